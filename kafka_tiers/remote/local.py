"""The ``local`` storage plugin: a directory tree as the remote tier.

The embedded default of the quick start and the tests, and a real remote tier on a shared
file system (NFS). Registered like every object-store backend: only its
:class:`LocalObjectStore` (entry point ``local`` in ``kafka_tiers.object_store``); the core
builds the storage manager around it (:mod:`kafka_tiers.objectstore` holds the key layout and
commit protocol).

Config keys (under ``rsm.config.`` in ``server.properties``):
    ``dir`` (required): the root directory; created when missing unless ``dir.create`` is
    false.
    ``dir.create``: ``true`` (default) or ``false``; ``false`` refuses a missing ``dir``
    (read-only tools such as ``kafka-tiers remote ls`` set it, so a mistyped path is an error
    rather than a new, empty tier) and creates nothing until the first write.
    ``key.prefix``: prepended to every key (default empty).

Durability: every object is written to a temporary file under ``<dir>/.kt-tmp``, flushed with
``fsync``, renamed into place (atomic on POSIX) and its directory fsynced, so a crash leaves the
old object, or the whole new one, never a torn file. While a large object is written, the write-back
of what is written so far is started every 8 MiB (without waiting), so that the final ``fsync``
has little left to flush. Keys are mapped to paths only after
checking them: no key may escape ``dir`` (``..``, absolute keys and symlinks pointing out are
refused).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from kafka_tiers.api import (
    ByteRange,
    ConfigError,
    ObjectInfo,
    ObjectStore,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    StorageCapability,
    validate_key,
)
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager

#: The directory (under the root) holding files being written; never listed.
TMP_DIR = ".kt-tmp"

_CHUNK = 1 << 20
#: how many written bytes of an object are handed to write-back at a time
_WRITEBACK_EVERY = 8 << 20


class _RangeReader(io.RawIOBase):
    """Reads ``length`` bytes of an open file from its current position, then closes it."""

    def __init__(self, fh: io.RawIOBase, length: int) -> None:
        self._fh = fh
        self._remaining = length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._remaining)
        if want <= 0:
            return 0
        n = self._fh.readinto(view[:want])
        self._remaining -= n or 0
        return n or 0

    def close(self) -> None:
        try:
            self._fh.close()
        finally:
            super().close()


def _copy_into(data: BinaryIO, out: Any) -> int:
    """Copy ``data`` to the unbuffered file ``out``; returns the bytes copied. With
    ``readinto`` (the copy's hashing reader has it, reading the local file straight into the
    buffer and hashing it there) the bytes go through one preallocated buffer: no bytes object
    per chunk, no copy between buffers."""
    readinto = getattr(data, "readinto", None)
    written = 0
    if readinto is None:
        while chunk := data.read(_CHUNK):
            _write_all(out, memoryview(chunk))
            written += len(chunk)
        return written
    buffer = memoryview(bytearray(_CHUNK))
    flushed = 0
    while n := readinto(buffer):
        _write_all(out, buffer[:n])
        written += n
        if written - flushed >= _WRITEBACK_EVERY:
            _start_writeback(out, flushed, written - flushed)
            flushed = written
    return written


def _start_writeback(out: Any, offset: int, length: int) -> None:
    """Start the write-back of a written range without waiting for it (``POSIX_FADV_DONTNEED``
    on Linux writes dirty pages back asynchronously, and drops them once clean: the remote
    tier's copy is not read again soon), so the ``fsync`` at the end has little left to
    flush and the disk works while the rest is read and hashed. Best effort."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:  # pragma: no cover - not on this platform
        return
    with contextlib.suppress(OSError):  # a file system that refuses advice
        advise(out.fileno(), offset, length, os.POSIX_FADV_DONTNEED)


def _write_all(out: Any, view: memoryview) -> None:
    while view:
        n = out.write(view)
        view = view[n:]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


class LocalObjectStore(ObjectStore):
    """An :class:`ObjectStore` on a directory: key ``a/b/c`` is the file ``<root>/a/b/c``.

    Args:
        root: the directory; created when missing (with ``create``).
        create: create ``root`` (and the temporary-file directory under it) when missing;
            False refuses a missing ``root`` and creates nothing until the first write.

    Raises:
        ConfigError: ``root`` cannot be created, is not a directory, or (``create`` False)
            does not exist.
    """

    max_delete_batch: ClassVar[int] = 1000
    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({StorageCapability.CONCURRENT_ACCESS})
    SUPPORTED_SPI: ClassVar[str] = ">=2.0,<3"

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> LocalObjectStore:
        """The store of the config key ``dir`` (required).

        Raises:
            ConfigError: ``dir`` is missing, or cannot be created; ``dir.create`` is neither
                true nor false, or false while ``dir`` does not exist.
        """
        root = (config.get("dir") or "").strip()
        if not root:
            raise ConfigError("dir is required: the directory that holds the remote tier",
                              key="dir", expected="a directory path")
        create = str(config.get("dir.create", "true")).strip().lower()
        if create not in ("true", "false"):
            raise ConfigError(f"dir.create must be true or false, got {create!r}",
                              key="dir.create", value=create, expected="true or false")
        return cls(root, create=create == "true")

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        path = Path(root)
        if not create:
            if not path.is_dir():
                what = "not a directory" if path.exists() else "no such directory"
                raise ConfigError(f"dir {path}: {what} (nothing was created; check the path)",
                                  key="dir", value=str(root))
            self.root = path.resolve()
            return
        try:
            path.mkdir(parents=True, exist_ok=True)
            (path / TMP_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create directory {path}: {exc.strerror or exc}",
                              key="dir", value=str(root)) from None
        self.root = path.resolve()

    def path_of(self, key: str) -> Path:
        """The file of a key.

        Raises:
            RemoteStorageError: the key is unsafe, reserved (a part starting with ``.``), or
                resolves outside the root.
        """
        validate_key(key)
        if any(part.startswith(".") for part in key.split("/")):
            raise RemoteStorageError(f"invalid object key {key!r}: parts starting with '.' "
                                     "are reserved", resource=key)
        path = self.root.joinpath(*key.split("/"))
        resolved = path.resolve()
        if resolved != path or not resolved.is_relative_to(self.root):
            raise RemoteStorageError(f"invalid object key {key!r}: it leaves the root",
                                     resource=key)
        return path

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        target = self.path_of(key)
        tmp = self.root / TMP_DIR / f"{uuid.uuid4().hex}.tmp"
        tmp.parent.mkdir(exist_ok=True)  # opened with create=False: made at the first write
        try:
            with open(tmp, "wb", buffering=0) as out:
                written = _copy_into(data, out)
                os.fsync(out.fileno())
            for attempt in range(5):  # a concurrent delete may remove the empty parent dirs
                self._make_parents(target.parent)
                try:
                    os.replace(tmp, target)
                    break
                except FileNotFoundError:
                    if attempt == 4 or not tmp.exists():
                        raise
            _fsync_dir(target.parent)
        finally:
            tmp.unlink(missing_ok=True)
        return written

    def _make_parents(self, directory: Path) -> None:
        missing = []
        current = directory
        while not current.exists() and current != self.root:
            missing.append(current)
            current = current.parent
        directory.mkdir(parents=True, exist_ok=True)
        for made in reversed(missing):
            _fsync_dir(made.parent)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        path = self.path_of(key)
        try:
            fh = open(path, "rb", buffering=0)  # noqa: SIM115 - the returned stream owns it
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise RemoteResourceNotFoundError(f"no object {key}", resource=key) from None
        try:
            if byte_range is None:
                length = os.fstat(fh.fileno()).st_size
            else:
                fh.seek(byte_range.first)
                length = byte_range.size
        except BaseException:
            fh.close()
            raise
        return io.BufferedReader(_RangeReader(fh, length))

    def delete_many(self, keys: Sequence[str]) -> None:
        parents = set()
        for key in keys:
            path = self.path_of(key)
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            parents.add(path.parent)
        for directory in parents:
            if directory.exists():
                _fsync_dir(directory)
            self._prune(directory)

    def _prune(self, directory: Path) -> None:
        """Remove empty directories up to (not including) the root."""
        current = directory
        while current != self.root and current.is_relative_to(self.root):
            try:
                current.rmdir()
            except OSError:  # not empty, or gone
                return
            current = current.parent

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        head, _, _ = prefix.rpartition("/")
        start = self.root
        if head:
            try:
                start = self.path_of(head)
            except RemoteStorageError:
                return []
        return list(self._walk(start, prefix))

    def _walk(self, start: Path, prefix: str) -> Iterator[ObjectInfo]:
        if not start.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(start):
            current = Path(dirpath)
            rel_dir = current.relative_to(self.root).as_posix()
            rel_dir = "" if rel_dir == "." else rel_dir + "/"
            dirnames[:] = sorted(
                d for d in dirnames
                if not d.startswith(".")
                and ((rel_dir + d + "/").startswith(prefix)
                     or prefix.startswith(rel_dir + d + "/")))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                key = rel_dir + name
                if not key.startswith(prefix):
                    continue
                try:
                    st = (current / name).stat()
                except FileNotFoundError:
                    continue
                yield ObjectInfo(key, st.st_size, st.st_mtime_ns // 1_000_000)

    def collect_temp_files(self, min_age_ms: int) -> builtins.list[str]:
        """Delete temporary files older than ``min_age_ms`` left by a crash mid-write;
        returns their names."""
        return self.collect_garbage("", int(time.time() * 1000) - min_age_ms)

    def collect_garbage(self, prefix: str, older_than_ms: int, dry_run: bool = False
                        ) -> builtins.list[str]:
        """Delete the temporary files (under ``<dir>/.kt-tmp``) last written before
        ``older_than_ms`` (epoch ms), left by a crash mid-write; returns their names, sorted.
        Temporary files are not named after keys, so every collection (whatever ``prefix``)
        looks at all of them: one older than the collection's age belongs to no write in
        progress."""
        cutoff = older_than_ms / 1000
        removed: builtins.list[str] = []
        if not (self.root / TMP_DIR).is_dir():  # opened with create=False, nothing written
            return removed
        for entry in (self.root / TMP_DIR).iterdir():
            try:
                if entry.stat().st_mtime <= cutoff:
                    if not dry_run:
                        entry.unlink()
                    removed.append(entry.name)
            except FileNotFoundError:
                continue
        return sorted(removed)


#: The storage manager the core builds around :class:`LocalObjectStore` (what
#: ``remote.storage.manager.class=local`` loads).
LocalRemoteStorageManager = ObjectStoreRemoteStorageManager.for_store(LocalObjectStore)


__all__ = ["TMP_DIR", "LocalObjectStore", "LocalRemoteStorageManager"]
