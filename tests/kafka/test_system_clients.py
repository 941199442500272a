"""Real Kafka clients, unchanged, against a kafka-tiers broker: confluent-kafka (librdkafka),
kafka-python 3.x and aiokafka each produce and consume against a standalone broker, a 3-broker
in-process cluster (embedded store) and a 3-broker cluster of broker processes on ZooKeeper.

Every record is checked: its partition, offset order, key and value. Topics are created through
the project's own API so a client test needs only Metadata, Produce, ListOffsets, Fetch (and the
group APIs for the group tests) from the Kafka listener.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.clients import (
    aiokafka_common,
    aiokafka_consumer_conf,
    confluent_consumer,
    confluent_producer,
    kafka_python_consumer_conf,
    kafka_python_producer_conf,
)
from tests.kafka.targets import KafkaTarget

PARTITIONS = 3
COUNT = 300


@pytest.fixture
def target(system_target: KafkaTarget) -> KafkaTarget:
    """A standalone broker, a 3-broker in-process cluster, 3 broker processes on ZooKeeper."""
    return system_target


def records(n: int = COUNT, tag: str = "") -> list[tuple[bytes, bytes]]:
    """``n`` numbered (key, value) pairs; keys spread the records over the partitions."""
    return [(f"key-{i % 17}".encode(), f"{tag}value-{i:06d}-".encode() + b"x" * (i % 50))
            for i in range(n)]


def check_consumed(sent: list[tuple[bytes, bytes]],
                   got: list[tuple[int, int, bytes | None, bytes | None]]) -> None:
    """Every sent record consumed exactly once; per partition offsets strictly increase and
    the values keep the order they were sent in; one key always lands on one partition."""
    assert sorted((k, v) for _, _, k, v in got) == sorted(sent), \
        f"consumed {len(got)} records, sent {len(sent)}"
    by_part: dict[int, list[tuple[int, bytes]]] = {}
    key_part: dict[bytes, int] = {}
    for p, off, k, v in got:
        assert k is not None and v is not None
        by_part.setdefault(p, []).append((off, v))
        assert key_part.setdefault(k, p) == p, f"key {k!r} on partitions {key_part[k]} and {p}"
    order = {v: i for i, (_, v) in enumerate(sent)}
    for p, rows in by_part.items():
        offsets = [o for o, _ in rows]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets out of order"
        seq = [order[v] for _, v in rows]
        assert seq == sorted(seq), f"partition {p}: records out of the order they were sent"


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- confluent-kafka

def confluent_produce(bootstrap: str, topic: str, sent: list[tuple[bytes, bytes]],
                      **conf: Any) -> list[tuple[int, int]]:
    """Produce with librdkafka; returns (partition, offset) of each delivered record."""
    delivered: list[tuple[int, int]] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append((msg.partition(), msg.offset()))

    with confluent_producer(bootstrap, **conf) as producer:
        for k, v in sent:
            producer.produce(topic, key=k, value=v, on_delivery=on_delivery)
            producer.poll(0)
        left = producer.flush(15)
    assert left == 0 and not errors, f"{left} not delivered; errors: {errors[:3]}"
    return delivered


def confluent_read(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS,
                   timeout: float = 20.0) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Read ``count`` records from offset 0 of every partition with ``assign`` (no group)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    got: list[tuple[int, int, bytes | None, bytes | None]] = []
    with confluent_consumer(bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = poll_confluent(consumer, count, timeout)
    assert len(got) == count, f"read {len(got)} of {count} records in {timeout}s"
    return got


def poll_confluent(consumer: Any, count: int, timeout: float = 20.0
                   ) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Consume until ``count`` records or ``timeout``: (partition, offset, key, value)."""
    got: list[tuple[int, int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    return got


def test_confluent_kafka_produces_and_consumes(target: KafkaTarget) -> None:
    topic = unique("ck")
    target.create_topic(topic, PARTITIONS)
    sent = records()
    delivered = confluent_produce(target.bootstrap_servers, topic, sent, acks="all",
                                  enable_idempotence=True, linger_ms=5)
    assert {p for p, _ in delivered} == set(range(PARTITIONS))
    got = confluent_read(target.bootstrap_servers, topic, len(sent))
    check_consumed(sent, got)
    assert sorted((p, o) for p, o, _, _ in got) == sorted(delivered)


@pytest.mark.parametrize("acks", ["0", "1"])
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_acks_and_compression(kafka_broker: Broker, acks: str,
                                              compression: str) -> None:
    target = KafkaTarget("standalone", kafka_broker)
    topic = unique("ckc")
    target.create_topic(topic, PARTITIONS)
    sent = records(200, tag=compression)
    confluent_produce(target.bootstrap_servers, topic, sent, acks=acks,
                      enable_idempotence=False, compression_type=compression,
                      linger_ms=20)
    check_consumed(sent, confluent_read(target.bootstrap_servers, topic, len(sent)))


def test_confluent_kafka_metadata_lists_brokers_and_leaders(target: KafkaTarget) -> None:
    from confluent_kafka.admin import AdminClient

    topic = unique("md")
    target.create_topic(topic, PARTITIONS)
    admin = AdminClient({"bootstrap.servers": target.bootstrap_servers,
                         "socket.timeout.ms": 5000})
    md = admin.list_topics(timeout=10)
    assert len(md.brokers) == target.brokers
    advertised = {f"{b.host}:{b.port}" for b in md.brokers.values()}
    assert advertised == set(target.bootstrap_servers.split(","))
    t = md.topics[topic]
    assert t.error is None and sorted(t.partitions) == list(range(PARTITIONS))
    for p in t.partitions.values():
        assert p.leader in md.brokers
        assert len(p.replicas) == min(3, target.brokers)
        assert set(p.isrs) <= set(p.replicas) and p.leader in p.isrs


def test_confluent_kafka_consumer_group_commits_and_resumes(target: KafkaTarget) -> None:
    topic, group = unique("ckg"), unique("group")
    target.create_topic(topic, PARTITIONS)
    sent = records(120)
    confluent_produce(target.bootstrap_servers, topic, sent)
    with confluent_consumer(target.bootstrap_servers, group,
                            enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])
        got = poll_confluent(consumer, len(sent))
        check_consumed(sent, got)
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
    ends: dict[int, int] = {}
    for p, off, _, _ in got:
        ends[p] = max(ends.get(p, -1), off + 1)
    assert {tp.partition: tp.offset for tp in committed} == ends
    # more records; a new member of the group starts at the committed offsets
    more = records(45, tag="more-")
    confluent_produce(target.bootstrap_servers, topic, more)
    with confluent_consumer(target.bootstrap_servers, group) as again:
        again.subscribe([topic])
        rest = poll_confluent(again, len(more))
    check_consumed(more, rest)  # the first 120 are never read again


# ---------------------------------------------------------------- kafka-python

def test_kafka_python_produces_and_consumes(target: KafkaTarget) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique("kp")
    target.create_topic(topic, PARTITIONS)
    sent = records()
    producer = KafkaProducer(**kafka_python_producer_conf(target.bootstrap_servers,
                                                          acks="all", linger_ms=5))
    try:  # idempotent by default in 3.x: InitProducerId, sequences
        futures = [producer.send(topic, key=k, value=v) for k, v in sent]
        producer.flush(20)
        metas = [f.get(timeout=10) for f in futures]
    finally:
        producer.close(5)
    assert {m.partition for m in metas} == set(range(PARTITIONS))
    consumer = KafkaConsumer(**kafka_python_consumer_conf(target.bootstrap_servers))
    got: list[tuple[int, int, bytes | None, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 20
        while len(got) < len(sent) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend((r.partition, r.offset, r.key, r.value) for r in batch)
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        consumer.close()
    check_consumed(sent, got)
    assert sorted((p, o) for p, o, _, _ in got) == sorted((m.partition, m.offset)
                                                          for m in metas)
    assert sum(ends.values()) == len(sent)


def test_kafka_python_consumer_group(target: KafkaTarget) -> None:
    from kafka import KafkaConsumer

    topic, group = unique("kpg"), unique("group")
    target.create_topic(topic, PARTITIONS)
    sent = records(90)
    confluent_produce(target.bootstrap_servers, topic, sent)
    consumer = KafkaConsumer(topic, **kafka_python_consumer_conf(
        target.bootstrap_servers, group, enable_auto_commit=False))
    got: list[tuple[int, int, bytes | None, bytes | None]] = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < len(sent) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend((r.partition, r.offset, r.key, r.value) for r in batch)
        consumer.commit()
        committed = {tp.partition: consumer.committed(tp) for tp in consumer.assignment()}
    finally:
        consumer.close()
    check_consumed(sent, got)
    counts: dict[int, int] = {}
    for p, _, _, _ in got:
        counts[p] = counts.get(p, 0) + 1
    assert committed == {p: counts.get(p, 0) for p in range(PARTITIONS)}


# ---------------------------------------------------------------- aiokafka

async def _aiokafka_roundtrip(bootstrap: str, topic: str, sent: list[tuple[bytes, bytes]],
                              group: str | None
                              ) -> list[tuple[int, int, bytes | None, bytes | None]]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    producer = AIOKafkaProducer(**aiokafka_common(bootstrap), acks="all",
                                enable_idempotence=True, linger_ms=5)
    await asyncio.wait_for(producer.start(), 15)
    try:
        futures = [await producer.send(topic, key=k, value=v) for k, v in sent]
        await asyncio.wait_for(producer.flush(), 20)
        for f in futures:
            await asyncio.wait_for(f, 10)
    finally:
        await producer.stop()
    if group is None:
        consumer = AIOKafkaConsumer(**aiokafka_consumer_conf(bootstrap))
    else:
        consumer = AIOKafkaConsumer(topic, **aiokafka_consumer_conf(bootstrap, group))
    await asyncio.wait_for(consumer.start(), 15)
    got: list[tuple[int, int, bytes | None, bytes | None]] = []
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
        deadline = time.monotonic() + 20
        while len(got) < len(sent) and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for batch in batches.values():
                got.extend((r.partition, r.offset, r.key, r.value) for r in batch)
        if group is not None:
            await consumer.commit()
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("group", [False, True], ids=["assign", "group"])
def test_aiokafka_produces_and_consumes(target: KafkaTarget, group: bool) -> None:
    topic = unique("aio")
    target.create_topic(topic, PARTITIONS)
    sent = records(150)
    got = asyncio.run(asyncio.wait_for(_aiokafka_roundtrip(
        target.bootstrap_servers, topic, sent, unique("group") if group else None), 90))
    check_consumed(sent, got)


# ---------------------------------------------------------------- across clients

def test_records_of_one_client_read_by_every_other(kafka_cluster: LocalCluster) -> None:
    """What librdkafka writes, kafka-python and aiokafka read byte for byte (and the reverse),
    with headers and timestamps kept."""
    from confluent_kafka import OFFSET_BEGINNING
    from confluent_kafka import TopicPartition as CkTp
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTp

    target = KafkaTarget("cluster", kafka_cluster)
    topic = unique("x")
    target.create_topic(topic, 1)
    ts = int(time.time() * 1000) - 60_000
    with confluent_producer(target.bootstrap_servers) as p:
        p.produce(topic, key=b"k1", value=b"from-librdkafka", headers=[("h", b"1")],
                  timestamp=ts, partition=0)
        assert p.flush(10) == 0
    kp = KafkaProducer(**kafka_python_producer_conf(target.bootstrap_servers))
    try:
        kp.send(topic, key=b"k2", value=b"from-kafka-python", headers=[("h", b"2")],
                timestamp_ms=ts + 1, partition=0).get(timeout=10)
    finally:
        kp.close(5)
    kc = KafkaConsumer(**kafka_python_consumer_conf(target.bootstrap_servers))
    try:
        kc.assign([KpTp(topic, 0)])
        kc.seek_to_beginning()
        seen: list[Any] = []
        deadline = time.monotonic() + 15
        while len(seen) < 2 and time.monotonic() < deadline:
            for batch in kc.poll(timeout_ms=500).values():
                seen.extend(batch)
    finally:
        kc.close()
    assert [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in seen] == [
        (0, b"k1", b"from-librdkafka", ts, [("h", b"1")]),
        (1, b"k2", b"from-kafka-python", ts + 1, [("h", b"2")])]
    msgs: list[Any] = []
    with confluent_consumer(target.bootstrap_servers) as c:
        c.assign([CkTp(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 15
        while len(msgs) < 2 and time.monotonic() < deadline:
            msgs.extend(m for m in c.consume(10, 0.5) if m.error() is None)
    assert [(m.offset(), m.value(), m.timestamp()[1], m.headers()) for m in msgs] == [
        (0, b"from-librdkafka", ts, [("h", b"1")]),
        (1, b"from-kafka-python", ts + 1, [("h", b"2")])]
