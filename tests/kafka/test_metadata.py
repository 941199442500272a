"""Topic ids (KIP-516) and the Metadata API, against a standalone broker and a 3-broker
in-process cluster, through real clients (confluent-kafka, kafka-python, aiokafka) and
kafka-python's own message classes on a raw socket."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiokafka
import kafka
import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from kafka_tiers.broker.broker import Broker
from kafka_tiers.broker.topics import TOPICS_FILE
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.metadata_store import TopicAssignment, topic_path
from kafka_tiers.kafka.topic_ids import topic_id, topic_name
from tests.kafka.clients import aiokafka_common, confluent_producer_conf
from tests.kafka.raw_requests import RawConnection, request_class


def _standalone(tmp_path: Path, **extra: str) -> Broker:
    return Broker({"broker.id": "1", "log.dirs": str(tmp_path / "d"),
                   "listeners": "PLAINTEXT://127.0.0.1:0", **extra},
                  background=False).start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = _standalone(tmp_path)
    try:
        yield b
    finally:
        b.shutdown()


# ---------------------------------------------------------------------------- topic ids

def test_a_standalone_topic_gets_an_id_at_creation_stable_across_restarts(tmp_path: Path
                                                                           ) -> None:
    b = _standalone(tmp_path)
    try:
        b.create_topic("orders", 2)
        b.create_topic("other", 1)
        tid = topic_id(b, "orders")
        assert isinstance(tid, uuid.UUID) and tid.int != 0
        assert topic_id(b, "other") not in (None, tid)
        assert topic_name(b, tid) == "orders"
        assert topic_id(b, "missing") is None
        assert topic_name(b, uuid.uuid4()) is None
        assert topic_name(b, uuid.UUID(int=0)) is None
        stored = json.loads((tmp_path / "d" / TOPICS_FILE).read_text())
        assert stored["topics"]["orders"]["topic_id"] == str(tid)
    finally:
        b.shutdown()
    again = _standalone(tmp_path)
    try:
        assert topic_id(again, "orders") == tid
        assert topic_name(again, tid) == "orders"
    finally:
        again.shutdown()


def test_a_deleted_then_recreated_topic_has_a_new_id(broker: Broker) -> None:
    broker.create_topic("t", 1)
    first = topic_id(broker, "t")
    assert first is not None and topic_name(broker, first) == "t"
    broker.delete_topic("t")
    assert topic_id(broker, "t") is None  # the cache follows the topic set
    assert topic_name(broker, first) is None
    broker.create_topic("t", 1)
    second = topic_id(broker, "t")
    assert second is not None and second != first
    assert topic_name(broker, second) == "t" and topic_name(broker, first) is None


def test_a_topic_of_an_earlier_release_gets_its_id_once_when_first_needed(tmp_path: Path
                                                                           ) -> None:
    b = _standalone(tmp_path)
    b.create_topic("old", 1)
    b.shutdown()
    path = tmp_path / "d" / TOPICS_FILE
    path.write_text(json.dumps({"version": 1, "topics": {"old": {"partitions": 1,
                                                                 "config": {}}}}))
    before = path.read_bytes()
    b = _standalone(tmp_path)
    try:
        assert path.read_bytes() == before  # nothing rewritten at start
        tid = topic_id(b, "old")
        assert tid is not None
        assert json.loads(path.read_text())["topics"]["old"]["topic_id"] == str(tid)
        assert topic_id(b, "old") == tid
    finally:
        b.shutdown()
    b = _standalone(tmp_path)
    try:
        assert topic_id(b, "old") == tid and topic_name(b, tid) == "old"
    finally:
        b.shutdown()


def test_an_earlier_release_topic_found_by_id_lookup_gets_its_id(tmp_path: Path) -> None:
    b = _standalone(tmp_path)
    b.create_topic("old", 1)
    b.shutdown()
    path = tmp_path / "d" / TOPICS_FILE
    path.write_text(json.dumps({"version": 1, "topics": {"old": {"partitions": 1,
                                                                 "config": {}}}}))
    b = _standalone(tmp_path)
    try:
        assert topic_name(b, uuid.uuid4()) is None  # scanning gave every topic its id
        tid = json.loads(path.read_text())["topics"]["old"]["topic_id"]
        assert topic_name(b, uuid.UUID(tid)) == "old"
    finally:
        b.shutdown()


def test_cluster_topic_ids_agree_on_every_broker_and_survive_restarts(tmp_path: Path
                                                                      ) -> None:
    with LocalCluster(tmp_path / "c", 3) as c:
        cl = c.client()
        cl.create_topic("t", 3, 2)
        ids = {topic_id(c.broker(b), "t") for b in (1, 2, 3)}
        assert len(ids) == 1 and None not in ids
        (tid,) = ids
        assert tid is not None
        assert all(topic_name(c.broker(b), tid) == "t" for b in (1, 2, 3))
        cl.add_partitions("t", 8)  # more partitions keep the id
        assert c.broker(1).member.metadata.topic("t").topic_id == str(tid)
        c.restart(2)
        assert topic_id(c.broker(2), "t") == tid
        assert topic_name(c.broker(2), tid) == "t"
        cl.delete_topic("t")
        c.wait_until(lambda: topic_id(c.broker(1), "t") is None, 10, "the id forgotten")
        assert topic_name(c.broker(3), tid) is None
        cl.close()


def test_the_controller_gives_an_id_to_a_topic_that_predates_ids(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "c", 3) as c:
        cl = c.client()
        cl.create_topic("legacy", 2, 3)
        md = c.broker(1).member.metadata
        asg = md.topic("legacy")
        # as an earlier release stored it: no topic_id
        md.store.set(topic_path("legacy"), TopicAssignment(
            "legacy", asg.partitions, asg.config).to_json(), asg.version)
        assert md.topic("legacy").topic_id is None
        ctl = c.controller_id()
        assert ctl is not None
        c.kill(ctl)
        c.wait_until(lambda: c.controller_id() not in (None, ctl), 20, "a new controller")
        c.wait_until(lambda: any(c.broker(b).member.metadata.topic("legacy").topic_id
                                 for b in c.live), 20, "the id given")
        survivor = c.live[0]
        tid = topic_id(c.broker(survivor), "legacy")
        assert tid is not None
        assert {topic_id(c.broker(b), "legacy") for b in c.live} == {tid}
        cl.close()


# ---------------------------------------------------------------------------- Metadata

METADATA = 3


def _topics(resp: Any) -> dict[str | None, Any]:
    return {t.name: t for t in resp.topics}


def _names(version: int, names: list[str] | None) -> Any:
    """The ``topics`` field of a Metadata request naming ``names`` (None: null)."""
    if names is None:
        return None
    cls = request_class(METADATA, version).MetadataRequestTopic
    return [cls(name=n) for n in names]


@pytest.mark.parametrize("version", range(14))
def test_every_version_describes_brokers_topics_and_partitions(
        make_kafka_broker: Callable[..., Broker], version: int) -> None:
    b = make_kafka_broker(background=False, **{"broker.rack": "r1"})
    b.create_topic("orders", 3)
    tid = topic_id(b, "orders")
    with RawConnection(b.bootstrap_servers) as conn:
        fields: dict[str, Any] = {"topics": _names(version, ["orders"])}
        if version >= 4:
            fields["allow_auto_topic_creation"] = False
        resp = conn.call(METADATA, version, **fields)
    host, port = b.bootstrap_servers.rsplit(":", 1)
    (brk,) = resp.brokers
    assert (brk.node_id, brk.host, brk.port) == (1, host, int(port))
    if version >= 1:
        assert brk.rack == "r1" and resp.controller_id == 1
    (t,) = resp.topics
    assert t.error_code == 0 and t.name == "orders"
    if version >= 10:
        assert t.topic_id == tid
    assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2]
    for p in t.partitions:
        assert (p.error_code, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == \
            (0, 1, [1], [1])
        if version >= 7:
            assert p.leader_epoch == 0
        if version >= 5:
            assert list(p.offline_replicas) == []


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_null_and_empty_topic_lists_follow_the_version_rules(
        make_kafka_broker: Callable[..., Broker], version: int) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("a", 1)
    b.create_topic("__consumer_offsets", 1)
    with RawConnection(b.bootstrap_servers) as conn:
        empty = conn.call(METADATA, version, topics=[])
        if version >= 1:
            null = conn.call(METADATA, version, topics=None)
            assert set(_topics(null)) == {"a", "__consumer_offsets"}
            assert _topics(null)["__consumer_offsets"].is_internal
            assert not _topics(null)["a"].is_internal
    # v0: an empty list means every topic; v1+: no topic
    assert set(_topics(empty)) == ({"a", "__consumer_offsets"} if version == 0 else set())


@pytest.mark.parametrize("version", [1, 4, 12])
def test_unknown_and_invalid_topics_get_their_error_codes(
        make_kafka_broker: Callable[..., Broker], version: int) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("a", 1)
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(METADATA, version, topics=_names(version, ["a", "nope", "bad/name"]),
                         **({"allow_auto_topic_creation": True} if version >= 4 else {}))
    got = {t.name: t.error_code for t in resp.topics}
    assert got == {"a": 0, "nope": 3, "bad/name": 17}  # auto-creation is off by default
    assert "nope" not in b.topics()


@pytest.mark.parametrize("version", [1, 13])
def test_a_request_listing_too_many_topics_is_refused(
        make_kafka_broker: Callable[..., Broker], version: int) -> None:
    b = make_kafka_broker(background=False, **{"max.request.topics": "3"})
    b.create_topic("a", 1)
    with RawConnection(b.bootstrap_servers) as conn:
        fields = {"allow_auto_topic_creation": False} if version >= 4 else {}
        refused = conn.call(METADATA, version, topics=_names(version, ["a", "b", "c", "d"]),
                            **fields)
        fine = conn.call(METADATA, version, topics=_names(version, ["a", "b", "c"]), **fields)
        every = conn.call(METADATA, version, topics=None, **fields)
    assert [t.error_code for t in refused.topics] == [42] * 4  # INVALID_REQUEST
    if version >= 13:
        assert refused.error_code == 42 and fine.error_code == 0
    assert {t.name: t.error_code for t in fine.topics} == {"a": 0, "b": 3, "c": 3}
    assert [t.name for t in every.topics] == ["a"]  # every topic is not a list


def test_topics_asked_by_id_are_answered_with_their_names(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("a", 2)
    tid = topic_id(b, "a")
    unknown = uuid.uuid4()
    cls = request_class(METADATA, 12).MetadataRequestTopic
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(METADATA, 12, topics=[cls(topic_id=tid, name=None),
                                               cls(topic_id=unknown, name=None)],
                         allow_auto_topic_creation=False)
    by_id = {t.topic_id: t for t in resp.topics}
    assert by_id[tid].name == "a" and by_id[tid].error_code == 0
    assert len(by_id[tid].partitions) == 2
    assert by_id[unknown].error_code == 100 and by_id[unknown].name is None  # UNKNOWN_TOPIC_ID


def test_authorized_operations_are_reported_only_when_asked(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("a", 1)
    with RawConnection(b.bootstrap_servers) as conn:
        asked = conn.call(METADATA, 10, topics=_names(10, ["a"]), allow_auto_topic_creation=False,
                          include_cluster_authorized_operations=True,
                          include_topic_authorized_operations=True)
        not_asked = conn.call(METADATA, 10, topics=_names(10, ["a"]),
                              allow_auto_topic_creation=False)
    assert {3, 4, 8} <= set(asked.topics[0].authorized_operations)  # READ, WRITE, DESCRIBE
    assert 8 in asked.authorized_operations
    assert not_asked.topics[0].authorized_operations is None


@pytest.mark.parametrize("version", [3, 4, 12])
def test_auto_creation_when_enabled_and_allowed_standalone(
        make_kafka_broker: Callable[..., Broker], version: int) -> None:
    b = make_kafka_broker(background=False, **{"auto.create.topics.enable": "true",
                                               "num.partitions": "4"})
    with RawConnection(b.bootstrap_servers) as conn:
        if version >= 4:  # the request may forbid it
            refused = conn.call(METADATA, version, topics=_names(version, ["no"]),
                                allow_auto_topic_creation=False)
            assert refused.topics[0].error_code == 3 and "no" not in b.topics()
        fields = {"allow_auto_topic_creation": True} if version >= 4 else {}
        first = conn.call(METADATA, version, topics=_names(version, ["auto", "__consumer_offsets"]),
                          **fields)
        assert {t.name: t.error_code for t in first.topics} == {
            "auto": 5, "__consumer_offsets": 3}  # LEADER_NOT_AVAILABLE; internal: never
        again = conn.call(METADATA, version, topics=_names(version, ["auto"]), **fields)
    assert again.topics[0].error_code == 0 and len(again.topics[0].partitions) == 4
    assert b.topic("auto").partitions == 4


@pytest.mark.parametrize("transport", ["loopback", "tcp"])
def test_auto_creation_in_a_cluster_goes_through_the_controller_and_placer(
        make_kafka_cluster: Callable[..., LocalCluster], transport: str) -> None:
    c = make_kafka_cluster(overrides={"auto.create.topics.enable": "true",
                                      "num.partitions": "3",
                                      "default.replication.factor": "2"},
                           transport=transport)
    with RawConnection(c.bootstrap_servers) as conn:
        first = conn.call(METADATA, 12, topics=_names(12, ["auto"]),
                          allow_auto_topic_creation=True)
        assert first.topics[0].error_code == 5
        c.wait_until(lambda: all(p.error_code == 0 and p.leader_id >= 0 for p in conn.call(
            METADATA, 12, topics=_names(12, ["auto"]), allow_auto_topic_creation=True
        ).topics[0].partitions), 10, "leaders of the auto-created topic")
        resp = conn.call(METADATA, 12, topics=_names(12, ["auto"]),
                         allow_auto_topic_creation=False)
    (t,) = resp.topics
    assert t.error_code == 0 and len(t.partitions) == 3
    assert all(len(p.replica_nodes) == 2 for p in t.partitions)
    asg = c.broker(1).member.metadata.topic("auto")
    assert {p: list(r) for p, r in asg.partitions.items()} == {
        p.partition_index: list(p.replica_nodes) for p in t.partitions}
    assert t.topic_id == uuid.UUID(asg.topic_id)


def test_a_cluster_reports_racks_leaders_isr_and_offline_replicas(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(racks=["ra", "rb", "rc"],
                           overrides={"auto.leader.rebalance.enable": "false"})
    cl = c.client()
    cl.create_topic("t", 3, 3)
    with RawConnection(c.broker(1).bootstrap_servers) as conn:
        resp = conn.call(METADATA, 12, topics=_names(12, ["t"]),
                         allow_auto_topic_creation=False)
        racks = {b.node_id: b.rack for b in resp.brokers}
        assert racks == {1: "ra", 2: "rb", 3: "rc"}
        assert resp.controller_id == c.controller_id()
        assert resp.cluster_id == c.broker(1).member.metadata.cluster_id()
        for p in resp.topics[0].partitions:
            assert sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3]
            assert p.leader_id == p.replica_nodes[0] and list(p.offline_replicas) == []
        c.kill(3)

        def offline_reported() -> bool:
            r = conn.call(METADATA, 12, topics=_names(12, ["t"]),
                          allow_auto_topic_creation=False)
            return ({b.node_id for b in r.brokers} == {1, 2} and all(
                list(p.offline_replicas) == [3] and 3 not in p.isr_nodes
                and p.leader_id in (1, 2) for p in r.topics[0].partitions))

        c.wait_until(offline_reported, 15, "broker 3 offline in Metadata")


def test_real_clients_list_topics(kafka_target: Any) -> None:
    kafka_target.create_topic("listed", 2)
    admin = AdminClient({"bootstrap.servers": kafka_target.bootstrap_servers,
                         "socket.timeout.ms": 5000})
    md = admin.list_topics(timeout=10)
    assert len(md.brokers) == kafka_target.brokers
    t = md.topics["listed"]
    assert t.error is None and sorted(t.partitions) == [0, 1]
    assert all(p.leader in md.brokers for p in t.partitions.values())
    missing = admin.list_topics("missing", timeout=10).topics["missing"]
    assert missing.error is not None and missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_target.bootstrap_servers.split(","),
                                   request_timeout_ms=5000, reconnect_backoff_max_ms=1000)
    try:
        assert "listed" in consumer.topics()
        assert consumer.partitions_for_topic("listed") == {0, 1}
    finally:
        consumer.close()

    async def aio() -> set[int] | None:
        client = aiokafka.AIOKafkaProducer(**aiokafka_common(kafka_target.bootstrap_servers))
        await client.start()
        try:
            return await client.partitions_for("listed")
        finally:
            await client.stop()

    assert asyncio.run(aio()) == {0, 1}


def test_a_standalone_metadata_request_copies_the_topic_map_once(
        make_kafka_broker: Callable[..., Broker], monkeypatch: pytest.MonkeyPatch) -> None:
    b = make_kafka_broker(background=False)
    for i in range(30):
        b.create_topic(f"t{i}", 1)
    calls = []
    real = b.topics

    def counted() -> Any:
        calls.append(1)
        return real()

    monkeypatch.setattr(b, "topics", counted)
    with RawConnection(b.bootstrap_servers) as conn:
        resp = conn.call(METADATA, 9, topics=None, allow_auto_topic_creation=False)
    assert len(resp.topics) == 30
    assert len(calls) <= 2  # the names, then the topics: not one copy per topic


def test_a_producer_creates_its_topic_when_auto_creation_is_on(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(overrides={"auto.create.topics.enable": "true",
                                      "num.partitions": "2",
                                      "default.replication.factor": "3"})
    p = Producer(confluent_producer_conf(c.bootstrap_servers, acks="all",
                                         enable_idempotence=False))
    errors: list[Any] = []
    for i in range(10):
        p.produce("made-by-producer", value=b"v%d" % i,
                  on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(20) == 0
    assert errors == [None] * 10
    asg = c.broker(1).member.metadata.topic("made-by-producer")
    assert asg is not None and sorted(asg.partitions) == [0, 1]
    assert all(sorted(r) == [1, 2, 3] for r in asg.partitions.values())
