"""The idempotent producer's rules in the log engine (Kafka's ``ProducerAppendInfo``):
epochs, sequences, duplicates, the remembered batches across restarts, expiry."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    TransactionsUnsupportedError,
)
from kafka_tiers.log.log import Log
from kafka_tiers.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    is_older,
)
from kafka_tiers.log.records import (
    ControlRecordType,
    ProducerRecord,
    build_batch,
    build_end_txn_marker,
)

from .helpers import crash, read_all

CLIENT = AppendOrigin.CLIENT
INT_MAX = (1 << 31) - 1
CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256)


def batch(pid: int, epoch: int, seq: int, n: int = 1, *, tag: bytes = b"v",
          txn: bool = False) -> bytes:
    return build_batch([ProducerRecord(b"%s-%d-%d" % (tag, pid, seq + i)) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=txn)


@pytest.fixture
def log(tmp_path: Path):
    lg = Log.open(tmp_path / "t-0", CONFIG)
    yield lg
    lg.close()


def test_in_order_batches_are_appended_and_a_gap_is_refused(log: Log) -> None:
    assert log.append(batch(1, 0, 0, 3), origin=CLIENT).first_offset == 0
    assert log.append(batch(1, 0, 3, 2), origin=CLIENT).first_offset == 3
    with pytest.raises(OutOfOrderSequenceError) as err:
        log.append(batch(1, 0, 7), origin=CLIENT)
    assert err.value.kafka_error_code == 45
    assert (err.value.producer_id, err.value.base_sequence, err.value.expected) == (1, 7, 5)
    assert "expected 5" in str(err.value)
    assert log.log_end_offset == 5
    # an overlap (starts inside what was written, ends after it) is out of order too
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, 0, 4, 3), origin=CLIENT)
    assert log.log_end_offset == 5


def test_a_retried_batch_returns_its_original_offsets_and_appends_nothing(log: Log) -> None:
    firsts = []
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        if i == 2:  # another producer in between
            log.append(batch(9, 0, 0, 1), origin=CLIENT)
        firsts.append(log.append(batch(1, 2, 2 * i, 2), origin=CLIENT).first_offset)
    end = log.log_end_offset
    # each of the last five batches: the original offsets, no error, nothing written
    for i in range(1, NUM_BATCHES_TO_RETAIN + 1):
        info = log.append(batch(1, 2, 2 * i, 2), origin=CLIENT)
        assert info.duplicate and (info.first_offset, info.last_offset) == (firsts[i],
                                                                            firsts[i] + 1)
        assert info.record_count == 0
    assert log.log_end_offset == end
    # the oldest is no longer remembered: written before, answered DUPLICATE_SEQUENCE_NUMBER
    with pytest.raises(DuplicateSequenceError) as err:
        log.append(batch(1, 2, 0, 2), origin=CLIENT)
    assert err.value.kafka_error_code == 46
    assert log.log_end_offset == end
    # the next batch is still accepted
    assert not log.append(batch(1, 2, 12), origin=CLIENT).duplicate


def test_epochs_fence_older_producers_and_a_new_epoch_starts_at_zero(log: Log) -> None:
    log.append(batch(4, 1, 0, 5), origin=CLIENT)
    with pytest.raises(InvalidProducerEpochError) as err:
        log.append(batch(4, 0, 5), origin=CLIENT)
    assert err.value.kafka_error_code == 47 and err.value.expected == 1
    with pytest.raises(OutOfOrderSequenceError, match="new epoch 2 starts at sequence 5"):
        log.append(batch(4, 2, 5), origin=CLIENT)
    assert log.log_end_offset == 5
    assert log.append(batch(4, 2, 0), origin=CLIENT).first_offset == 5
    # the old epoch's batches are no longer answered as duplicates: they are fenced
    with pytest.raises(InvalidProducerEpochError):
        log.append(batch(4, 1, 0, 5), origin=CLIENT)


def test_sequences_wrap_around_at_int32_max(log: Log) -> None:
    log.append(batch(3, 0, INT_MAX - 1, 1), origin=AppendOrigin.LOCAL)
    # a batch spanning the wrap: INT_MAX, 0, 1
    log.append(batch(3, 0, INT_MAX, 3), origin=CLIENT)
    assert log.producer_state.producers[3].last_sequence == 1
    assert log.append(batch(3, 0, 2), origin=CLIENT).first_offset == 4
    assert log.append(batch(3, 0, INT_MAX, 3), origin=CLIENT).duplicate
    with pytest.raises(DuplicateSequenceError):
        log.append(batch(3, 0, 0), origin=CLIENT)  # inside the wrapped batch: written
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(3, 0, 4), origin=CLIENT)  # a gap after the wrap
    assert is_older(5, INT_MAX - 2, 1) and not is_older(1, INT_MAX, 3)


def test_an_unknown_producer_may_start_anywhere(log: Log) -> None:
    assert log.append(batch(5, 3, 1234, 2), origin=CLIENT).first_offset == 0
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(5, 3, 1237), origin=CLIENT)


def test_a_multi_batch_request_is_checked_batch_by_batch(log: Log) -> None:
    info = log.append(batch(1, 0, 0, 2) + batch(1, 0, 2, 2) + batch(2, 0, 0), origin=CLIENT)
    assert (info.first_offset, info.last_offset) == (0, 4)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, 0, 4) + batch(1, 0, 6), origin=CLIENT)
    assert log.log_end_offset == 5  # nothing of the request
    assert log.append(batch(1, 0, 4) + batch(1, 0, 5), origin=CLIENT).last_offset == 6


def test_transactional_and_control_batches_from_clients_are_refused(log: Log) -> None:
    with pytest.raises(TransactionsUnsupportedError) as err:
        log.append(batch(6, 0, 0, txn=True), origin=CLIENT)
    assert err.value.kafka_error_code == 48 and "transactional.id" in str(err.value)
    marker = build_end_txn_marker(ControlRecordType.COMMIT, producer_id=6, producer_epoch=0)
    with pytest.raises(InvalidRecordError, match="control batch"):
        log.append(marker, origin=CLIENT)
    with pytest.raises(InvalidRecordError, match="without a sequence"):
        log.append(batch(6, 0, -1), origin=CLIENT)
    assert log.log_end_offset == 0


def test_local_and_replicated_appends_are_not_checked_but_update_the_state(log: Log) -> None:
    log.append(batch(1, 0, 0), origin=AppendOrigin.LOCAL)
    log.append(batch(1, 0, 10))  # the default for a leader's own write: not checked
    assert log.producer_state.producers[1].last_sequence == 10
    follower = batch(1, 0, 20, 2)
    from kafka_tiers.log.records import set_base_offset
    buf = bytearray(follower)
    set_base_offset(buf, 0, log.log_end_offset)
    log.append(bytes(buf), assign_offsets=False)  # REPLICATION
    # leadership moves here: the replicated batch is recognised as a duplicate
    info = log.append(batch(1, 0, 20, 2), origin=CLIENT)
    assert info.duplicate and info.first_offset == 2
    with pytest.raises(ValueError):
        log.append(bytes(buf), assign_offsets=False, origin=CLIENT)


@pytest.mark.parametrize("clean", [True, False])
def test_duplicates_are_detected_after_a_restart(tmp_path: Path, clean: bool) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    firsts = []
    n = 38
    for i in range(n):  # several segments, a snapshot at each roll
        firsts.append(log.append(batch(1, 0, 3 * i, 3, tag=b"x" * 20), origin=CLIENT
                                 ).first_offset)
        log.append(batch(2, 5, i, 1), origin=CLIENT)
    end, active = log.log_end_offset, log.segment_bases()[-1]
    # the last five batches straddle the last roll: some are before its snapshot
    assert firsts[n - 5] < active <= firsts[n - 1]
    if clean:
        log.close()
        log = Log.open(d, CONFIG, recovery_point=end, clean_shutdown=True,
                       sanity_check_all=False)
    else:  # the rolled segments were flushed; the active one is recovered
        crash(log)
        log = Log.open(d, CONFIG, recovery_point=active, clean_shutdown=False)
    try:
        assert log.log_end_offset == end
        # the last five batches of producer 1, remembered again from the log's tail
        for i in range(n - 5, n):
            info = log.append(batch(1, 0, 3 * i, 3, tag=b"x" * 20), origin=CLIENT)
            assert info.duplicate and info.first_offset == firsts[i], i
        assert log.log_end_offset == end
        with pytest.raises(DuplicateSequenceError):
            log.append(batch(1, 0, 3 * (n - 6), 3), origin=CLIENT)
        with pytest.raises(OutOfOrderSequenceError):
            log.append(batch(2, 5, n + 1), origin=CLIENT)
        assert log.append(batch(2, 5, n), origin=CLIENT).first_offset == end
        assert len(read_all(log, end)) == 1
    finally:
        log.close()


def test_idle_producers_expire(tmp_path: Path) -> None:
    clock = [1_000_000.0]
    config = LogConfig(producer_id_expiration_ms=60_000,
                       producer_id_expiration_check_interval_ms=1_000)
    log = Log.open(tmp_path / "t-0", config, time_fn=lambda: clock[0])
    try:
        now_ms = int(clock[0] * 1000)
        log.append(build_batch([ProducerRecord(b"a", timestamp=now_ms)], producer_id=1,
                               producer_epoch=0, base_sequence=0), origin=CLIENT)
        clock[0] += 30
        log.append(build_batch([ProducerRecord(b"b", timestamp=now_ms + 30_000)],
                               producer_id=2, producer_epoch=0, base_sequence=0),
                   origin=CLIENT)
        clock[0] += 45  # producer 1 idle 75 s, producer 2 idle 45 s
        with pytest.raises(OutOfOrderSequenceError):
            log.append(batch(2, 0, 5), origin=CLIENT)
        assert set(log.producer_state.producers) == {2}
        # the expired producer is new again: any sequence is accepted
        again = build_batch([ProducerRecord(b"d", timestamp=int(clock[0] * 1000))],
                            producer_id=1, producer_epoch=0, base_sequence=17)
        assert not log.append(again, origin=CLIENT).duplicate
        # followers drop idle producers too
        clock[0] += 120
        log.append(build_batch([ProducerRecord(b"c", timestamp=int(clock[0] * 1000))],
                               producer_id=3, producer_epoch=0, base_sequence=0),
                   origin=AppendOrigin.REPLICATION)
        assert set(log.producer_state.producers) == {3}
    finally:
        log.close()
