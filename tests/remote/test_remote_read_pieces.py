"""read_batches reads a remote range in pieces of at most REMOTE_READ_CHUNK bytes into one
buffer (no whole-range temporaries), from streams with ``readinto`` and from bare streams with
``read`` only, and returns exactly the batches asked for."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kafka_tiers.api import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicPartition
from kafka_tiers.log.records import build_batch
from kafka_tiers.remote import remote_log_manager as rlm_module
from kafka_tiers.remote.remote_log_manager import read_batches


class _ReadOnly:
    """A plugin's bare stream: read() and close() only, recording each read's size."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self._inner = io.BytesIO(data)
        self._sizes = sizes

    def read(self, n: int = -1) -> bytes:
        self._sizes.append(n)
        return self._inner.read(n)

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _ReadOnly:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Storage:
    def __init__(self, segment: bytes, bare: bool) -> None:
        self.segment = segment
        self.bare = bare
        self.sizes: list[int] = []
        self.ranges: list[tuple[int, int]] = []

    def fetch_log_segment(self, md: Any, first: int, last: int) -> Any:
        self.ranges.append((first, last))
        data = self.segment[first:last + 1]
        if self.bare:
            return _ReadOnly(data, self.sizes)
        return _Recording(data, self.sizes)


class _Recording(io.BytesIO):
    def __init__(self, data: bytes, sizes: list[int]) -> None:
        super().__init__(data)
        self._sizes = sizes

    def readinto(self, b: Any) -> int:
        self._sizes.append(len(b))
        return super().readinto(b)


def _segment(batches: int, records: int, size: int) -> tuple[bytes, list[int]]:
    out, starts, offset = bytearray(), [], 0
    for _ in range(batches):
        starts.append(len(out))
        out += build_batch([b"x" * size] * records, base_offset=offset)
        offset += records
    return bytes(out), starts


@pytest.mark.parametrize("bare", [False, True])
def test_a_large_remote_range_is_read_in_pieces_and_returned_whole(monkeypatch, bare):
    monkeypatch.setattr(rlm_module, "REMOTE_READ_CHUNK", 4096)
    segment, starts = _segment(batches=6, records=10, size=1000)  # ~10 KB a batch
    md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TopicPartition("t", 0)),
                                  0, 59, 0, 0, 0, len(segment), {0: 0})
    storage = _Storage(segment, bare)
    got = read_batches(storage, md, 25, 3 * (starts[1] - starts[0]), starts[2])
    assert got.records == segment[starts[2]:starts[5]]  # batches 20-29, 30-39, 40-49
    assert got.next_offset == 50 and got.fetch_offset == 25
    assert got.bytes_fetched == sum(last - first + 1 for first, last in storage.ranges)
    assert storage.sizes and max(storage.sizes) <= 4096  # never the whole range at once
    assert isinstance(got.records, bytes)
