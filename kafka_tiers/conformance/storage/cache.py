"""The chunk cache: it never holds more than ``fetch.chunk.cache.size`` bytes (memory and disk),
N concurrent readers of one chunk cause one download, a cached chunk is read without one, and a
chunk pushed out by others is downloaded again.

Downloads are counted on a wrapping object store (gets of the log object). The segments are
compressed: every chunk of a transformed layout goes through the cache (a plain layout may
read part of a chunk straight from the store, uncached)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from kafka_tiers.api import IndexType, ObjectStore
from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.data_path import (
    DATA_TRANSFORMS,
    NO_PREFETCH,
    DataPath,
    DataPathSuiteBase,
    batches_log,
    check_reads,
)
from kafka_tiers.conformance.storage.harness import (
    Segment,
    SegmentBuilder,
    TrackingObjectStore,
    check,
    read_all,
    storage_test,
)
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager

BOUNDED = "chunk-cache-bounded"
SINGLE = "one-download-per-chunk"
EVICTION = "chunk-cache-eviction"

CHUNK = 4096
LOG_BYTES = 40_000
READERS = 8


def _settings(cache_bytes: int | None = None, **more: str) -> dict[str, str]:
    settings = {"chunk.size": str(CHUNK), "compression.enabled": "true", **NO_PREFETCH,
                **more}
    if cache_bytes is not None:
        settings["fetch.chunk.cache.size"] = str(cache_bytes)
    return settings


def chunk_cache_stats(rsm: Any, rule: str) -> Mapping[str, int]:
    """The chunk cache's counters of ``rsm.cache_stats()`` (``bytes``, ``max_bytes``,
    ``evictions``...)."""
    stats = rsm.cache_stats()
    chunk = stats.get("chunk_cache") if isinstance(stats, Mapping) else None
    check(rule, isinstance(chunk, Mapping) and "bytes" in chunk and "max_bytes" in chunk,
          f"cache_stats() has no chunk_cache counters with bytes and max_bytes: {stats!r}")
    assert isinstance(chunk, Mapping)
    return chunk


def tracked(rsm: ObjectStoreRemoteStorageManager, **options: Any) -> TrackingObjectStore:
    """Wrap ``rsm``'s object store in a :class:`TrackingObjectStore` and return it."""
    holder: list[TrackingObjectStore] = []

    def wrap(store: ObjectStore) -> ObjectStore:
        holder.append(TrackingObjectStore(store, **options))
        return holder[0]

    rsm.wrap_object_store(wrap)
    return holder[0]


def chunk_range(n: int) -> tuple[int, int]:
    """An inclusive range inside chunk ``n`` (not all of it)."""
    return n * CHUNK + 10, n * CHUNK + 700


def read_range(rsm: Any, segment: Segment, rule: str, first: int, last: int) -> None:
    got = read_all(rsm.fetch_log_segment(segment.metadata, first, last))
    check(rule, got == segment.log[first:last + 1],
          f"fetch_log_segment({first}, {last}) read wrong bytes through the chunk cache")


class CacheTests(DataPathSuiteBase):
    """The chunk cache (``data_transforms``)."""

    @pytest.mark.parametrize("kind", ["memory", "disk"])
    @storage_test(BOUNDED, requires=(DATA_TRANSFORMS,))
    def test_cache_stays_within_its_size(self, data_path: DataPath,
                                         segments: SegmentBuilder, kind: str) -> None:
        bound = 3 * CHUNK + 100  # three chunks and a bit
        extra = {"fetch.chunk.cache.class": kind}
        if kind == "disk":
            extra["fetch.chunk.cache.path"] = str(data_path.key_dir.parent / "chunk-cache")
        rsm = data_path.rsm(_settings(bound, **extra))
        made = [segments.make(i * 1000, log_bytes=batches_log(LOG_BYTES, seed=i))
                for i in range(2)]
        for segment in made:
            copy(rsm, segment)

        def within(after: str) -> None:
            stats = chunk_cache_stats(rsm, BOUNDED)
            check(BOUNDED, stats["max_bytes"] == bound,
                  f"fetch.chunk.cache.size={bound} gave a cache of {stats['max_bytes']} bytes")
            check(BOUNDED, stats["bytes"] <= bound,
                  f"after {after} the {kind} chunk cache holds {stats['bytes']} bytes, over "
                  f"fetch.chunk.cache.size={bound}")

        for segment in made:
            check_reads(rsm, segment, BOUNDED)
            within(f"reading segment {segment.metadata.start_offset} whole")
            for n in range(-(-len(segment.log) // CHUNK)):
                read_range(rsm, segment, BOUNDED, *chunk_range(n))
                within(f"reading chunk {n}")
        stats = chunk_cache_stats(rsm, BOUNDED)
        check(BOUNDED, stats["bytes"] > 0 and stats.get("entries", 1) > 0,
              f"the {kind} chunk cache holds nothing after reads: {dict(stats)}")

        def read_concurrently(n: int) -> None:
            read_range(rsm, made[n % 2], BOUNDED, *chunk_range(n % 9))

        threads = [threading.Thread(target=read_concurrently, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        within("12 concurrent reads")

    @storage_test(SINGLE, requires=(DATA_TRANSFORMS,))
    def test_concurrent_readers_of_a_chunk_download_it_once(
            self, data_path: DataPath, segments: SegmentBuilder) -> None:
        rsm = data_path.rsm(_settings())
        segment = segments.make(0, log_bytes=batches_log(LOG_BYTES))
        copy(rsm, segment)
        store = tracked(rsm, slow_get_suffix=".log", slow_get_seconds=0.3)
        read_all(rsm.fetch_index(segment.metadata, IndexType.OFFSET))  # manifest read once
        before = store.gets_of(".log")
        barrier = threading.Barrier(READERS)
        problems: list[str] = []
        first, last = chunk_range(2)

        def reader() -> None:
            barrier.wait()
            try:
                got = read_all(rsm.fetch_log_segment(segment.metadata, first, last))
                if got != segment.log[first:last + 1]:
                    problems.append("wrong bytes")
            except Exception as exc:  # reported below, with the rule
                problems.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=reader) for _ in range(READERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        check(SINGLE, not problems, f"concurrent readers of one chunk failed: {problems}")
        downloads = store.gets_of(".log") - before
        check(SINGLE, downloads == 1,
              f"{READERS} concurrent readers of one chunk caused {downloads} gets of the log "
              "object, expected 1")

    @storage_test(EVICTION, requires=(DATA_TRANSFORMS,))
    def test_evicted_chunk_is_downloaded_again(self, data_path: DataPath,
                                               segments: SegmentBuilder) -> None:
        rsm = data_path.rsm(_settings(2 * CHUNK + 100))  # two chunks and a bit
        segment = segments.make(0, log_bytes=batches_log(LOG_BYTES))
        copy(rsm, segment)
        store = tracked(rsm)

        def downloads_of(n: int) -> int:
            before = store.gets_of(".log")
            read_range(rsm, segment, EVICTION, *chunk_range(n))
            return store.gets_of(".log") - before

        got = downloads_of(0)
        check(EVICTION, got == 1, f"the first read of chunk 0 made {got} gets, expected 1")
        got = downloads_of(0)
        check(EVICTION, got == 0,
              f"reading chunk 0 again, still cached, made {got} gets, expected 0")
        for n in (3, 4, 5, 6):
            got = downloads_of(n)
            check(EVICTION, got == 1, f"the first read of chunk {n} made {got} gets, "
                  "expected 1")
        got = downloads_of(0)
        check(EVICTION, got == 1,
              f"reading chunk 0 after four other chunks went through a cache of two made "
              f"{got} gets, expected 1 (it must have been evicted, and downloaded again)")
        stats = chunk_cache_stats(rsm, EVICTION)
        check(EVICTION, stats.get("evictions", 1) >= 1,
              f"the chunk cache counts no evictions: {dict(stats)}")


__all__ = ["CacheTests", "chunk_cache_stats", "tracked"]
