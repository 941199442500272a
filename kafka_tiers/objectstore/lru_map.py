"""Least-recently-used bookkeeping with a retention time, the one piece under the memory chunk
cache, the disk chunk cache's index and the manifest cache.

An :class:`LruMap` keeps values by key in order of last use, each with a weight (a chunk's
bytes, 1 for a manifest). :meth:`LruMap.put` drops least recently used entries while the total
weight is above the bound; every call given the time first drops the entries unused for the
retention time (there is no background thread). It counts hits and misses of :meth:`LruMap.get`
and evictions (entries dropped for the bound or the retention time, not those discarded).

Not thread-safe: each cache calls it under its own lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class LruMap(Generic[V]):
    """Values by key, least recently used first out, unused ones expiring.

    Args:
        max_weight: the most total weight :meth:`put` leaves (>= 0; a value heavier than it
            alone is evicted at once, so owners refuse those before putting).
        retention_ms: how long an unused entry is kept (>= 1).
        weigh: a value's weight (fixed while it is held).
        on_drop: called with each value the map drops (evicted, expired, discarded, cleared),
            not with one replaced by :meth:`put` under the same key; the disk cache deletes
            the value's file there.

    Raises:
        ValueError: ``max_weight`` < 0 or ``retention_ms`` < 1.

    Attributes:
        hits, misses: lookups of :meth:`get` answered or not (callers of :meth:`touch` count
            their own).
        evictions: entries dropped to stay within ``max_weight`` or the retention time.
        weight: the total weight held now.
    """

    def __init__(self, max_weight: int, retention_ms: int, weigh: Callable[[V], int],
                 on_drop: Callable[[V], None] | None = None) -> None:
        if max_weight < 0:
            raise ValueError(f"max_weight must be >= 0, got {max_weight}")
        if retention_ms < 1:
            raise ValueError(f"retention_ms must be >= 1, got {retention_ms}")
        self.max_weight = max_weight
        self.retention_s = retention_ms / 1000
        self._weigh = weigh
        self._on_drop = on_drop
        # in order of last use, least recent first: (value, time of last use)
        self._entries: OrderedDict[str, tuple[V, float]] = OrderedDict()
        self.weight = 0
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is held (expired entries count until the next :meth:`expire`)."""
        return key in self._entries

    def _drop(self, key: str) -> None:
        value = self._entries.pop(key)[0]
        self.weight -= self._weigh(value)
        if self._on_drop is not None:
            self._on_drop(value)

    def expire(self, now: float) -> None:
        """Drop (and count as evictions) the entries unused since ``now - retention``."""
        while self._entries:
            key, (_, used) = next(iter(self._entries.items()))
            if now - used < self.retention_s:
                return
            self._drop(key)
            self.evictions += 1

    def touch(self, key: str, now: float) -> V | None:
        """The value under ``key`` (now the most recently used, its retention restarted), or
        None; expired entries are dropped first. Counts nothing."""
        self.expire(now)
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries[key] = (entry[0], now)
        self._entries.move_to_end(key)
        return entry[0]

    def get(self, key: str, now: float) -> V | None:
        """:meth:`touch`, counted as a hit or a miss."""
        value = self.touch(key, now)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def peek(self, key: str) -> V | None:
        """The value under ``key`` or None, changing nothing."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: str, value: V, now: float) -> None:
        """Keep ``value`` under ``key`` as the most recently used (replacing any value, which
        is not passed to ``on_drop``), then drop the expired entries and the least recently
        used ones while the weight is above ``max_weight``."""
        old = self._entries.pop(key, None)
        if old is not None:
            self.weight -= self._weigh(old[0])
        self._entries[key] = (value, now)
        self.weight += self._weigh(value)
        self.expire(now)
        while self.weight > self.max_weight:
            self._drop(next(iter(self._entries)))
            self.evictions += 1

    def discard(self, key: str) -> bool:
        """Drop the entry under ``key`` (not an eviction); returns whether one was held."""
        if key not in self._entries:
            return False
        self._drop(key)
        return True

    def discard_prefix(self, prefix: str) -> int:
        """Drop every entry whose key starts with ``prefix`` (not evictions); returns how
        many."""
        keys = [k for k in self._entries if k.startswith(prefix)]
        for k in keys:
            self._drop(k)
        return len(keys)

    def clear(self) -> None:
        """Drop every entry (not evictions); the counters stay."""
        for key in list(self._entries):
            self._drop(key)


__all__ = ["LruMap"]
