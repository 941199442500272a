"""Failover under real clients, on broker processes coordinated by ZooKeeper:

- a confluent-kafka producer with ``acks=all`` and ``enable.idempotence=True`` sends 100,000
  numbered records while the leader of each partition is killed with SIGKILL three times
  (each killed broker is restarted and back in the ISR before the next kill); afterwards a
  consumer reads every acknowledged record exactly once, in order per partition;
- a consumer group survives the death of its coordinator's broker without losing committed
  offsets.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.kafka.clients import confluent_consumer, confluent_producer
from tests.kafka.processes import KafkaProcessCluster, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.servers]

PARTITIONS = 3
TOTAL = 100_000
KILLS_PER_PARTITION = 3
FAILOVER = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}


def _value(p: int, seq: int) -> bytes:
    return f"{p}:{seq:07d}:".encode() + b"r" * 64


def _seq(value: bytes) -> tuple[int, int]:
    p, seq, _ = value.split(b":", 2)
    return int(p), int(seq)


def read_partitions(bootstrap: str, topic: str, timeout: float = 120.0
                    ) -> dict[int, list[int]]:
    """Every record of every partition up to its high watermark: the sequence numbers."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    out: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    with confluent_consumer(bootstrap, fetch_max_bytes=8 << 20) as consumer:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in range(PARTITIONS)])
        last = {p: -1 for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout
        while any(last[p] + 1 < ends[p] for p in ends) and time.monotonic() < deadline:
            for msg in consumer.consume(5000, 0.5):
                assert msg.error() is None, msg.error()
                part, seq = _seq(msg.value())
                assert part == msg.partition()
                out[part].append(seq)
                last[part] = msg.offset()
    missing = {p: (last[p] + 1, ends[p]) for p in ends if last[p] + 1 < ends[p]}
    assert not missing, f"not read up to the high watermark (next, end): {missing}"
    return out


def test_idempotent_producer_survives_sigkilled_leaders(
        make_process_cluster: Callable[..., KafkaProcessCluster]) -> None:
    pc = make_process_cluster(3, FAILOVER)
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    pc.create_topic(topic, PARTITIONS, 3)
    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked[msg.partition()].append(_seq(msg.value())[1])

    kills = [p for _ in range(KILLS_PER_PARTITION) for p in range(PARTITIONS)]
    chunk = TOTAL // (len(kills) + 1)
    seqs = dict.fromkeys(range(PARTITIONS), 0)
    killed: list[tuple[int, int]] = []
    with confluent_producer(pc.bootstrap_servers, acks="all", enable_idempotence=True,
                            message_timeout_ms=180000, linger_ms=5,
                            queue_buffering_max_messages=TOTAL) as producer:

        def pump(pred: Callable[[], bool], timeout: float, what: str) -> None:
            """Serve delivery reports while waiting for ``pred``."""
            def step() -> bool:
                producer.poll(0.05)
                return pred()
            wait_until(step, timeout, what, interval=0.0)

        sent = 0
        for k in range(len(kills) + 1):
            n = chunk if k < len(kills) else TOTAL - sent
            for i in range(n):
                p = (sent + i) % PARTITIONS
                producer.produce(topic, value=_value(p, seqs[p]), partition=p,
                                 on_delivery=on_delivery)
                seqs[p] += 1
                producer.poll(0)
            sent += n
            if k == len(kills):
                break
            part = kills[k]
            leader = pc.leader(topic, part)
            assert leader > 0, f"partition {part} has no leader before kill {k}"
            pc.kill(leader)  # SIGKILL, with records in flight
            killed.append((part, leader))
            pump(lambda part=part, old=leader: pc.leader(topic, part) not in (-1, old), 60,
                 f"a new leader of partition {part} after SIGKILL of broker {leader}")
            pc.restart(leader)
            pump(lambda b=leader: all(b in isr for isr in pc.isr(topic).values()), 90,
                 f"broker {leader} back in every ISR")
        left = producer.flush(240)
        assert left == 0, f"{left} records neither delivered nor failed"
    assert len(killed) == PARTITIONS * KILLS_PER_PARTITION
    total_acked = sum(len(v) for v in acked.values())
    assert total_acked + len(failed) == TOTAL
    assert total_acked >= 0.9 * TOTAL, f"only {total_acked} acknowledged; {failed[:3]}"
    got = read_partitions(pc.bootstrap_servers, topic)
    for p in range(PARTITIONS):
        seq = got[p]
        assert seq == sorted(set(seq)), f"partition {p}: duplicates or out of order"
        lost = sorted(set(acked[p]) - set(seq))
        assert not lost, f"partition {p}: {len(lost)} acknowledged records lost: {lost[:10]}"


def test_group_survives_its_coordinators_death(
        make_process_cluster: Callable[..., KafkaProcessCluster]) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    pc = make_process_cluster(3, FAILOVER)
    topic, group = f"cg-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    pc.create_topic(topic, PARTITIONS, 3)
    values = [f"{i % PARTITIONS}:{i:07d}:".encode() for i in range(300)]
    with confluent_producer(pc.bootstrap_servers, acks="all") as producer:
        for i, v in enumerate(values):
            producer.produce(topic, value=v, partition=i % PARTITIONS)
        assert producer.flush(20) == 0

    def coordinator() -> int:
        admin = AdminClient({"bootstrap.servers": pc.bootstrap_servers,
                             "socket.timeout.ms": 5000})
        [fut] = admin.describe_consumer_groups([group], request_timeout=10).values()
        return int(fut.result().coordinator.id)

    seen: list[bytes] = []
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with confluent_consumer(pc.bootstrap_servers, group, enable_auto_commit=False,
                            session_timeout_ms=10000) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(seen) < 150 and time.monotonic() < deadline:
            seen.extend(m.value() for m in consumer.consume(10, 0.5) if m.error() is None)
        consumer.commit(asynchronous=False)
        before = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
        assert sum(max(o, 0) for o in before.values()) == len(seen)
        old = coordinator()
        pc.kill(old)
        # the member goes on through the new coordinator: it reads the rest and commits
        deadline = time.monotonic() + 60
        while len(seen) < len(values) and time.monotonic() < deadline:
            seen.extend(m.value() for m in consumer.consume(50, 0.5) if m.error() is None)
        assert sorted(seen) == sorted(values), f"read {len(seen)} of {len(values)}"
        commit_deadline = time.monotonic() + 60
        while True:
            try:
                consumer.commit(asynchronous=False)
                break
            except Exception:
                if time.monotonic() > commit_deadline:
                    raise
                time.sleep(0.5)
        after = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=15)}
    assert sum(after.values()) == len(values)
    new = coordinator()
    assert new != old and new in pc.live()
    # a new member of the group starts where the group committed: only new records
    more = [f"{i % PARTITIONS}:{i:07d}:".encode() for i in range(300, 330)]
    with confluent_producer(pc.bootstrap_servers, acks="all") as producer:
        for i, v in enumerate(more):
            producer.produce(topic, value=v, partition=i % PARTITIONS)
        assert producer.flush(20) == 0
    with confluent_consumer(pc.bootstrap_servers, group) as again:
        assert {tp.partition: tp.offset for tp in again.committed(tps, timeout=15)} == after
        again.subscribe([topic])
        rest: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(rest) < len(more) and time.monotonic() < deadline:
            rest.extend(m.value() for m in again.consume(50, 0.5) if m.error() is None)
    assert sorted(rest) == sorted(more)
