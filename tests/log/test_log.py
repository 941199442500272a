"""The partition log: append, read, timestamps, rolling, retention, truncation, flushing."""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.errors import (
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import (
    ControlRecordType,
    ProducerRecord,
    RecordBatch,
    TimestampType,
    build_batch,
    build_end_txn_marker,
)

from .helpers import batch_of, fill, read_all

OpenLog = Callable[..., Log]


def test_append_assigns_offsets_and_epochs(open_log: OpenLog) -> None:
    log = open_log()
    info = log.append(batch_of([b"a", b"b", b"c"]), leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    info = log.append(batch_of([b"d"], base_offset=999), leader_epoch=6)
    assert (info.first_offset, info.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    batches = log.read(0, 1 << 20).batches()
    assert [(b.base_offset, b.partition_leader_epoch) for b in batches] == [(0, 5), (3, 6)]
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries()] == [(5, 0),
                                                                                      (6, 3)]
    assert read_all(log) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_append_refuses_bad_input_without_writing(open_log: OpenLog) -> None:
    log = open_log()
    log.append(batch_of([b"ok"]))
    size = log.size
    good = batch_of([b"x"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    for junk in (b"", b"short", bytes(bad), good + bytes(bad), good[:-3]):
        with pytest.raises(InvalidRecordError):
            log.append(junk)
    assert log.size == size and log.log_end_offset == 1
    big = Log.open(log.dir.parent / "big-0", LogConfig(max_message_bytes=100))
    with pytest.raises(RecordTooLargeError):
        big.append(batch_of([b"x" * 200]))
    big.close()


def test_log_append_time(open_log: OpenLog, small_config: LogConfig) -> None:
    from dataclasses import replace

    log = open_log(config=replace(small_config, message_timestamp_type="LogAppendTime"),
                   time_fn=lambda: 1234.5)
    info = log.append(batch_of([b"a", b"b"], ts=5))
    assert info.log_append_time == 1234500
    (batch,) = log.read(0, 1000).batches()
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [1234500, 1234500]


def test_read_limits(open_log: OpenLog) -> None:
    log = open_log()
    for i in range(10):
        log.append(batch_of([b"%d" % i] * 3))  # 3 records per batch
    one = log.read(0, 1).batches()
    assert len(one) == 1  # at least one batch
    assert log.read(0, 1, min_one_batch=False).records == b""
    assert log.read(4, 1).batches()[0].base_offset == 3  # batch holding offset 4
    size = len(log.read(0, 1).records)
    assert len(log.read(0, size * 3 + 5).batches()) == 3
    assert log.read(30, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError) as err:
        log.read(31, 100)
    assert err.value.log_end_offset == 30
    log.update_high_watermark(9)
    assert [b.base_offset for b in log.read(0, 1 << 20, isolation="high_watermark").batches()] \
        == [0, 3, 6]
    assert log.read(9, 100, isolation="high_watermark").records == b""
    assert [b.base_offset for b in log.read(0, 1 << 20, max_offset=6).batches()] == [0, 3]
    assert log.update_high_watermark(1000) == 30


def test_reads_across_segments_and_index(open_log: OpenLog) -> None:
    log = open_log()
    values = fill(log, 400)
    assert log.num_segments > 3
    assert read_all(log) == list(enumerate(values))
    for offset in (0, 1, 57, 199, 200, 399):
        (first,) = log.read(offset, 1).batches()
        assert first.base_offset == offset
        assert first.records()[0].value == values[offset]


def test_index_entries_follow_kafkas_interval(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log(config=LogConfig(index_interval_bytes=200))
    sizes = []
    for i in range(20):
        data = batch_of([b"x" * (10 + i)])
        sizes.append(len(data))
        log.append(data)
    log.close()
    entries = (log_dir / "00000000000000000000.index").read_bytes()
    got = [struct.unpack_from(">ii", entries, i) for i in range(0, len(entries), 8)]
    # Kafka: an entry is added before a batch once more than interval bytes were written
    # since the last entry; it names the batch's last offset and position.
    expected, since, pos = [], 0, 0
    for offset, size in enumerate(sizes):
        if since > 200:
            expected.append((offset, pos))
            since = 0
        pos += size
        since += size
    assert got == expected and expected


def test_offset_for_timestamp(open_log: OpenLog) -> None:
    log = open_log()
    for i in range(300):
        log.append(batch_of([b"v%d" % i], ts=10_000 + 10 * i))
    assert log.offset_for_timestamp(10_000).offset == 0
    assert log.offset_for_timestamp(10_005) == (10_010, 1)
    assert log.offset_for_timestamp(10_000 + 10 * 250) == (12_500, 250)
    assert log.offset_for_timestamp(99_999) is None
    assert log.offset_for_timestamp(-2).offset == 0
    assert log.offset_for_timestamp(-1).offset == 300
    assert log.offset_for_timestamp(-3) == (10_000 + 10 * 299, 299)


def test_roll_by_size_time_and_index(open_log: OpenLog, small_config: LogConfig) -> None:
    rolled = []
    log = open_log(on_roll=lambda lg, info: rolled.append(info))
    fill(log, 200)
    assert log.num_segments == len(rolled) + 1 and rolled
    for info in rolled:
        assert info.size <= small_config.segment_bytes
        assert info.log_path.exists() and info.next_offset > info.base_offset
        # rolled segments' indexes are trimmed to their entries
        assert info.offset_index_path.stat().st_size % 8 == 0
        assert info.offset_index_path.stat().st_size < small_config.max_index_size
    infos = log.inactive_segments()
    assert [i.base_offset for i in infos] == [i.base_offset for i in rolled]
    assert all(a.next_offset == b.base_offset for a, b in itertools.pairwise(infos))

    from dataclasses import replace

    timed = Log.open(log.dir.parent / "timed-0", replace(small_config, segment_ms=1000))
    timed.append(batch_of([b"a"], ts=1_000))
    timed.append(batch_of([b"b"], ts=1_500))
    assert timed.num_segments == 1
    timed.append(batch_of([b"c"], ts=2_001))
    assert timed.num_segments == 2
    timed.close()

    tiny_index = Log.open(log.dir.parent / "idx-0", LogConfig(index_interval_bytes=1,
                                                              max_index_size=24))
    for i in range(12):
        tiny_index.append(batch_of([b"%d" % i]))
    assert tiny_index.num_segments >= 3  # 3 entries fill an index, forcing a roll
    tiny_index.close()


def test_retention_by_time_bytes_and_start_offset(open_log: OpenLog,
                                                  small_config: LogConfig) -> None:
    from dataclasses import replace

    now = [100_000.0]
    log = open_log(config=replace(small_config, retention_ms=50_000), time_fn=lambda: now[0])
    fill(log, 300, start_ts=10_000)  # timestamps 10_000..10_299 ms
    assert log.delete_old_segments() == 0  # nothing below the high watermark yet
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    # every record was older than retention: all gone, an empty active segment remains
    assert log.num_segments == 1 and log.size == 0
    assert log.log_start_offset == 300 == log.log_end_offset

    sized = Log.open(log.dir.parent / "sized-0", replace(small_config, retention_bytes=6000,
                                                           retention_ms=-1))
    fill(sized, 300)
    sized.update_high_watermark(sized.log_end_offset)
    before = sized.size
    deleted = sized.delete_old_segments()
    assert deleted > 0 and sized.size < before
    # Kafka: delete the oldest segments while the log stays at or above the limit
    assert sized.size - sized.segments()[0].size < 6000 <= sized.size
    start = sized.log_start_offset
    assert read_all(sized)[0][0] == start
    target = sized.segments()[1].base_offset + 1
    sized.advance_log_start_offset(target)
    assert sized.log_start_offset == target
    assert sized.segments()[0].base_offset == target - 1  # the first segment went
    assert read_all(sized, target)[0][0] == target
    with pytest.raises(OffsetOutOfRangeError):
        sized.advance_log_start_offset(sized.log_end_offset + 1)
    sized.close()


def test_local_log_start_for_tiering(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 300)
    log.update_high_watermark(300)
    infos = log.inactive_segments()
    copied_up_to = infos[2].next_offset
    assert log.advance_local_log_start_offset(copied_up_to) == 3
    assert log.local_log_start_offset == copied_up_to
    assert log.log_start_offset == 0  # still readable from the remote tier
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.read(copied_up_to, 10).batches()[0].base_offset == copied_up_to


def test_truncate_to(open_log: OpenLog) -> None:
    log = open_log()
    for i in range(100):
        log.append(batch_of([b"%d" % i, b"x"]), leader_epoch=i // 25)
    log.update_high_watermark(200)
    segments = log.num_segments
    assert log.truncate_to(121)  # mid-batch: cut at the batch start (120)
    assert log.log_end_offset == 120
    assert log.high_watermark == 120
    assert log.num_segments <= segments
    assert [o for o, _ in read_all(log)] == list(range(120))
    assert log.leader_epoch_cache.latest_epoch == 2
    assert not log.truncate_to(500)
    info = log.append(batch_of([b"new"]))
    assert info.first_offset == 120
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.num_segments == 1 and log.size == 0
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.append(batch_of([b"z"])).first_offset == 1000


def test_follower_append_keeps_offsets(open_log: OpenLog, tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "lead-0", LogConfig())
    for i in range(5):
        leader.append(batch_of([b"a%d" % i, b"b%d" % i]), leader_epoch=3)
    data = leader.read(0, 1 << 20).records
    follower = open_log()
    follower.append(data, assign_offsets=False)
    assert follower.log_end_offset == 10
    assert follower.read(0, 1 << 20).records == data
    assert follower.leader_epoch_cache.entries()[0].epoch == 3
    with pytest.raises(InvalidRecordError):
        follower.append(data, assign_offsets=False)  # offsets below the log end
    gap = batch_of([b"later"], base_offset=20)
    follower.append(gap, assign_offsets=False)
    assert follower.log_end_offset == 21
    assert follower.read(15, 100).batches()[0].base_offset == 20
    leader.close()


def test_flush_policy(open_log: OpenLog, small_config: LogConfig) -> None:
    from dataclasses import replace

    log = open_log(config=replace(small_config, flush_interval_messages=5))
    for i in range(4):
        log.append(batch_of([b"%d" % i]))
    assert log.recovery_point == 0
    log.append(batch_of([b"4"]))
    assert log.recovery_point == 5
    log.append(batch_of([b"5"]))
    log.flush()
    assert log.recovery_point == 6

    now = [0.0]
    timed = Log.open(log.dir.parent / "ms-0", replace(small_config, flush_interval_ms=1000),
                     time_fn=lambda: now[0])
    timed.append(batch_of([b"a"]))
    assert timed.recovery_point == 0
    assert not timed.maybe_flush()
    now[0] = 2.0
    assert timed.maybe_flush() and timed.recovery_point == 1
    timed.close()


def test_transactions_fill_the_txn_index(open_log: OpenLog) -> None:
    log = open_log()
    log.append(build_batch([ProducerRecord(b"t1")], producer_id=7, producer_epoch=0,
                           base_sequence=0, transactional=True))
    log.append(batch_of([b"plain"]))
    log.append(build_batch([ProducerRecord(b"t2")], producer_id=7, producer_epoch=0,
                           base_sequence=1, transactional=True))
    log.append(build_end_txn_marker(ControlRecordType.ABORT, producer_id=7, producer_epoch=0))
    log.append(build_batch([ProducerRecord(b"t3")], producer_id=8, producer_epoch=0,
                           base_sequence=0, transactional=True))
    log.append(build_end_txn_marker(ControlRecordType.COMMIT, producer_id=8, producer_epoch=0))
    aborted = log.collect_aborted(0, 100)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(7, 0, 3)]
    assert log.read(0, 1 << 20).aborted_transactions == tuple(aborted)
    txn_files = list(log.dir.glob("*.txnindex"))
    assert len(txn_files) == 1 and txn_files[0].stat().st_size == 34


def test_copy_to_another_dir_and_reopen(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    values = fill(log, 250)
    log.update_high_watermark(200)
    copy = log.copy_to(tmp_path / "other-dir" / "topic-0")
    try:
        assert copy.log_end_offset == log.log_end_offset
        assert copy.high_watermark == 200
        assert read_all(copy) == list(enumerate(values))
        assert copy.leader_epoch_cache.entries() == log.leader_epoch_cache.entries()
        assert copy.append(batch_of([b"more"])).first_offset == 250
    finally:
        copy.close()
    assert log.log_end_offset == 250


def test_closed_log_refuses_use(open_log: OpenLog) -> None:
    from kafka_tiers.log.errors import LogClosedError

    log = open_log()
    log.append(batch_of([b"a"]))
    log.close()
    with pytest.raises(LogClosedError):
        log.append(batch_of([b"b"]))
    with pytest.raises(LogClosedError):
        log.read(0, 10)


def test_every_segment_file_is_named_by_base_offset(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    fill(log, 200)
    log.close()
    for path in log_dir.glob("*.log"):
        base = int(path.stem)
        first = RecordBatch(path.read_bytes()) if path.stat().st_size else None
        if first is not None:
            assert first.base_offset == base
        assert len(path.stem) == 20
    assert "leader-epoch-checkpoint" not in os.listdir(log_dir)  # no epochs were assigned
