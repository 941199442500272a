"""DescribeCluster, ElectLeaders and the partition reassignments through the Kafka protocol:
every registered version on the wire (kafka-python's protocol classes), and real admin clients
(confluent-kafka's AdminClient, kafka-python's KafkaAdminClient) against a standalone broker
and an in-process 3-broker cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.kafka.registry import apis
from tests.kafka.admin_helpers import roundtrip, wait_for
from tests.kafka.clients import kafka_python_common

ELECTION_NOT_NEEDED = 84
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICA_ASSIGNMENT = 39
NO_REASSIGNMENT_IN_PROGRESS = 85


def _confluent_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000,
                        "api.version.request.timeout.ms": 5000,
                        "reconnect.backoff.max.ms": 1000})


def _kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(**kafka_python_common(bootstrap))


def _state(c: LocalCluster, topic: str, partition: int = 0) -> dict[str, Any]:
    return c.client().describe_topic(topic)[partition]


def test_every_version_is_registered() -> None:
    got = {k: (a.min_version, a.max_version) for k, a in apis().items()
           if k in (21, 34, 35, 43, 45, 46, 60)}
    assert got == {60: (0, 2), 43: (0, 2), 45: (0, 1), 46: (0, 0), 35: (0, 4), 34: (0, 2),
                   21: (0, 2)}


# ---------------------------------------------------------------- DescribeCluster

@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_standalone_every_version(make_kafka_broker: Callable[..., Broker],
                                                   version: int) -> None:
    b = make_kafka_broker(**{"broker.rack": "r1"})
    fields: dict[str, Any] = {"include_cluster_authorized_operations": True}
    if version >= 1:
        fields["endpoint_type"] = 1
    r = roundtrip(b.bootstrap_servers, 60, version, **fields)
    assert r.error_code == 0
    # a standalone broker's log dirs may carry no cluster id (the field is not nullable)
    assert r.cluster_id == (b.log_manager.meta_properties.get("cluster.id") or "")
    assert r.controller_id == b.broker_id
    host, port = b.bootstrap_servers.rsplit(":", 1)
    assert [(x.broker_id, x.host, x.port, x.rack) for x in r.brokers] == \
        [(b.broker_id, host, int(port), "r1")]
    assert 8 in r.authorized_operations  # DESCRIBE


def test_describe_cluster_refuses_controller_endpoints(kafka_broker: Broker) -> None:
    r = roundtrip(kafka_broker.bootstrap_servers, 60, 1,
                  include_cluster_authorized_operations=False, endpoint_type=2)
    assert r.error_code == 114  # MISMATCHED_ENDPOINT_TYPE
    assert "endpoint type 2" in r.error_message


def test_describe_cluster_real_clients_on_a_cluster(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(3, racks=["a", "b", "c"])
    ids = sorted(c.brokers)
    admin = _confluent_admin(c.bootstrap_servers)
    desc = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert desc.cluster_id == c.brokers[1].member.cluster_id
    assert desc.controller.id == c.controller_id()
    assert sorted(n.id for n in desc.nodes) == ids
    assert {n.id: n.rack for n in desc.nodes} == {1: "a", 2: "b", 3: "c"}
    kp = _kp_admin(c.bootstrap_servers)
    try:
        got = kp.describe_cluster()
    finally:
        kp.close()
    assert got["controller_id"] == c.controller_id()
    assert sorted(b["broker_id"] for b in got["brokers"]) == ids
    ports = {b["broker_id"]: b["port"] for b in got["brokers"]}
    for bid, broker in c.brokers.items():  # as advertised on the Kafka listener
        assert broker.bootstrap_servers.endswith(f":{ports[bid]}")


# ---------------------------------------------------------------- ElectLeaders

@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_standalone(make_kafka_broker: Callable[..., Broker],
                                  version: int) -> None:
    b = make_kafka_broker()
    b.create_topic("e", 2)
    fields: dict[str, Any] = {
        "topic_partitions": [("e", [0, 1, 5]), ("nope", [0])], "timeout_ms": 5000}
    if version >= 1:
        fields["election_type"] = 0
    r = roundtrip(b.bootstrap_servers, 43, version, **fields)
    if version >= 1:
        assert r.error_code == 0
    got = {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results
           for p in t.partition_result}
    assert got == {("e", 0): ELECTION_NOT_NEEDED, ("e", 1): ELECTION_NOT_NEEDED,
                   ("e", 5): UNKNOWN_TOPIC_OR_PARTITION,
                   ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    # null partitions: all of them, and the elections not needed are left out (Kafka's rule)
    fields["topic_partitions"] = None
    r = roundtrip(b.bootstrap_servers, 43, version, **fields)
    assert r.replica_election_results == []


def test_elect_leaders_unknown_type_is_an_invalid_request(kafka_broker: Broker) -> None:
    kafka_broker.create_topic("e", 1)
    r = roundtrip(kafka_broker.bootstrap_servers, 43, 2, election_type=7,
                  topic_partitions=[("e", [0])], timeout_ms=1000)
    assert r.error_code == 42
    assert [p.error_code for p in r.replica_election_results[0].partition_result] == [42]


def test_preferred_election_after_a_leader_change(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(3)
    cl = c.client()
    cl.create_topic("pref", 1, 3, assignment={0: [1, 2, 3]})
    assert _state(c, "pref")["leader"] == 1
    c.stop_broker(1)  # controlled: the leadership moves away
    wait_for(lambda: _state(c, "pref")["leader"] in (2, 3), what="a new leader")
    c.start_broker(1)
    wait_for(lambda: 1 in _state(c, "pref")["isr"], 20, "broker 1 back in the ISR")
    assert _state(c, "pref")["leader"] != 1
    admin = _confluent_admin(c.bootstrap_servers)
    # sent to a broker that is not the controller: it forwards to the controller
    # (confluent-kafka 2.16's binding refuses every keyword argument of elect_leaders)
    res = admin.elect_leaders(ElectionType.PREFERRED,
                              [CTopicPartition("pref", 0)]).result(timeout=20)
    assert res[CTopicPartition("pref", 0)] is None
    wait_for(lambda: _state(c, "pref")["leader"] == 1, what="the preferred leader")
    again = admin.elect_leaders(ElectionType.PREFERRED,
                                [CTopicPartition("pref", 0)]).result(timeout=20)
    assert again[CTopicPartition("pref", 0)].code() == ELECTION_NOT_NEEDED
    # every broker answers it, controller or not (forwarded over the internal transport)
    for broker in c.brokers.values():
        r = roundtrip(broker.bootstrap_servers, 43, 2, election_type=0,
                      topic_partitions=[("pref", [0]), ("pref", [9])], timeout_ms=5000)
        got = {p.partition_id: p.error_code for t in r.replica_election_results
               for p in t.partition_result}
        assert got == {0: ELECTION_NOT_NEEDED, 9: UNKNOWN_TOPIC_OR_PARTITION}


def test_unclean_election_only_without_a_live_isr_replica(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(3)
    ctl = c.controller_id()
    a, b = [x for x in sorted(c.brokers) if x != ctl]  # the controller stays alive
    cl = c.client()
    cl.create_topic("u", 1, 2, assignment={0: [a, b]})
    cl.produce("u", 0, [b"a", b"b"])
    kp = _kp_admin(c.bootstrap_servers)
    try:
        # a leader exists: an unclean election is not needed
        r = kp.elect_leaders(1, {"u": [0]}, raise_errors=False)
        assert r.replica_election_results[0].partition_result[0].error_code == \
            ELECTION_NOT_NEEDED
        c.pause(b)  # b falls out of the ISR
        wait_for(lambda: _state(c, "u")["isr"] == [a], 20, f"broker {b} out of the ISR")
        c.kill(a)  # the only ISR replica dies: the partition goes offline
        c.resume(b)
        wait_for(lambda: _state(c, "u")["leader"] == -1, 20, "the partition offline")
        # its session may have expired while paused: it registers again
        wait_for(lambda: b in c.controller().live, 20, f"broker {b} registered again")
        r = kp.elect_leaders(0, {"u": [0]}, raise_errors=False)
        assert r.replica_election_results[0].partition_result[0].error_code == \
            PREFERRED_LEADER_NOT_AVAILABLE
        r = kp.elect_leaders(1, {"u": [0]}, raise_errors=False)
        assert r.error_code == 0
        assert r.replica_election_results[0].partition_result[0].error_code == 0
    finally:
        kp.close()
    st = wait_for(lambda: (s := _state(c, "u"))["leader"] == b and s, what="unclean leader")
    assert st["isr"] == [b]
    c.kill(b)
    wait_for(lambda: _state(c, "u")["leader"] == -1, 20, "no replica left")
    r = roundtrip(c.brokers[ctl].bootstrap_servers, 43, 2, election_type=1,
                  topic_partitions=[("u", [0])], timeout_ms=5000)
    assert r.replica_election_results[0].partition_result[0].error_code == \
        ELIGIBLE_LEADERS_NOT_AVAILABLE


# ---------------------------------------------------------------- reassignments

def test_reassignment_completes_and_is_listed(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(3)
    cl = c.client()
    cl.create_topic("r", 2, 2, assignment={0: [1, 2], 1: [2, 3]})
    cl.produce("r", 0, [b"x%d" % i for i in range(20)])
    kp = _kp_admin(c.bootstrap_servers)
    try:
        got = kp.alter_partition_reassignments({
            KTopicPartition("r", 0): [3, 1],
            KTopicPartition("r", 7): [1, 2],
            KTopicPartition("r", 1): [2, 9]})
        assert got[KTopicPartition("r", 0)] is None
        assert got[KTopicPartition("r", 7)].errno == UNKNOWN_TOPIC_OR_PARTITION
        assert got[KTopicPartition("r", 1)] is InvalidReplicationAssignmentError
        listed = kp.list_partition_reassignments()
        if listed:  # the controller may be done already
            assert listed[KTopicPartition("r", 0)] == {
                "replicas": [3, 1, 2], "adding_replicas": [3], "removing_replicas": [2]}
        wait_for(lambda: _state(c, "r")["replicas"] == [3, 1]
                 and not kp.list_partition_reassignments(), 30, "the reassignment done")
        got = kp.alter_partition_reassignments({KTopicPartition("r", 0): None})
        assert got[KTopicPartition("r", 0)] is NoReassignmentInProgressError
    finally:
        kp.close()
    wait_for(lambda: c.brokers[2].log_manager.get_log(TopicPartition("r", 0)) is None,
             what="the replica left out removed from broker 2")
    assert [r.value for r in cl.read_all("r", 0)] == [b"x%d" % i for i in range(20)]


def test_reassignment_cancelled_goes_back_to_the_original_replicas(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    # a paused broker stays registered for the test's length
    c = make_kafka_cluster(3, overrides={"zookeeper.session.timeout.ms": "30000"})
    cl = c.client()
    cl.create_topic("cx", 1, 2, assignment={0: [1, 2]})
    c.pause(3)  # the new replica cannot catch up: the reassignment stays pending
    try:
        r = roundtrip(c.brokers[1].bootstrap_servers, 45, 0, timeout_ms=5000, topics=[
            ("cx", [(0, [1, 3])])])
        assert r.error_code == 0
        assert r.responses[0].partitions[0].error_code == 0
        listed = roundtrip(c.brokers[2].bootstrap_servers, 46, 0, timeout_ms=5000,
                           topics=None)
        assert [(t.name, p.partition_index, list(p.replicas), list(p.adding_replicas),
                 list(p.removing_replicas)) for t in listed.topics for p in t.partitions] == \
            [("cx", 0, [1, 3, 2], [3], [2])]
        r = roundtrip(c.brokers[2].bootstrap_servers, 45, 1, timeout_ms=5000,
                      allow_replication_factor_change=False, topics=[("cx", [(0, [1, 2, 3])])])
        part = r.responses[0].partitions[0]
        assert part.error_code == 38 and "replication factor" in part.error_message
        # a second request replaces the target and keeps the original replicas
        r = roundtrip(c.brokers[2].bootstrap_servers, 45, 1, timeout_ms=5000,
                      allow_replication_factor_change=False, topics=[("cx", [(0, [2, 3])])])
        assert r.responses[0].partitions[0].error_code == 0
        listed = roundtrip(c.brokers[3 - 1].bootstrap_servers, 46, 0, timeout_ms=5000,
                           topics=[("cx", [0])])
        part = listed.topics[0].partitions[0]
        assert (list(part.replicas), list(part.adding_replicas),
                list(part.removing_replicas)) == ([2, 3, 1], [3], [1])
        r = roundtrip(c.brokers[1].bootstrap_servers, 45, 0, timeout_ms=5000,
                      topics=[("cx", [(0, None)])])
        assert r.responses[0].partitions[0].error_code == 0
        listed = roundtrip(c.brokers[1].bootstrap_servers, 46, 0, timeout_ms=5000,
                           topics=None)
        assert listed.topics == []
    finally:
        c.resume(3)
    wait_for(lambda: not cl.reassignments() and _state(c, "cx")["replicas"] == [1, 2],
             30, "the partition back on its original replicas")
    wait_for(lambda: c.brokers[3].log_manager.get_log(TopicPartition("cx", 0)) is None,
             what="the added replica removed")


def test_reassignment_standalone(kafka_broker: Broker) -> None:
    kafka_broker.create_topic("s", 1)
    me = kafka_broker.broker_id
    r = roundtrip(kafka_broker.bootstrap_servers, 45, 0, timeout_ms=5000, topics=[
        ("s", [(0, [me]), (1, [me])]), ("x", [(0, None)])])
    got = {(t.name, p.partition_index): p.error_code for t in r.responses
           for p in t.partitions}
    assert got == {("s", 0): 0, ("s", 1): UNKNOWN_TOPIC_OR_PARTITION,
                   ("x", 0): UNKNOWN_TOPIC_OR_PARTITION}
    r = roundtrip(kafka_broker.bootstrap_servers, 45, 0, timeout_ms=5000, topics=[
        ("s", [(0, [me, 2])])])
    part = r.responses[0].partitions[0]
    assert part.error_code == INVALID_REPLICA_ASSIGNMENT and "not registered" in \
        part.error_message
    r = roundtrip(kafka_broker.bootstrap_servers, 45, 0, timeout_ms=5000, topics=[
        ("s", [(0, None)])])
    assert r.responses[0].partitions[0].error_code == NO_REASSIGNMENT_IN_PROGRESS
    assert roundtrip(kafka_broker.bootstrap_servers, 46, 0, timeout_ms=5000,
                     topics=None).topics == []


def test_election_of_more_partitions_than_the_bound_is_refused(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**{"max.request.partitions": "2"})
    b.create_topic("e", 2)
    r = roundtrip(b.bootstrap_servers, 43, 2, election_type=0,
                  topic_partitions=[("e", [0, 1]), ("x", [0])], timeout_ms=1000)
    assert r.error_code == 42  # INVALID_REQUEST
    got = [(t.topic, p.partition_id, p.error_code, p.error_message) for t in
           r.replica_election_results for p in t.partition_result]
    assert [g[:3] for g in got] == [("e", 0, 42), ("e", 1, 42), ("x", 0, 42)]
    assert "max.request.partitions" in got[0][3]
