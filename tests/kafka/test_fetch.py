"""Fetch (v4-18) and OffsetForLeaderEpoch (v2-4) over the Kafka listener: every version
decodes with kafka-python's FetchResponse, records are sent with os.sendfile, the byte
limits, the high watermark bound, the errors, the long poll, the remote tier (with a slow
one), and real clients (confluent-kafka, kafka-python, aiokafka, kcat) reading what was
produced, standalone and on a 3-broker cluster."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.fetch_sessions import cache_of
from kafka_tiers.kafka.topic_ids import topic_id
from kafka_tiers.log.records import ProducerRecord, RecordBatch, build_batch
from tests.broker.helpers import make_broker, shutdown_brokers, thread_baseline  # noqa: F401
from tests.kafka.clients import (
    aiokafka_common,
    confluent_consumer,
)
from tests.kafka.raw_requests import RawConnection, request_class
from tests.kafka.targets import LISTENER, KafkaTarget

FETCH = 1
EPOCH = 23
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_REQUEST = 42
REPLICA_NOT_AVAILABLE = 9
KAFKA_STORAGE_ERROR = 56
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100


# ---------------------------------------------------------------------- helpers
def value(i: int, size: int = 100) -> bytes:
    return (f"value-{i:06d}-".encode() * (size // 13 + 1))[:size]


def produce(broker: Broker, tp: TopicPartition, start: int, count: int, *,
            per_batch: int = 1, size: int = 100) -> None:
    """Records ``start..start+count-1`` (key ``k<i>``, :func:`value`), ``per_batch`` a
    batch."""
    for i in range(start, start + count, per_batch):
        broker.produce(tp, [(f"k{j}".encode(), value(j, size))
                            for j in range(i, min(i + per_batch, start + count))])


def part(version: int, partition: int, offset: int, max_bytes: int = 1 << 20,
         epoch: int = -1) -> Any:
    cls = request_class(FETCH, version).FetchTopic.FetchPartition
    return cls(version=version, partition=partition, current_leader_epoch=epoch,
               fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
               partition_max_bytes=max_bytes)


def fetch(broker: Broker, version: int, topics: list[tuple[str, list[Any]]], *,
          max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 50 << 20,
          replica_id: int = -1, session_id: int = 0, session_epoch: int = -1,
          isolation_level: int = 0, forgotten: list[tuple[str, list[int]]] = (),
          conn: RawConnection | None = None) -> Any:
    """One raw Fetch at ``version``; topics are ``(name, [part(...)])`` (by id from v13)."""
    req = request_class(FETCH, version)
    entries = []
    for name, parts in topics:
        tid = topic_id(broker, name) if version >= 13 else None
        entries.append(req.FetchTopic(version=version, topic=name,
                                      topic_id=tid or uuid.uuid4(), partitions=parts))
    gone = [req.ForgottenTopic(version=version, topic=name,
                               topic_id=topic_id(broker, name) if version >= 13 else None,
                               partitions=ps) for name, ps in forgotten]
    fields: dict[str, Any] = dict(max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                  max_bytes=max_bytes, isolation_level=isolation_level,
                                  session_id=session_id, session_epoch=session_epoch,
                                  topics=entries, forgotten_topics_data=gone, rack_id="")
    if version <= 14:
        fields["replica_id"] = replica_id
    else:
        fields["replica_state"] = req.ReplicaState(version=version, replica_id=replica_id,
                                                   replica_epoch=-1)
    if conn is not None:
        return conn.call(FETCH, version, **fields)
    with RawConnection(broker.bootstrap_servers) as c:
        return c.call(FETCH, version, **fields)


def only(resp: Any) -> Any:
    """The one partition of a one-partition response."""
    assert len(resp.responses) == 1 and len(resp.responses[0].partitions) == 1
    return resp.responses[0].partitions[0]


def batches(records: Any) -> list[RecordBatch]:
    data = bytes(records or b"")
    out, pos = [], 0
    while pos < len(data):
        b = RecordBatch(data, pos)
        out.append(b)
        pos += b.size
    assert pos == len(data), "the records end inside a batch"
    return out


def offsets_of(records: Any) -> list[int]:
    return [r.offset for b in batches(records) for r in b.records()]


@pytest.fixture
def standalone(tmp_path: Path) -> Any:
    made: list[Broker] = []

    def make(**config: str) -> Broker:
        cfg = {"broker.id": "1", "log.dirs": str(tmp_path / f"b{len(made)}"),
               "listeners": LISTENER}
        cfg.update(config)
        b = Broker(cfg, background=False).start()
        made.append(b)
        return b

    yield make
    for b in made:
        b.shutdown()


@pytest.fixture
def broker(standalone: Callable[..., Broker]) -> Broker:
    b = standalone()
    b.create_topic("t", 2)
    produce(b, TopicPartition("t", 0), 0, 20)
    return b


# ---------------------------------------------------------------------- versions, zero copy
@pytest.mark.parametrize("version", range(4, 19))
def test_every_version_decodes_with_the_file_regions(broker: Broker, version: int) -> None:
    tp = TopicPartition("t", 0)
    expected = broker.fetch(tp, 3, 300)
    resp = fetch(broker, version, [("t", [part(version, 0, 3, 300), part(version, 1, 0)])])
    assert resp.error_code == 0 and resp.session_id == 0
    topic = resp.responses[0]
    if version >= 13:
        assert topic.topic_id == topic_id(broker, "t")
    else:
        assert topic.topic == "t"
    p0, p1 = topic.partitions
    assert (p0.partition_index, p0.error_code, p0.high_watermark, p0.last_stable_offset,
            p0.log_start_offset) == (0, NONE, 20, 20, 0 if version >= 5 else -1)
    assert bytes(p0.records) == expected.records and offsets_of(p0.records)[0] <= 3
    assert p0.aborted_transactions is None
    if version >= 11:
        assert p0.preferred_read_replica == -1
    assert (p1.error_code, p1.high_watermark, bytes(p1.records or b"")) == (NONE, 0, b"")


def test_local_records_go_out_with_sendfile(broker: Broker,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[int] = []
    real = os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        n = real(out_fd, in_fd, offset, count)
        sent.append(n)
        return n

    monkeypatch.setattr(os, "sendfile", counting)
    p = only(fetch(broker, 12, [("t", [part(12, 0, 0)])]))
    assert offsets_of(p.records) == list(range(20))
    assert sum(sent) == len(bytes(p.records)) > 0


def test_a_region_still_reads_after_its_segment_is_deleted(standalone: Callable[..., Broker]
                                                           ) -> None:
    b = standalone()
    b.create_topic("s", 1, {"segment.bytes": "1024"})
    tp = TopicPartition("s", 0)
    produce(b, tp, 0, 30)
    lg = b.log(tp)
    assert lg.num_segments > 2
    region = b.log_manager.read_region(tp, 0, 500, isolation="high_watermark")
    try:
        expected = bytes(lg.read(0, 500).records)
        lg.advance_log_start_offset(lg.segment_bases()[2])  # deletes the first two
        lg.delete_old_segments()
        assert lg.local_log_start_offset > 0
        assert not (lg.dir / "00000000000000000000.log").exists()
        assert os.pread(region.fd, region.size, region.position) == expected
    finally:
        os.close(region.fd)


def test_a_region_is_whole_checked_batches_below_the_high_watermark(
        standalone: Callable[..., Broker]) -> None:
    b = standalone()
    b.create_topic("h", 1)
    tp = TopicPartition("h", 0)
    produce(b, tp, 0, 10, per_batch=2)
    # appended but not committed: not readable by consumers
    b.log_manager.append(tp, build_batch([ProducerRecord(b"late")]), leader_epoch=0)
    lg = b.log(tp)
    assert (lg.high_watermark, lg.log_end_offset) == (10, 11)
    for version in (4, 11, 12, 16):
        p = only(fetch(b, version, [("h", [part(version, 0, 3)])]))
        assert (p.high_watermark, p.last_stable_offset) == (10, 10)
        assert offsets_of(p.records) == list(range(2, 10))  # from the batch holding 3
        empty = only(fetch(b, version, [("h", [part(version, 0, 10)])]))
        assert (empty.error_code, bytes(empty.records or b"")) == (NONE, b"")
    # read_committed reads the same (no transactions) and lists no aborted one
    p = only(fetch(b, 12, [("h", [part(12, 0, 0)])], isolation_level=1))
    assert offsets_of(p.records) == list(range(10)) and p.aborted_transactions == []


# ---------------------------------------------------------------------- byte limits
def test_partition_max_bytes_and_max_bytes_keep_whole_batches(broker: Broker) -> None:
    one = len(broker.fetch(TopicPartition("t", 0), 0, 1).records)  # one batch
    produce(broker, TopicPartition("t", 1), 0, 5)
    # a partition limit below one batch still gives the first batch whole (KIP-74)
    p = only(fetch(broker, 12, [("t", [part(12, 0, 0, 10)])]))
    assert offsets_of(p.records) == [0]
    p = only(fetch(broker, 12, [("t", [part(12, 0, 0, 3 * one + 1)])]))
    assert offsets_of(p.records) == [0, 1, 2]
    # max_bytes spent by the first partition: the second gets nothing, without an error
    resp = fetch(broker, 12, [("t", [part(12, 0, 0), part(12, 1, 0)])], max_bytes=10)
    p0, p1 = resp.responses[0].partitions
    assert offsets_of(p0.records) == [0]
    assert (p1.error_code, bytes(p1.records or b""), p1.high_watermark) == (NONE, b"", 5)
    resp = fetch(broker, 12, [("t", [part(12, 0, 0), part(12, 1, 0)])],
                 max_bytes=2 * one + 1)
    p0, p1 = resp.responses[0].partitions
    assert offsets_of(p0.records) == [0, 1] and offsets_of(p1.records) == []


def test_fetch_max_bytes_caps_the_request(standalone: Callable[..., Broker]) -> None:
    b = standalone(**{"fetch.max.bytes": "1024"})
    b.create_topic("c", 1)
    produce(b, TopicPartition("c", 0), 0, 40)
    p = only(fetch(b, 12, [("c", [part(12, 0, 0)])], max_bytes=1 << 20))
    assert 0 < len(bytes(p.records)) <= 1024 and offsets_of(p.records)[0] == 0


# ---------------------------------------------------------------------- errors
def test_errors_per_partition(broker: Broker) -> None:
    tp = TopicPartition("t", 0)
    v = 12
    resp = fetch(broker, v, [("t", [part(v, 0, 21), part(v, 0, -1), part(v, 1, 0),
                                    part(v, 7, 0)]),
                             ("nope", [part(v, 0, 0)])])
    codes = [p.error_code for t in resp.responses for p in t.partitions]
    assert codes == [OFFSET_OUT_OF_RANGE, OFFSET_OUT_OF_RANGE, NONE,
                     UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION]
    assert resp.responses[0].partitions[0].high_watermark == 20
    # below the log start offset (not tiered)
    broker.log(tp).advance_log_start_offset(5)
    p = only(fetch(broker, v, [("t", [part(v, 0, 4)])]))
    assert p.error_code == OFFSET_OUT_OF_RANGE
    p = only(fetch(broker, v, [("t", [part(v, 0, 5)])]))
    assert p.error_code == NONE and p.log_start_offset == 5
    # current leader epoch (v9+): standalone leads in epoch 0
    broker.become_leader(tp, 3)
    assert only(fetch(broker, 9, [("t", [part(9, 0, 5, epoch=2)])])).error_code == \
        FENCED_LEADER_EPOCH
    assert only(fetch(broker, 9, [("t", [part(9, 0, 5, epoch=4)])])).error_code == \
        UNKNOWN_LEADER_EPOCH
    assert only(fetch(broker, 9, [("t", [part(9, 0, 5, epoch=3)])])).error_code == NONE
    # a follower does not serve consumers
    broker.become_follower(tp)
    p = only(fetch(broker, 12, [("t", [part(12, 0, 5)])]))
    assert p.error_code == NOT_LEADER_OR_FOLLOWER


def test_unknown_topic_id_is_refused(broker: Broker) -> None:
    req = request_class(FETCH, 13)
    with RawConnection(broker.bootstrap_servers) as c:
        resp = c.call(FETCH, 13, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1000,
                      isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[req.FetchTopic(version=13, topic_id=uuid.uuid4(),
                                             partitions=[part(13, 0, 0)])],
                      forgotten_topics_data=[], rack_id="")
    assert only(resp).error_code == UNKNOWN_TOPIC_ID


def test_follower_fetches_are_refused(broker: Broker) -> None:
    for version in (11, 15):
        p = only(fetch(broker, version, [("t", [part(version, 0, 0)])], replica_id=2))
        assert p.error_code == REPLICA_NOT_AVAILABLE and bytes(p.records or b"") == b""


def _answered(resp: Any) -> dict[int, list[int]]:
    """partition -> offsets of an incremental response (one topic)."""
    return {p.partition_index: offsets_of(p.records)
            for t in resp.responses for p in t.partitions}


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_incremental_fetch_sessions(broker: Broker, version: int) -> None:
    v = version
    # epoch 0 opens a session: a full answer and the session's id
    full = fetch(broker, v, [("t", [part(v, 0, 0), part(v, 1, 0)])], session_epoch=0)
    sid = full.session_id
    assert full.error_code == NONE and sid > 0
    assert _answered(full) == {0: list(range(20)), 1: []}
    # epoch 1: partition 0 moved on, nothing new anywhere: nothing answered
    inc = fetch(broker, v, [("t", [part(v, 0, 20)])], session_id=sid, session_epoch=1)
    assert (inc.error_code, inc.session_id, _answered(inc)) == (NONE, sid, {})
    # a record on partition 1: only partition 1 (still fetched from 0 by the session)
    produce(broker, TopicPartition("t", 1), 0, 1)
    inc = fetch(broker, v, [], session_id=sid, session_epoch=2)
    assert _answered(inc) == {1: [0]}
    assert inc.responses[0].partitions[0].high_watermark == 1
    # partition 1 forgotten: a record there is not answered; partition 0's is
    produce(broker, TopicPartition("t", 0), 20, 1)
    produce(broker, TopicPartition("t", 1), 1, 1)
    inc = fetch(broker, v, [], session_id=sid, session_epoch=3, forgotten=[("t", [1])])
    assert _answered(inc) == {0: [20]}
    # a wrong epoch, an unknown session
    assert fetch(broker, v, [], session_id=sid, session_epoch=3).error_code == \
        INVALID_FETCH_SESSION_EPOCH
    assert fetch(broker, v, [], session_id=sid + 1, session_epoch=1).error_code == \
        FETCH_SESSION_ID_NOT_FOUND
    # epoch -1 closes it
    assert fetch(broker, v, [], session_id=sid, session_epoch=-1).session_id == 0
    assert fetch(broker, v, [], session_id=sid, session_epoch=4).error_code == \
        FETCH_SESSION_ID_NOT_FOUND


def test_fetch_session_slots(standalone: Callable[..., Broker]) -> None:
    b = standalone(**{"max.incremental.fetch.session.cache.slots": "1"})
    b.create_topic("t", 1)
    first = fetch(b, 12, [("t", [part(12, 0, 0)])], session_epoch=0)
    second = fetch(b, 12, [("t", [part(12, 0, 0)])], session_epoch=0)
    assert first.session_id > 0 and second.session_id == 0  # full, without a session
    assert second.error_code == NONE and only(second).error_code == NONE


def test_an_offline_log_dir_is_a_storage_error_of_its_partitions_only(
        standalone: Callable[..., Broker], tmp_path: Path) -> None:
    b = standalone(**{"log.dirs": f"{tmp_path / 'd1'},{tmp_path / 'd2'}"})
    b.create_topic("o", 2)
    produce(b, TopicPartition("o", 1), 0, 2)
    lm = b.log_manager
    d0, d1 = lm.log_dir_of(TopicPartition("o", 0)), lm.log_dir_of(TopicPartition("o", 1))
    assert d0 != d1
    lm.mark_log_dir_offline(d0, OSError(5, "injected I/O error"))
    resp = fetch(b, 12, [("o", [part(12, 0, 0), part(12, 1, 0)])])
    p0, p1 = resp.responses[0].partitions
    assert p0.error_code == KAFKA_STORAGE_ERROR
    assert p1.error_code == NONE and offsets_of(p1.records) == [0, 1]


# ---------------------------------------------------------------------- long poll
def test_a_waiting_fetch_returns_when_a_record_arrives(broker: Broker) -> None:
    tp = TopicPartition("t", 1)
    timer = threading.Timer(0.3, lambda: produce(broker, tp, 0, 1))
    start = time.monotonic()
    timer.start()
    try:
        p = only(fetch(broker, 12, [("t", [part(12, 1, 0)])], max_wait_ms=10000))
    finally:
        timer.cancel()
    took = time.monotonic() - start
    assert offsets_of(p.records) == [0]
    assert 0.25 < took < 3.0, took


def test_a_waiting_fetch_answers_at_max_wait_and_honours_min_bytes(broker: Broker) -> None:
    start = time.monotonic()
    p = only(fetch(broker, 12, [("t", [part(12, 1, 0)])], max_wait_ms=400))
    took = time.monotonic() - start
    assert bytes(p.records or b"") == b"" and 0.38 < took < 2.5, took
    # min_bytes above what there is: the data available comes at max_wait
    start = time.monotonic()
    p = only(fetch(broker, 12, [("t", [part(12, 0, 0)])], max_wait_ms=400,
                   min_bytes=10 << 20))
    took = time.monotonic() - start
    assert offsets_of(p.records) == list(range(20)) and 0.38 < took < 2.5, took
    # enough: at once
    start = time.monotonic()
    only(fetch(broker, 12, [("t", [part(12, 0, 0)])], max_wait_ms=5000, min_bytes=100))
    assert time.monotonic() - start < 1.0


def test_a_stopping_broker_ends_a_waiting_fetch(standalone: Callable[..., Broker]) -> None:
    b = standalone()
    b.create_topic("w", 1)
    conn = RawConnection(b.bootstrap_servers)
    box: list[Any] = []

    def wait() -> None:
        try:
            box.append(fetch(b, 12, [("w", [part(12, 0, 0)])], max_wait_ms=20000, conn=conn))
        except Exception as exc:
            box.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.3)
    start = time.monotonic()
    b.shutdown()
    t.join(10)
    conn.close()
    assert not t.is_alive() and time.monotonic() - start < 5.0


# ---------------------------------------------------------------------- OffsetForLeaderEpoch
def _epoch_request(version: int, topic: str, partition: int, epoch: int,
                   current: int = -1) -> dict[str, Any]:
    req = request_class(EPOCH, version)
    t = req.OffsetForLeaderTopic(version=version, topic=topic, partitions=[
        req.OffsetForLeaderTopic.OffsetForLeaderPartition(
            version=version, partition=partition, current_leader_epoch=current,
            leader_epoch=epoch)])
    fields: dict[str, Any] = {"topics": [t]}
    if version >= 3:
        fields["replica_id"] = -1
    return fields


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(broker: Broker, version: int) -> None:
    tp = TopicPartition("t", 0)
    broker.become_leader(tp, 2)
    produce(broker, tp, 20, 5)  # written in epoch 2, from offset 20

    def ask(partition: int, epoch: int, current: int = -1) -> tuple[int, int, int]:
        with RawConnection(broker.bootstrap_servers) as c:
            resp = c.call(EPOCH, version, **_epoch_request(version, "t", partition, epoch,
                                                           current))
        p = resp.topics[0].partitions[0]
        return p.error_code, p.leader_epoch, p.end_offset

    assert ask(0, 0) == (NONE, 0, 20)  # epoch 0 ends where epoch 2 starts
    assert ask(0, 1) == (NONE, 0, 20)  # the largest epoch known at or below 1
    assert ask(0, 2) == (NONE, 2, 25)  # the latest: the log end offset
    assert ask(0, 5) == (NONE, -1, -1)
    assert ask(0, 2, current=1)[0] == FENCED_LEADER_EPOCH
    assert ask(0, 2, current=3)[0] == UNKNOWN_LEADER_EPOCH
    assert ask(0, 2, current=2) == (NONE, 2, 25)
    assert ask(9, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION
    broker.become_follower(tp)
    assert ask(0, 2)[0] == NOT_LEADER_OR_FOLLOWER


# ---------------------------------------------------------------------- remote tier
def _tiered_broker(tmp_path: Path, **config: str) -> tuple[Broker, Any, TopicPartition]:
    b, store, _ = make_broker(tmp_path, listeners=LISTENER, **config)
    b.create_topic("tiered", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("tiered", 0)
    produce(b, tp, 0, 200, per_batch=4)
    b.run_tiering()
    lg = b.log(tp)
    assert lg.local_log_start_offset > 100 and b.log_start_offset(tp) == 0
    return b, store, tp


def test_offsets_below_the_local_log_come_from_the_remote_tier(tmp_path: Path) -> None:
    b, _store, tp = _tiered_broker(tmp_path)
    local_start = b.log(tp).local_log_start_offset
    got: dict[int, bytes] = {}
    offset = 0
    while offset < 200:
        p = only(fetch(b, 12, [("tiered", [part(12, 0, offset, 1500)])]))
        assert p.error_code == NONE and p.log_start_offset == 0 and p.high_watermark == 200
        recs = [r for bt in batches(p.records) for r in bt.records() if r.offset >= offset]
        assert recs, offset
        got.update({r.offset: r.value for r in recs})
        offset = recs[-1].offset + 1
    assert got == {i: value(i) for i in range(200)}
    # below the remote log start: out of range
    b.log(tp).advance_log_start_offset(8)
    b.rlm.run_once(tp)
    assert only(fetch(b, 12, [("tiered", [part(12, 0, 0)])])).error_code == OFFSET_OUT_OF_RANGE
    assert local_start > 8


def test_a_slow_remote_tier_fails_only_its_partition_after_remote_fetch_max_wait(
        tmp_path: Path) -> None:
    b, store, _tp = _tiered_broker(tmp_path, remote_fetch_max_wait_ms="300")
    b.create_topic("plain", 1)
    produce(b, TopicPartition("plain", 0), 0, 3)
    store.mode = "hang"
    try:
        start = time.monotonic()
        resp = fetch(b, 12, [("tiered", [part(12, 0, 0)]), ("plain", [part(12, 0, 0)])],
                     max_wait_ms=5000)
        took = time.monotonic() - start
    finally:
        store.mode = "ok"
        store.release.set()
    slow, plain = resp.responses[0].partitions[0], resp.responses[1].partitions[0]
    assert slow.error_code == KAFKA_STORAGE_ERROR
    assert plain.error_code == NONE and offsets_of(plain.records) == [0, 1, 2]
    assert 0.25 < took < 3.0, took


def test_every_remote_partition_is_read_in_one_request(tmp_path: Path) -> None:
    # KAFKA-14915 (issue 16): was "one remote read per request", the second partition empty
    b, _store, _tp = _tiered_broker(tmp_path)
    b.create_topic("tiered2", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                  "local.retention.bytes": "0"})
    tp2 = TopicPartition("tiered2", 0)
    produce(b, tp2, 0, 100, per_batch=4)
    b.run_tiering()
    assert b.log(tp2).local_log_start_offset > 0
    resp = fetch(b, 12, [("tiered", [part(12, 0, 0)]), ("tiered2", [part(12, 0, 0)])])
    first, second = resp.responses[0].partitions[0], resp.responses[1].partitions[0]
    assert first.error_code == NONE and offsets_of(first.records)[0] == 0
    assert second.error_code == NONE and offsets_of(second.records)[0] == 0
    p = only(fetch(b, 12, [("tiered2", [part(12, 0, 0)])]))
    assert offsets_of(p.records)[0] == 0


# ---------------------------------------------------------------------- real clients
def _confluent_read(bootstrap: str, topic: str, partitions: int, count: int,
                    **extra: Any) -> dict[tuple[int, int], bytes]:
    from confluent_kafka import TopicPartition as CTP

    got: dict[tuple[int, int], bytes] = {}
    with confluent_consumer(bootstrap, **extra) as c:
        c.assign([CTP(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got[(m.partition(), m.offset())] = m.value()
    return got


def test_confluent_consumer_reads_local_and_remote(tmp_path: Path) -> None:
    b, _store, _tp = _tiered_broker(tmp_path)
    got = _confluent_read(b.bootstrap_servers, "tiered", 1, 200, fetch_max_bytes=4096,
                          message_max_bytes=4096,
                          max_partition_fetch_bytes=2048)
    assert got == {(0, i): value(i) for i in range(200)}
    # kafka-python, through an incremental fetch session
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers.split(","),
                             request_timeout_ms=5000, enable_auto_commit=False,
                             consumer_timeout_ms=1500, fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=2048)
    try:
        consumer.assign([KTP("tiered", 0)])
        consumer.seek(KTP("tiered", 0), 0)
        seen = {m.offset: m.value for m in consumer}
    finally:
        consumer.close()
    assert seen == {i: value(i) for i in range(200)}


def test_kafka_python_and_aiokafka_consumers_read(broker: Broker) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    produce(broker, TopicPartition("t", 1), 0, 7)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers.split(","),
                             request_timeout_ms=5000, reconnect_backoff_max_ms=1000,
                             enable_auto_commit=False, consumer_timeout_ms=1500,
                             fetch_max_wait_ms=100, max_partition_fetch_bytes=500)
    try:
        parts = [KTP("t", 0), KTP("t", 1)]
        consumer.assign(parts)
        for p in parts:
            consumer.seek(p, 0)
        seen = {(m.partition, m.offset): m.value for m in consumer}
    finally:
        consumer.close()
    assert seen == {**{(0, i): value(i) for i in range(20)},
                    **{(1, i): value(i) for i in range(7)}}
    assert broker.kafka_server is not None
    assert len(cache_of(broker.kafka_server)) == 1  # it read through a fetch session

    async def aio() -> dict[tuple[int, int], bytes]:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition as ATP

        c = AIOKafkaConsumer(**aiokafka_common(broker.bootstrap_servers),
                             enable_auto_commit=False, fetch_max_wait_ms=100)
        await c.start()
        try:
            c.assign([ATP("t", 0)])
            c.seek(ATP("t", 0), 0)
            out: dict[tuple[int, int], bytes] = {}
            deadline = time.monotonic() + 15
            while len(out) < 20 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    out.update({(m.partition, m.offset): m.value for m in msgs})
            return out
        finally:
            await c.stop()

    assert asyncio.run(aio()) == {(0, i): value(i) for i in range(20)}


def test_confluent_consumer_long_poll_gets_a_new_record_quickly(broker: Broker) -> None:
    from confluent_kafka import TopicPartition as CTP

    tp = TopicPartition("t", 1)
    with confluent_consumer(broker.bootstrap_servers, fetch_wait_max_ms=5000) as c:
        c.assign([CTP("t", 1, 0)])
        assert c.poll(1.0) is None  # connected, fetching, nothing there
        start = time.monotonic()
        produce(broker, tp, 0, 1)
        m = None
        while m is None and time.monotonic() - start < 10:
            m = c.poll(0.1)
        took = time.monotonic() - start
    assert m is not None and m.error() is None and m.value() == value(0)
    assert took < 2.0, took  # well before fetch.wait.max.ms


def test_kcat_consumes(broker: Broker, kcat: str) -> None:
    out = subprocess.run([kcat, "-C", "-b", broker.bootstrap_servers, "-t", "t", "-p", "0",
                          "-o", "0", "-c", "20", "-f", "%o:%s\\n", "-q",
                          "-X", "socket.timeout.ms=5000"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"{i}:{value(i).decode()}" for i in range(20)]


def test_three_broker_cluster_consumer(make_kafka_cluster: Callable[..., Any]) -> None:
    cluster = make_kafka_cluster()
    target = KafkaTarget("cluster", cluster)
    target.create_topic("r", 3, 3)
    cl = cluster.client()
    for p in range(3):
        for i in range(10):
            cl.produce("r", p, build_batch([ProducerRecord(value(i), f"k{i}".encode())]))
    got = _confluent_read(cluster.bootstrap_servers, "r", 3, 30)
    assert got == {(p, i): value(i) for p in range(3) for i in range(10)}


def test_cluster_long_poll_and_leader_hints(make_kafka_cluster: Callable[..., Any]) -> None:
    cluster = make_kafka_cluster()
    KafkaTarget("cluster", cluster).create_topic("lp", 1, 3)
    cl = cluster.client()
    leader_id = cl.leader("lp", 0, refresh=True)
    leader = cluster.broker(leader_id)
    other = cluster.broker(next(b for b in cluster.live if b != leader_id))
    _leads, epoch = leader.leadership(TopicPartition("lp", 0))
    # a follower answers NOT_LEADER_OR_FOLLOWER with the current leader (v12+) and its
    # endpoint (v16+, KIP-951)
    resp = fetch(other, 16, [("lp", [part(16, 0, 0)])])
    p = only(resp)
    assert p.error_code == NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader_id, epoch)
    host, port = leader.bootstrap_servers.split(",")[0].rsplit(":", 1)
    assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == \
        [(leader_id, host, int(port))]
    # the leader's waiting fetch wakes when the high watermark passes a new record (the
    # followers fetched it), long before max_wait
    timer = threading.Timer(0.3, lambda: cl.produce(
        "lp", 0, build_batch([ProducerRecord(b"late")]), acks=1))
    start = time.monotonic()
    timer.start()
    try:
        p = only(fetch(leader, 12, [("lp", [part(12, 0, 0)])], max_wait_ms=10000))
    finally:
        timer.cancel()
    took = time.monotonic() - start
    assert offsets_of(p.records) == [0] and p.high_watermark == 1
    assert 0.25 < took < 3.0, took


def test_requests_listing_too_many_partitions_are_refused(
        standalone: Callable[..., Broker]) -> None:
    b = standalone(**{"max.request.partitions": "3"})
    b.create_topic("t", 1)
    resp = fetch(b, 12, [("t", [part(12, 0, 0) for _ in range(4)])])
    assert resp.error_code == INVALID_REQUEST and resp.responses == []
    assert fetch(b, 12, [("t", [part(12, 0, 0) for _ in range(3)])]).error_code == NONE
    fields = _epoch_request(4, "t", 0, 0)
    fields["topics"][0].partitions *= 4
    with RawConnection(b.bootstrap_servers) as c:
        resp = c.call(EPOCH, 4, **fields)
    assert [p.error_code for p in resp.topics[0].partitions] == [INVALID_REQUEST] * 4
    # a fetch session grown by increments beyond the bound is closed
    b.create_topic("u", 2)
    b.create_topic("w", 2)
    sid = fetch(b, 12, [("u", [part(12, 0, 0), part(12, 1, 0)])], session_epoch=0).session_id
    ok = fetch(b, 12, [("w", [part(12, 0, 0)])], session_id=sid, session_epoch=1)
    assert ok.error_code == NONE
    over = fetch(b, 12, [("w", [part(12, 1, 0)])], session_id=sid, session_epoch=2)
    assert over.error_code == INVALID_REQUEST
    assert fetch(b, 12, [], session_id=sid, session_epoch=3).error_code == \
        FETCH_SESSION_ID_NOT_FOUND


def test_out_of_range_resets_with_auto_offset_reset(tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition as CTP
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    b, _store, _tp = _tiered_broker(tmp_path)  # offsets 0..199, the first ones remote only
    with confluent_consumer(b.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([CTP("tiered", 0, 5000)])  # above the log end offset
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + 20
        while len(got) < 200 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got[m.offset()] = m.value()
    assert got == {i: value(i) for i in range(200)}  # reset to 0: the remote tier's start
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers.split(","),
                             request_timeout_ms=5000, enable_auto_commit=False,
                             consumer_timeout_ms=1500, fetch_max_wait_ms=100,
                             auto_offset_reset="latest")
    try:
        consumer.assign([KTP("tiered", 0)])
        consumer.seek(KTP("tiered", 0), 5000)
        assert list(consumer) == []  # reset to the end: nothing to read
        assert consumer.position(KTP("tiered", 0)) == 200
    finally:
        consumer.close()


def test_confluent_consumer_follows_a_leader_change(make_kafka_cluster: Callable[..., Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka import TopicPartition as CTP

    import kafka_tiers.kafka.apis.offset_for_leader_epoch as ofle

    asked: list[tuple[Any, ...]] = []
    real = ofle._end_offset

    def counting(*args: Any) -> tuple[int, int, int]:
        out = real(*args)
        asked.append((*args[1:], *out))
        return out

    monkeypatch.setattr(ofle, "_end_offset", counting)
    cluster = make_kafka_cluster()
    KafkaTarget("cluster", cluster).create_topic("fo", 1, 3)
    cl = cluster.client()
    for i in range(10):
        cl.produce("fo", 0, build_batch([ProducerRecord(value(i))]))
    got: dict[int, bytes] = {}
    with confluent_consumer(cluster.bootstrap_servers) as c:
        c.assign([CTP("fo", 0, 0)])

        def read(count: int) -> None:
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None:
                    assert m.error() is None, m.error()
                    got[m.offset()] = m.value()

        read(10)
        old = cl.leader("fo", 0, refresh=True)
        cluster.kill(old)  # the consumer's leader dies; another replica takes over
        cluster.wait_until(lambda: cl.leader("fo", 0, refresh=True) not in (-1, old), 20,
                           "a new leader")
        for i in range(10, 20):
            cl.produce("fo", 0, build_batch([ProducerRecord(value(i))]), timeout=20)
        read(20)
    assert got == {i: value(i) for i in range(20)}
    # librdkafka validated its position with the new leader (KIP-320): epoch 0 ended at 10
    assert any(a[-3:] == (NONE, 0, 10) for a in asked), asked


def test_kafka_python_reads_without_a_session_when_no_slot_is_free(
        standalone: Callable[..., Broker]) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    b = standalone(**{"max.incremental.fetch.session.cache.slots": "0"})
    b.create_topic("t", 1)
    produce(b, TopicPartition("t", 0), 0, 30)
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers.split(","),
                             request_timeout_ms=5000, enable_auto_commit=False,
                             consumer_timeout_ms=1500, fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=400)
    try:
        consumer.assign([KTP("t", 0)])
        consumer.seek(KTP("t", 0), 0)
        seen = {m.offset: m.value for m in consumer}
    finally:
        consumer.close()
    assert seen == {i: value(i) for i in range(30)}
    assert b.kafka_server is not None and len(cache_of(b.kafka_server)) == 0


def test_a_partition_whose_files_failed_to_load_is_a_storage_error(
        standalone: Callable[..., Broker], tmp_path: Path) -> None:
    d = tmp_path / "fail"
    b = standalone(**{"log.dirs": str(d)})
    b.create_topic("x", 2)
    produce(b, TopicPartition("x", 1), 0, 2)
    b.shutdown()
    ckpt = d / "x-0" / "leader-epoch-checkpoint"
    if ckpt.exists():
        ckpt.unlink()
    ckpt.mkdir()  # EISDIR when loaded: only x-0 goes offline
    again = standalone(**{"log.dirs": str(d)})
    assert TopicPartition("x", 0) in again.log_manager.offline_partitions
    resp = fetch(again, 12, [("x", [part(12, 0, 0), part(12, 1, 0)])])
    p0, p1 = resp.responses[0].partitions
    assert p0.error_code == KAFKA_STORAGE_ERROR
    assert p1.error_code == NONE and offsets_of(p1.records) == [0, 1]


# ---------------------------------------------------------------------- Log.read_region
def _region_bytes(region: Any) -> bytes:
    if region.fd < 0:
        return b""
    try:
        return os.pread(region.fd, region.size, region.position)
    finally:
        os.close(region.fd)


def test_read_region_gives_the_bytes_read_gives(standalone: Callable[..., Broker]) -> None:
    b = standalone()
    b.create_topic("g", 1, {"segment.bytes": "3000"})
    tp = TopicPartition("g", 0)
    for i in range(0, 60, 3):
        produce(b, tp, i, 3, per_batch=1 + i % 3)
    lg = b.log(tp)
    assert lg.num_segments >= 4
    b.log_manager.append(tp, build_batch([ProducerRecord(b"above")]), leader_epoch=0)
    for offset in range(0, 61):
        for max_bytes in (1, 150, 700, 5000):
            for isolation in ("high_watermark", "log_end"):
                want = lg.read(offset, max_bytes, isolation=isolation)
                got = lg.read_region(offset, max_bytes, isolation=isolation)
                assert _region_bytes(got) == bytes(want.records), (offset, max_bytes)
                assert got.next_offset == want.next_offset
                assert (got.high_watermark, got.log_end_offset) == (60, 61)
    empty = lg.read_region(10, 0, min_one_batch=False)
    assert (empty.fd, empty.size, empty.next_offset) == (-1, 0, 10)


def test_read_region_recovers_a_segment_with_a_corrupt_header(
        standalone: Callable[..., Broker], tmp_path: Path) -> None:
    d = tmp_path / "corrupt"
    b = standalone(**{"log.dirs": str(d)})
    b.create_topic("c", 1, {"segment.bytes": "3000"})
    tp = TopicPartition("c", 0)
    produce(b, tp, 0, 60)
    b.shutdown()
    seg = d / "c-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    pos, n = 0, 0
    while n < 5:  # the 6th batch's magic byte
        pos += RecordBatch(bytes(data), pos).size
        n += 1
    data[pos + 16] = 7
    seg.write_bytes(bytes(data))
    again = standalone(**{"log.dirs": str(d)})
    lg = again.log(tp)
    region = lg.read_region(0, 1 << 20)
    assert offsets_of(_region_bytes(region)) == [0, 1, 2, 3, 4]
    assert 0 in lg.load_report.recovered


def test_a_waiting_fetch_reads_again_only_when_its_partitions_moved(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_tiers.kafka.apis.fetch as fetch_api

    reads: list[int] = []
    real = fetch_api._read_all

    def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fetch_api, "_read_all", counting)
    stop = threading.Event()

    def other_partition() -> None:  # wakes the signal, never the waiting partition
        i = 20
        while not stop.wait(0.05):
            produce(broker, TopicPartition("t", 0), i, 1)
            i += 1

    t = threading.Thread(target=other_partition)
    t.start()
    try:
        start = time.monotonic()
        p = only(fetch(broker, 12, [("t", [part(12, 1, 0)])], max_wait_ms=600))
        took = time.monotonic() - start
    finally:
        stop.set()
        t.join()
    assert bytes(p.records or b"") == b"" and took >= 0.58
    assert broker.data_arrived.version > 5 and len(reads) == 1
