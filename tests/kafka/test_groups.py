"""Consumer groups, the classic protocol (part 4): FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, ListGroups, DescribeGroups, DeleteGroups, request by request over raw
connections (kafka-python's message classes), then with real clients."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.groups import OFFSETS_TOPIC, is_internal, java_string_hash, partition_for
from kafka_tiers.kafka.groups.group import Group, GroupState, Member
from tests.kafka.group_requests import (
    DELETE,
    DESCRIBE,
    FIND_COORDINATOR,
    LIST,
    RawMember,
    find_coordinator,
    subscription,
)
from tests.kafka.raw_requests import RawConnection
from tests.kafka.targets import KafkaTarget

#: members joining an empty group within 150 ms share its first generation
FAST = {"group.initial.rebalance.delay.ms": "150", "offsets.topic.num.partitions": "3"}


@pytest.fixture
def broker(make_kafka_broker: Callable[..., Broker]) -> Broker:
    """A standalone broker whose groups rebalance at once, with topic ``t`` (6 partitions)."""
    b = make_kafka_broker(**FAST)
    b.create_topic("t", 6)
    return b


def wait_for(pred: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def describe(conn: RawConnection, group: str, version: int = 5) -> object:
    return conn.call(DESCRIBE, version, groups=[group],
                     include_authorized_operations=False).groups[0]


# ------------------------------------------------------------------ placement


def test_java_string_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("aé") == 97 * 31 + 0xE9  # UTF-16 code units
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # a surrogate pair
    # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0 (Math.abs would stay negative)
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50
    assert is_internal(OFFSETS_TOPIC) and not is_internal("t")


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_every_version(broker: Broker, version: int) -> None:
    host, port = broker.bootstrap_servers.split(":")
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = find_coordinator(conn, "g1", version)
    if version >= 4:
        (entry,) = resp.coordinators
        assert (entry.key, entry.error_code, entry.node_id, entry.host, entry.port) == \
            ("g1", 0, 1, host, int(port))
    else:
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, host,
                                                                        int(port))
    # created on first need, with offsets.topic.num.partitions partitions
    assert broker.topics()[OFFSETS_TOPIC].partitions == 3


def test_find_coordinator_batches_keys_and_refuses_other_key_types(broker: Broker) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["a", "b", "c"])
        assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == \
            [("a", 0, 1), ("b", 0, 1), ("c", 0, 1)]
        # transactions are out of scope: the transaction APIs' one fatal refusal
        txn = conn.call(FIND_COORDINATOR, 3, key="tx", key_type=1)
        assert txn.error_code == 53 and "tx" in txn.error_message  # TRANSACTIONAL_ID_AUTH..
        txn4 = conn.call(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["tx"])
        assert txn4.coordinators[0].error_code == 53
        share = conn.call(FIND_COORDINATOR, 6, key_type=2, coordinator_keys=["s"])
        assert share.coordinators[0].error_code == 42  # INVALID_REQUEST


def test_find_coordinator_needs_replication_factor_brokers(
        make_kafka_cluster: Callable[..., object]) -> None:
    """Kafka's rule: the offsets topic is not created while fewer brokers than
    offsets.topic.replication.factor are live (COORDINATOR_NOT_AVAILABLE)."""
    cluster = make_kafka_cluster(brokers=1, overrides=FAST)
    with RawConnection(cluster.bootstrap_servers) as conn:  # type: ignore[attr-defined]
        resp = find_coordinator(conn, "g1", 3)
    assert resp.error_code == 15
    assert "offsets.topic.replication.factor=3" in resp.error_message
    # the message says which key to lower, and to what
    assert "set offsets.topic.replication.factor=1 on every broker" in resp.error_message


@pytest.mark.parametrize("brokers", [1, 2])
def test_cluster_start_of_fewer_than_three_brokers_serves_groups(
        tmp_path: Path, brokers: int) -> None:
    """`kafka-tiers cluster start --brokers 1|2` sets offsets.topic.replication.factor to
    min(3, brokers) unless given: FindCoordinator finds a coordinator (with Kafka's default 3
    it would answer COORDINATOR_NOT_AVAILABLE forever), and the topic has that many
    replicas."""
    proc = subprocess.Popen([sys.executable, "-m", "kafka_tiers", "cluster", "start",
                             "--brokers", str(brokers), "--dir", str(tmp_path / "c"),
                             "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2], start_new_session=True)
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
        assert doc["event"] == "running", doc
        boot = doc["bootstrap_servers"].split(",")[0]
        deadline = time.monotonic() + 20
        with RawConnection(boot) as conn:
            while True:
                resp = find_coordinator(conn, "dev", 3)
                if resp.error_code == 0:
                    break
                assert time.monotonic() < deadline, resp.error_message
                time.sleep(0.1)
            md = conn.call(3, 9, topics=[(OFFSETS_TOPIC, False)],
                           allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False)
        replicas = {len(p.replica_nodes) for t in md.topics for p in t.partitions}
        assert replicas == {brokers}
    finally:
        os.kill(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_find_coordinator_cluster_places_by_hash(
        make_kafka_cluster: Callable[..., object]) -> None:
    """In a cluster the coordinator is the leader of partition hash % n, as advertised on
    the listener the request came in on; every broker answers the same."""
    cluster = make_kafka_cluster(brokers=3, overrides=FAST)
    boot = cluster.bootstrap_servers.split(",")  # type: ignore[attr-defined]
    with RawConnection(boot[0]) as conn:
        first = find_coordinator(conn, "g1", 3)
    assert first.error_code == 0
    topic = cluster.broker(1).metadata.topic(OFFSETS_TOPIC)  # type: ignore[attr-defined]
    assert len(topic.partitions) == 3 and all(len(r) == 3 for r in topic.partitions.values())
    from kafka_tiers.api import TopicPartition
    from kafka_tiers.kafka.cluster_state import ClusterState
    p = partition_for("g1", 3)
    view = ClusterState(cluster.broker(1), "PLAINTEXT").partition(  # type: ignore[attr-defined]
        TopicPartition(OFFSETS_TOPIC, p))
    assert first.node_id == view.leader
    assert f"{first.host}:{first.port}" in boot
    for addr in boot[1:]:
        with RawConnection(addr) as conn:
            again = find_coordinator(conn, "g1", 2)
        assert (again.error_code, again.node_id) == (0, first.node_id)


def test_find_coordinator_on_every_broker_at_once_creates_the_topic_once(
        make_kafka_cluster: Callable[..., object]) -> None:
    """The first FindCoordinator of a fresh cluster, sent to every broker at the same moment
    (as a group of consumers does): each broker asks the controller to create the offsets
    topic; one creation wins and the others see it exists, so the topic keeps
    offsets.topic.num.partitions partitions and every broker names the same coordinator.
    (Creating once grew the topic by the count on every losing request: brokers then hashed
    one group to different partitions and the group never formed.)"""
    cluster: Any = make_kafka_cluster(brokers=3, overrides=FAST)
    boot = cluster.bootstrap_servers.split(",")
    start = threading.Barrier(len(boot) * 2)
    answers: list[tuple[int, int]] = []
    failures: list[str] = []

    def ask(addr: str) -> None:
        try:
            with RawConnection(addr) as conn:
                start.wait(10)
                deadline = time.monotonic() + 20
                while True:
                    resp = find_coordinator(conn, "same-group", 3)
                    if resp.error_code == 0 or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                answers.append((resp.error_code, resp.node_id))
        except Exception as exc:  # reported by the test
            failures.append(repr(exc))

    threads = [threading.Thread(target=ask, args=(a,)) for a in boot * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    assert len(answers) == len(threads) and len(set(answers)) == 1 and answers[0][0] == 0
    for b in (1, 2, 3):
        topic = cluster.broker(b).metadata.topic(OFFSETS_TOPIC)
        assert sorted(topic.partitions) == [0, 1, 2]


# ------------------------------------------------------------------ the state machine


def test_join_requires_member_id_then_forms_a_group(broker: Broker) -> None:
    """KIP-394: v4+ first join gets MEMBER_ID_REQUIRED with the member id; the second join
    with it completes the rebalance; the leader gets the members, SyncGroup hands out the
    assignment, the group is Stable."""
    a = RawMember(broker.bootstrap_servers, "g")
    with RawConnection(broker.bootstrap_servers) as conn:
        find_coordinator(conn, "g")
        first = a.join_once()
        assert first.error_code == 79 and first.member_id.startswith("kt-raw-")
        resp = a.join_once()
        assert resp.error_code == 0 and resp.generation_id == 1
        assert resp.leader == a.member_id and resp.protocol_name == "range"
        assert [(m.member_id, m.metadata) for m in resp.members] == \
            [(a.member_id, subscription("t"))]
        assert describe(conn, "g").group_state == "CompletingRebalance"
        sync = a.sync([(a.member_id, b"assignment-a")])
        assert (sync.error_code, sync.assignment, sync.protocol_name) == \
            (0, b"assignment-a", "range")
        d = describe(conn, "g")
        assert (d.group_state, d.protocol_type, d.protocol_data) == \
            ("Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.member_assignment) for m in d.members] == \
            [(a.member_id, "kt-raw", b"assignment-a")]
        assert a.heartbeat() == 0
    a.close()


@pytest.mark.parametrize("version", range(0, 10))
def test_membership_apis_every_version(broker: Broker, version: int) -> None:
    """JoinGroup v0-v9 (v0-v3: a member id at once; v4+: MEMBER_ID_REQUIRED first), with
    SyncGroup, Heartbeat and LeaveGroup at their matching versions."""
    m = RawMember(broker.bootstrap_servers, f"v-{version}")
    find_coordinator(m.conn, m.group)
    resp = m.join_once(version)
    if version >= 4:
        assert (resp.error_code, resp.generation_id) == (79, -1) and resp.member_id
        resp = m.join_once(version)
    assert (resp.error_code, resp.generation_id, resp.leader) == (0, 1, m.member_id)
    assert resp.protocol_name == "range"
    sync_v, hb_v, leave_v = min(version, 5), min(version, 4), min(version, 5)
    assert m.sync([(m.member_id, b"x")], version=sync_v).assignment == b"x"
    assert m.heartbeat(hb_v) == 0
    left = m.leave(leave_v)
    assert left.error_code == 0
    if leave_v >= 3:
        assert [(x.member_id, x.error_code) for x in left.members] == [(m.member_id, 0)]
    with RawConnection(broker.bootstrap_servers) as conn:
        assert describe(conn, m.group).group_state == "Empty"
    m.close()


def test_rebalance_with_three_members_and_heartbeats(broker: Broker) -> None:
    """A second and third member joining a Stable group: the others learn it by heartbeat
    (REBALANCE_IN_PROGRESS), rejoin, and all get generation 2 with one leader; followers
    get no member list; the leader's assignment reaches everyone."""
    boot = broker.bootstrap_servers
    a = RawMember(boot, "g")
    find_coordinator(a.conn, "g")
    a.join()
    a.sync([(a.member_id, b"all")])
    b, c = RawMember(boot, "g"), RawMember(boot, "g")
    assert b.join_once().error_code == 79  # both pending before either joins: one rebalance
    assert c.join_once().error_code == 79
    tb, tc = b.join_async(), c.join_async()
    wait_for(lambda: a.heartbeat() == 27, what="REBALANCE_IN_PROGRESS on a's heartbeat")
    a.join()
    tb.join(10)
    tc.join(10)
    gens = {m.join_response.generation_id for m in (a, b, c)}
    assert gens == {2}
    leaders = {m.join_response.leader for m in (a, b, c)}
    assert leaders == {a.member_id}  # the leader kept its place
    assert len(a.join_response.members) == 3
    assert b.join_response.members == [] and c.join_response.members == []
    results: dict[str, bytes] = {}

    def follower_sync(m: RawMember) -> None:
        results[m.member_id] = m.sync().assignment

    import threading
    threads = [threading.Thread(target=follower_sync, args=(m,)) for m in (b, c)]
    for t in threads:
        t.start()
    time.sleep(0.1)  # the followers are parked until the leader syncs
    assert results == {}
    a.sync([(a.member_id, b"A"), (b.member_id, b"B")])  # c left out: an empty assignment
    for t in threads:
        t.join(10)
    assert results == {b.member_id: b"B", c.member_id: b""}
    assert {a.heartbeat(), b.heartbeat(), c.heartbeat()} == {0}
    for m in (a, b, c):
        m.close()


def test_a_slow_assignment_write_holds_up_no_heartbeat(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's SyncGroup stores the assignment with acks=all without holding the group:
    while that write waits (here: held by the test, as a loaded cluster's replication), the
    other members' Heartbeats are answered at once (a stalled heartbeat expired sessions and
    restarted the rebalance under load); once written, every member gets its assignment.
    The same for an OffsetCommit's write."""
    from kafka_tiers.kafka.groups.store import OffsetsPartition

    boot = broker.bootstrap_servers
    a, b = RawMember(boot, "w"), RawMember(boot, "w")
    find_coordinator(a.conn, "w")
    assert a.join_once().error_code == 79  # both pending first: one generation
    assert b.join_once().error_code == 79
    ta, tb = a.join_async(), b.join_async()
    ta.join(10)
    tb.join(10)
    leader, follower = (a, b) if a.join_response.leader == a.member_id else (b, a)
    assert follower.join_response.leader == leader.member_id
    writing, release = threading.Event(), threading.Event()
    original = OffsetsPartition.append

    def held_append(self: OffsetsPartition, records: Any) -> None:
        writing.set()
        release.wait(20)
        original(self, records)

    monkeypatch.setattr(OffsetsPartition, "append", held_append)
    synced: list[Any] = []
    t = threading.Thread(target=lambda: synced.append(leader.sync(
        [(leader.member_id, b"L"), (follower.member_id, b"F")])), daemon=True)
    t.start()
    try:
        assert writing.wait(10)
        started = time.monotonic()
        assert follower.heartbeat() == 0  # CompletingRebalance: NONE, not parked
        assert leader.conn is not follower.conn
        assert time.monotonic() - started < 2.0
        assert synced == []  # the leader is still waiting for its write
    finally:
        release.set()
    t.join(10)
    assert [r.error_code for r in synced] == [0] and synced[0].assignment == b"L"
    assert follower.sync().assignment == b"F"
    assert {a.heartbeat(), b.heartbeat()} == {0}
    # an OffsetCommit's replicated write does not hold the group either
    writing.clear()
    release.clear()
    committed: list[dict[tuple[str, int], int]] = []
    t = threading.Thread(target=lambda: committed.append(leader.commit({("t", 0): 5})),
                         daemon=True)
    t.start()
    try:
        assert writing.wait(10)
        started = time.monotonic()
        assert follower.heartbeat() == 0
        assert time.monotonic() - started < 2.0
        assert committed == []
    finally:
        release.set()
    t.join(10)
    assert committed == [{("t", 0): 0}]
    a.close()
    b.close()


def test_protocol_selection_most_votes_among_common(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Each member votes for its first protocol every member supports; the most votes win."""
    broker = make_kafka_broker(**{"group.initial.rebalance.delay.ms": "300",
                                  "offsets.topic.num.partitions": "1"})
    boot = broker.bootstrap_servers
    sub = subscription("t")
    members = [RawMember(boot, "p", protocols=[("roundrobin", sub), ("range", sub)]),
               RawMember(boot, "p", protocols=[("range", sub), ("roundrobin", sub)]),
               RawMember(boot, "p", protocols=[("range", sub), ("cooperative-sticky", sub),
                                               ("roundrobin", sub)])]
    find_coordinator(members[0].conn, "p")
    for m in members:  # all three join within the initial delay: one generation
        assert m.join_once().error_code == 79
    threads = [m.join_async() for m in members]
    for t in threads:
        t.join(10)
    assert {m.join_response.generation_id for m in members} == {1}
    assert {m.join_response.protocol_name for m in members} == {"range"}
    odd = RawMember(boot, "p", protocols=[("sticky", sub)])  # supported by no one else
    assert odd.join().error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
    other_type = RawMember(boot, "p", protocol_type="connect",
                           protocols=[("range", sub)])
    assert other_type.join().error_code == 23
    for m in [*members, odd, other_type]:
        m.close()


def test_session_timeout_bounds(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**FAST, **{"group.min.session.timeout.ms": "1000",
                                     "group.max.session.timeout.ms": "5000"})
    for session, code in ((999, 26), (5001, 26), (1000, 79)):
        m = RawMember(b.bootstrap_servers, "s", session_ms=session)
        find_coordinator(m.conn, "s")
        assert m.join_once().error_code == code
        m.close()


def test_session_expiry_removes_member_and_empties_group(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**FAST, **{"group.min.session.timeout.ms": "100"})
    m = RawMember(b.bootstrap_servers, "e", session_ms=300, rebalance_ms=1000)
    find_coordinator(m.conn, "e")
    m.join()
    m.sync([(m.member_id, b"x")])
    with RawConnection(b.bootstrap_servers) as conn:
        assert describe(conn, "e").group_state == "Stable"
        wait_for(lambda: describe(conn, "e").group_state == "Empty", 5,
                 "the silent member to be removed")
        assert describe(conn, "e").members == []
    assert m.heartbeat() == 25  # UNKNOWN_MEMBER_ID
    m.close()


def test_heartbeat_errors(broker: Broker) -> None:
    m = RawMember(broker.bootstrap_servers, "h")
    find_coordinator(m.conn, "h")
    m.join()
    m.sync([(m.member_id, b"")])
    good = m.generation
    m.generation = good + 5
    assert m.heartbeat() == 22  # ILLEGAL_GENERATION
    m.generation = good
    real = m.member_id
    m.member_id = "nobody"
    assert m.heartbeat() == 25  # UNKNOWN_MEMBER_ID
    m.member_id = real
    assert m.heartbeat() == 0
    stranger = RawMember(broker.bootstrap_servers, "no-such-group")
    stranger.member_id = "x"
    assert stranger.heartbeat() == 25
    m.close()
    stranger.close()


def test_initial_rebalance_delay_gathers_members(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """group.initial.rebalance.delay.ms: members joining an empty group within the delay
    end up in the same first generation."""
    b = make_kafka_broker(**{"group.initial.rebalance.delay.ms": "400",
                             "offsets.topic.num.partitions": "1"})
    ms = [RawMember(b.bootstrap_servers, "d") for _ in range(3)]
    find_coordinator(ms[0].conn, "d")
    started = time.monotonic()
    threads = []
    for m in ms:
        threads.append(m.join_async())
        time.sleep(0.1)
    for t in threads:
        t.join(10)
    assert time.monotonic() - started >= 0.4
    assert {m.join_response.generation_id for m in ms} == {1}
    assert len([m for m in ms if m.join_response.members]) == 1
    for m in ms:
        m.close()


def test_leave_group_batch_and_rebalance(broker: Broker) -> None:
    boot = broker.bootstrap_servers
    a, b = RawMember(boot, "l"), RawMember(boot, "l")
    find_coordinator(a.conn, "l")
    assert a.join_once().error_code == 79
    assert b.join_once().error_code == 79
    ta, tb = a.join_async(), b.join_async()
    ta.join(10)
    tb.join(10)
    leader = a if a.join_response.members else b
    leader.sync([(a.member_id, b"a"), (b.member_id, b"b")])
    with RawConnection(boot) as conn:
        resp = conn.call(13, 5, group_id="l", members=[(b.member_id, None, "bye"),
                                                         ("ghost", None, None)])
        assert resp.error_code == 0
        assert [(r.member_id, r.error_code) for r in resp.members] == \
            [(b.member_id, 0), ("ghost", 25)]
        # the remaining member must rejoin; alone, it completes the next generation at once
        assert a.heartbeat() == 27
        a.join()
        assert a.join_response.generation_id == 2
        assert [m.member_id for m in describe(conn, "l").members] == [a.member_id]
        assert a.leave(2).error_code == 0
        assert describe(conn, "l").group_state == "Empty"
    a.close()
    b.close()


def test_static_member_rejoin_fences_the_old_id(broker: Broker) -> None:
    """KIP-345: a static member joining again with an unknown member id takes its old
    place without a rebalance (Stable, same protocol); the old member id is fenced."""
    boot = broker.bootstrap_servers
    m = RawMember(boot, "st", instance_id="instance-1")
    find_coordinator(m.conn, "st")
    resp = m.join_once()
    assert resp.error_code == 0  # static members get no MEMBER_ID_REQUIRED
    m.sync([(m.member_id, b"mine")])
    old_id = m.member_id
    again = RawMember(boot, "st", instance_id="instance-1")
    resp2 = again.join_once()
    assert resp2.error_code == 0 and resp2.member_id != old_id
    assert resp2.generation_id == m.generation  # no rebalance
    assert again.sync().assignment == b"mine"
    assert m.heartbeat() == 82  # FENCED_INSTANCE_ID
    assert again.heartbeat() == 0
    # an admin removes a static member by its instance id alone (LeaveGroup v3+)
    with RawConnection(boot) as conn:
        resp = conn.call(13, 4, group_id="st", members=[("", "instance-1"), ("", "nobody")])
        assert [(r.group_instance_id, r.error_code) for r in resp.members] == \
            [("instance-1", 0), ("nobody", 25)]
        assert describe(conn, "st").group_state == "Empty"
    m.close()
    again.close()


def test_group_max_size(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**FAST, **{"group.max.size": "1"})
    a = RawMember(b.bootstrap_servers, "max")
    find_coordinator(a.conn, "max")
    a.join()
    a.sync([(a.member_id, b"")])
    extra = RawMember(b.bootstrap_servers, "max")
    assert extra.join().error_code == 81  # GROUP_MAX_SIZE_REACHED
    a.close()
    extra.close()


def test_pending_sync_expiry_rebalances(make_kafka_broker: Callable[..., Broker]) -> None:
    """A member that never sends SyncGroup within the rebalance timeout is removed and the
    group rebalances (Kafka's pending-sync expiration)."""
    b = make_kafka_broker(**FAST, **{"group.min.session.timeout.ms": "100"})
    boot = b.bootstrap_servers
    a, lazy = RawMember(boot, "ps", rebalance_ms=400), RawMember(boot, "ps", rebalance_ms=400)
    find_coordinator(a.conn, "ps")
    assert a.join_once().error_code == 79
    assert lazy.join_once().error_code == 79
    ta, tl = a.join_async(), lazy.join_async()
    ta.join(10)
    tl.join(10)
    leader = a if a.join_response.members else lazy
    if leader is lazy:
        a, lazy = lazy, a
    a.sync([(a.member_id, b"a"), (lazy.member_id, b"l")])
    with RawConnection(boot) as conn:
        wait_for(lambda: lazy.member_id not in
                 [m.member_id for m in describe(conn, "ps").members], 5,
                 "the member without SyncGroup to be removed")
    a.close()
    lazy.close()


# ------------------------------------------------------------------ admin APIs


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_groups_every_version(broker: Broker, version: int) -> None:
    m = RawMember(broker.bootstrap_servers, "dg")
    find_coordinator(m.conn, "dg")
    m.join()
    m.sync([(m.member_id, b"asg")])
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.call(DESCRIBE, version, groups=["dg", "unknown"],
                         include_authorized_operations=version >= 3)
    known, unknown = resp.groups
    assert (known.error_code, known.group_state, known.protocol_data) == (0, "Stable",
                                                                          "range")
    assert [(x.member_id, x.member_metadata, x.member_assignment) for x in known.members] \
        == [(m.member_id, subscription("t"), b"asg")]
    assert unknown.group_state == "Dead"
    assert unknown.error_code == (69 if version >= 6 else 0)
    m.close()


@pytest.mark.parametrize("version", range(0, 6))
def test_list_groups_every_version(broker: Broker, version: int) -> None:
    m = RawMember(broker.bootstrap_servers, "lg")
    find_coordinator(m.conn, "lg")
    m.join()
    m.sync([(m.member_id, b"")])
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.call(LIST, version, states_filter=[], types_filter=[])
        assert resp.error_code == 0
        assert [(g.group_id, g.protocol_type) for g in resp.groups] == [("lg", "consumer")]
        if version >= 4:
            assert resp.groups[0].group_state == "Stable"
            empty = conn.call(LIST, version, states_filter=["Empty"], types_filter=[])
            assert empty.groups == []
        if version >= 5:
            assert resp.groups[0].group_type == "classic"
            none = conn.call(LIST, version, states_filter=[], types_filter=["consumer"])
            assert none.groups == []
    m.close()


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_groups(broker: Broker, version: int) -> None:
    m = RawMember(broker.bootstrap_servers, "del")
    find_coordinator(m.conn, "del")
    m.join()
    m.sync([(m.member_id, b"")])
    assert m.commit({("t", 0): 5}) == {("t", 0): 0}
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.call(DELETE, version, groups_names=["del", "nope"])
        assert [(r.group_id, r.error_code) for r in resp.results] == \
            [("del", 68), ("nope", 69)]  # NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND
        m.leave()
        resp = conn.call(DELETE, version, groups_names=["del"])
        assert resp.results[0].error_code == 0
        assert describe(conn, "del").group_state == "Dead"
        from tests.kafka.group_requests import fetch
        assert fetch(conn, "del", {"t": [0]})[1] == {("t", 0): (-1, "", 0)}
    m.close()


# ------------------------------------------------------------------ the group object


def test_group_state_machine_refuses_invalid_transitions() -> None:
    g = Group("x", 0)
    with pytest.raises(RuntimeError, match="Empty -> Stable"):
        g.transition(GroupState.STABLE, 1)
    g.transition(GroupState.PREPARING_REBALANCE, 1)
    with pytest.raises(RuntimeError):
        g.transition(GroupState.STABLE, 2)
    g.add(Member("m1", None, "c", "/h", 1000, 1000, "consumer", (("range", b""),)), None)
    g.init_next_generation(3)
    assert (g.state, g.generation, g.protocol_name) == (GroupState.COMPLETING_REBALANCE, 1,
                                                        "range")
    g.transition(GroupState.STABLE, 4)
    g.transition(GroupState.DEAD, 5)
    g.transition(GroupState.DEAD, 6)


# ------------------------------------------------------------------ real clients


class ConfluentMember:
    """A confluent-kafka consumer polling in a thread of its own, recording what it reads
    and its current assignment."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str,
                 seen: list[tuple[int, int, bytes]], lock: threading.Lock) -> None:
        from confluent_kafka import Consumer

        from tests.kafka.clients import confluent_consumer_conf

        self.consumer = Consumer(confluent_consumer_conf(
            bootstrap, group, partition_assignment_strategy=assignor,
            auto_commit_interval_ms=200))
        self.consumer.subscribe([topic])
        self.seen, self.lock = seen, lock
        self.assigned: set[int] = set()
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                msg = self.consumer.poll(0.1)
                self.assigned = {tp.partition for tp in self.consumer.assignment()}
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                with self.lock:
                    self.seen.append((msg.partition(), msg.offset(), msg.value()))
            try:
                self.consumer.commit(asynchronous=False)
            except KafkaException as exc:  # nothing new since the last auto-commit: fine
                if exc.args[0].code() != KafkaError._NO_OFFSET:
                    raise
        except Exception as exc:  # reported by the test
            self.errors.append(repr(exc))
        finally:
            self.consumer.close()
            self.closed.set()

    def close(self) -> None:
        self.stop.set()
        self.closed.wait(15)


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    from tests.kafka.clients import confluent_producer
    with confluent_producer(bootstrap, acks="all") as producer:
        for i, v in enumerate(values):
            producer.produce(topic, v, partition=i % partitions)
        assert producer.flush(15) == 0


@pytest.mark.parametrize("kind", ["standalone", "cluster"])
@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_group_of_three_every_record_once(
        make_kafka_broker: Callable[..., Broker], make_kafka_cluster: Callable[..., Any],
        assignor: str, kind: str) -> None:
    """Three librdkafka consumers share 6 partitions with each client-side assignor (the
    broker only picks the protocol; cooperative-sticky rebalances several times in a row); a
    member leaving hands its partitions over from the offsets it committed; every record is
    read exactly once. Standalone, and on a 3-broker cluster (offsets replicated 3 times)."""
    if kind == "standalone":
        b: Any = make_kafka_broker(**FAST)
        b.create_topic("six", 6)
    else:
        b = make_kafka_cluster(brokers=3, overrides=FAST)
        KafkaTarget("cluster", b).create_topic("six", 6)
    seen: list[tuple[int, int, bytes]] = []
    lock = threading.Lock()
    members = [ConfluentMember(b.bootstrap_servers, f"g-{assignor}", "six", assignor, seen,
                               lock) for _ in range(3)]
    try:
        def covered(ms: list[ConfluentMember], each: bool) -> bool:
            sets = [m.assigned for m in ms]
            union = set().union(*sets)
            disjoint = sum(len(s) for s in sets) == len(union)
            return union == set(range(6)) and disjoint and (all(sets) or not each)

        wait_for(lambda: covered(members, True), 30, "3 members sharing 6 partitions")
        first = [f"a{i}".encode() for i in range(60)]
        _produce(b.bootstrap_servers, "six", first, 6)
        wait_for(lambda: len(seen) >= 60, 20, "the first 60 records")
        members[0].close()
        wait_for(lambda: covered(members[1:], True), 30, "2 members sharing 6 partitions")
        second = [f"b{i}".encode() for i in range(60)]
        _produce(b.bootstrap_servers, "six", second, 6)
        wait_for(lambda: len(seen) >= 120, 20, "the next 60 records")
        time.sleep(0.3)
    finally:
        for m in members:
            m.close()
    values = sorted(v for _, _, v in seen)
    assert values == sorted(first + second)  # each once: none lost, none twice
    assert len({(p, o) for p, o, _ in seen}) == 120
    assert not [e for m in members for e in m.errors]


def shared(shares: list[set[int]], partitions: int) -> bool:
    """Whether every consumer has partitions, none twice, all of them covered."""
    union = set().union(*shares)
    return (all(shares) and sum(len(x) for x in shares) == len(union)
            and union == set(range(partitions)))


def test_kafka_python_group(broker: Broker) -> None:
    """Two kafka-python 3.x consumers (each polling in its own thread: a member rejoins only
    from its poll) split the topic and commit; a third one started later in the same group
    reads only what came after the commits."""
    from kafka import KafkaConsumer

    from tests.kafka.clients import kafka_python_consumer_conf

    conf = kafka_python_consumer_conf(broker.bootstrap_servers, "kp", consumer_timeout_ms=500,
                                      enable_auto_commit=False)
    got: list[bytes] = []
    shares: list[set[int]] = [set(), set()]
    done = threading.Event()
    lock = threading.Lock()
    failures: list[str] = []

    def member(i: int) -> None:
        c = KafkaConsumer("t", **conf)
        try:
            while not done.is_set():
                records = c.poll(timeout_ms=100)
                shares[i] = {tp.partition for tp in c.assignment()}
                with lock:
                    got.extend(r.value for batch in records.values() for r in batch)
            c.commit()
        except Exception as exc:  # reported by the test
            failures.append(repr(exc))
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in (0, 1)]
    for t in threads:
        t.start()
    values = [f"k{i}".encode() for i in range(30)]
    try:
        wait_for(lambda: shared(shares, 6), 30, "two consumers sharing the topic")
        assert got == []  # both in before any record: no partition read twice
        _produce(broker.bootstrap_servers, "t", values, 6)
        wait_for(lambda: len(got) >= 30, 20, "30 records")
        assert shared(shares, 6)
    finally:
        done.set()
        for t in threads:
            t.join(15)
    assert sorted(got) == sorted(values) and not failures
    more = [f"m{i}".encode() for i in range(6)]
    _produce(broker.bootstrap_servers, "t", more, 6)
    c3 = KafkaConsumer("t", **conf)
    try:
        later: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(later) < 6 and time.monotonic() < deadline:
            for batch in c3.poll(timeout_ms=200).values():
                later.extend(r.value for r in batch)
        assert sorted(later) == sorted(more)
    finally:
        c3.close()


def test_aiokafka_group(broker: Broker) -> None:
    """Two aiokafka consumers in a group share the partitions and commit; the committed
    offsets are what OffsetFetch answers."""
    import asyncio

    from aiokafka import AIOKafkaConsumer

    from tests.kafka.clients import aiokafka_consumer_conf

    values = [f"a{i}".encode() for i in range(24)]

    async def run() -> tuple[list[bytes], list[set[int]]]:
        conf = aiokafka_consumer_conf(broker.bootstrap_servers, "aio",
                                      enable_auto_commit=False)
        consumers = [AIOKafkaConsumer("t", **conf), AIOKafkaConsumer("t", **conf)]
        got: list[bytes] = []
        try:
            for c in consumers:
                await c.start()
            deadline = time.monotonic() + 30

            def shares() -> list[set[int]]:
                return [{tp.partition for tp in c.assignment()} for c in consumers]

            while not shared(shares(), 6):  # both in before any record
                assert time.monotonic() < deadline, "the consumers did not share the topic"
                for c in consumers:
                    await c.getmany(timeout_ms=100)
            await asyncio.to_thread(_produce, broker.bootstrap_servers, "t", values, 6)
            while len(got) < 24 and time.monotonic() < deadline:
                for c in consumers:
                    for batch in (await c.getmany(timeout_ms=200)).values():
                        got.extend(r.value for r in batch)
            for c in consumers:
                await c.commit()
            return got, shares()
        finally:
            for c in consumers:
                await c.stop()

    got, shares = asyncio.run(run())
    assert sorted(got) == sorted(values)
    assert all(shares) and shares[0] | shares[1] == set(range(6))
    assert not shares[0] & shares[1]
    with RawConnection(broker.bootstrap_servers) as conn:
        from tests.kafka.group_requests import fetch
        error, offsets = fetch(conn, "aio", {"t": list(range(6))})
    assert error == 0 and {o for o, _, _ in offsets.values()} == {4}


def test_admin_clients_list_describe_delete_groups(broker: Broker) -> None:
    """confluent-kafka's AdminClient and kafka-python's KafkaAdminClient list, describe and
    delete groups and list a group's committed offsets."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    from tests.kafka.clients import kafka_python_common

    with RawConnection(broker.bootstrap_servers) as conn:
        from tests.kafka.group_requests import commit
        find_coordinator(conn, "idle")
        assert commit(conn, "idle", {("t", 0): 3, ("t", 5): 8}) == {("t", 0): 0, ("t", 5): 0}
    m = RawMember(broker.bootstrap_servers, "busy")
    find_coordinator(m.conn, "busy")
    m.join()
    m.sync([(m.member_id, b"")])

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                         "socket.timeout.ms": 5000})
    listed = admin.list_consumer_groups(request_timeout=10).result()
    states = {g.group_id: g.state for g in listed.valid}
    assert states == {"idle": ConsumerGroupState.EMPTY, "busy": ConsumerGroupState.STABLE}
    described = {g: f.result() for g, f in
                 admin.describe_consumer_groups(["busy", "idle"], request_timeout=10).items()}
    assert described["busy"].state == ConsumerGroupState.STABLE
    assert [x.member_id for x in described["busy"].members] == [m.member_id]
    assert described["busy"].partition_assignor == "range"
    assert described["idle"].members == []
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("idle", [TopicPartition("t", 0), TopicPartition("t", 5)])],
        request_timeout=10)["idle"].result()
    assert {(tp.partition, tp.offset) for tp in offsets.topic_partitions} == {(0, 3), (5, 8)}
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("idle", [TopicPartition("t", 0, 42)])],
        request_timeout=10)["idle"].result()
    assert [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions] == \
        [(0, 42, None)]
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("idle", [TopicPartition("t", 0)])],
        request_timeout=10)["idle"].result()
    assert [(tp.partition, tp.offset) for tp in offsets.topic_partitions] == [(0, 42)]
    with pytest.raises(KafkaException, match=r"NON_EMPTY_GROUP|not empty"):
        admin.delete_consumer_groups(["busy"], request_timeout=10)["busy"].result()
    admin.delete_consumer_groups(["idle"], request_timeout=10)["idle"].result()

    kp = KafkaAdminClient(**kafka_python_common(broker.bootstrap_servers))
    try:
        assert [(g["group_id"], g["group_state"]) for g in kp.list_groups()] == \
            [("busy", "Stable")]
        desc = kp.describe_groups(["busy"])["busy"]
        assert (desc["group_state"], desc["protocol_data"]) == ("Stable", "range")
        assert [x["member_id"] for x in desc["members"]] == [m.member_id]
        assert m.commit({("t", 1): 4, ("u", 0): 2}) == {("t", 1): 0, ("u", 0): 3}
        got = kp.list_group_offsets({"busy": None})["busy"]
        assert {(tp.topic, tp.partition, om.offset) for tp, om in got.items()} == {("t", 1, 4)}
        from kafka import TopicPartition as KpTopicPartition
        from kafka.errors import GroupSubscribedToTopicError
        assert kp.delete_group_offsets("busy", [KpTopicPartition("t", 1)]) == \
            {KpTopicPartition("t", 1): GroupSubscribedToTopicError}
        assert m.leave().error_code == 0
        assert kp.delete_groups(["busy", "nope"]) == {"busy": "OK",
                                                      "nope": "GroupIdNotFoundError"}
    finally:
        kp.close()
    m.close()


def test_confluent_static_member_comes_back_without_rebalance(broker: Broker) -> None:
    """KIP-345 with librdkafka: a consumer with group.instance.id closes (a static member
    sends no LeaveGroup) and a new one with the same instance id takes its place (a new
    member id) with the same partitions; the raw-request test above checks the generation
    stays the same."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    from tests.kafka.clients import confluent_consumer_conf

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def member_ids() -> list[tuple[str, str | None]]:
        d = admin.describe_consumer_groups(["static"], request_timeout=10)["static"].result()
        return [(m.member_id, m.group_instance_id) for m in d.members]

    def start() -> tuple[Any, set[int]]:
        c = Consumer(confluent_consumer_conf(broker.bootstrap_servers, "static",
                                             group_instance_id="instance-1"))
        c.subscribe(["t"])
        deadline = time.monotonic() + 15
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        return c, {tp.partition for tp in c.assignment()}

    first, parts = start()
    assert parts == set(range(6))
    (before,) = member_ids()
    first.close()
    assert member_ids() == [before]  # still a member: static members do not leave on close
    second, parts = start()
    try:
        assert parts == set(range(6))
        (after,) = member_ids()
        assert after[1] == "instance-1" and after[0] != before[0]
        with RawConnection(broker.bootstrap_servers) as conn:
            assert describe(conn, "static").group_state == "Stable"
    finally:
        second.close()


def test_a_parked_join_does_not_hold_up_the_broker_stop(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**FAST)
    a = RawMember(b.bootstrap_servers, "park", rebalance_ms=30000)
    find_coordinator(a.conn, "park")
    a.join()
    a.sync([(a.member_id, b"")])
    parked = RawMember(b.bootstrap_servers, "park", rebalance_ms=30000)
    assert parked.join_once().error_code == 79
    t = parked.join_async()  # waits for a to rejoin: up to the rebalance timeout
    wait_for(lambda: a.heartbeat() == 27, what="the rebalance to start")
    started = time.monotonic()
    b.shutdown()
    assert time.monotonic() - started < 3  # the server waits 5 s for a busy connection
    t.join(5)
    assert not t.is_alive()
    # the stopping broker closed the parked member's connection (as Kafka does at shutdown)
    assert isinstance(parked.async_outcome, OSError | ConnectionError), parked.async_outcome
    a.close()
    parked.close()
