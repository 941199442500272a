"""The chunk cache of remote reads: original (decoded) chunks of remote segments, shared by every
partition of the broker, bounded in bytes.

Keys are strings the storage manager makes from the stored object's key and the chunk's place
(``<log object key>#<chunk number>``, ``<indexes object key>#<kind>``); every key of one stored
object starts with ``<object key>#``, so :meth:`ChunkCache.discard_prefix` drops a deleted
segment's chunks at once.

:func:`build_chunk_cache` makes the cache of the settings (``fetch.chunk.cache.class``).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kafka_tiers.objectstore.data_settings import DISK, MEMORY, ChunkCacheSettings


@dataclass(frozen=True)
class CacheStats:
    """What a cache has done since it was made.

    Attributes:
        hits: lookups answered from the cache.
        misses: lookups it could not answer.
        evictions: entries dropped to stay within the size or the retention time.
        entries: entries held now.
        bytes: bytes held now.
        max_bytes: the bound on ``bytes``.
    """

    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    max_bytes: int


class ChunkCache(ABC):
    """A bounded map of chunk keys to chunk bytes. Thread-safe. Every method is idempotent;
    an entry may disappear at any time (eviction), so callers always have a way to load it."""

    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """The chunk under ``key`` (now the most recently used), or None; counted as a hit or
        a miss. Never raises for a chunk it cannot produce: that is a miss."""

    @abstractmethod
    def contains(self, key: str) -> bool:
        """Whether ``key`` is held now, without counting a hit or a miss or changing the
        order of use (the loader peeks with it before a prefetch). A True may be followed by
        a miss (eviction, a damaged file)."""

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key`` (replacing any entry), evicting least recently used
        entries while the cache holds more than its bound. A chunk larger than the bound is
        not kept (and any older entry of ``key`` is dropped). Never raises for a chunk it
        cannot keep (a full disk): the chunk is simply not kept. After :meth:`close`, keeps
        nothing."""

    @abstractmethod
    def discard_prefix(self, prefix: str) -> int:
        """Drop every entry whose key starts with ``prefix``; returns how many."""

    @abstractmethod
    def stats(self) -> CacheStats:
        """The counters and sizes now."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release what the cache holds (a disk cache deletes its own files); later calls
        miss and keep nothing. Idempotent."""


class MemoryChunkCache(ChunkCache):
    """Chunks in memory, least recently used evicted first, entries unused for
    ``retention_ms`` dropped (on the next call: there is no background thread).

    Args:
        max_bytes: the most bytes held (>= 1); :meth:`put` never leaves more, whatever the
            sequence of calls or threads.
        retention_ms: how long an unused entry is kept (>= 1).
        clock: seconds (monotonic), for tests.

    Raises:
        ValueError: a bound below 1.
    """

    def __init__(self, max_bytes: int, retention_ms: int = 600_000, *,
                 clock: Callable[[], float] | None = None) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if retention_ms < 1:
            raise ValueError(f"retention_ms must be >= 1, got {retention_ms}")
        self.max_bytes = max_bytes
        self.retention_s = retention_ms / 1000
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        # in order of last use, least recent first: (data, time of last use)
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = 0
        self._closed = False

    def _expire(self, now: float) -> None:
        while self._entries:
            key, (data, used) = next(iter(self._entries.items()))
            if now - used < self.retention_s:
                break
            del self._entries[key]
            self._bytes -= len(data)
            self._evictions += 1

    def get(self, key: str) -> bytes | None:
        now = self._clock()
        with self._lock:
            self._expire(now)
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._entries[key] = (entry[0], now)
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0]

    def contains(self, key: str) -> bool:
        now = self._clock()
        with self._lock:
            self._expire(now)
            return key in self._entries

    def put(self, key: str, data: bytes) -> None:
        data = bytes(data)
        now = self._clock()
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])
            if self._closed or len(data) > self.max_bytes:
                return
            self._entries[key] = (data, now)
            self._bytes += len(data)
            self._expire(now)
            while self._bytes > self.max_bytes:
                _, (dropped, _) = self._entries.popitem(last=False)
                self._bytes -= len(dropped)
                self._evictions += 1

    def discard_prefix(self, prefix: str) -> int:
        with self._lock:
            keys = [k for k in self._entries if k.startswith(prefix)]
            for k in keys:
                self._bytes -= len(self._entries.pop(k)[0])
            return len(keys)

    def stats(self) -> CacheStats:
        now = self._clock()
        with self._lock:
            self._expire(now)
            return CacheStats(self._hits, self._misses, self._evictions, len(self._entries),
                              self._bytes, self.max_bytes)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._entries.clear()
            self._bytes = 0


def build_chunk_cache(settings: ChunkCacheSettings) -> ChunkCache | None:
    """The cache the settings name, or None for ``none``.

    Raises:
        ConfigError: the disk cache's directory cannot be made or used.
    """
    if settings.kind == MEMORY:
        return MemoryChunkCache(settings.size, settings.retention_ms)
    if settings.kind == DISK:
        from kafka_tiers.objectstore.disk_chunk_cache import DiskChunkCache

        assert settings.path is not None
        return DiskChunkCache(settings.path, settings.size, settings.retention_ms)
    return None


__all__ = ["CacheStats", "ChunkCache", "MemoryChunkCache", "build_chunk_cache"]
