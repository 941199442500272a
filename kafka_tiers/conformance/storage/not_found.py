"""Fetching what is not there raises RemoteResourceNotFoundError, never returns None."""

from __future__ import annotations

from kafka_tiers.api import (
    IndexType,
    RemoteLogSegmentId,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
)
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.harness import (
    Segment,
    SegmentBuilder,
    check,
    expect_raises,
    storage_test,
)


def check_absent(rsm: RemoteStorageManager, segment: Segment, rule: str) -> None:
    """The segment and every one of its indexes raise not-found."""
    md = segment.metadata
    err = expect_raises(rule, RemoteResourceNotFoundError, rsm.fetch_log_segment, md, 0)
    check(rule, isinstance(err, RemoteStorageError),
          "RemoteResourceNotFoundError must be a RemoteStorageError")
    for index_type in IndexType:
        expect_raises(rule, RemoteResourceNotFoundError, rsm.fetch_index, md, index_type)


class NotFoundTests(StorageSuiteBase):
    """Missing segments and indexes."""

    @storage_test("missing-segment-not-found")
    def test_segment_never_copied(self, rsm: RemoteStorageManager,
                                  segments: SegmentBuilder) -> None:
        check_absent(rsm, segments.make(0), "missing-segment-not-found")

    @storage_test("missing-segment-not-found")
    def test_segment_deleted(self, rsm: RemoteStorageManager, segments: SegmentBuilder) -> None:
        segment = segments.make(0)
        copy(rsm, segment)
        rsm.delete_log_segment_data(segment.metadata)
        check_absent(rsm, segment, "missing-segment-not-found")

    @storage_test("missing-segment-not-found")
    def test_other_id_of_a_copied_offset(self, rsm: RemoteStorageManager,
                                         segments: SegmentBuilder) -> None:
        segment = segments.make(0)
        copy(rsm, segment)
        other = segments.make(0, segment_id=RemoteLogSegmentId.generate(segment.tp))
        check_absent(rsm, other, "missing-segment-not-found")


__all__ = ["NotFoundTests", "check_absent"]
