"""A copy that fails midway leaves no listed segment and no readable partial data."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_tiers.api import (
    IndexType,
    ObjectStore,
    RemoteStorageError,
    RemoteStorageManager,
)
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import check_contents, copy
from kafka_tiers.conformance.storage.harness import (
    FaultyObjectStore,
    Segment,
    SegmentBuilder,
    check,
    expect_raises,
    objects_of_segment,
    storage_test,
)
from kafka_tiers.conformance.storage.not_found import check_absent
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager, partition_prefix

RULE = "failed-copy-invisible"


def check_not_listed(rsm: RemoteStorageManager, segment: Segment, rule: str) -> None:
    """No listed segment has the id or the start offset of ``segment``."""
    listed = rsm.list_remote_segments(segment.tp)
    check(rule, all(m.segment_id != segment.metadata.segment_id for m in listed),
          f"the failed copy {segment.metadata.segment_id} is listed")
    check(rule, all(m.start_offset != segment.metadata.start_offset for m in listed),
          f"a segment at start offset {segment.metadata.start_offset} is listed after its "
          "only copy failed")


def faulty(make_rsm: Callable[[], RemoteStorageManager], *,
           fail_put_after: int | None = None, fail_put_suffix: str | None = None,
           fail_deletes: bool = False, spare_delete_suffix: str | None = None,
           ) -> tuple[ObjectStoreRemoteStorageManager, FaultyObjectStore]:
    """A new instance whose object store fails as told (the faults are
    :class:`FaultyObjectStore`'s)."""
    instance = make_rsm()
    assert isinstance(instance, ObjectStoreRemoteStorageManager)
    holder: list[FaultyObjectStore] = []

    def wrap(store: ObjectStore) -> FaultyObjectStore:
        holder.append(FaultyObjectStore(
            store, fail_put_after=fail_put_after, fail_put_suffix=fail_put_suffix,
            fail_deletes=fail_deletes, spare_delete_suffix=spare_delete_suffix))
        return holder[0]

    instance.wrap_object_store(wrap)
    return instance, holder[0]


class FaultTests(StorageSuiteBase):
    """Failed copies."""

    @storage_test(RULE)
    def test_unreadable_local_file(self, rsm: RemoteStorageManager,
                                   segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_size=30_000)
        segment.data.producer_snapshot_index.unlink()
        expect_raises(RULE, RemoteStorageError, rsm.copy_log_segment_data, segment.metadata,
                      segment.data)
        check_not_listed(rsm, segment, RULE)
        check_absent(rsm, segment, RULE)

    # format 3 keeps small indexes inline in the manifest; ".indexes" copies indexes of over
    # 64 KiB, stored in one object of their own
    @pytest.mark.parametrize("suffix", [".log", ".indexes", ".manifest"])
    @storage_test(RULE, requires=("fault_injection",))
    def test_copy_failing_midway(self, rsm: RemoteStorageManager,
                                 make_rsm: Callable[[], RemoteStorageManager],
                                 segments: SegmentBuilder, suffix: str) -> None:
        earlier = segments.make(0)
        copy(rsm, earlier)
        large = {IndexType.OFFSET: bytes(40_000), IndexType.TIMESTAMP: bytes(36_000)}
        segment = segments.make(1000, log_size=40_000,
                                index_bytes=large if suffix == ".indexes" else None)
        broken, store = faulty(make_rsm, fail_put_after=50, fail_put_suffix=suffix)
        expect_raises(RULE, RemoteStorageError, broken.copy_log_segment_data,
                      segment.metadata, segment.data)
        check(RULE, store.faults >= 1, f"the injected fault on {suffix} never fired")
        check_not_listed(rsm, segment, RULE)
        check_absent(rsm, segment, RULE)
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        left = objects_of_segment(rsm.object_store,
                                  partition_prefix(rsm.key_prefix, segment.tp),
                                  segment.metadata.segment_id)
        check("failed-copy-cleaned-up", left == [],
              f"a failed copy left {len(left)} objects behind: {left}")
        check_contents(rsm, earlier, RULE)

    @storage_test(RULE, requires=("fault_injection", "orphan_collection"))
    def test_failed_copy_whose_cleanup_fails(self, rsm: RemoteStorageManager,
                                             make_rsm: Callable[[], RemoteStorageManager],
                                             segments: SegmentBuilder) -> None:
        earlier = segments.make(0)
        copy(rsm, earlier)
        segment = segments.make(1000)
        broken, _ = faulty(make_rsm, fail_put_after=0,
                           fail_put_suffix=".manifest", fail_deletes=True,
                           spare_delete_suffix=".manifest")
        expect_raises(RULE, RemoteStorageError, broken.copy_log_segment_data,
                      segment.metadata, segment.data)
        check_not_listed(rsm, segment, RULE)
        check_absent(rsm, segment, RULE)
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        prefix = partition_prefix(rsm.key_prefix, segment.tp)
        left = objects_of_segment(rsm.object_store, prefix, segment.metadata.segment_id)
        check(RULE, left, "the fault injection did not leave the expected garbage")
        collected = rsm.collect_orphans(0, segment.tp)
        check("orphans-collected", sorted(collected) == left,
              f"collect_orphans(0) removed {collected}, expected the garbage {left}")
        check("orphans-collected",
              objects_of_segment(rsm.object_store, prefix, segment.metadata.segment_id) == [],
              "garbage remains after collect_orphans")
        check_contents(rsm, earlier, "orphans-collected")

    @storage_test(RULE, requires=("fault_injection",))
    def test_failed_retry_with_the_same_id_hides_the_segment(
            self, rsm: RemoteStorageManager, make_rsm: Callable[[], RemoteStorageManager],
            segments: SegmentBuilder) -> None:
        first = segments.make(0, log_size=20_000)
        copy(rsm, first)
        retry = segments.retry(first, new_id=False)
        broken, _ = faulty(make_rsm, fail_put_after=100, fail_put_suffix=".log")
        expect_raises(RULE, RemoteStorageError, broken.copy_log_segment_data,
                      retry.metadata, retry.data)
        check_not_listed(rsm, retry, RULE)
        check_absent(rsm, retry, RULE)

    @storage_test("retry-after-failure")
    def test_retry_with_a_new_id_after_a_failure(self, rsm: RemoteStorageManager,
                                                 segments: SegmentBuilder) -> None:
        failed = segments.make(0)
        failed.data.time_index.unlink()
        expect_raises("retry-after-failure", RemoteStorageError, rsm.copy_log_segment_data,
                      failed.metadata, failed.data)
        retry = segments.retry(failed, new_id=True)
        copy(rsm, retry)
        listed = rsm.list_remote_segments(retry.tp)
        check("retry-after-failure", [m.segment_id for m in listed] == [
            retry.metadata.segment_id], f"after a failed copy and a good retry, listed "
              f"{[m.segment_id for m in listed]}")
        check_contents(rsm, retry, "retry-after-failure")


__all__ = ["FaultTests", "check_not_listed", "faulty"]
