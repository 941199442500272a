"""Admin APIs for topics and partitions (CreateTopics v2-7, DeleteTopics v1-6, CreatePartitions
v0-3) through confluent-kafka's AdminClient, kafka-python's KafkaAdminClient and raw requests
(kafka-python's message classes, every version registered), against a standalone broker and
an in-process 3-broker cluster whose placement is checked against the configured placer's
own output (multi-level racks)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from kafka_tiers.api import RemoteLogSegmentMetadata, RemoteStorageError, TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.kafka.admin_routing import FORWARDED_CLIENT_PREFIX
from kafka_tiers.kafka.codec import REQUESTS, RESPONSES
from kafka_tiers.kafka.topic_ids import topic_id
from kafka_tiers.remote.local import LocalRemoteStorageManager
from tests.kafka.admin_helpers import recv_exact
from tests.kafka.clients import confluent_producer, kafka_python_common

RACKS = ["/dc1/r1", "/dc1/r2", "/dc2/r1"]
CREATE, DELETE, PARTITIONS = 19, 20, 37
NONE, UNKNOWN_TOPIC, TIMED_OUT, INVALID_TOPIC = 0, 3, 7, 17
EXISTS, INVALID_PARTITIONS, INVALID_RF, INVALID_ASSIGNMENT, INVALID_CONFIG = 36, 37, 38, 39, 40
NOT_CONTROLLER, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 41, 42, 100
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


# ---------------------------------------------------------------------- helpers

#: set: :class:`RefusingDeletes` refuses every deletion
REFUSE_DELETES = threading.Event()


class RefusingDeletes(LocalRemoteStorageManager):
    """The local backend, refusing deletions while :data:`REFUSE_DELETES` is set (a remote
    tier that fails during a topic deletion; loaded by import path)."""

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        if REFUSE_DELETES.is_set():
            raise RemoteStorageError("the remote tier refuses deletions right now")
        super().delete_log_segment_data(metadata)


def call(address: str, api_key: int, version: int, client_id: str = "kt-admin-test",
         **fields: Any) -> Any:
    """One request at ``version`` to one broker (``host:port``), its decoded response."""
    req = REQUESTS[api_key][version](**fields)
    req.with_header(correlation_id=5, client_id=client_id)
    host, port = address.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(bytes(req.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        body = recv_exact(s, size)
    resp = RESPONSES[api_key].decode(body, version=version, header=True)
    assert resp.header.correlation_id == 5
    return resp


def topic_req(name: str, partitions: int = 1, rf: int = 1,
              assignments: list[tuple[int, list[int]]] | None = None,
              configs: dict[str, str] | None = None) -> Any:
    cls = REQUESTS[CREATE][7]
    return cls.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[cls.CreatableTopic.CreatableReplicaAssignment(
            partition_index=p, broker_ids=b) for p, b in assignments or []],
        configs=[cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])


def create(address: str, *topics: Any, version: int = 7, timeout_ms: int = 20000,
           validate_only: bool = False, client_id: str = "kt-admin-test") -> list[Any]:
    return list(call(address, CREATE, version, client_id, topics=list(topics),
                     timeout_ms=timeout_ms, validate_only=validate_only).topics)


def wait_for(pred: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    """``{key: None or the KafkaError}`` of confluent-kafka admin futures."""
    out = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result()
        except Exception as exc:
            out[key] = exc.args[0]
    return out


@contextlib.contextmanager
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(**kafka_python_common(bootstrap))
    try:
        yield admin
    finally:
        admin.close()


def confluent_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def controller_of(cluster: LocalCluster) -> Broker:
    return wait_for(lambda: next((b for b in cluster.brokers.values()
                                  if b.controller is not None and b.controller.active), None),
                    what="a controller")


def others(cluster: LocalCluster) -> list[Broker]:
    ctl = controller_of(cluster)
    return [b for b in cluster.brokers.values() if b is not ctl]


@pytest.fixture
def standalone(make_kafka_broker: Callable[..., Broker]) -> Broker:
    return make_kafka_broker(background=False)


@pytest.fixture
def racked(make_kafka_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    """3 brokers on multi-level racks with the multi-level-rack placer (seeded: the same
    cluster view always gets the same placement)."""
    return make_kafka_cluster(3, overrides={"broker.replica.placer": "multi-level-rack",
                                            "placer.seed": "7"},
                              racks=RACKS)


# ---------------------------------------------------------------------- standalone

def test_standalone_create_describe_delete_with_confluent_and_kafka_python(
        standalone: Broker) -> None:
    admin = confluent_admin(standalone.bootstrap_servers)
    got = results(admin.create_topics([
        NewTopic("orders", 3, 1, config={"retention.ms": "3600000"}),
        NewTopic("bad!", 1, 1),
        NewTopic("three", 1, 3),
        NewTopic("unknown-key", 1, 1, config={"no.such.key": "1"}),
        NewTopic("bad-value", 1, 1, config={"segment.bytes": "tiny"}),
    ], request_timeout=10))
    assert got["orders"] is None
    assert got["bad!"].code() == INVALID_TOPIC
    assert got["three"].code() == INVALID_RF and "standalone" in got["three"].str()
    assert got["unknown-key"].code() == INVALID_CONFIG and "no.such.key" in \
        got["unknown-key"].str()
    assert got["bad-value"].code() == INVALID_CONFIG and "segment.bytes" in \
        got["bad-value"].str()
    assert sorted(standalone.topics()) == ["orders"]
    assert standalone.topic("orders").partitions == 3
    assert standalone.topic("orders").config == {"retention.ms": "3600000"}
    again = results(admin.create_topics([NewTopic("orders", 1, 1)], request_timeout=10))
    assert again["orders"].code() == EXISTS
    # validate_only: the answer of a creation, nothing created
    checked = results(admin.create_topics([NewTopic("dry", 2, 1), NewTopic("orders", 1, 1)],
                                          validate_only=True, request_timeout=10))
    assert checked["dry"] is None and checked["orders"].code() == EXISTS
    assert "dry" not in standalone.topics()
    with kp_admin(standalone.bootstrap_servers) as kp:
        kp.create_topics([KpNewTopic("kp", 2, 1)])
        assert "kp" in kp.list_topics()
        described = kp.describe_topics(["kp"])
        assert len(described[0]["partitions"]) == 2
        kp.delete_topics(["kp"])
        assert "kp" not in kp.list_topics()
    gone = results(admin.delete_topics(["orders", "never-was"], request_timeout=10))
    assert gone["orders"] is None and gone["never-was"].code() == UNKNOWN_TOPIC
    assert standalone.topics() == {}


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version_answers_as_kafka(standalone: Broker,
                                                      version: int) -> None:
    addr = standalone.bootstrap_servers
    [dry] = create(addr, topic_req("t", 2, -1, configs={"retention.ms": "1000"}),
                   version=version, validate_only=True)
    assert dry.error_code == NONE and "t" not in standalone.topics()
    [made, zero, dup1] = create(addr, topic_req("t", 2, -1, configs={"retention.ms": "1000"}),
                                topic_req("zero", 0, 1), topic_req("dup"), topic_req("dup"),
                                version=version)
    assert made.error_code == NONE and standalone.topic("t").partitions == 2
    assert zero.error_code == INVALID_PARTITIONS
    assert dup1.name == "dup" and dup1.error_code == INVALID_REQUEST
    assert "dup" not in standalone.topics()
    if version >= 5:
        assert (made.num_partitions, made.replication_factor) == (2, 1)
        configs = {c.name: c for c in made.configs}
        assert configs["retention.ms"].value == "1000"
        assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
        assert configs["segment.bytes"].config_source == DEFAULT_CONFIG
        assert (dry.num_partitions, dry.replication_factor) == (2, 1)
        assert zero.num_partitions == -1
    if version >= 7:
        assert made.topic_id == topic_id(standalone, "t") and made.topic_id.int != 0
        assert dry.topic_id in (None, uuid.UUID(int=0))  # decoded zero UUID: None


def test_requests_listing_more_topics_than_max_request_topics_are_refused(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False, **{"max.request.topics": "2"})
    b.create_topic("a", 1)
    b.create_topic("b", 1)
    b.create_topic("c", 1)
    rows = create(b.bootstrap_servers, topic_req("x"), topic_req("y"), topic_req("z"))
    assert {r.error_code for r in rows} == {INVALID_REQUEST}
    assert "max.request.topics" in rows[0].error_message
    resp = call(b.bootstrap_servers, DELETE, 5, topic_names=["a", "b", "c"], timeout_ms=5000)
    assert {r.error_code for r in resp.responses} == {INVALID_REQUEST}
    t = REQUESTS[PARTITIONS][3].CreatePartitionsTopic
    resp = call(b.bootstrap_servers, PARTITIONS, 3, timeout_ms=5000, validate_only=False,
                topics=[t(name=n, count=2, assignments=None) for n in "abc"])
    assert {r.error_code for r in resp.results} == {INVALID_REQUEST}
    assert sorted(b.topics()) == ["a", "b", "c"]
    assert all(b.topic(n).partitions == 1 for n in "abc")
    rows = create(b.bootstrap_servers, topic_req("x"), topic_req("y"))
    assert {r.error_code for r in rows} == {NONE}


def test_standalone_create_partitions_and_produce_to_a_new_one(standalone: Broker) -> None:
    standalone.create_topic("grow", 2)
    admin = confluent_admin(standalone.bootstrap_servers)
    got = results(admin.create_partitions([NewPartitions("grow", 2)], request_timeout=10))
    assert got["grow"].code() == INVALID_PARTITIONS
    got = results(admin.create_partitions([NewPartitions("grow", 5)], validate_only=True,
                                          request_timeout=10))
    assert got["grow"] is None and standalone.topic("grow").partitions == 2
    got = results(admin.create_partitions([NewPartitions("grow", 4), NewPartitions("nope", 3)],
                                          request_timeout=10))
    assert got["grow"] is None and got["nope"].code() == UNKNOWN_TOPIC
    assert standalone.topic("grow").partitions == 4
    with confluent_producer(standalone.bootstrap_servers) as producer:
        producer.produce("grow", b"into-3", partition=3)
        assert producer.flush(10) == 0
    assert standalone.log(TopicPartition("grow", 3)).log_end_offset == 1
    with kp_admin(standalone.bootstrap_servers) as kp:
        kp.create_partitions({"grow": KpNewPartitions(6)})
    assert standalone.topic("grow").partitions == 6


def test_create_partitions_every_version_and_assignments_standalone(standalone: Broker
                                                                     ) -> None:
    standalone.create_topic("v", 1)
    req = REQUESTS[PARTITIONS][3]
    topic = req.CreatePartitionsTopic
    count = 1
    for version in range(0, 4):
        count += 1
        resp = call(standalone.bootstrap_servers, PARTITIONS, version, topics=[
            topic(name="v", count=count, assignments=[
                topic.CreatePartitionsAssignment(broker_ids=[standalone.broker_id])])],
            timeout_ms=10000, validate_only=False)
        assert [(r.name, r.error_code) for r in resp.results] == [("v", NONE)]
        assert standalone.topic("v").partitions == count
    resp = call(standalone.bootstrap_servers, PARTITIONS, 3, topics=[
        topic(name="v", count=count + 1, assignments=[
            topic.CreatePartitionsAssignment(broker_ids=[99])])],
        timeout_ms=10000, validate_only=False)
    assert resp.results[0].error_code == INVALID_ASSIGNMENT
    assert "99" in resp.results[0].error_message


def test_delete_topics_every_version_by_name_and_by_id(standalone: Broker) -> None:
    addr = standalone.bootstrap_servers
    for version in range(1, 7):
        standalone.create_topic(f"d{version}", 1)
        tid = topic_id(standalone, f"d{version}")
        assert tid is not None
        if version < 6:
            resp = call(addr, DELETE, version, topic_names=[f"d{version}", "missing"],
                        timeout_ms=10000)
        else:
            state = REQUESTS[DELETE][6].DeleteTopicState
            resp = call(addr, DELETE, 6, topics=[
                state(name=None, topic_id=tid), state(name=None, topic_id=uuid.uuid4()),
                state(name="missing", topic_id=uuid.UUID(int=0))], timeout_ms=10000)
        rows = {(r.name, r.error_code) for r in resp.responses}
        assert (f"d{version}", NONE) in rows and ("missing", UNKNOWN_TOPIC) in rows
        if version >= 6:
            assert (None, UNKNOWN_TOPIC_ID) in rows
            assert next(r.topic_id for r in resp.responses if r.name == "d6") == tid
        assert f"d{version}" not in standalone.topics()


def test_delete_topics_refuses_internal_and_repeated_topics(standalone: Broker) -> None:
    standalone.create_topic("twice", 1)
    resp = call(standalone.bootstrap_servers, DELETE, 5,
                topic_names=["__consumer_offsets", "twice", "twice"], timeout_ms=10000)
    codes = {r.name: (r.error_code, r.error_message) for r in resp.responses}
    assert codes["__consumer_offsets"][0] == INVALID_REQUEST
    assert "internal" in codes["__consumer_offsets"][1]
    assert codes["twice"][0] == INVALID_REQUEST and len(resp.responses) == 2
    assert "twice" in standalone.topics()


def test_delete_a_tiered_topic_deletes_its_remote_data_standalone(
        make_kafka_broker: Callable[..., Broker], tmp_path: Path) -> None:
    b = make_kafka_broker(background=False, **{
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote")})
    b.create_topic("tiered", 1, {"remote.storage.enable": "true", "segment.bytes": "1024",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("tiered", 0)
    for i in range(40):
        b.produce(tp, [(None, f"value-{i:04d}-" + "x" * 40)])
    b.run_tiering(["tiered"])
    assert b.rlm is not None and b.rlm.storage.list_remote_segments(tp)
    admin = confluent_admin(b.bootstrap_servers)  # kept: a dropped client cancels its calls
    got = results(admin.delete_topics(["tiered"], request_timeout=10))
    assert got["tiered"] is None
    assert not b.rlm.storage.list_remote_segments(tp)
    assert "tiered" not in b.topics()


# ---------------------------------------------------------------------- cluster

def test_cluster_create_and_grow_through_the_configured_placer(racked: LocalCluster) -> None:
    ctl = controller_of(racked)
    assert ctl.controller is not None
    expected = ctl.controller.call(lambda: ctl.controller.create_replica_placement(
        6, 2, topic="placed"))
    admin = confluent_admin(racked.bootstrap_servers)
    got = results(admin.create_topics([NewTopic("placed", 6, 2)], request_timeout=20))
    assert got["placed"] is None
    md = ctl.metadata
    assert {p: list(r) for p, r in md.topic("placed").partitions.items()} == \
        dict(enumerate(expected))
    # the multi-level-rack placer spreads each partition's 2 replicas over both data centres
    dc = {b.broker_id: b.rack.split("/")[1] for b in racked.brokers.values()}
    assert all(len({dc[r] for r in reps}) == 2 for reps in expected)
    # validate_only changes nothing
    got = results(admin.create_topics([NewTopic("dry", 3, 3)], validate_only=True,
                                      request_timeout=20))
    assert got["dry"] is None and md.topic("dry") is None
    got = results(admin.create_partitions([NewPartitions("placed", 12)], validate_only=True,
                                          request_timeout=20))
    assert got["placed"] is None and len(md.topic("placed").partitions) == 6
    # CreatePartitions continues the topic: the placer's output for start_partition 6
    more = ctl.controller.call(lambda: ctl.controller.create_replica_placement(
        3, 2, start_partition=6, topic="placed"))
    with kp_admin(racked.bootstrap_servers) as kp:
        kp.create_partitions({"placed": KpNewPartitions(9)})
    parts = md.topic("placed").partitions
    assert [list(parts[p]) for p in range(6, 9)] == more
    # the new partitions have leaders that clients see, and take records
    meta = admin.list_topics("placed", timeout=10).topics["placed"]
    assert sorted(meta.partitions) == list(range(9))
    assert all(p.leader >= 0 for p in meta.partitions.values())
    with confluent_producer(racked.bootstrap_servers) as producer:
        producer.produce("placed", b"into-8", partition=8)
        assert producer.flush(10) == 0
    got = results(admin.create_partitions([NewPartitions("placed", 9)], request_timeout=20))
    assert got["placed"].code() == INVALID_PARTITIONS


def test_cluster_errors_and_manual_assignments(racked: LocalCluster) -> None:
    addr = racked.bootstrap_servers
    rows = {t.name: t for t in create(
        addr, topic_req("manual", -1, -1, [(0, [1, 2]), (1, [2, 3]), (2, [3, 1])]),
        topic_req("dup-broker", -1, -1, [(0, [1, 1])]),
        topic_req("unknown-broker", -1, -1, [(0, [1, 9])]),
        topic_req("mixed-rf", -1, -1, [(0, [1, 2]), (1, [3])]),
        topic_req("gap", -1, -1, [(0, [1]), (2, [2])]),
        topic_req("both", 2, -1, [(0, [1]), (1, [2])]),
        topic_req("too-many", 1, 4),
        topic_req("rf-zero", 1, 0),
        topic_req("bad config", 1, 1),
        topic_req("cfg", 1, 1, configs={"retention.ms": "soon"}))}
    assert rows["manual"].error_code == NONE
    md = controller_of(racked).metadata
    assert {p: list(r) for p, r in md.topic("manual").partitions.items()} == \
        {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert (rows["manual"].num_partitions, rows["manual"].replication_factor) == (3, 2)
    assert rows["dup-broker"].error_code == INVALID_ASSIGNMENT
    assert "duplicate" in rows["dup-broker"].error_message
    assert rows["unknown-broker"].error_code == INVALID_ASSIGNMENT
    assert "9" in rows["unknown-broker"].error_message
    assert rows["mixed-rf"].error_code == INVALID_ASSIGNMENT
    assert rows["gap"].error_code == INVALID_ASSIGNMENT
    assert rows["both"].error_code == INVALID_REQUEST
    assert rows["too-many"].error_code == INVALID_RF
    assert rows["rf-zero"].error_code == INVALID_RF
    assert rows["bad config"].error_code == INVALID_TOPIC
    assert rows["cfg"].error_code == INVALID_CONFIG and "retention.ms" in \
        rows["cfg"].error_message
    assert rows["manual"].topic_id == topic_id(controller_of(racked), "manual")
    for name in rows:
        if name != "manual":
            assert md.topic(name) is None, name
    # CreatePartitions: assignments of another replication factor, or of the wrong count
    req = REQUESTS[PARTITIONS][3]
    t = req.CreatePartitionsTopic
    resp = call(addr, PARTITIONS, 3, timeout_ms=10000, validate_only=False, topics=[
        t(name="manual", count=4, assignments=[t.CreatePartitionsAssignment(broker_ids=[1])])])
    assert resp.results[0].error_code == INVALID_ASSIGNMENT
    resp = call(addr, PARTITIONS, 3, timeout_ms=10000, validate_only=False, topics=[
        t(name="manual", count=5, assignments=[
            t.CreatePartitionsAssignment(broker_ids=[1, 3])])])
    assert resp.results[0].error_code == INVALID_ASSIGNMENT
    resp = call(addr, PARTITIONS, 3, timeout_ms=10000, validate_only=False, topics=[
        t(name="manual", count=4, assignments=[
            t.CreatePartitionsAssignment(broker_ids=[1, 3])])])
    assert resp.results[0].error_code == NONE
    assert md.topic("manual").partitions[3] == (1, 3)


def test_any_broker_accepts_admin_requests_forwarding_to_the_controller(
        racked: LocalCluster) -> None:
    md = controller_of(racked).metadata
    for i, b in enumerate(others(racked)):
        [row] = create(b.bootstrap_servers, topic_req(f"fwd{i}", 2, 3))
        assert row.error_code == NONE, row.error_message
        assert len(md.topic(f"fwd{i}").partitions) == 2
        t = REQUESTS[PARTITIONS][3].CreatePartitionsTopic
        resp = call(b.bootstrap_servers, PARTITIONS, 3, timeout_ms=10000, validate_only=False,
                    topics=[t(name=f"fwd{i}", count=3, assignments=None)])
        assert resp.results[0].error_code == NONE
        assert len(md.topic(f"fwd{i}").partitions) == 3
        state = REQUESTS[DELETE][6].DeleteTopicState
        tid = topic_id(b, f"fwd{i}")
        resp = call(b.bootstrap_servers, DELETE, 6, timeout_ms=10000,
                    topics=[state(name=None, topic_id=tid)])
        assert [(r.name, r.error_code) for r in resp.responses] == [(f"fwd{i}", NONE)]
        assert md.topic(f"fwd{i}") is None
    # a request forwarded once is never forwarded again: NOT_CONTROLLER, clients retry
    b = others(racked)[0]
    [row] = create(b.bootstrap_servers, topic_req("loop", 1, 1),
                   client_id=FORWARDED_CLIENT_PREFIX + "x")
    assert row.error_code == NOT_CONTROLLER and md.topic("loop") is None


def test_create_topics_timeout_answers_request_timed_out_and_still_creates(
        racked: LocalCluster) -> None:
    ctl = controller_of(racked)
    [row] = create(ctl.bootstrap_servers, topic_req("slow", 60, 3), timeout_ms=1)
    assert row.error_code == TIMED_OUT and "goes on creating" in row.error_message
    md = ctl.metadata
    wait_for(lambda: md.topic("slow") is not None and len(md.topic("slow").partitions) == 60,
             what="the topic created after its timeout")


def test_delete_a_tiered_topic_deletes_its_remote_data_in_a_cluster(
        make_kafka_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    c = make_kafka_cluster(3, overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000"}, background=False)
    cl = c.client()
    cl.create_topic("tiered", 2, 2, {"remote.storage.enable": "true", "segment.bytes": "1024",
                                      "local.retention.bytes": "0"})
    tps = [TopicPartition("tiered", p) for p in range(2)]
    for tp in tps:
        for i in range(40):
            cl.produce("tiered", tp.partition, [f"value-{i:04d}-" + "x" * 40])
        leader = c.broker(cl.leader("tiered", tp.partition, refresh=True))
        assert leader.rlm is not None and leader.rlm.run_once(tp).copied
    storage = next(iter(c.brokers.values())).rlm.storage
    assert all(storage.list_remote_segments(tp) for tp in tps)
    admin = confluent_admin(c.bootstrap_servers)
    got = results(admin.delete_topics(["tiered"], request_timeout=20))
    assert got["tiered"] is None
    assert not any(storage.list_remote_segments(tp) for tp in tps)
    assert controller_of(c).metadata.topic("tiered") is None
    for b in c.brokers.values():
        assert all(b.log_manager.get_log(tp) is None for tp in tps)


def test_a_refused_remote_deletion_keeps_the_topic_serving_until_repeated(
        make_kafka_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    c = make_kafka_cluster(3, overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.storage.manager.class": "tests.kafka.test_admin_topics:RefusingDeletes",
        "remote.log.manager.task.interval.ms": "3600000"}, background=False)
    cl = c.client()
    cl.create_topic("kept", 1, 3, {"remote.storage.enable": "true", "segment.bytes": "1024",
                                    "local.retention.bytes": "0"})
    tp = TopicPartition("kept", 0)
    for i in range(40):
        cl.produce("kept", 0, [f"value-{i:04d}-" + "x" * 40])
    leader = c.broker(cl.leader("kept", 0, refresh=True))
    assert leader.rlm is not None and leader.rlm.run_once(tp).copied
    storage = leader.rlm.storage
    admin = confluent_admin(c.bootstrap_servers)
    REFUSE_DELETES.set()
    try:
        got = results(admin.delete_topics(["kept"], request_timeout=20))
    finally:
        REFUSE_DELETES.clear()
    assert got["kept"].code() == 56  # KAFKA_STORAGE_ERROR: repeat the deletion
    md = controller_of(c).metadata
    assert md.topic("kept") is not None and storage.list_remote_segments(tp)
    # the replicas serve again: a record is appended and replicated
    wait_for(lambda: cl.leader("kept", 0, refresh=True) >= 0, what="a leader again")
    cl.produce("kept", 0, ["after the refusal"])
    got = results(admin.delete_topics(["kept"], request_timeout=20))
    assert got["kept"] is None
    assert md.topic("kept") is None and not storage.list_remote_segments(tp)


@pytest.mark.slow
def test_an_admin_deletion_request_node_is_retried_while_the_remote_tier_refuses(
        make_kafka_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    """Document 003's ``/admin/delete_topics/<topic>`` path: a tiered topic whose remote data
    cannot be deleted keeps its request node and is deleted once the remote tier answers
    (the controller retries every 5 s)."""
    c = make_kafka_cluster(3, overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.storage.manager.class": "tests.kafka.test_admin_topics:RefusingDeletes",
        "remote.log.manager.task.interval.ms": "3600000"}, background=False)
    cl = c.client()
    cl.create_topic("later", 1, 2, {"remote.storage.enable": "true", "segment.bytes": "1024",
                                     "local.retention.bytes": "0"})
    tp = TopicPartition("later", 0)
    for i in range(40):
        cl.produce("later", 0, [f"value-{i:04d}-" + "x" * 40])
    leader = c.broker(cl.leader("later", 0, refresh=True))
    assert leader.rlm is not None and leader.rlm.run_once(tp).copied
    md = controller_of(c).metadata
    REFUSE_DELETES.set()
    try:
        md.request_topic_deletion("later")
        time.sleep(1.0)
        assert md.topic("later") is not None
        assert md.store.children_or_empty("/admin/delete_topics") == ["later"]
    finally:
        REFUSE_DELETES.clear()
    wait_for(lambda: md.topic("later") is None, 15, "the retried deletion")
    assert not leader.rlm.storage.list_remote_segments(tp)
