"""The disk chunk cache (``fetch.chunk.cache.class=disk``): decoded chunks of remote segments as
files in one directory (``fetch.chunk.cache.path``), bounded in bytes, least recently used
first out, unused chunks dropped after ``fetch.chunk.cache.retention.ms``.

What it writes and what it deletes:

- One file per chunk, named ``kt-chunk-<sha256 of the cache key>.chunk``: never the key itself
  (keys hold ``/``), so no key can name a path outside the directory. Files are made ``0600``;
  the directory, when the cache makes it, ``0700``. They hold *decoded* chunks: with encryption
  at rest on, decrypted data lands on the cache disk, as it does in the local log itself.
- A chunk is written to ``kt-chunk-<hash>.<random>.tmp`` and renamed into place, so a reader
  never sees a partial file (a crash leaves at most a temporary file). Files are not fsynced:
  the index lives in memory, and a cache that lost a file only misses.
- One live cache per directory: the cache holds an exclusive ``flock`` on the directory
  itself (no lock file is made) from its start to :meth:`DiskChunkCache.close`; a second cache
  on the same ``fetch.chunk.cache.path`` (another broker, a command given the broker's
  settings, a second manager in one process) is refused with a ConfigError instead of
  deleting the first one's files. The operating system drops the lock when a process dies, so
  a crashed broker's restart is not refused. Where the file system cannot lock (some network
  file systems) the cache warns once and goes on unlocked.
- On start the cache deletes the files of an earlier run it can prove are its own: names of
  exactly its two patterns, regular files (not symlinks, not directories), owned by this
  process's user. Nothing else in the directory is ever touched, so pointing the path at a
  directory holding other files loses none of them. :meth:`DiskChunkCache.close` deletes the
  files it wrote.

Reads check every file against the in-memory index (size and CRC-32): a file that vanished,
was truncated or damaged, or cannot be read is a miss (logged), never an error; the entry is
dropped and the chunk is downloaded again. A chunk the disk cannot take (a full disk) is not
kept, and the read that brought it still succeeds.

The byte bound counts the chunks' bytes (not file-system blocks) and holds after every call;
temporary files of writes in flight (at most one chunk per writing thread) come on top.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import secrets
import stat
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.objectstore.chunk_cache import LruChunkCache

log = logging.getLogger(__name__)

PATH_KEY = "fetch.chunk.cache.path"
_PREFIX = "kt-chunk-"
#: the two name patterns the cache writes; only these are ever deleted
_CHUNK_NAME = re.compile(r"kt-chunk-[0-9a-f]{64}\.chunk")
_TEMP_NAME = re.compile(r"kt-chunk-[0-9a-f]{64}\.[0-9a-f]{16}\.tmp")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_WARN_INTERVAL_S = 60.0


def chunk_file_name(key: str) -> str:
    """The file name of the chunk under ``key``: a hash of the key, never the key."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{_PREFIX}{digest}.chunk"


def is_own_name(name: str) -> bool:
    """Whether ``name`` has one of the cache's two name patterns (a chunk or a temporary
    file)."""
    return bool(_CHUNK_NAME.fullmatch(name) or _TEMP_NAME.fullmatch(name))


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the index knows of a chunk's file: its name, and the size and CRC-32 its bytes
    must have."""

    name: str
    size: int
    crc: int


class DiskChunkCache(LruChunkCache[_Entry]):
    """Chunks as files under ``path`` (module docstring for the files and the deletion rule).

    Args:
        path: the directory (made ``0700`` with its parents when missing).
        max_bytes: the most chunk bytes held (>= 1).
        retention_ms: how long an unused chunk is kept (>= 1); expired chunks are dropped on
            the next call (there is no background thread).
        clock: seconds (monotonic), for tests.

    Raises:
        ConfigError: ``path`` cannot be made, is not a directory, a file cannot be created in
            it, or another live cache holds it (the error names ``fetch.chunk.cache.path``).
        ValueError: a bound below 1.

    Thread-safe: the index is guarded by one lock; file contents are read and written outside
    it, so a slow disk delays only the call that waits for it. A read racing the eviction of
    its entry either reads the whole file or misses.
    """

    def __init__(self, path: str | os.PathLike[str], max_bytes: int,
                 retention_ms: int = 600_000, *,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(max_bytes, retention_ms, lambda e: e.size,
                         lambda e: self._unlink(e.name), clock=clock)
        self.path = os.path.abspath(os.fspath(path))
        self._last_warning = float("-inf")
        self._lock_fd: int | None = None
        self._prepare_directory()
        self._lock_directory()
        try:
            removed = self._remove_earlier_files()
        except BaseException:
            self._unlock_directory()
            raise
        if removed:
            log.info("chunk cache %s: deleted %d file(s) of an earlier run", self.path, removed)

    # -- the directory -------------------------------------------------------------------

    def _unusable(self, reason: str) -> ConfigError:
        return ConfigError(
            f"{PATH_KEY} {self.path!r} is not a usable directory ({reason}); set {PATH_KEY} "
            "to a directory the broker can create and write", key=PATH_KEY, value=self.path,
            expected="a writable directory")

    def _prepare_directory(self) -> None:
        if not os.path.lexists(self.path):
            try:
                os.makedirs(self.path, mode=0o700, exist_ok=True)
                os.chmod(self.path, 0o700)
            except OSError as exc:
                raise self._unusable(f"cannot create it: {exc.strerror or exc}") from None
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise self._unusable(exc.strerror or str(exc)) from None
        if not stat.S_ISDIR(st.st_mode):
            raise self._unusable("not a directory")
        if st.st_mode & 0o077:
            log.warning("chunk cache directory %s has mode %o: others may list it (the chunk "
                        "files themselves are 0600); make it 0700", self.path,
                        stat.S_IMODE(st.st_mode))
        probe = os.path.join(self.path, f"{_PREFIX}{'0' * 64}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
                         0o600)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise self._unusable(f"cannot write a file in it: {exc.strerror or exc}") from None

    def _lock_directory(self) -> None:
        """Take the directory's exclusive lock (module docstring), held until :meth:`close`.

        Raises:
            ConfigError: another live cache holds it.
        """
        try:
            import fcntl
        except ImportError:  # no flock on this platform: one cache per directory by convention
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
        except OSError as exc:
            raise self._unusable(f"cannot open it: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ConfigError(
                    f"{PATH_KEY} {self.path!r} is in use by another live chunk cache (another "
                    f"broker, or a command given a broker's settings): give each its own "
                    f"{PATH_KEY}", key=PATH_KEY, value=self.path,
                    expected="a directory no other chunk cache uses") from None
            log.warning("chunk cache %s: cannot lock the directory (%s); make sure no other "
                        "chunk cache uses it", self.path, exc.strerror or exc)
            return
        self._lock_fd = fd

    def _unlock_directory(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def _remove_earlier_files(self) -> int:
        """Delete the chunk and temporary files a cache left here (only those provably its
        own: module docstring)."""
        uid = os.geteuid() if hasattr(os, "geteuid") else None
        removed = 0
        try:
            entries = list(os.scandir(self.path))
        except OSError as exc:
            raise self._unusable(f"cannot list it: {exc.strerror or exc}") from None
        for entry in entries:
            if not is_own_name(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or (uid is not None and st.st_uid != uid):
                    continue
                os.unlink(entry.path)
                removed += 1
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("chunk cache %s: cannot delete %s of an earlier run: %s",
                            self.path, entry.name, exc.strerror or exc)
        return removed

    # -- helpers (called with the lock held unless said) -----------------------------------

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _unlink(self, name: str) -> None:
        try:
            os.unlink(self._file(name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            self._warn("cannot delete %s: %s", name, exc.strerror or exc)

    def _warn(self, message: str, *args: object) -> None:
        """A warning at most once a minute (a full or failing disk would log on every
        chunk)."""
        now = time.monotonic()
        if now - self._last_warning >= _WARN_INTERVAL_S:
            self._last_warning = now
            log.warning("chunk cache %s: " + message, self.path, *args)

    def _read(self, entry: _Entry) -> bytes | None:
        """The file's bytes if they are the entry's (no lock needed: files are replaced by
        rename, never written in place)."""
        try:
            fd = os.open(self._file(entry.name), os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                data = f.read(entry.size + 1)
        except OSError:
            return None
        if len(data) != entry.size or zlib.crc32(data) != entry.crc:
            return None
        return data

    # -- ChunkCache --------------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        now = self._clock()
        with self._lock:
            entry = self._index.touch(key, now)
            if entry is None:
                self._index.misses += 1
                return None
        data = self._read(entry)
        with self._lock:
            if data is not None:
                self._index.hits += 1
                return data
            self._index.misses += 1
            if self._index.peek(key) is entry:  # not replaced or evicted meanwhile
                self._index.discard(key)
                self._warn("the file of %s vanished or is damaged; it is downloaded again",
                           key)
        return None

    def put(self, key: str, data: bytes) -> None:
        data = bytes(data)
        size = len(data)
        name = chunk_file_name(key)
        if size > self.max_bytes or self._closed:
            with self._lock:
                self._index.discard(key)
            return
        temp = f"{name[:-len('.chunk')]}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(self._file(temp),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
        except OSError as exc:
            with self._lock:
                self._warn("cannot write a chunk (%s); chunks are not kept",
                           exc.strerror or exc)
            return
        try:
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o600)
                f.write(data)
        except OSError as exc:
            with self._lock:
                self._unlink(temp)
                self._warn("cannot write a chunk (%s); chunks are not kept",
                           exc.strerror or exc)
            return
        crc = zlib.crc32(data)
        now = self._clock()
        with self._lock:
            if self._closed:
                self._unlink(temp)
                return
            try:
                os.replace(self._file(temp), self._file(name))
            except OSError as exc:
                self._unlink(temp)
                self._warn("cannot rename a chunk into place (%s)", exc.strerror or exc)
                return
            # an older entry of the key is replaced without deleting a file: the rename
            # just replaced its file
            self._index.put(key, _Entry(name, size, crc), now)

    def close(self) -> None:
        """Delete every chunk file this cache wrote and release the directory's lock; later
        gets miss and puts keep nothing. Idempotent."""
        super().close()
        with self._lock:
            self._unlock_directory()

    def __repr__(self) -> str:
        return f"DiskChunkCache({self.path!r}, max_bytes={self.max_bytes})"


__all__ = ["DiskChunkCache", "chunk_file_name", "is_own_name"]
