"""Ranged fetches: inclusive positions, clipping at the end, and the errors of bad ranges."""

from __future__ import annotations

from kafka_tiers.api import InvalidRangeError, RemoteStorageManager
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.harness import (
    SegmentBuilder,
    check,
    expect_raises,
    read_all,
    storage_test,
)

SIZE = 1000


class RangeTests(StorageSuiteBase):
    """fetch_log_segment(metadata, start, end): [start, end] inclusive, end clipped."""

    @storage_test("ranged-fetch-inclusive")
    def test_positions_by_lengths(self, rsm: RemoteStorageManager,
                                  segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_size=SIZE)
        copy(rsm, segment)
        md, log = segment.metadata, segment.log
        lengths: list[tuple[str, int | None]] = [
            ("1", 1), ("13", 13), ("half", SIZE // 2), ("all", None), ("past the end", SIZE + 50)]
        for start in (0, 1, SIZE // 2, SIZE - 1):
            for label, length in lengths:
                end = None if length is None else start + length - 1
                want = log[start:] if end is None else log[start:min(end, SIZE - 1) + 1]
                got = read_all(rsm.fetch_log_segment(md, start, end))
                check("ranged-fetch-inclusive", got == want,
                      f"fetch_log_segment(start={start}, end={end}) (length {label}) gave "
                      f"{len(got)} bytes, expected {len(want)} bytes "
                      f"[{start}..{start + len(want) - 1}]"
                      + (" with other content" if len(got) == len(want) else ""))

    @storage_test("ranged-fetch-64bit")
    def test_positions_are_64_bit(self, rsm: RemoteStorageManager,
                                  segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_size=SIZE)
        copy(rsm, segment)
        got = read_all(rsm.fetch_log_segment(segment.metadata, 10, 2**62))
        check("ranged-fetch-64bit", got == segment.log[10:],
              "an end position of 2**62 was not clipped to the last byte")
        expect_raises("ranged-fetch-64bit", InvalidRangeError, rsm.fetch_log_segment,
                      segment.metadata, 2**40)

    @storage_test("invalid-range-error")
    def test_start_beyond_the_end(self, rsm: RemoteStorageManager,
                                  segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_size=SIZE)
        copy(rsm, segment)
        for start, end in ((SIZE, None), (SIZE, SIZE + 10), (SIZE + 1000, None)):
            expect_raises("invalid-range-error", InvalidRangeError, rsm.fetch_log_segment,
                          segment.metadata, start, end)

    @storage_test("invalid-range-error")
    def test_negative_and_reversed_ranges(self, rsm: RemoteStorageManager,
                                          segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_size=SIZE)
        copy(rsm, segment)
        for start, end in ((-1, None), (-1, 10), (10, 9), (500, 0), (0, -1)):
            err = expect_raises("invalid-range-error", InvalidRangeError,
                                rsm.fetch_log_segment, segment.metadata, start, end)
            check("invalid-range-error", isinstance(err, ValueError),
                  "InvalidRangeError must also be a ValueError")

    @storage_test("invalid-range-error")
    def test_empty_segment_ranges(self, rsm: RemoteStorageManager,
                                  segments: SegmentBuilder) -> None:
        segment = segments.make(0, log_bytes=b"", records=1)
        copy(rsm, segment)
        check("invalid-range-error", read_all(rsm.fetch_log_segment(segment.metadata, 0)) == b"",
              "fetching an empty segment from 0 must give an empty stream")
        expect_raises("invalid-range-error", InvalidRangeError, rsm.fetch_log_segment,
                      segment.metadata, 1)


__all__ = ["RangeTests"]
