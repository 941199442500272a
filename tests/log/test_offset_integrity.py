"""Batch header fields outside the CRC (baseOffset above all): recovery, reads and dump-log check
the offset rules and end the valid prefix exactly at the damaged batch."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.cli.dump_log import dump_log
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import RecordBatch, first_offset_violation

from .helpers import fill, read_all

CONFIG = LogConfig(segment_bytes=16384, index_interval_bytes=256, max_index_size=4096)
_Q = struct.Struct(">q")


def _batches(path: Path) -> list[tuple[int, RecordBatch]]:
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        b = RecordBatch(data, pos)
        out.append((pos, b))
        pos += b.size
    return out


def _segment_holding(directory: Path, offset: int) -> Path:
    logs = sorted(directory.glob("*.log"))
    return [p for p in logs if int(p.stem) <= offset][-1]


def _set_base(path: Path, base_offset: int, new_base: int) -> int:
    """Rewrite the baseOffset of the batch starting at ``base_offset`` (no CRC change, as a
    flipped bit there would); returns its position."""
    for pos, b in _batches(path):
        if b.base_offset == base_offset:
            with open(path, "r+b") as fh:
                fh.seek(pos)
                fh.write(_Q.pack(new_base))
            return pos
    raise AssertionError(f"no batch at {base_offset} in {path}")


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """A closed log of 1000 records in batches of 10 whose batch 730-739 (in the middle of a
    middle segment) had bit 2 of its baseOffset flipped: it claims 734-743."""
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 1000, per_batch=10)
    log.close()
    seg = _segment_holding(d, 730)
    assert 680 <= int(seg.stem) < 730 and seg != sorted(d.glob("*.log"))[-1]
    _set_base(seg, 730, 730 ^ 0b100)
    return d, values


def test_reads_never_serve_a_shifted_batch(damaged: tuple[Path, list[bytes]]) -> None:
    d, values = damaged
    log = Log.open(d, CONFIG, recovery_point=1000, clean_shutdown=True)
    served = read_all(log, 700)
    # every offset served carries its own record: never 734-743 with the values of 730-739
    assert all(values[off] == value for off, value in served)
    assert [off for off, _ in served if 730 <= off < 744] == []
    assert [off for off, _ in served][:30] == list(range(700, 730))
    assert log.load_report.problems  # the corruption is reported
    log.close()


def test_read_stops_at_the_bad_batch_even_when_it_is_the_last_one_served(
        damaged: tuple[Path, list[bytes]]) -> None:
    d, values = damaged
    log = Log.open(d, CONFIG, recovery_point=1000, clean_shutdown=True)
    size = next(b.size for _, b in _batches(_segment_holding(d, 730)))
    data = log.read(734, size)  # room for exactly the (bad) batch that claims 734
    for b in data.batches():
        assert all(values[r.offset] == r.value for r in b.records())
    log.close()


def test_full_recovery_cuts_at_the_bad_batch(damaged: tuple[Path, list[bytes]]) -> None:
    d, values = damaged
    log = Log.open(d, CONFIG, recovery_point=0, clean_shutdown=False)
    assert log.log_end_offset == 730  # the bad batch is not kept, nothing after it either
    assert read_all(log) == [(i, values[i]) for i in range(730)]
    assert any("damaged baseOffset" in p for p in log.load_report.problems)
    log.close()


def test_a_lowered_base_offset_is_cut_at_the_lowered_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 1000, per_batch=10)
    log.close()
    _set_base(_segment_holding(d, 740), 740, 740 ^ 0b100)  # claims 736-745: overlaps 730-739
    log = Log.open(d, CONFIG, recovery_point=0, clean_shutdown=False)
    assert log.log_end_offset == 740
    assert read_all(log) == [(i, values[i]) for i in range(740)]
    log.close()


def test_first_batch_below_the_segment_base_is_cut(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 1000, per_batch=10)
    log.close()
    seg = sorted(d.glob("*.log"))[2]
    base = int(seg.stem)
    _set_base(seg, base, base - 64)
    log = Log.open(d, CONFIG, recovery_point=0, clean_shutdown=False)
    assert log.log_end_offset == base
    assert read_all(log) == [(i, values[i]) for i in range(base)]
    log.close()


def test_a_read_of_the_active_segment_cuts_it_at_the_bad_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 1000, per_batch=10)
    log.close()
    active = sorted(d.glob("*.log"))[-1]
    _set_base(active, 960, 960 ^ 0b100)
    log = Log.open(d, CONFIG, recovery_point=1000, clean_shutdown=True,
                   sanity_check_all=False)
    assert read_all(log, 900) == [(i, values[i]) for i in range(900, 960)]
    assert log.log_end_offset == 960
    log.close()


def test_dump_log_names_the_bad_batch_and_why(damaged: tuple[Path, list[bytes]]) -> None:
    d, _ = damaged
    seg = _segment_holding(d, 730)
    bad_pos = next(pos for pos, b in _batches(seg) if b.base_offset == 734)
    result = CliRunner().invoke(dump_log, [str(seg), "--format", "json"])
    assert result.exit_code == 0, result.output
    batches = json.loads(result.output)["files"][0]["batches"]
    flagged = [b for b in batches if not b["isValid"]]
    assert [b["position"] for b in flagged] == [bad_pos]
    assert "baseOffset" in flagged[0]["offsetProblem"]
    text = CliRunner().invoke(dump_log, [str(seg)]).output
    assert f"position: {bad_pos}" in text
    assert "isvalid: false" in text and "damaged baseOffset" in text


def test_dump_log_reports_crc_failures_per_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    fill(log, 100, per_batch=10)
    log.close()
    seg = sorted(d.glob("*.log"))[0]
    pos, batch = _batches(seg)[3]
    with open(seg, "r+b") as fh:
        fh.seek(pos + batch.size - 2)
        fh.write(b"\xff\xfe")
    out = json.loads(CliRunner().invoke(dump_log, [str(seg), "--format", "json"]).output)
    flagged = [b for b in out["files"][0]["batches"] if not b["isValid"]]
    assert [b["position"] for b in flagged] == [pos]
    assert "CRC" in flagged[0]["problem"]


@pytest.mark.parametrize(("bounds", "floor", "ceiling", "expected"), [
    ([(0, 9), (10, 19), (20, 29)], 0, None, None),
    ([(0, 9), (14, 23), (20, 29)], 0, None, 1),   # raised: the earlier batch is blamed
    ([(0, 9), (10, 19), (16, 25)], 0, None, 2),   # lowered: the later batch is blamed
    ([(0, 9), (10, 19), (20, 29)], 5, None, 0),   # first batch below the segment base
    ([(0, 9), (10, 19), (20, 29)], 0, 25, 2),     # past the next segment's base
    ([(0, 9), (10, 19), (3, 12)], 0, None, 2),    # no gap before the earlier: the later
    ([(5, 9), (3, 4)], 0, None, 0),               # a gap, and the later fits there: earlier
    ([(0, 9), (30, 39), (20, 29)], 0, None, 1),   # a gap then an overlap: the gap's batch
])
def test_first_offset_violation(bounds: list[tuple[int, int]], floor: int,
                                ceiling: int | None, expected: int | None) -> None:
    found = first_offset_violation(bounds, floor, ceiling)
    assert (found[0] if found else None) == expected


def test_an_impossible_leader_epoch_is_cut_by_recovery_and_flagged_by_dump_log(
        tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 100, per_batch=10)
    log.close()
    seg = sorted(d.glob("*.log"))[0]
    pos = next(p for p, b in _batches(seg) if b.base_offset == 50)
    with open(seg, "r+b") as fh:  # the sign bit of partitionLeaderEpoch (outside the CRC)
        fh.seek(pos + 12)
        fh.write(struct.pack(">i", -(2**31) + 7))
    out = json.loads(CliRunner().invoke(dump_log, [str(seg), "--format", "json"]).output)
    flagged = [b for b in out["files"][0]["batches"] if not b["isValid"]]
    assert [b["position"] for b in flagged] == [pos]
    assert "partitionLeaderEpoch" in flagged[0]["problem"]
    log = Log.open(d, CONFIG, recovery_point=0, clean_shutdown=False)
    assert log.log_end_offset == 50
    assert read_all(log) == [(i, values[i]) for i in range(50)]
    log.close()


def test_the_cluster_client_verifies_what_it_prints() -> None:
    """``topics consume`` prints what ClusterClient.fetch decodes: a batch failing its CRC or
    the offset order is an error there too, never records."""
    from kafka_tiers.cluster.client import decode_records
    from kafka_tiers.log.errors import CorruptRecordError
    from kafka_tiers.log.records import set_base_offset

    from .helpers import batch_of

    first, second = batch_of([b"a", b"b"]), batch_of([b"c"])
    payload = bytearray(first + second)
    set_base_offset(payload, len(first), 2)
    assert [r.value for r in decode_records(bytes(payload))] == [b"a", b"b", b"c"]
    overlapping = bytearray(payload)
    set_base_offset(overlapping, len(first), 1)  # offset 1 twice
    with pytest.raises(CorruptRecordError, match="baseOffset 1"):
        decode_records(bytes(overlapping))
    damaged = bytearray(payload)
    damaged[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_records(bytes(damaged))
