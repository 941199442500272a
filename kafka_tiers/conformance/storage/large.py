"""Large segments, and multi-part uploads where the backend has them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from kafka_tiers.api import (
    MultipartObjectStore,
    RemoteStorageError,
    RemoteStorageManager,
)
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.faults import check_not_listed, faulty
from kafka_tiers.conformance.storage.harness import (
    SegmentBuilder,
    check,
    count_calls,
    expect_raises,
    objects_of_segment,
    read_all,
    storage_test,
)
from kafka_tiers.conformance.storage.not_found import check_absent
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager, partition_prefix


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _multipart_store(rsm: RemoteStorageManager) -> MultipartObjectStore:
    check("multipart-upload", isinstance(rsm, ObjectStoreRemoteStorageManager)
          and isinstance(rsm.object_store, MultipartObjectStore),
          "the plugin declares multipart_upload but its object store is not a "
          "MultipartObjectStore")
    assert isinstance(rsm, ObjectStoreRemoteStorageManager)
    store = rsm.object_store
    assert isinstance(store, MultipartObjectStore)  # the check above made sure
    return store


class LargeSegmentTests(StorageSuiteBase):
    """Big data."""

    @storage_test("large-segment", requires=("large_segments",))
    def test_large_segment(self, rsm: RemoteStorageManager, segments: SegmentBuilder) -> None:
        size = self.LARGE_SEGMENT_BYTES
        segment = segments.make(0, log_size=size)
        copy(rsm, segment)
        got = read_all(rsm.fetch_log_segment(segment.metadata, 0))
        check("large-segment", len(got) == size and _digest(got) == _digest(segment.log),
              f"a {size}-byte segment read back as {len(got)} different bytes")
        start = size // 2 + 5
        got = read_all(rsm.fetch_log_segment(segment.metadata, start, size + 10))
        check("large-segment", got == segment.log[start:],
              "a ranged fetch near the end of a large segment differs")

    @storage_test("multipart-upload", requires=("multipart_upload",))
    def test_multipart_upload(self, rsm: RemoteStorageManager,
                              segments: SegmentBuilder) -> None:
        store = _multipart_store(rsm)
        parts = count_calls(store, "upload_part")
        completes = count_calls(store, "complete_multipart_upload")
        size = store.part_size * 2 + store.part_size // 2
        segment = segments.make(0, log_size=size)
        copy(rsm, segment)
        log_parts = [c for c in parts if str(c[0]).endswith(".log")]
        check("multipart-upload", len(log_parts) == 3,
              f"a log of 2.5 parts went up in {len(log_parts)} parts, expected 3")
        check("multipart-upload", any(str(c[0]).endswith(".log") for c in completes),
              "the multi-part upload of the log was never completed")
        got = read_all(rsm.fetch_log_segment(segment.metadata, 0))
        check("multipart-upload", _digest(got) == _digest(segment.log),
              "a multi-part object reads back different")
        edge = store.part_size - 3
        got = read_all(rsm.fetch_log_segment(segment.metadata, edge, edge + 9))
        check("multipart-upload", got == segment.log[edge:edge + 10],
              "a range across a part boundary reads back different")

    @storage_test("multipart-abort", requires=("multipart_upload", "fault_injection"))
    def test_failed_multipart_upload_is_aborted(self, rsm: RemoteStorageManager,
                                                make_rsm: Callable[[], RemoteStorageManager],
                                                segments: SegmentBuilder) -> None:
        instance = make_rsm()
        store = _multipart_store(instance)
        aborts = count_calls(store, "abort_multipart_upload")
        completes = count_calls(store, "complete_multipart_upload")
        # fails while reading the third part: after the upload was created
        segment = segments.make(0, log_size=store.part_size * 3 + 100)
        broken, _ = faulty(lambda: instance,
                           fail_put_after=store.part_size * 2 + 10, fail_put_suffix=".log")
        expect_raises("multipart-abort", RemoteStorageError, broken.copy_log_segment_data,
                      segment.metadata, segment.data)
        check("multipart-abort", any(str(c[0]).endswith(".log") for c in aborts),
              "the failed multi-part upload of the log was not aborted")
        check("multipart-abort", not any(str(c[0]).endswith(".log") for c in completes),
              "a failed multi-part upload was completed")
        check_not_listed(rsm, segment, "multipart-abort")
        check_absent(rsm, segment, "multipart-abort")
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        left = objects_of_segment(rsm.object_store,
                                  partition_prefix(rsm.key_prefix, segment.tp),
                                  segment.metadata.segment_id)
        check("multipart-abort", left == [], f"objects left after the abort: {left}")


__all__ = ["LargeSegmentTests"]
