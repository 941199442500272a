"""End to end through the remote tier with real clients: a tiered topic on the S3 plugin (moto),
the Azure plugin (Azurite) and the HDFS plugin (the WebHDFS emulator), small segments copied
to the remote tier and deleted locally, then a consumer group of 3 confluent-kafka members
reads from offset 0, every record checked, including the ones served from the remote tier.

Tiering runs when the test says (``background=False``; the leader's remote log manager task is
run by hand), so the test knows which offsets are remote before any consumer starts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.clients import confluent_consumer, confluent_producer
from tests.kafka.fixtures import no_aws_environment  # noqa: F401 (used by name)

pytestmark = [pytest.mark.servers, pytest.mark.usefixtures("no_aws_environment")]

PARTITIONS = 3
COUNT = 1500
TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "8192",
                "local.retention.bytes": "0"}
REMOTE_BROKER = {"remote.log.storage.enable": "true",
                 "remote.log.manager.task.interval.ms": "3600000",
                 "remote.log.manager.task.retry.jitter": "0"}


def s3_plugin(request: pytest.FixtureRequest) -> dict[str, str]:
    server = request.getfixturevalue("s3_server")
    return {"remote.storage.manager.class": "s3",
            "rsm.config.s3.bucket.name": server.create_bucket(),
            "rsm.config.s3.endpoint.url": server.url, "rsm.config.s3.region": "us-east-1",
            "rsm.config.s3.path.style.access.enabled": "true",
            "rsm.config.aws.access.key.id": "kt-test", "rsm.config.aws.secret.access.key":
            "kt-test-secret", "rsm.config.s3.retry.max.attempts": "2"}


def azure_plugin(request: pytest.FixtureRequest) -> dict[str, str]:
    server = request.getfixturevalue("azurite_server")
    return {"remote.storage.manager.class": "azure",
            "rsm.config.azure.connection.string": server.connection_string,
            "rsm.config.azure.container.name": server.create_container().container_name,
            "rsm.config.azure.retry.total": "1", "rsm.config.azure.retry.backoff.ms": "20",
            "rsm.config.azure.connection.timeout.ms": "2000"}


def hdfs_plugin(request: pytest.FixtureRequest) -> dict[str, str]:
    server = request.getfixturevalue("webhdfs_server")
    return {"remote.storage.manager.class": "hdfs",
            "rsm.config.hdfs.namenode.url": server.url, "rsm.config.hdfs.user": server.user,
            "rsm.config.hdfs.base.dir": f"{server.base_path}/kt-{uuid.uuid4().hex[:12]}",
            "rsm.config.hdfs.timeout.ms": "20000"}


PLUGINS: dict[str, Callable[[pytest.FixtureRequest], dict[str, str]]] = {
    "s3": s3_plugin, "azure": azure_plugin, "hdfs": hdfs_plugin}


def value(p: int, i: int) -> bytes:
    return f"p{p}-record-{i:06d}-".encode() + bytes([65 + i % 26]) * (40 + i % 60)


def produce_numbered(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """COUNT records spread over the partitions (explicit partitions), acks=all."""
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: list[str] = []
    with confluent_producer(bootstrap, acks="all", linger_ms=2, batch_size=4096) as producer:
        for i in range(COUNT):
            p = i % PARTITIONS
            v = value(p, i)
            sent[p].append(v)
            producer.produce(topic, value=v, partition=p,
                             on_delivery=lambda err, _m: err and errors.append(str(err)))
            producer.poll(0)
        assert producer.flush(20) == 0
    assert not errors, errors[:3]
    return sent


def group_reads_everything(bootstrap: str, topic: str, sent: dict[int, list[bytes]],
                           timeout: float = 60.0) -> dict[int, set[int]]:
    """Three members of one new group read from offset 0 until every record arrived; checks
    every record's value and order per partition; returns the partitions each member read.

    Each member pauses what it is assigned until the group is stable (one partition each), so
    no member reads a partition that a rebalance then gives to another one."""
    group = f"tiered-{uuid.uuid4().hex[:8]}"
    members = [confluent_consumer(bootstrap, group, enable_auto_commit=False,
                                  partition_assignment_strategy="range")
               for _ in range(3)]
    consumers = [m.__enter__() for m in members]
    got: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
    read_by: dict[int, set[int]] = {i: set() for i in range(3)}
    try:
        for c in consumers:
            def on_assign(consumer: Any, partitions: list[Any]) -> None:
                consumer.assign(partitions)
                consumer.pause(partitions)
            c.subscribe([topic], on_assign=on_assign)
        deadline = time.monotonic() + timeout
        while True:
            for c in consumers:
                assert not c.consume(10, 0.1), "a paused member received records"
            owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
            if sorted(p for ps in owned for p in ps) == list(range(PARTITIONS)) \
                    and all(len(ps) == 1 for ps in owned):
                break
            assert time.monotonic() < deadline, f"the group never settled: {owned}"
        for c in consumers:
            c.resume(c.assignment())
        total = sum(len(v) for v in sent.values())
        while sum(len(v) for v in got.values()) < total and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for msg in c.consume(200, 0.1):
                    assert msg.error() is None, msg.error()
                    got[msg.partition()].append((msg.offset(), msg.value()))
                    read_by[i].add(msg.partition())
    finally:
        for m in members:
            m.__exit__(None, None, None)
    for p in range(PARTITIONS):
        offsets = [o for o, _ in got[p]]
        assert offsets == list(range(len(sent[p]))), \
            f"partition {p}: read {len(offsets)} of {len(sent[p])} records, " \
            f"first offsets {offsets[:5]}"
        assert [v for _, v in got[p]] == sent[p], f"partition {p}: values differ"
    return read_by


def check_tiered(logs: dict[int, Any], rlms: dict[int, Any], topic: str) -> dict[int, int]:
    """Each partition has remote segments and no local copy of its first offsets; returns the
    local log start offset per partition."""
    starts = {}
    for p in range(PARTITIONS):
        tp = TopicPartition(topic, p)
        remote = rlms[p].remote_segments(tp)
        assert remote and remote[0].start_offset == 0, f"{tp}: no remote segment from 0"
        starts[p] = logs[p].local_log_start_offset
        assert starts[p] > 0 and starts[p] == remote[-1].end_offset + 1, \
            f"{tp}: local log start {starts[p]}, remote up to {remote[-1].end_offset}"
    return starts


@pytest.mark.parametrize("backend", ["s3", "azure", "hdfs"])
def test_group_reads_tiered_topic_from_offset_zero_standalone(
        request: pytest.FixtureRequest, make_kafka_broker: Callable[..., Broker],
        backend: str) -> None:
    broker = make_kafka_broker(background=False, **REMOTE_BROKER, **PLUGINS[backend](request))
    topic = f"tiered-{backend}"
    broker.create_topic(topic, PARTITIONS, TOPIC_CONFIG)
    sent = produce_numbered(broker.bootstrap_servers, topic)
    results = broker.run_tiering([topic])
    assert all(r.error is None and r.copied and r.local_deleted for r in results.values()), \
        results
    tps = {p: TopicPartition(topic, p) for p in range(PARTITIONS)}
    check_tiered({p: broker.log(tp) for p, tp in tps.items()},
                 {p: broker.rlm for p in tps}, topic)
    read_by = group_reads_everything(broker.bootstrap_servers, topic, sent)
    assert sorted(len(ps) for ps in read_by.values()) == [1, 1, 1], read_by


def test_group_reads_tiered_topic_from_offset_zero_cluster_s3(
        request: pytest.FixtureRequest, make_kafka_cluster: Callable[..., LocalCluster]
        ) -> None:
    """The same on a 3-broker cluster: each partition's leader copies its segments to S3 and
    serves the remote offsets."""
    cluster = make_kafka_cluster(overrides={**REMOTE_BROKER, **s3_plugin(request)},
                                 background=False)
    topic = "tiered-cluster"
    cl = cluster.client()
    cl.create_topic(topic, PARTITIONS, 3, TOPIC_CONFIG)
    sent = produce_numbered(cluster.bootstrap_servers, topic)
    leaders = {p: cl.leader(topic, p, refresh=True) for p in range(PARTITIONS)}
    logs, rlms = {}, {}
    for p, b in leaders.items():
        tp = TopicPartition(topic, p)
        rlm = cluster.broker(b).rlm
        cluster.wait_until(lambda rlm=rlm, tp=tp: rlm.role(tp) == "leader", 10,
                           f"{tp}: the leader's remote tier leads")
        result = rlm.run_once(tp)
        assert result.error is None and result.copied and result.local_deleted, result
        logs[p], rlms[p] = cluster.broker(b).log_manager.get_log(tp), rlm
    check_tiered(logs, rlms, topic)
    read_by = group_reads_everything(cluster.bootstrap_servers, topic, sent)
    assert sorted(len(ps) for ps in read_by.values()) == [1, 1, 1], read_by
