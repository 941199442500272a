"""The manifest cache: LRU by last use, time to live, 0 entries = off, discard, counters."""

from __future__ import annotations

import threading

import pytest

from kafka_tiers.objectstore.manifest_cache import ManifestCache, ManifestCacheStats
from tests.remote.data_path_helpers import ManualClock


def test_get_put_and_counters() -> None:
    cache: ManifestCache[dict[str, int]] = ManifestCache(10, 60_000)
    assert cache.get("a") is None
    manifest = {"x": 1}
    cache.put("a", manifest)
    assert cache.get("a") is manifest
    assert cache.stats() == ManifestCacheStats(hits=1, misses=1, evictions=0, entries=1,
                                               max_entries=10)


def test_least_recently_used_is_dropped_first() -> None:
    cache: ManifestCache[str] = ManifestCache(2, 60_000)
    cache.put("a", "A")
    cache.put("b", "B")
    assert cache.get("a") == "A"  # b is now the least recently used
    cache.put("c", "C")
    assert cache.get("b") is None
    assert cache.get("a") == "A" and cache.get("c") == "C"
    assert cache.stats().evictions == 1 and len(cache) == 2


def test_unused_manifest_expires_after_retention() -> None:
    clock = ManualClock()
    cache: ManifestCache[str] = ManifestCache(10, 1000, clock=clock)
    cache.put("a", "A")
    cache.put("b", "B")
    clock.now += 0.6
    assert cache.get("a") == "A"  # used: its time to live starts again
    clock.now += 0.6
    assert cache.get("b") is None  # unused for 1.2 s
    assert cache.get("a") == "A"
    clock.now += 1.0
    assert cache.stats().entries == 0
    assert cache.get("a") is None
    assert cache.stats().evictions == 2


def test_zero_entries_caches_nothing() -> None:
    cache: ManifestCache[str] = ManifestCache(0, 1000)
    cache.put("a", "A")
    assert cache.get("a") is None
    assert cache.stats() == ManifestCacheStats(0, 1, 0, 0, 0)


def test_discard_and_replace() -> None:
    cache: ManifestCache[str] = ManifestCache(5, 60_000)
    cache.put("a", "old")
    cache.put("a", "new")
    assert cache.get("a") == "new" and len(cache) == 1
    assert cache.discard("a") is True
    assert cache.discard("a") is False
    assert cache.get("a") is None
    assert cache.stats().evictions == 0  # a discard is not an eviction
    cache.put("b", "B")
    cache.clear()
    assert len(cache) == 0


@pytest.mark.parametrize("entries, retention", [(-1, 1000), (1, 0)])
def test_bad_bounds_are_refused(entries: int, retention: int) -> None:
    with pytest.raises(ValueError):
        ManifestCache(entries, retention)


def test_bound_holds_under_concurrent_puts() -> None:
    cache: ManifestCache[int] = ManifestCache(7, 60_000)
    start = threading.Barrier(8)

    def writer(w: int) -> None:
        start.wait()
        for i in range(300):
            cache.put(f"{w}-{i}", i)
            assert len(cache) <= 7
            cache.get(f"{w}-{i // 2}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = cache.stats()
    assert stats.entries == 7
    assert stats.evictions == 8 * 300 - 7
