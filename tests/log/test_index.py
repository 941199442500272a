"""Offset and time indexes: Kafka's layout, lookups, preallocation and trimming."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafka_tiers.log.errors import CorruptIndexError
from kafka_tiers.log.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from kafka_tiers.log.txnindex import AbortedTxn, TransactionIndex


def test_offset_index_layout_preallocation_and_trim(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, max_index_size=1003, writable=True)
    assert not path.exists()  # nothing touched before first use
    idx.append(105, 0)
    idx.append(110, 4096)
    assert path.stat().st_size == 1000  # rounded down to whole 8-byte entries
    assert idx.max_entries == 125
    idx.trim()
    assert path.read_bytes() == struct.pack(">iiii", 5, 0, 10, 4096)
    ro = OffsetIndex(path, 100)
    assert ro.all_entries() == [OffsetPosition(105, 0), OffsetPosition(110, 4096)]


def test_offset_index_lookup(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, writable=True)
    for off, pos in [(10, 100), (20, 200), (30, 300)]:
        idx.append(off, pos)
    assert idx.lookup(5) == OffsetPosition(0, 0)
    assert idx.lookup(10) == OffsetPosition(10, 100)
    assert idx.lookup(29) == OffsetPosition(20, 200)
    assert idx.lookup(10_000) == OffsetPosition(30, 300)
    with pytest.raises(CorruptIndexError):
        idx.append(30, 400)
    idx.truncate_to(20)
    assert idx.all_entries() == [OffsetPosition(10, 100)]
    idx.close()


def test_untrimmed_preallocated_index_ignores_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 7, 90) + bytes(8 * 500))
    idx = OffsetIndex(path, 0)
    assert idx.entries == 2
    assert idx.lookup(1000) == OffsetPosition(7, 90)
    idx.sanity_check()


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 5, 0) + b"\x01\x02\x03")
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(path, 0).sanity_check()
    path.write_bytes(struct.pack(">iiii", 9, 0, 3, 10))
    with pytest.raises(CorruptIndexError, match="increasing"):
        OffsetIndex(path, 0).sanity_check()


def test_time_index(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, max_index_size=36,
                    writable=True)
    assert idx.last_entry == TimestampOffset(-1, 50)
    assert idx.maybe_append(1000, 55)
    assert not idx.maybe_append(1000, 56)  # timestamps must increase
    assert idx.maybe_append(2000, 60)
    assert idx.maybe_append(3000, 61)
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.maybe_append(4000, 70)
    assert idx.lookup(999) == TimestampOffset(-1, 50)
    assert idx.lookup(2500) == TimestampOffset(2000, 60)
    idx.truncate_to(60)
    assert idx.last_entry == TimestampOffset(1000, 55)
    idx.close()
    assert idx.path.read_bytes() == struct.pack(">qi", 1000, 5)


def test_time_index_sanity(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(struct.pack(">qiqi", 500, 1, 100, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0).sanity_check()


def test_txn_index(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert idx.all_entries() == []
    idx.append(AbortedTxn(7, 10, 20, 10))
    idx.append(AbortedTxn(8, 15, 30, 21))
    assert idx.path.stat().st_size == 68
    assert idx.path.read_bytes()[:34] == struct.pack(">hqqqq", 0, 7, 10, 20, 10)
    assert [t.producer_id for t in idx.collect_aborted(21, 100)] == [8]
    assert [t.producer_id for t in idx.collect_aborted(0, 12)] == [7]
    with pytest.raises(CorruptIndexError):
        idx.append(AbortedTxn(9, 1, 25, 1))
    idx.truncate_to(30)
    assert TransactionIndex(idx.path, 0).all_entries() == [AbortedTxn(7, 10, 20, 10)]
    idx.path.write_bytes(idx.path.read_bytes() + b"xx")
    with pytest.raises(CorruptIndexError):
        TransactionIndex(idx.path, 0).sanity_check()
