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
from typing import Generic, TypeVar

from kafka_tiers.objectstore.data_settings import DISK, MEMORY, ChunkCacheSettings
from kafka_tiers.objectstore.lru_map import LruMap

V = TypeVar("V")


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


class LruChunkCache(ChunkCache, Generic[V]):
    """What the built-in chunk caches share: an :class:`LruMap` bounded in chunk bytes
    (``_index``, holding the chunks or what the cache knows of them), guarded by one lock, and
    the :meth:`contains`, :meth:`discard_prefix`, :meth:`stats` and :meth:`close` over it.
    Subclasses give :meth:`get` and :meth:`put`, which count their own lookups when they use
    :meth:`LruMap.touch`.

    Args:
        max_bytes: the most chunk bytes held (>= 1).
        retention_ms: how long an unused chunk is kept (>= 1).
        weigh: the chunk bytes of a held value.
        on_drop: called with each value the index drops (:class:`LruMap`).
        clock: seconds (monotonic), for tests.

    Raises:
        ValueError: a bound below 1.
    """

    def __init__(self, max_bytes: int, retention_ms: int, weigh: Callable[[V], int],
                 on_drop: Callable[[V], None] | None = None, *,
                 clock: Callable[[], float] | None = None) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.max_bytes = max_bytes
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._index: LruMap[V] = LruMap(max_bytes, retention_ms, weigh, on_drop)
        self._closed = False

    @property
    def retention_s(self) -> float:
        """How long an unused chunk is kept, in seconds."""
        return self._index.retention_s

    def contains(self, key: str) -> bool:
        now = self._clock()
        with self._lock:
            self._index.expire(now)
            return key in self._index

    def discard_prefix(self, prefix: str) -> int:
        with self._lock:
            return self._index.discard_prefix(prefix)

    def stats(self) -> CacheStats:
        now = self._clock()
        with self._lock:
            i = self._index
            i.expire(now)
            return CacheStats(i.hits, i.misses, i.evictions, len(i), i.weight, self.max_bytes)

    def close(self) -> None:
        """Drop every chunk; later gets miss and puts keep nothing. Idempotent."""
        with self._lock:
            self._closed = True
            self._index.clear()


class MemoryChunkCache(LruChunkCache[bytes]):
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
        super().__init__(max_bytes, retention_ms, len, clock=clock)

    def get(self, key: str) -> bytes | None:
        now = self._clock()
        with self._lock:
            return self._index.get(key, now)

    def put(self, key: str, data: bytes) -> None:
        data = bytes(data)
        now = self._clock()
        with self._lock:
            if self._closed or len(data) > self.max_bytes:
                self._index.discard(key)
                return
            self._index.put(key, data, now)


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


__all__ = ["CacheStats", "ChunkCache", "LruChunkCache", "MemoryChunkCache", "build_chunk_cache"]
