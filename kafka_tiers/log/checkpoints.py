"""Kafka's small state files, read and written as Kafka does, written crash-safely.

* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (log dir level)::

      0                      <- version
      2                      <- number of entries
      my-topic 0 1234        <- topic partition offset
      my-topic 1 99

* ``leader-epoch-checkpoint`` (partition dir): version 0, count, then ``epoch startOffset`` lines.
* ``meta.properties`` (log dir): ``version``, ``broker.id`` / ``node.id``, ``cluster.id``,
  ``directory.id`` as Java properties.
* ``.kafka_cleanshutdown`` (log dir): present after a clean shutdown; Kafka 3.5+ writes
  ``{"version":0,"brokerEpoch":N}`` in it, older versions leave it empty. Both are accepted.

Every write goes to a temporary file in the same directory, is fsynced, renamed over the target
and the directory fsynced, so a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.log.errors import LogDirError
from kafka_tiers.log.names import validate_topic

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
SEGMENT_LIST_FILE = "kafka-tiers-segment-list"
TEMP_SUFFIX = ".tmp"


def open_nofollow(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` with ``O_NOFOLLOW``: nothing in a log dir is opened through a symlink (a
    link raises ``OSError`` ELOOP, a per-partition problem). Usable as ``open(opener=...)``."""
    return os.open(path, flags | os.O_NOFOLLOW, mode)


def read_file_nofollow(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a file opened without following a symlink (see :func:`open_nofollow`).

    Raises:
        OSError: FileNotFoundError when missing, ELOOP when ``path`` is a symlink, ...
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so renames and creations in it are durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` crash-safely (temp file, fsync, rename, fsync dir).

    ``mode``: the file's permission bits, set on the temporary file before anything is
    written (also when a crash left one with other bits); None: a new temporary file is made
    0644 less the umask, as before.

    Raises:
        OSError: the temporary file cannot be made or written (``ELOOP`` when it is a
            symlink), or the rename fails; ``path`` is unchanged then.
    """
    target = Path(path)
    tmp = target.with_name(target.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o644 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(target.parent)


def _read_lines(path: Path, what: str) -> list[str] | None:
    try:
        text = read_file_nofollow(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LogDirError(f"cannot read {what} {path}: {exc}", path=str(path)) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise LogDirError(f"malformed {what} {path}: bad version or size line",
                          path=str(path))
    try:
        count = int(lines[1])
    except ValueError:
        raise LogDirError(f"malformed {what} {path}: bad size line", path=str(path)) from None
    if count != len(lines) - 2:
        raise LogDirError(
            f"malformed {what} {path}: declares {count} entries, holds {len(lines) - 2}",
            path=str(path))
    return lines[2:]


class OffsetCheckpointFile:
    """A ``topic partition offset`` checkpoint (recovery point, log start, high watermark)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> dict[TopicPartition, int]:
        """The entries; empty when the file does not exist.

        Raises:
            LogDirError: the file is malformed (a line, the version or the count).
        """
        lines = _read_lines(self.path, "offset checkpoint")
        out: dict[TopicPartition, int] = {}
        for line in lines or ():
            parts = line.split(" ")
            try:
                if len(parts) != 3:
                    raise ValueError(line)
                tp = TopicPartition(validate_topic(parts[0]), int(parts[1]))
                out[tp] = int(parts[2])
            except (ValueError, TypeError):
                raise LogDirError(f"malformed line {line!r} in {self.path}",
                                  path=str(self.path)) from None
        return out

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file with these entries (crash-safe)."""
        rows = sorted(offsets.items())
        text = f"0\n{len(rows)}\n" + "".join(f"{tp.topic} {tp.partition} {off}\n"
                                             for tp, off in rows)
        write_atomic(self.path, text.encode("utf-8"))


class LeaderEpochCheckpointFile:
    """The ``leader-epoch-checkpoint`` of a partition: ``epoch startOffset`` lines."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> list[tuple[int, int]]:
        """The ``(epoch, start offset)`` entries; empty when the file does not exist.

        Raises:
            LogDirError: the file is malformed.
        """
        out = []
        for line in _read_lines(self.path, "leader epoch checkpoint") or ():
            parts = line.split(" ")
            try:
                if len(parts) != 2:
                    raise ValueError(line)
                out.append((int(parts[0]), int(parts[1])))
            except ValueError:
                raise LogDirError(f"malformed line {line!r} in {self.path}",
                                  path=str(self.path)) from None
        return out

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        rows = list(entries)
        text = f"0\n{len(rows)}\n" + "".join(f"{e} {o}\n" for e, o in rows)
        write_atomic(self.path, text.encode("utf-8"))


class SegmentListCheckpoint:
    """kafka-tiers' own log-dir file ``kafka-tiers-segment-list``, written at clean shutdown:
    each partition's segment base offsets and its directory's modification time. Kafka ignores
    the file. It is never trusted on its own: the loader compares it with one listing of the
    partition directory (names only) and ignores it for a partition on any difference
    (:func:`kafka_tiers.log.log_loader.load_segments`); the mtime is kept for readers of the
    format but no longer decides anything::

        0
        2
        my-topic 0 1700000000123456789 0 1042 2087
        my-topic 1 1700000000123999999 0
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> dict[TopicPartition, tuple[int, list[int]]]:
        """``partition -> (dir mtime ns, sorted base offsets)``; empty when absent.

        Raises:
            LogDirError: the file is malformed.
        """
        out: dict[TopicPartition, tuple[int, list[int]]] = {}
        for line in _read_lines(self.path, "segment list") or ():
            parts = line.split(" ")
            try:
                if len(parts) < 4:
                    raise ValueError(line)
                tp = TopicPartition(validate_topic(parts[0]), int(parts[1]))
                bases = [int(p) for p in parts[3:]]
                if bases != sorted(set(bases)) or bases[0] < 0:
                    raise ValueError(line)
                out[tp] = (int(parts[2]), bases)
            except (ValueError, TypeError):
                raise LogDirError(f"malformed line in {self.path}", path=str(self.path)) from None
        return out

    def write(self, entries: Mapping[TopicPartition, tuple[int, list[int]]]) -> None:
        rows = sorted(entries.items())
        text = f"0\n{len(rows)}\n" + "".join(
            f"{tp.topic} {tp.partition} {mtime} {' '.join(map(str, bases))}\n"
            for tp, (mtime, bases) in rows)
        write_atomic(self.path, text.encode("utf-8"))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def read_meta_properties(log_dir: str | os.PathLike[str]) -> dict[str, str] | None:
    """The ``meta.properties`` of a log dir as a dict, or None when absent.

    Raises:
        LogDirError: the file cannot be read or has no ``version``.
    """
    from kafka_tiers.config import read_properties

    path = Path(log_dir) / META_PROPERTIES
    if not path.exists():
        return None
    try:
        props = read_properties(path)
    except Exception as exc:
        raise LogDirError(f"cannot read {path}: {exc}", path=str(path)) from None
    if "version" not in props:
        raise LogDirError(f"{path} has no version", path=str(path))
    return props


def write_meta_properties(log_dir: str | os.PathLike[str], props: Mapping[str, str]) -> None:
    """Write ``meta.properties`` as Kafka does (comment header with the date, key=value)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    body = "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    write_atomic(Path(log_dir) / META_PROPERTIES, f"#\n#{stamp}\n{body}".encode())


def has_clean_shutdown(log_dir: str | os.PathLike[str]) -> bool:
    """True when the log dir holds a ``.kafka_cleanshutdown`` marker."""
    return (Path(log_dir) / CLEAN_SHUTDOWN_FILE).exists()


def write_clean_shutdown(log_dir: str | os.PathLike[str], broker_epoch: int = -1) -> None:
    """Write the clean shutdown marker (last step of a clean shutdown)."""
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
    write_atomic(Path(log_dir) / CLEAN_SHUTDOWN_FILE, data.encode())


def remove_clean_shutdown(log_dir: str | os.PathLike[str]) -> None:
    """Remove the marker (durably) once the log dir is in use again."""
    path = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    if path.exists():
        path.unlink()
        fsync_dir(log_dir)


__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "META_PROPERTIES",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SEGMENT_LIST_FILE",
    "TEMP_SUFFIX",
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
    "SegmentListCheckpoint",
    "fsync_dir",
    "has_clean_shutdown",
    "open_nofollow",
    "read_file_nofollow",
    "read_meta_properties",
    "remove_clean_shutdown",
    "write_atomic",
    "write_clean_shutdown",
    "write_meta_properties",
]
