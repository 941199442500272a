"""Retried copies overwrite cleanly; deletes are idempotent; whole partitions are deleted."""

from __future__ import annotations

from kafka_tiers.api import RemoteStorageManager
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import check_contents, copy
from kafka_tiers.conformance.storage.harness import SegmentBuilder, check, read_all, storage_test
from kafka_tiers.conformance.storage.not_found import check_absent


class IdempotencyTests(StorageSuiteBase):
    """Retries and deletes."""

    @storage_test("retry-same-id-overwrites")
    def test_retried_copy_with_the_same_id_overwrites(self, rsm: RemoteStorageManager,
                                                      segments: SegmentBuilder) -> None:
        first = segments.make(0, log_size=20_000)
        copy(rsm, first)
        retry = segments.retry(first, new_id=False, log_size=15_000)
        copy(rsm, retry)
        check_contents(rsm, retry, "retry-same-id-overwrites")
        listed = rsm.list_remote_segments(first.tp)
        check("retry-same-id-overwrites",
              [m.segment_id for m in listed] == [first.metadata.segment_id],
              f"after a retried copy with the same id, {len(listed)} segments are listed")
        check("retry-same-id-overwrites", listed[0].segment_size_in_bytes == len(retry.log),
              "the listed metadata is the first attempt's, not the retry's")

    @storage_test("retry-new-id-lists-newest")
    def test_retried_copy_with_a_new_id(self, rsm: RemoteStorageManager,
                                        segments: SegmentBuilder) -> None:
        first = segments.make(100)
        copy(rsm, first)
        retry = segments.retry(first, new_id=True)
        copy(rsm, retry)
        listed = rsm.list_remote_segments(first.tp)
        check("retry-new-id-lists-newest",
              [m.segment_id for m in listed] == [retry.metadata.segment_id],
              "two copies of one start offset: only the newest must be listed, got "
              f"{[m.segment_id for m in listed]} (newest {retry.metadata.segment_id})")
        check_contents(rsm, retry, "retry-new-id-lists-newest")
        # The older copy stays readable by its own metadata until it is deleted.
        got = read_all(rsm.fetch_log_segment(first.metadata, 0))
        check("retry-new-id-lists-newest", got == first.log,
              "the superseded copy is no longer readable by its own metadata")
        rsm.delete_log_segment_data(first.metadata)
        check_contents(rsm, retry, "retry-new-id-lists-newest")
        check_absent(rsm, first, "retry-new-id-lists-newest")

    @storage_test("delete-idempotent")
    def test_delete_is_idempotent(self, rsm: RemoteStorageManager,
                                  segments: SegmentBuilder) -> None:
        segment = segments.make(0)
        never = segments.make(1000)
        copy(rsm, segment)
        rsm.delete_log_segment_data(segment.metadata)
        rsm.delete_log_segment_data(segment.metadata)
        rsm.delete_log_segment_data(never.metadata)
        check("delete-idempotent", rsm.list_remote_segments(segment.tp) == [],
              "a deleted segment is still listed")
        check_absent(rsm, segment, "delete-idempotent")

    @storage_test("delete-partition")
    def test_delete_a_partition_with_many_segments(self, rsm: RemoteStorageManager,
                                                   segments: SegmentBuilder) -> None:
        doomed = [segments.make(i * 10, partition=0, log_size=300, records=10)
                  for i in range(40)]
        kept = [segments.make(i * 10, partition=1, log_size=300, records=10) for i in range(2)]
        for segment in doomed + kept:
            copy(rsm, segment)
        check("delete-partition", len(rsm.list_remote_segments(doomed[0].tp)) == 40,
              "not all 40 segments are listed before the delete")
        rsm.delete_topic_partition(doomed[0].tp)
        check("delete-partition", rsm.list_remote_segments(doomed[0].tp) == [],
              "segments are still listed after delete_topic_partition")
        for segment in (doomed[0], doomed[-1]):
            check_absent(rsm, segment, "delete-partition")
        rsm.delete_topic_partition(doomed[0].tp)  # idempotent
        listed = rsm.list_remote_segments(kept[0].tp)
        check("delete-partition", len(listed) == 2,
              "deleting one partition removed segments of another")
        for segment in kept:
            check_contents(rsm, segment, "delete-partition")


__all__ = ["IdempotencyTests"]
