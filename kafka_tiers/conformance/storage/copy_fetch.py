"""Copy, then fetch the segment and every index back, byte-identical."""

from __future__ import annotations

from collections.abc import Callable

from kafka_tiers.api import (
    IndexType,
    RemoteLogSegmentState,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.harness import (
    Segment,
    SegmentBuilder,
    check,
    expect_raises,
    read_all,
    storage_test,
)


def copy(rsm: RemoteStorageManager, segment: Segment) -> bytes | None:
    """Copy a segment, checking the custom metadata's type."""
    custom = rsm.copy_log_segment_data(segment.metadata, segment.data)
    check("copy-returns-bytes-or-none", custom is None or isinstance(custom, bytes),
          f"copy_log_segment_data returned {type(custom).__name__}, not bytes or None")
    return custom


def check_contents(rsm: RemoteStorageManager, segment: Segment, rule: str) -> None:
    """The whole log and every index of ``segment`` read back identical."""
    md = segment.metadata
    got = read_all(rsm.fetch_log_segment(md, 0))
    check(rule, got == segment.log, f"fetch_log_segment(0) returned {len(got)} bytes, "
          f"expected the {len(segment.log)} bytes copied" + ("" if len(got) != len(segment.log)
                                                            else " (content differs)"))
    for index_type, content in segment.indexes.items():
        got = read_all(rsm.fetch_index(md, index_type))
        check(rule, got == content, f"fetch_index({index_type.name}) returned {len(got)} "
              f"bytes that differ from the {len(content)} bytes copied")


class CopyFetchTests(StorageSuiteBase):
    """Copy then fetch."""

    @storage_test("copy-fetch-identical")
    def test_copy_then_fetch_segment_and_every_index(self, rsm: RemoteStorageManager,
                                                     segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_size=50_000)
        copy(rsm, segment)
        check_contents(rsm, segment, "copy-fetch-identical")

    @storage_test("copy-lists-finished-segment")
    def test_copied_segment_is_listed_with_its_metadata(self, rsm: RemoteStorageManager,
                                                        segments: SegmentBuilder) -> None:
        segment = segments.make(500)
        custom = copy(rsm, segment)
        listed = rsm.list_remote_segments(segment.tp)
        check("copy-lists-finished-segment", len(listed) == 1,
              f"after one copy, list_remote_segments gave {len(listed)} segments")
        md, want = listed[0], segment.metadata
        check("copy-lists-finished-segment",
              md.remote_log_segment_id == want.remote_log_segment_id,
              f"listed id {md.remote_log_segment_id}, copied {want.remote_log_segment_id}")
        for name in ("start_offset", "end_offset", "max_timestamp_ms", "broker_id",
                     "segment_size_in_bytes"):
            check("copy-lists-finished-segment", getattr(md, name) == getattr(want, name),
                  f"listed {name}={getattr(md, name)}, copied {getattr(want, name)}")
        check("copy-lists-finished-segment",
              dict(md.segment_leader_epochs) == dict(want.segment_leader_epochs),
              "listed leader epochs differ from the copied ones")
        check("copy-lists-finished-segment", md.custom_metadata == custom,
              f"listed custom metadata {md.custom_metadata!r}, copy returned {custom!r}")
        check("copy-lists-finished-segment",
              md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
              f"listed state {md.state.name}, expected COPY_SEGMENT_FINISHED")

    @storage_test("fetch-with-listed-metadata")
    def test_another_instance_finds_and_reads_the_segment(
            self, rsm: RemoteStorageManager, make_rsm: Callable[[], RemoteStorageManager],
            segments: SegmentBuilder) -> None:
        segment = segments.make(0)
        copy(rsm, segment)
        other = make_rsm()
        listed = other.list_remote_segments(segment.tp)
        check("fetch-with-listed-metadata", len(listed) == 1,
              f"a second instance over the same root lists {len(listed)} segments, not 1")
        got = read_all(other.fetch_log_segment(listed[0], 0))
        check("fetch-with-listed-metadata", got == segment.log,
              "a second instance read different bytes through the listed metadata")

    @storage_test("copy-empty-segment")
    def test_copy_of_an_empty_segment(self, rsm: RemoteStorageManager,
                                      segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_bytes=b"", records=1)
        copy(rsm, segment)
        check_contents(rsm, segment, "copy-empty-segment")
        listed = rsm.list_remote_segments(segment.tp)
        check("copy-empty-segment", [m.segment_id for m in listed] == [segment.metadata.segment_id],
              "an empty segment is not listed after its copy")

    @storage_test("missing-transaction-index-not-found")
    def test_copy_without_transaction_index(self, rsm: RemoteStorageManager,
                                            segments: SegmentBuilder) -> None:
        segment = segments.make(0, with_transaction_index=False)
        copy(rsm, segment)
        check_contents(rsm, segment, "missing-transaction-index-not-found")
        expect_raises("missing-transaction-index-not-found", RemoteResourceNotFoundError,
                      rsm.fetch_index, segment.metadata, IndexType.TRANSACTION)


__all__ = ["CopyFetchTests", "check_contents", "copy"]
