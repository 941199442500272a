"""The manifest cache of remote reads: parsed segment manifests by manifest key, so a remote fetch
does not read and parse the segment's manifest from the store every time.

Least recently used manifests are dropped beyond ``fetch.manifest.cache.size`` entries, and a
manifest unused for ``fetch.manifest.cache.retention.ms`` is dropped on the next call. A
manifest changes only when the storage manager rewrites it (``remote rekey``) or deletes the
segment; the manager calls :meth:`ManifestCache.discard` then, so the cache never answers with
a manifest the store no longer holds (for longer than the manager's own rewrite).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kafka_tiers.objectstore.lru_map import LruMap

M = TypeVar("M")


@dataclass(frozen=True)
class ManifestCacheStats:
    """What a manifest cache has done since it was made.

    Attributes:
        hits: lookups answered from the cache.
        misses: lookups it could not answer (every lookup when ``max_entries`` is 0).
        evictions: manifests dropped to stay within ``max_entries`` or the retention time
            (not those dropped by :meth:`ManifestCache.discard`).
        entries: manifests held now.
        max_entries: the bound on ``entries`` (0: nothing is kept).
    """

    hits: int
    misses: int
    evictions: int
    entries: int
    max_entries: int


class ManifestCache(Generic[M]):
    """A bounded, thread-safe map of manifest keys to parsed manifests, LRU with a time to live
    counted from the last use.

    Args:
        max_entries: the most manifests held; 0 turns caching off (every :meth:`get` misses,
            :meth:`put` keeps nothing).
        retention_ms: how long an unused manifest is kept (>= 1).
        clock: seconds (monotonic), for tests.

    Raises:
        ValueError: ``max_entries`` < 0 or ``retention_ms`` < 1.

    Every method is idempotent except for the counters. The cache holds the objects it is
    given; callers must not change a manifest after putting it.
    """

    def __init__(self, max_entries: int, retention_ms: int = 3_600_000, *,
                 clock: Callable[[], float] | None = None) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._manifests: LruMap[M] = LruMap(max_entries, retention_ms, lambda _: 1)

    def get(self, key: str) -> M | None:
        """The manifest under ``key`` (now the most recently used), or None; counted as a hit
        or a miss."""
        now = self._clock()
        with self._lock:
            return self._manifests.get(key, now)

    def put(self, key: str, manifest: M) -> None:
        """Keep ``manifest`` under ``key`` (replacing any), dropping the least recently used
        manifests beyond ``max_entries``. Nothing is kept when ``max_entries`` is 0."""
        if self.max_entries == 0:
            return
        now = self._clock()
        with self._lock:
            self._manifests.put(key, manifest, now)

    def discard(self, key: str) -> bool:
        """Drop the manifest under ``key`` (its segment was deleted or its manifest rewritten);
        returns whether one was held."""
        with self._lock:
            return self._manifests.discard(key)

    def clear(self) -> None:
        """Drop every manifest (the counters stay)."""
        with self._lock:
            self._manifests.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._manifests)

    def stats(self) -> ManifestCacheStats:
        """The counters and the entries now (expired manifests dropped first)."""
        now = self._clock()
        with self._lock:
            m = self._manifests
            m.expire(now)
            return ManifestCacheStats(m.hits, m.misses, m.evictions, len(m), self.max_entries)


__all__ = ["ManifestCache", "ManifestCacheStats"]
