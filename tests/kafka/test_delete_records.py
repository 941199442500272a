"""DeleteRecords through the Kafka protocol: every registered version on the wire, the
admin clients of confluent-kafka and kafka-python, a standalone broker, a 3-broker
in-process cluster (followers follow the leader's log start offset) and a tiered topic on the
local storage plugin (remote segments wholly below the new log start offset deleted, nothing
below it served, before and after a restart)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.log.checkpoints import OffsetCheckpointFile
from kafka_tiers.log.errors import OffsetOutOfRangeError
from tests.kafka.admin_helpers import roundtrip, wait_for
from tests.kafka.clients import confluent_consumer_conf, kafka_python_common

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6


def _confluent_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000,
                        "api.version.request.timeout.ms": 5000,
                        "reconnect.backoff.max.ms": 1000})


def _answers(resp: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in resp.topics
            for p in t.partitions}


def _produce_each(b: Broker, tp: TopicPartition, n: int, size: int = 40) -> None:
    for i in range(n):  # one batch each: small segments roll often
        b.produce(tp, [(None, f"value-{i:04d}-" + "x" * size)])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_every_version(make_kafka_broker: Callable[..., Broker],
                                      version: int) -> None:
    b = make_kafka_broker()
    b.create_topic("d", 2, {"segment.bytes": "1024"})
    t0, t1 = TopicPartition("d", 0), TopicPartition("d", 1)
    _produce_each(b, t0, 100)
    _produce_each(b, t1, 20)
    first_segments = b.log(t0).num_segments
    r = roundtrip(b.bootstrap_servers, 21, version, timeout_ms=5000, topics=[
        ("d", [(0, 50), (1, -1)]), ("nope", [(0, 1)])])
    assert _answers(r) == {("d", 0): (0, 50), ("d", 1): (0, 20),
                           ("nope", 0): (UNKNOWN_TOPIC_OR_PARTITION, -1)}
    lg = b.log(t0)
    assert lg.log_start_offset == 50
    assert lg.num_segments < first_segments  # the segments wholly below 50 are gone
    assert lg.segments()[0].base_offset <= 50 < lg.segments()[0].next_offset
    # the log dir's checkpoint holds the new log start offsets already
    written = OffsetCheckpointFile(b.log_manager.log_dir_of(t0)
                                   / "log-start-offset-checkpoint").read()
    assert (written[t0], written[t1]) == (50, 20)
    with pytest.raises(OffsetOutOfRangeError):
        b.fetch(t0, 49)
    assert b.fetch(t0, 50).records_list()[0].offset == 50
    # below the current start: nothing changes; above the high watermark or negative: refused
    r = roundtrip(b.bootstrap_servers, 21, version, timeout_ms=5000, topics=[
        ("d", [(0, 10), (1, 21)])])
    assert _answers(r) == {("d", 0): (0, 50), ("d", 1): (OFFSET_OUT_OF_RANGE, -1)}
    r = roundtrip(b.bootstrap_servers, 21, version, timeout_ms=5000, topics=[
        ("d", [(0, -2)])])
    assert _answers(r) == {("d", 0): (OFFSET_OUT_OF_RANGE, -1)}
    assert b.log(t0).log_start_offset == 50 and b.log(t1).log_start_offset == 20


def test_delete_records_with_real_admin_clients(kafka_broker: Broker) -> None:
    kafka_broker.create_topic("a", 1, {"segment.bytes": "1024"})
    tp = TopicPartition("a", 0)
    _produce_each(kafka_broker, tp, 60)
    admin = _confluent_admin(kafka_broker.bootstrap_servers)
    futures = admin.delete_records([CTopicPartition("a", 0, 25)], request_timeout=10)
    deleted = futures[CTopicPartition("a", 0, 25)].result(timeout=15)
    assert deleted.low_watermark == 25
    kp = KafkaAdminClient(**kafka_python_common(kafka_broker.bootstrap_servers))
    try:
        got = kp.delete_records({KTopicPartition("a", 0): 40})
    finally:
        kp.close()
    assert got[KTopicPartition("a", 0)]["low_watermark"] == 40
    assert kafka_broker.log(tp).log_start_offset == 40
    # a consumer from the beginning starts at the new log start offset
    consumer = Consumer(confluent_consumer_conf(kafka_broker.bootstrap_servers))
    try:
        low, high = consumer.get_watermark_offsets(CTopicPartition("a", 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (40, 60)


def test_followers_follow_the_leaders_log_start_offset(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(3)
    cl = c.client()
    cl.create_topic("c", 1, 3, assignment={0: [1, 2, 3]})
    cl.create_topic("one", 1, 1, assignment={0: [3]})
    tp = TopicPartition("c", 0)
    for i in range(10):
        cl.produce("c", 0, [b"r%d-%d" % (i, j) for j in range(10)])
    wait_for(lambda: all(c.brokers[b].log_manager.get_log(tp).high_watermark == 100
                         for b in (1, 2, 3)), what="every replica committed 100")
    admin = _confluent_admin(c.bootstrap_servers)
    futures = admin.delete_records([CTopicPartition("c", 0, 40)], request_timeout=10)
    assert futures[CTopicPartition("c", 0, 40)].result(timeout=15).low_watermark == 40
    # answered once every live replica followed (Kafka's low watermark)
    assert [c.brokers[b].log_manager.get_log(tp).log_start_offset for b in (1, 2, 3)] == \
        [40, 40, 40]
    # a follower, and a broker without a replica, refuse it: the client re-routes
    for bid, topic in ((2, "c"), (1, "one")):
        r = roundtrip(c.brokers[bid].bootstrap_servers, 21, 2, timeout_ms=5000,
                      topics=[(topic, [(0, 1)])])
        assert _answers(r) == {(topic, 0): (NOT_LEADER_OR_FOLLOWER, -1)}
    assert cl.fetch("c", 0, 40)[0][0].offset == 40


def test_a_replica_that_does_not_follow_times_the_request_out(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    # a paused broker stays registered (alive) for the test's length
    c = make_kafka_cluster(3, overrides={"zookeeper.session.timeout.ms": "30000"})
    cl = c.client()
    cl.create_topic("w", 1, 2, assignment={0: [1, 2]})
    tp = TopicPartition("w", 0)
    cl.produce("w", 0, [b"v%d" % i for i in range(30)])
    wait_for(lambda: c.brokers[2].log_manager.get_log(tp).high_watermark == 30,
             what="the follower committed 30")
    c.pause(2)
    try:
        r = roundtrip(c.brokers[1].bootstrap_servers, 21, 2, timeout_ms=500,
                      topics=[("w", [(0, 20)])])
        assert _answers(r) == {("w", 0): (7, -1)}  # REQUEST_TIMED_OUT
        assert c.brokers[1].log_manager.get_log(tp).log_start_offset == 20  # it stands
    finally:
        c.resume(2)
    wait_for(lambda: c.brokers[2].log_manager.get_log(tp).log_start_offset == 20,
             what="the follower follows once running")
    r = roundtrip(c.brokers[1].bootstrap_servers, 21, 2, timeout_ms=5000,
                  topics=[("w", [(0, 20)])])
    assert _answers(r) == {("w", 0): (0, 20)}


# ---------------------------------------------------------------- tiered

@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[Callable[[], Broker]]:
    """``start()``: a standalone broker (tiering on, local storage plugin, no background
    threads), started again on the same dirs by each call; the last one is shut down."""
    cfg = {"broker.id": "1", "log.dirs": str(tmp_path / "data"),
           "listeners": "PLAINTEXT://127.0.0.1:0", "remote.log.storage.enable": "true",
           "rsm.config.dir": str(tmp_path / "remote")}
    made: list[Broker] = []

    def start() -> Broker:
        if made:
            made[-1].shutdown()
        made.append(Broker(cfg, background=False).start())
        return made[-1]

    yield start
    if made:
        made[-1].shutdown()


def test_delete_records_removes_remote_segments(tiered: Callable[[], Broker]) -> None:
    b = tiered()
    b.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "1024",
                            "local.retention.bytes": "0"})
    tp = TopicPartition("t", 0)
    _produce_each(b, tp, 60)
    b.run_tiering(["t"])
    assert b.rlm is not None
    segs = b.rlm.storage.list_remote_segments(tp)
    assert len(segs) >= 4 and segs[0].start_offset == 0
    assert b.log(tp).local_log_start_offset > segs[2].end_offset  # read from the remote tier
    cut = segs[2].start_offset + 1  # inside the third remote segment
    admin = _confluent_admin(b.bootstrap_servers)
    futures = admin.delete_records([CTopicPartition("t", 0, cut)], request_timeout=10)
    assert futures[CTopicPartition("t", 0, cut)].result(timeout=15).low_watermark == cut
    with pytest.raises(OffsetOutOfRangeError):  # nothing below it is served any more
        b.fetch(tp, cut - 1)
    b.run_tiering(["t"])  # the leader's task deletes what is wholly below it
    left = b.rlm.storage.list_remote_segments(tp)
    assert [m.segment_id for m in left] == [m.segment_id for m in segs[2:]]
    assert b.log_start_offset(tp) == cut
    got = b.fetch(tp, cut)
    assert got.tier == "remote" and got.records_list()[0].offset == cut
    # a real consumer from the beginning reads from the new start, through the remote tier
    consumer = Consumer(confluent_consumer_conf(b.bootstrap_servers))
    try:
        consumer.assign([CTopicPartition("t", 0, -2)])  # OFFSET_BEGINNING
        offsets: list[int] = []
        deadline_polls = 100
        while len(offsets) < 60 - cut and deadline_polls:
            deadline_polls -= 1
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                offsets.append(msg.offset())
    finally:
        consumer.close()
    assert offsets == list(range(cut, 60))
    # after a restart the tiered log keeps its start offset (below its local log)
    b = tiered()
    assert b.log(tp).log_start_offset == cut < b.log(tp).local_log_start_offset
    assert b.log_start_offset(tp) == cut
    with pytest.raises(OffsetOutOfRangeError):
        b.fetch(tp, cut - 1)
    assert b.fetch(tp, cut).records_list()[0].offset == cut
    # offsets still in the remote tier above the start are served after the restart
    assert b.fetch(tp, segs[3].start_offset).tier == "remote"


def test_more_partitions_than_the_bound_are_refused(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**{"max.request.partitions": "2"})
    b.create_topic("d", 2)
    for p in range(2):
        b.produce(TopicPartition("d", p), [b"x", b"y"])
    r = roundtrip(b.bootstrap_servers, 21, 2, timeout_ms=5000, topics=[
        ("d", [(0, 1), (1, 1)]), ("x", [(0, 1)])])
    assert _answers(r) == {("d", 0): (42, -1), ("d", 1): (42, -1),  # INVALID_REQUEST
                           ("x", 0): (42, -1)}
    assert all(b.log(TopicPartition("d", p)).log_start_offset == 0 for p in range(2))


def test_delete_records_on_a_tiered_topic_in_a_cluster(
        make_kafka_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    # background=False: each broker's remote task runs when the test says
    c = make_kafka_cluster(3, overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000"}, background=False)
    cl = c.client()
    cl.create_topic("tc", 1, 2, {"remote.storage.enable": "true", "segment.bytes": "1024",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("tc", 0)
    for i in range(60):
        cl.produce("tc", 0, [f"value-{i:04d}-" + "x" * 40])
    leader = c.brokers[cl.leader("tc", 0, refresh=True)]
    assert leader.rlm is not None
    assert leader.rlm.run_once(tp).copied
    segs = leader.rlm.remote_segments(tp)
    assert len(segs) >= 4
    cut = segs[2].start_offset + 1
    admin = _confluent_admin(c.bootstrap_servers)
    futures = admin.delete_records([CTopicPartition("tc", 0, cut)], request_timeout=10)
    assert futures[CTopicPartition("tc", 0, cut)].result(timeout=15).low_watermark == cut
    assert leader.rlm.run_once(tp).remote_deleted == segs[:2]
    assert [m.segment_id for m in leader.rlm.storage.list_remote_segments(tp)] == \
        [m.segment_id for m in segs[2:]]
    consumer = Consumer(confluent_consumer_conf(c.bootstrap_servers))
    try:
        low, high = consumer.get_watermark_offsets(CTopicPartition("tc", 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (cut, 60)
    # the cluster's own fetch path: below the start refused, from it served (remote tier)
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE"):
        cl.fetch("tc", 0, cut - 1)
    assert cl.fetch("tc", 0, cut)[0][0].offset == cut
