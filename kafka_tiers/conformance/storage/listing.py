"""list_remote_segments: sorted by start offset, filtered by min_base_offset, per partition."""

from __future__ import annotations

import random

from kafka_tiers.api import RemoteStorageManager, TopicPartition
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.harness import SegmentBuilder, check, storage_test


class ListingTests(StorageSuiteBase):
    """Listing."""

    @storage_test("listing-sorted-filtered")
    def test_sorted_and_filtered(self, rsm: RemoteStorageManager,
                                 segments: SegmentBuilder) -> None:
        starts = [i * 100 for i in range(12)] + [10**12, 2**40]
        made = [segments.make(s, log_size=200) for s in starts]
        for segment in random.Random(7).sample(made, len(made)):
            copy(rsm, segment)
        tp = made[0].tp
        got = [m.start_offset for m in rsm.list_remote_segments(tp)]
        want = sorted(starts)
        check("listing-sorted-filtered", got == want,
              f"list_remote_segments gave start offsets {got}, expected {want}")
        for minimum in (0, 1, 300, 301, 1100, 1101, 2**40, 2**41):
            got = [m.start_offset for m in rsm.list_remote_segments(tp, minimum)]
            want = [s for s in sorted(starts) if s >= minimum]
            check("listing-sorted-filtered", got == want,
                  f"list_remote_segments(min_base_offset={minimum}) gave {got}, "
                  f"expected {want}")

    @storage_test("listing-per-partition")
    def test_partitions_and_topics_are_separate(self, rsm: RemoteStorageManager,
                                                segments: SegmentBuilder) -> None:
        one = segments.make(0, partition=1)
        ten = segments.make(0, partition=10)
        copy(rsm, one)
        copy(rsm, ten)
        lookalike = TopicPartition(f"{segments.topic}-1", 0)
        segments.partitions.add(lookalike)
        for tp, want in ((one.tp, [one.metadata.segment_id]),
                         (ten.tp, [ten.metadata.segment_id]), (lookalike, [])):
            got = [m.segment_id for m in rsm.list_remote_segments(tp)]
            check("listing-per-partition", got == want,
                  f"list_remote_segments({tp}) gave {got}, expected {want}")
        check("listing-per-partition", rsm.list_remote_segments(segments.tp(3)) == [],
              "a partition with no segments must list nothing")


__all__ = ["ListingTests"]
