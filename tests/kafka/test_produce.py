"""Produce through the Kafka listener: real producers (confluent-kafka with acks 0/1/all,
kafka-python, aiokafka) against a standalone broker and a 3-broker in-process cluster, and each
rule version by version on a raw socket (kafka-python's message classes)."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import aiokafka
import kafka
import pytest
from confluent_kafka import Producer

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.client import decode_records
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.kafka.topic_ids import topic_id
from kafka_tiers.log.records import ProducerRecord, build_batch
from tests.kafka.clients import aiokafka_common, confluent_producer_conf
from tests.kafka.raw_requests import RawConnection, request_class
from tests.kafka.targets import KafkaTarget

PRODUCE = 0
METADATA = 3


def _values(target: KafkaTarget, topic: str, partition: int) -> list[bytes | None]:
    """Every record value of a partition, read from the leader's log (not through Fetch)."""
    tp = TopicPartition(topic, partition)
    server = target.server
    if isinstance(server, Broker):
        lg = server.log(tp)
        data = lg.read(0, 1 << 24).records if lg.log_end_offset else b""
        return [r.value for r in decode_records(bytes(data))]
    assert isinstance(server, LocalCluster)
    cl = server.client()
    leader = cl.leader(topic, partition, refresh=True)
    lg = server.broker(leader).log(tp)
    server.wait_until(lambda: lg.high_watermark == lg.log_end_offset, 10, "committed")
    data = lg.read(0, 1 << 24).records if lg.log_end_offset else b""
    return [r.value for r in decode_records(bytes(data))]


def _batch(*values: bytes, **kw: Any) -> bytes:
    return build_batch([ProducerRecord(v) for v in values], **kw)


def _produce_request(version: int, topic: str, batches: dict[int, bytes | None], *,
                     acks: int = 1, timeout_ms: int = 5000, transactional_id: str | None = None,
                     tid: uuid.UUID | None = None) -> dict[str, Any]:
    cls = request_class(PRODUCE, version).TopicProduceData
    parts = [cls.PartitionProduceData(index=p, records=b) for p, b in batches.items()]
    topic_fields: dict[str, Any] = {"partition_data": parts}
    if version >= 13:
        topic_fields["topic_id"] = tid
    else:
        topic_fields["name"] = topic
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [cls(**topic_fields)]}


def _partitions(resp: Any) -> dict[int, Any]:
    (t,) = resp.responses
    return {p.index: p for p in t.partition_responses}


# ---------------------------------------------------------------------------- real clients

@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_producer_with_every_acks(kafka_target: KafkaTarget, acks: str) -> None:
    kafka_target.create_topic("t", 2)
    p = Producer(confluent_producer_conf(kafka_target.bootstrap_servers, acks=acks,
                                         enable_idempotence=False, linger_ms=5))
    reports: list[Any] = []
    for i in range(200):
        p.produce("t", value=b"v%d" % i, partition=i % 2,
                  on_delivery=lambda err, msg: reports.append((err, msg.partition(),
                                                               msg.offset())))
    assert p.flush(15) == 0
    assert len(reports) == 200 and all(err is None for err, _, _ in reports)
    if acks != "0":  # acks=0 has no answer, so no offsets
        for part in (0, 1):
            assert sorted(o for _, pp, o in reports if pp == part) == list(range(100))
    for part in (0, 1):
        want = [b"v%d" % i for i in range(part, 200, 2)]
        # acks=0: sent is not yet appended
        LocalCluster.wait_until(lambda p=part, w=want: _values(kafka_target, "t", p) == w,
                                10, f"partition {part} holding every record")


def test_kafka_python_and_aiokafka_producers(kafka_target: KafkaTarget) -> None:
    kafka_target.create_topic("kp", 1)
    producer = kafka.KafkaProducer(
        bootstrap_servers=kafka_target.bootstrap_servers.split(","), acks=1,
        enable_idempotence=False, request_timeout_ms=5000, max_block_ms=10000)
    try:
        metas = [producer.send("kp", value=b"k%d" % i, partition=0) for i in range(20)]
        producer.flush(10)
        assert [m.get(timeout=10).offset for m in metas] == list(range(20))
    finally:
        producer.close(timeout=5)

    async def aio() -> list[int]:
        prod = aiokafka.AIOKafkaProducer(acks="all", enable_idempotence=False,
                                         **aiokafka_common(kafka_target.bootstrap_servers))
        await prod.start()
        try:
            return [(await prod.send_and_wait("kp", b"a%d" % i, partition=0)).offset
                    for i in range(10)]
        finally:
            await prod.stop()

    assert asyncio.run(aio()) == list(range(20, 30))
    assert _values(kafka_target, "kp", 0) == [b"k%d" % i for i in range(20)] + \
        [b"a%d" % i for i in range(10)]


# ---------------------------------------------------------------------------- versions

@pytest.mark.parametrize("version", range(3, 14))
def test_every_version_appends_and_answers_offsets(
        make_kafka_broker: Callable[..., Broker], version: int) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 2)
    tid = topic_id(b, "t")
    with RawConnection(b.bootstrap_servers) as conn:
        first = conn.call(PRODUCE, version, **_produce_request(
            version, "t", {0: _batch(b"a", b"b"), 1: _batch(b"c")}, tid=tid))
        second = conn.call(PRODUCE, version, **_produce_request(
            version, "t", {0: _batch(b"d")}, acks=-1, tid=tid))
    parts = _partitions(first)
    assert {p: (r.error_code, r.base_offset) for p, r in parts.items()} == {0: (0, 0),
                                                                            1: (0, 0)}
    (r,) = _partitions(second).values()
    assert (r.error_code, r.base_offset, r.log_append_time_ms) == (0, 2, -1)
    if version >= 5:
        assert r.log_start_offset == 0
    if version >= 13:
        assert first.responses[0].topic_id == tid
    else:
        assert first.responses[0].name == "t"
    tp = TopicPartition("t", 0)
    assert [x.value for x in decode_records(bytes(b.log(tp).read(0, 1 << 20).records))] == \
        [b"a", b"b", b"d"]
    assert b.log(tp).high_watermark == 3


def test_log_append_time_is_answered(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("la", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(PRODUCE, 9, **_produce_request(9, "la", {0: _batch(b"x")}))
    (r,) = _partitions(resp).values()
    assert r.error_code == 0 and before <= r.log_append_time_ms <= int(time.time() * 1000)


# ---------------------------------------------------------------------------- refusals

def test_invalid_acks_and_transactional_ids_are_refused(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 2)
    with RawConnection(b.bootstrap_servers) as conn:
        bad_acks = conn.call(PRODUCE, 8, **_produce_request(
            8, "t", {0: _batch(b"a"), 1: _batch(b"b")}, acks=2))
        txn = conn.call(PRODUCE, 8, **_produce_request(
            8, "t", {0: _batch(b"a")}, transactional_id="tx-1"))
    assert {p: r.error_code for p, r in _partitions(bad_acks).items()} == {0: 21, 1: 21}
    (r,) = _partitions(txn).values()
    # TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as InitProducerId answers a transactional id
    assert r.error_code == 53 and "transactions are not supported by kafka-tiers" in \
        r.error_message
    assert b.log(TopicPartition("t", 0)).log_end_offset == 0


def test_a_transactional_batch_is_refused(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 1)
    batch = _batch(b"a", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(PRODUCE, 9, **_produce_request(9, "t", {0: batch}))
    (r,) = _partitions(resp).values()
    # INVALID_TXN_STATE from the log engine (the idempotence part words it)
    assert r.error_code == 48 and "transactions" in r.error_message
    assert "produce without transactional.id" in r.error_message
    assert b.log(TopicPartition("t", 0)).log_end_offset == 0


def test_bad_batches_get_kafkas_error_codes(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 6, {"max.message.bytes": "2000"})
    corrupt = bytearray(_batch(b"a"))
    corrupt[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    old_magic = bytearray(_batch(b"a"))
    old_magic[16] = 1
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(PRODUCE, 9, **_produce_request(9, "t", {
            0: bytes(corrupt), 1: bytes(old_magic), 2: _batch(b"a") + _batch(b"b"),
            3: b"", 4: _batch(b"x" * 5000), 5: _batch(b"fine")}))
    got = {p: r.error_code for p, r in _partitions(resp).items()}
    # CORRUPT_MESSAGE, INVALID_RECORD x3, MESSAGE_TOO_LARGE, and the good one appended
    assert got == {0: 2, 1: 87, 2: 87, 3: 87, 4: 10, 5: 0}
    assert all(r.error_message for p, r in _partitions(resp).items() if p != 5)
    assert [b.log(TopicPartition("t", p)).log_end_offset for p in range(6)] == \
        [0, 0, 0, 0, 0, 1]


def test_unknown_topics_partitions_and_ids(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 1)
    with RawConnection(b.bootstrap_servers) as conn:
        topic = conn.call(PRODUCE, 9, **_produce_request(9, "nope", {0: _batch(b"a")}))
        part = conn.call(PRODUCE, 9, **_produce_request(9, "t", {5: _batch(b"a")}))
        by_id = conn.call(PRODUCE, 13, **_produce_request(13, "", {0: _batch(b"a")},
                                                          tid=uuid.uuid4()))
    assert _partitions(topic)[0].error_code == 3
    assert _partitions(part)[5].error_code == 3
    assert _partitions(by_id)[0].error_code == 100  # UNKNOWN_TOPIC_ID


def test_a_follower_answers_not_leader(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 1)
    b.become_follower(TopicPartition("t", 0))
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(PRODUCE, 7, **_produce_request(7, "t", {0: _batch(b"a")}))
    assert _partitions(resp)[0].error_code == 6


def test_storage_errors_and_min_insync_replicas_standalone(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False, **{"min.insync.replicas": "2"})
    b.create_topic("t", 2)
    tp = TopicPartition("t", 1)
    assert b.log_manager is not None
    b.log_manager.take_partition_offline(tp, b.log(tp).dir.parent, "a test")
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(PRODUCE, 9, **_produce_request(
            9, "t", {0: _batch(b"a"), 1: _batch(b"b")}, acks=-1))
        ok = conn.call(PRODUCE, 9, **_produce_request(9, "t", {0: _batch(b"a")}, acks=1))
    got = _partitions(resp)
    assert got[0].error_code == 19 and "min.insync.replicas" in got[0].error_message
    assert got[1].error_code in (19, 56)
    assert _partitions(ok)[0].error_code == 0
    with RawConnection(b.bootstrap_servers) as conn:
        storage = conn.call(PRODUCE, 9, **_produce_request(9, "t", {1: _batch(b"b")}, acks=1))
    assert _partitions(storage)[1].error_code == 56  # KAFKA_STORAGE_ERROR


def test_acks_zero_closes_the_connection_on_an_error(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 1)
    with RawConnection(b.bootstrap_servers) as conn:
        conn.send(PRODUCE, 9, **_produce_request(9, "t", {0: _batch(b"a")}, acks=0))
        # no answer to acks=0: the next request's answer is the first one read
        md = conn.call(METADATA, 1, topics=None)
        assert [t.name for t in md.topics] == ["t"]
        conn.send(PRODUCE, 9, **_produce_request(9, "nope", {0: _batch(b"a")}, acks=0))
        conn.sock.settimeout(5)
        with pytest.raises((ConnectionError, socket.timeout)):
            conn.call(METADATA, 1, topics=None)
    assert b.log(TopicPartition("t", 0)).log_end_offset == 1


# ---------------------------------------------------------------------------- cluster

def _leader_and_follower(c: LocalCluster, topic: str, partition: int) -> tuple[int, int]:
    leader = c.client().leader(topic, partition, refresh=True)
    md = c.broker(leader).member.metadata
    follower = next(b for b in md.topic(topic).partitions[partition] if b != leader)
    return leader, follower


def test_cluster_not_leader_carries_the_current_leader(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(overrides={"auto.leader.rebalance.enable": "false"})
    c.client().create_topic("t", 1, 2)
    leader, other = _leader_and_follower(c, "t", 0)
    with RawConnection(c.broker(other).bootstrap_servers) as conn:
        old = conn.call(PRODUCE, 9, **_produce_request(9, "t", {0: _batch(b"a")}))
        new = conn.call(PRODUCE, 10, **_produce_request(10, "t", {0: _batch(b"a")}))
    assert _partitions(old)[0].error_code == 6
    r = _partitions(new)[0]
    assert r.error_code == 6 and r.current_leader.leader_id == leader
    assert r.current_leader.leader_epoch >= 0
    host, port = c.broker(leader).bootstrap_servers.rsplit(":", 1)
    assert [(e.node_id, e.host, e.port) for e in new.node_endpoints] == [(leader, host,
                                                                           int(port))]
    with RawConnection(c.broker(leader).bootstrap_servers) as conn:
        ok = conn.call(PRODUCE, 10, **_produce_request(10, "t", {0: _batch(b"a")}, acks=-1))
    assert _partitions(ok)[0].error_code == 0


def test_cluster_acks_all_needs_min_insync_replicas(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(overrides={"min.insync.replicas": "3"})
    c.client().create_topic("t", 1, 2)
    leader, _ = _leader_and_follower(c, "t", 0)
    with RawConnection(c.broker(leader).bootstrap_servers) as conn:
        all_acks = conn.call(PRODUCE, 9, **_produce_request(9, "t", {0: _batch(b"a")}, acks=-1))
        one = conn.call(PRODUCE, 9, **_produce_request(9, "t", {0: _batch(b"b")}, acks=1))
    assert _partitions(all_acks)[0].error_code == 19  # NOT_ENOUGH_REPLICAS, nothing appended
    assert _partitions(one)[0].error_code == 0 and _partitions(one)[0].base_offset == 0


def test_cluster_acks_all_times_out_per_the_request(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(overrides={"auto.leader.rebalance.enable": "false",
                                      "replica.lag.time.max.ms": "30000"})
    c.client().create_topic("t", 1, 2)
    leader, follower = _leader_and_follower(c, "t", 0)
    c.pause(follower)  # in the ISR, not fetching
    try:
        with RawConnection(c.broker(leader).bootstrap_servers) as conn:
            started = time.monotonic()
            resp = conn.call(PRODUCE, 9, **_produce_request(9, "t", {0: _batch(b"a")},
                                                            acks=-1, timeout_ms=300))
            took = time.monotonic() - started
    finally:
        c.resume(follower)
    assert _partitions(resp)[0].error_code == 7 and 0.25 < took < 5  # REQUEST_TIMED_OUT


def test_cluster_acks_all_partitions_of_one_request_wait_together(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(brokers=2, overrides={"auto.leader.rebalance.enable": "false"})
    c.client().create_topic("t", 8, 2, assignment={p: [1, 2] for p in range(8)})
    with RawConnection(c.broker(1).bootstrap_servers) as conn:
        resp = conn.call(PRODUCE, 9, **_produce_request(
            9, "t", {p: _batch(b"p%d" % p) for p in range(8)}, acks=-1))
    assert {p: (r.error_code, r.base_offset) for p, r in _partitions(resp).items()} == {
        p: (0, 0) for p in range(8)}
    for p in range(8):
        lg = c.broker(1).log(TopicPartition("t", p))
        assert lg.high_watermark == 1
