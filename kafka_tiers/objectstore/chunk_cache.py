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
from collections.abc import Callable
from dataclasses import dataclass

from kafka_tiers.objectstore.data_settings import DISK, MEMORY, ChunkCacheSettings
from kafka_tiers.objectstore.lru_map import LruMap


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
        self.max_bytes = max_bytes
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._chunks: LruMap[bytes] = LruMap(max_bytes, retention_ms, len)
        self._closed = False

    @property
    def retention_s(self) -> float:
        """How long an unused chunk is kept, in seconds."""
        return self._chunks.retention_s

    def get(self, key: str) -> bytes | None:
        now = self._clock()
        with self._lock:
            return self._chunks.get(key, now)

    def contains(self, key: str) -> bool:
        now = self._clock()
        with self._lock:
            self._chunks.expire(now)
            return key in self._chunks

    def put(self, key: str, data: bytes) -> None:
        data = bytes(data)
        now = self._clock()
        with self._lock:
            if self._closed or len(data) > self.max_bytes:
                self._chunks.discard(key)
                return
            self._chunks.put(key, data, now)

    def discard_prefix(self, prefix: str) -> int:
        with self._lock:
            return self._chunks.discard_prefix(prefix)

    def stats(self) -> CacheStats:
        now = self._clock()
        with self._lock:
            c = self._chunks
            c.expire(now)
            return CacheStats(c.hits, c.misses, c.evictions, len(c), c.weight, self.max_bytes)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._chunks.clear()


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
