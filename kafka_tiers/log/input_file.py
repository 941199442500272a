"""Reading a file the user names (``cluster.json``, a reassignment or log-dirs plan, a
``.properties`` config file): the one reader that bounds what such a file may cost.

A path that is not a regular file (``/dev/zero``, a fifo, a directory, a socket) is refused
before anything is read, without blocking (a fifo is opened non-blocking), and a file larger
than its limit is refused after reading at most ``limit + 1`` bytes. docs/operations.md lists
the limits.
"""

from __future__ import annotations

import os
import stat

from kafka_tiers.api.errors import KafkaTiersError

#: The largest JSON document read from a file (cluster.json, reassignment and log-dirs plans).
MAX_JSON_FILE_BYTES = 16 * 1024 * 1024
#: The largest ``.properties`` config file read.
MAX_PROPERTIES_FILE_BYTES = 1024 * 1024


class InputFileError(KafkaTiersError):
    """An input file cannot be read, is not a regular file, or exceeds its size limit; the
    message is one line naming the file and the problem."""


def read_input_file(path: str | os.PathLike[str], limit: int, what: str = "") -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.
        what: what the file is, for the message (``"config file"``): ``cannot read config
            file <path>: ...``; empty: ``cannot read <path>: ...``.

    Raises:
        InputFileError: the file cannot be opened or read, is not a regular file (a device,
            a fifo, a directory), or holds more than ``limit`` bytes. Reads nothing twice and
            never blocks on a fifo.
    """
    name = os.fsdecode(path)
    label = f"{what} {name}" if what else name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError(f"cannot read {label}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a fifo" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
            raise InputFileError(f"cannot read {label}: it is {kind}, not a regular file; "
                                 "give the path of a file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputFileError(f"cannot read {label}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise InputFileError(f"cannot read {label}: it is larger than {limit} bytes, the "
                             "limit for such a file (docs/operations.md); give a smaller file")
    return b"".join(chunks)


__all__ = ["MAX_JSON_FILE_BYTES", "MAX_PROPERTIES_FILE_BYTES", "InputFileError",
           "read_input_file"]
