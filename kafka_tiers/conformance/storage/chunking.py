"""Chunked layouts: a segment stored as chunks of ``chunk.size`` bytes (1 byte, an odd size, one
larger than the segment), plain and compressed+encrypted, reads back identical whole and in
ranges, those across every chunk boundary (+/- 1) and random ones included."""

from __future__ import annotations

import random

import pytest

from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.data_path import (
    DATA_TRANSFORMS,
    DataPath,
    DataPathSuiteBase,
    batches_log,
    check_reads,
    manifest_of,
)
from kafka_tiers.conformance.storage.harness import (
    Segment,
    SegmentBuilder,
    check,
    read_object,
    storage_test,
)
from kafka_tiers.objectstore.keys import ObjectKind

LAYOUT = "chunked-layout"
BOUNDARIES = "chunk-boundary-ranges"

#: (case, chunk.size, segment bytes): one byte per chunk, an odd size that divides nothing,
#: and one chunk larger than the segment
CASES = [("1-byte", 1, 64), ("odd", 4093, 40_000), ("larger-than-segment", 1 << 20, 40_000)]
#: boundaries read per segment (all when fewer; else the first, the last and a random sample)
MAX_BOUNDARIES = 16
RANDOM_RANGES = 12


def boundary_ranges(size: int, chunk: int, rng: random.Random) -> list[tuple[int, int]]:
    """Inclusive ranges around the chunk boundaries of a ``size``-byte log: for a boundary
    ``b`` (first byte of a chunk), ``b-1..b`` (one byte each side), ``b..b`` (a chunk's first
    byte alone), ``b+1..`` just past the next boundary, and ``..b-1`` from just before the
    previous boundary; plus random ranges, some ending past the end (clipped)."""
    bounds = list(range(chunk, size, chunk))
    if len(bounds) > MAX_BOUNDARIES:
        picked = set(bounds[:4] + bounds[-4:]) | set(rng.sample(bounds, MAX_BOUNDARIES - 8))
        bounds = sorted(picked)
    ranges: list[tuple[int, int]] = []
    for b in bounds:
        ranges += [(b - 1, b), (b, b), (b + 1 if b + 1 < size else b, min(b + chunk + 1,
                                                                          size - 1)),
                   (max(0, b - chunk - 1), b - 1)]
    for _ in range(RANDOM_RANGES):
        first = rng.randrange(size)
        ranges.append((first, first + rng.randrange(1, 3 * chunk + 2)))
    ranges.append((0, size + 100))
    return ranges


class ChunkingTests(DataPathSuiteBase):
    """Chunked layouts (``data_transforms``)."""

    def _check_layout(self, rsm: object, segment: Segment, chunk_size: int,
                      transformed: bool) -> None:
        manifest = manifest_of(rsm, segment, LAYOUT)
        chunks = manifest.chunks
        assert chunks is not None
        size = len(segment.log)
        check(LAYOUT, chunks.chunk_size == chunk_size and chunks.original_size == size,
              f"with chunk.size={chunk_size} the manifest's chunk index has chunk size "
              f"{chunks.chunk_size} and original size {chunks.original_size} (log: {size})")
        check(LAYOUT, chunks.count == -(-size // chunk_size),
              f"{chunks.count} chunks for {size} bytes of chunk.size={chunk_size}")
        if not transformed:
            check(LAYOUT, chunks.identity and manifest.compression is None
                  and manifest.encryption is None,
                  "without compression and encryption the chunk index must be identity")

    @pytest.mark.parametrize("transformed", [False, True], ids=["plain", "zstd-aes"])
    @pytest.mark.parametrize(("case", "chunk_size", "log_size"), CASES,
                             ids=[c[0] for c in CASES])
    @storage_test(LAYOUT, requires=(DATA_TRANSFORMS,))
    def test_chunked_segment_reads_back(self, data_path: DataPath, segments: SegmentBuilder,
                                        case: str, chunk_size: int, log_size: int,
                                        transformed: bool) -> None:
        settings = {"chunk.size": str(chunk_size)}
        if transformed:
            settings |= {"compression.enabled": "true"} | data_path.encryption("k1", ["k1"])
        else:
            settings["fetch.chunk.cache.class"] = "none"  # every range from the store
        rsm = data_path.rsm(settings)
        segment = segments.make(0, log_bytes=batches_log(log_size, seed=log_size)[:log_size])
        copy(rsm, segment)
        guarded = data_path.guarded(settings)
        self._check_layout(guarded, segment, chunk_size, transformed)
        manifest = manifest_of(rsm, segment, LAYOUT)
        stored = read_object(rsm.object_store, rsm.object_key(segment.metadata, ObjectKind.LOG))
        assert manifest.chunks is not None
        check(LAYOUT, len(stored) == manifest.chunks.stored_size,
              f"the stored log object has {len(stored)} bytes; its chunk index says "
              f"{manifest.chunks.stored_size}")
        if not transformed:
            check(LAYOUT, stored == segment.log,
                  "without compression and encryption the log object must be the segment's "
                  "bytes as they are")
        check_reads(rsm, segment, LAYOUT)
        ranges = boundary_ranges(len(segment.log), chunk_size, random.Random(log_size))
        check_reads(rsm, segment, BOUNDARIES, ranges=ranges, whole=False)
        # another instance (cold caches) reads the same through the core's wrapper
        check_reads(guarded, segment, BOUNDARIES, ranges=ranges[:8])


__all__ = ["ChunkingTests", "boundary_ranges"]
