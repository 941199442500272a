"""Unchecked small files: every checkpoint value is checked against the log it describes; a
value that fails is reported (one WARN naming the partition, the file, the value and the range)
and ignored (recomputed from the segments), never obeyed."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    SEGMENT_LIST_FILE,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    SegmentListCheckpoint,
)
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.records import RecordBatch

from .helpers import batch_of, fill, read_all

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, max_index_size=4096)
TP = TopicPartition("orders", 0)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _twelve_segments(log_dir: Path) -> tuple[list[bytes], int]:
    """A clean-shut-down log dir whose orders-0 has 12 segments; returns values and LEO."""
    m = LogManager([log_dir], CONFIG)
    m.startup()
    log = m.get_or_create_log(TP)
    values: list[bytes] = []
    now_ms = int(time.time() * 1000)
    while log.num_segments < 12:
        values += fill(log, 10, start_ts=now_ms + len(values))  # inside retention.ms
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    end = log.log_end_offset
    m.shutdown()
    return values, end


def test_log_start_offset_above_the_log_end_is_ignored(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "d"
    values, end = _twelve_segments(d)
    OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write({TP: end + 1_000})
    caplog.set_level(logging.WARNING)
    m = LogManager([d], CONFIG)
    m.startup()
    try:
        log = m.get_log(TP)
        assert log.log_start_offset == 0
        assert read_all(log) == list(enumerate(values))
        before = log.num_segments
        assert log.delete_old_segments() == 0  # retention does not obey it either
        assert log.num_segments == before
    finally:
        m.shutdown()
    (line,) = [w for w in _warnings(caplog) if LOG_START_OFFSET_CHECKPOINT in w]
    assert "orders-0" in line and str(end + 1_000) in line and f"[0, {end}]" in line


def test_removed_segment_list_entry_hides_nothing(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "d"
    values, _end = _twelve_segments(d)
    lists = SegmentListCheckpoint(d / SEGMENT_LIST_FILE)
    entries = lists.read()
    mtime, bases = entries[TP]
    hidden = bases[5]
    entries[TP] = (mtime, [b for b in bases if b != hidden])
    lists.write(entries)  # the partition dir's mtime is unchanged
    caplog.set_level(logging.WARNING)
    m = LogManager([d], CONFIG, sanity_check_all=False)
    m.startup()
    try:
        log = m.get_log(TP)
        assert hidden in log.segment_bases()
        assert read_all(log) == list(enumerate(values))
    finally:
        m.shutdown()
    assert any(SEGMENT_LIST_FILE in w and "orders-0" in w and str(hidden) in w
               for w in _warnings(caplog))
    # the next clean shutdown lists it again
    assert hidden in SegmentListCheckpoint(d / SEGMENT_LIST_FILE).read()[TP][1]


def test_segment_list_naming_a_missing_segment_is_distrusted(tmp_path: Path) -> None:
    d = tmp_path / "d"
    values, _end = _twelve_segments(d)
    lists = SegmentListCheckpoint(d / SEGMENT_LIST_FILE)
    entries = lists.read()
    mtime, bases = entries[TP]
    entries[TP] = (mtime, [*bases, bases[-1] + 7])  # a segment that does not exist
    lists.write(entries)
    m = LogManager([d], CONFIG, sanity_check_all=False)
    m.startup()
    try:
        log = m.get_log(TP)
        assert log.segment_bases() == bases
        assert read_all(log) == list(enumerate(values))
    finally:
        m.shutdown()


def _closed_log(d: Path, count: int = 200) -> list[bytes]:
    log = Log.open(d, CONFIG)
    values = fill(log, count)
    log.close()
    return values


def test_recovery_point_above_the_log_end_recovers_every_segment(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    values = _closed_log(d)
    seg = sorted(d.glob("*.log"))[1]  # damage a middle segment's last batch (CRC)
    data = seg.read_bytes()
    pos = 0
    while True:
        b = RecordBatch(data, pos)
        if pos + b.size == len(data):
            break
        pos += b.size
    with open(seg, "r+b") as fh:
        fh.seek(len(data) - 3)
        fh.write(b"\x00\xff\x00")
    caplog.set_level(logging.WARNING)
    log = Log.open(d, CONFIG, recovery_point=10**9, clean_shutdown=False)
    try:
        assert read_all(log) == list(enumerate(values))[:log.log_end_offset]
        assert log.log_end_offset == RecordBatch(data, pos).base_offset  # cut at the damage
        assert int(seg.stem) in log.load_report.recovered
    finally:
        log.close()
    assert any("recovery point" in w and str(10**9) in w and "orders-0" in w
               for w in _warnings(caplog))


def test_recovery_point_above_the_log_end_after_a_clean_shutdown(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    _closed_log(d)
    caplog.set_level(logging.WARNING)
    with Log.open(d, CONFIG, recovery_point=5_000, clean_shutdown=True) as log:
        assert log.recovery_point == log.log_end_offset == 200
    assert any("recovery point 5000" in w for w in _warnings(caplog))


def test_high_watermark_above_the_log_end_is_not_obeyed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    _closed_log(d)
    caplog.set_level(logging.WARNING)
    with Log.open(d, CONFIG, recovery_point=200, high_watermark=9_999,
                  clean_shutdown=True) as log:
        assert log.high_watermark == 0  # nothing is called committed on its word
        assert log.read(0, 1 << 20, isolation="high_watermark").records == b""
    (line,) = [w for w in _warnings(caplog) if "high watermark" in w]
    assert "replication-offset-checkpoint" in line and "9999" in line and "[0, 200]" in line


def test_valid_values_are_used_without_a_warning(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    _closed_log(d)
    caplog.set_level(logging.WARNING)
    with Log.open(d, CONFIG, recovery_point=200, log_start_offset=50, high_watermark=150,
                  clean_shutdown=True) as log:
        assert (log.log_start_offset, log.high_watermark, log.recovery_point) == (50, 150, 200)
    assert _warnings(caplog) == []


def _epoch_log(d: Path) -> None:
    log = Log.open(d, CONFIG)
    for epoch, n in ((1, 30), (3, 40), (4, 30)):
        for i in range(n):
            log.append(batch_of([b"e%d-%d" % (epoch, i)]), leader_epoch=epoch)
    log.close()


EXPECTED_EPOCHS = [(1, 0), (3, 30), (4, 70)]


@pytest.mark.parametrize("content", [
    "0\n2\n1 0\nthree 30\n",            # malformed
    "0\n3\n1 0\n4 30\n3 70\n",          # epochs decrease
    "0\n3\n1 0\n3 30\n4 20\n",          # start offsets decrease
    "0\n3\n1 0\n3 30\n4 5000\n",        # beyond the log end after a clean shutdown
    "0\n2\n-7 0\n3 30\n",               # negative epoch
])
def test_bad_leader_epoch_checkpoint_is_rebuilt_from_the_batches(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str) -> None:
    d = tmp_path / "orders-0"
    _epoch_log(d)
    path = d / LEADER_EPOCH_CHECKPOINT
    assert LeaderEpochCheckpointFile(path).read() == EXPECTED_EPOCHS
    path.write_text(content)
    caplog.set_level(logging.WARNING)
    with Log.open(d, CONFIG, recovery_point=100, clean_shutdown=True) as log:
        assert [tuple(e) for e in log.leader_epoch_cache.entries()] == EXPECTED_EPOCHS
        assert log.leader_epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 70)
    assert LeaderEpochCheckpointFile(path).read() == EXPECTED_EPOCHS  # rewritten
    (line,) = [w for w in _warnings(caplog) if LEADER_EPOCH_CHECKPOINT in w]
    assert "orders-0" in line and "[0, 100]" in line


def test_bad_leader_epoch_checkpoint_takes_no_other_partition_down(tmp_path: Path) -> None:
    d = tmp_path / "d"
    m = LogManager([d], CONFIG)
    m.startup()
    for p in range(2):
        log = m.get_or_create_log(TopicPartition("orders", p))
        log.append(batch_of([b"x"]), leader_epoch=2)
    m.shutdown()
    (d / "orders-1" / LEADER_EPOCH_CHECKPOINT).write_text("garbage\n")
    m = LogManager([d], CONFIG)
    m.startup()
    try:
        for p in range(2):
            log = m.get_log(TopicPartition("orders", p))
            assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(2, 0)]
    finally:
        m.shutdown()
