"""Every stream the backend returns is closed: by the suite's caller, and by the plugin for
the streams it opens itself."""

from __future__ import annotations

import gc

import pytest

from kafka_tiers.api import (
    IndexType,
    InvalidRangeError,
    ObjectStore,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.harness import (
    Segment,
    SegmentBuilder,
    TrackingObjectStore,
    check,
    expect_raises,
    open_fd_count,
    read_all,
    storage_test,
)
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager

RULE = "streams-closed"


def exercise(rsm: RemoteStorageManager, segment: Segment, missing: Segment) -> None:
    """Every read path once: whole, ranged, partial read then close, each index, errors."""
    md = segment.metadata
    read_all(rsm.fetch_log_segment(md, 0))
    read_all(rsm.fetch_log_segment(md, 5, 50))
    with rsm.fetch_log_segment(md, 0) as stream:
        stream.read(10)  # closed before the end
    for index_type in segment.indexes:
        read_all(rsm.fetch_index(md, index_type))
    rsm.list_remote_segments(segment.tp)
    expect_raises(RULE, RemoteResourceNotFoundError, rsm.fetch_log_segment, missing.metadata, 0)
    expect_raises(RULE, RemoteResourceNotFoundError, rsm.fetch_index, missing.metadata,
                  IndexType.OFFSET)
    expect_raises(RULE, InvalidRangeError, rsm.fetch_log_segment, md, len(segment.log) + 1)


class LeakTests(StorageSuiteBase):
    """Leak checks."""

    @storage_test(RULE, requires=("fault_injection",))
    def test_object_store_streams_are_closed(self, rsm: RemoteStorageManager,
                                             segments: SegmentBuilder) -> None:
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        holder: list[TrackingObjectStore] = []

        def track(store: ObjectStore) -> ObjectStore:
            holder.append(TrackingObjectStore(store))
            return holder[0]

        rsm.wrap_object_store(track)
        tracking = holder[0]
        segment = segments.make(0, log_size=30_000)
        copy(rsm, segment)
        exercise(rsm, segment, segments.make(5000))
        rsm.delete_log_segment_data(segment.metadata)
        gc.collect()
        check(RULE, tracking.gets > 0, "the tracking store saw no reads")
        check(RULE, tracking.open_streams == 0,
              f"{tracking.open_streams} object-store streams were left open "
              f"(of {tracking.gets} opened)")

    @storage_test(RULE)
    def test_no_file_descriptors_leak(self, rsm: RemoteStorageManager,
                                      segments: SegmentBuilder) -> None:
        if open_fd_count() is None:
            pytest.skip("this platform cannot count open file descriptors")
        segment = segments.make(0, log_size=30_000)
        missing = segments.make(5000)
        copy(rsm, segment)
        exercise(rsm, segment, missing)  # warm up caches and connection pools
        gc.collect()
        before = open_fd_count()
        for _ in range(10):
            exercise(rsm, segment, missing)
        gc.collect()
        after = open_fd_count()
        check(RULE, after is not None and before is not None and after <= before,
              f"{(after or 0) - (before or 0)} file descriptors leaked over 10 rounds of "
              "fetches")


__all__ = ["LeakTests", "exercise"]
