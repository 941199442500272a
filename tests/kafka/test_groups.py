"""Consumer groups, the classic protocol (part 4): FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, ListGroups, DescribeGroups, DeleteGroups, request by request over raw
connections (kafka-python's message classes), then with real clients."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

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


def test_join_v0_to_v3_gets_a_member_id_at_once(broker: Broker) -> None:
    for version in range(0, 4):
        m = RawMember(broker.bootstrap_servers, f"old-{version}")
        find_coordinator(m.conn, m.group)
        resp = m.join_once(version)
        assert (resp.error_code, resp.generation_id) == (0, 1)
        assert m.sync([(m.member_id, b"x")], version=0).assignment == b"x"
        assert m.heartbeat(0) == 0
        assert m.leave(0).error_code == 0
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
