"""Concurrent copies and fetches of different segments on one instance."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from kafka_tiers.api import IndexType, RemoteStorageManager
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.harness import (
    Segment,
    SegmentBuilder,
    check,
    read_all,
    storage_test,
)

RULE = "concurrent-access"
THREADS = 8


class ConcurrencyTests(StorageSuiteBase):
    """Threads."""

    @storage_test(RULE, requires=("concurrent_access",))
    def test_concurrent_copies_and_fetches(self, rsm: RemoteStorageManager,
                                           segments: SegmentBuilder) -> None:
        made = [segments.make(i * 1000, partition=i % 2, log_size=60_000 + i * 7)
                for i in range(THREADS * 2)]

        def work(segment: Segment) -> str | None:
            rsm.copy_log_segment_data(segment.metadata, segment.data)
            for start, end in ((0, None), (17, 4000), (len(segment.log) - 10, None)):
                got = read_all(rsm.fetch_log_segment(segment.metadata, start, end))
                want = segment.log[start:] if end is None else segment.log[start:end + 1]
                if got != want:
                    return f"{segment.metadata.segment_id}: range {start}..{end} differs"
            if read_all(rsm.fetch_index(segment.metadata, IndexType.OFFSET)) != \
                    segment.indexes[IndexType.OFFSET]:
                return f"{segment.metadata.segment_id}: offset index differs"
            rsm.list_remote_segments(segment.tp)
            return None

        with ThreadPoolExecutor(THREADS) as pool:
            problems = [p for p in pool.map(work, made) if p]
        check(RULE, not problems, "concurrent copies/fetches read wrong data: "
              + "; ".join(problems))
        for partition in (0, 1):
            listed = rsm.list_remote_segments(segments.tp(partition))
            want = sorted(s.metadata.segment_id for s in made if s.tp.partition == partition)
            check(RULE, sorted(m.segment_id for m in listed) == want,
                  f"after concurrent copies partition {partition} lists {len(listed)} "
                  f"segments, expected {len(want)}")


__all__ = ["ConcurrencyTests"]
