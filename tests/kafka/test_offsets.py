"""Committed offsets (part 4): OffsetCommit v2-v9, OffsetFetch v1-v9, OffsetDelete v0, kept in
``__consumer_offsets`` in Kafka's record format, surviving a restart and a coordinator
failover, bounded by snapshots, expired by ``offsets.retention.minutes``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.groups import OFFSETS_TOPIC, partition_for
from kafka_tiers.kafka.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from tests.kafka.group_requests import (
    OFFSET_DELETE,
    RawMember,
    commit,
    fetch,
    find_coordinator,
)
from tests.kafka.raw_requests import RawConnection
from tests.kafka.targets import KafkaTarget

FAST = {"group.initial.rebalance.delay.ms": "100", "offsets.topic.num.partitions": "3"}


@pytest.fixture
def broker(make_kafka_broker: Callable[..., Broker]) -> Broker:
    b = make_kafka_broker(**FAST)
    b.create_topic("t", 4)
    b.create_topic("u", 2)
    return b


def coordinator_conn(bootstrap: str, group: str) -> RawConnection:
    """A connection to ``group``'s coordinator (found with FindCoordinator)."""
    with RawConnection(bootstrap.split(",")[0]) as conn:
        deadline = time.monotonic() + 20
        while True:
            resp = find_coordinator(conn, group)
            if resp.error_code == 0:
                break
            assert time.monotonic() < deadline, f"no coordinator: {resp}"
            time.sleep(0.1)
    return RawConnection(f"{resp.host}:{resp.port}")


# ------------------------------------------------------------------ record format


def test_records_are_kafkas_schemas_byte_for_byte() -> None:
    """OffsetCommitKey v1, OffsetCommitValue v3, GroupMetadataKey v2, GroupMetadataValue v3
    as Kafka lays them out (int16 version, int16-length strings, big-endian)."""
    key = encode_offset_key(OffsetKey("g", "t", 2))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x02"
    value = encode_offset_value(OffsetValue(42, 7, "m", 1000))
    assert value == (b"\x00\x03" + (42).to_bytes(8, "big") + (7).to_bytes(4, "big")
                     + b"\x00\x01m" + (1000).to_bytes(8, "big"))
    assert encode_group_key(GroupKey("g")) == b"\x00\x02\x00\x01g"
    assert decode_key(key) == OffsetKey("g", "t", 2)
    assert decode_key(b"\x00\x02\x00\x01g") == GroupKey("g")
    assert decode_offset_value(value) == OffsetValue(42, 7, "m", 1000)
    # v1 (with expire_timestamp) and v0 read too
    v1 = b"\x00\x01" + (5).to_bytes(8, "big") + b"\x00\x00" + (9).to_bytes(8, "big") + \
        (11).to_bytes(8, "big")
    assert decode_offset_value(v1) == OffsetValue(5, -1, "", 9, 11)
    group = GroupValue("consumer", 3, "range", "m1", 123, (
        MemberValue("m1", None, "c", "/127.0.0.1", 300000, 10000, b"sub", b"asg"),))
    raw = encode_group_value(group)
    assert raw[:2] == b"\x00\x03" and decode_group_value(raw) == group
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x07\x00\x01g")
    with pytest.raises(RecordFormatError):
        decode_offset_value(b"\x00\x01\x00")


# ------------------------------------------------------------------ commit and fetch


@pytest.mark.parametrize("version", range(2, 10))
def test_commit_every_version_then_fetch(broker: Broker, version: int) -> None:
    """A commit without group management (generation -1, no member) on an empty group is
    stored; every OffsetFetch version reads it back (leader epoch from v5)."""
    group = f"simple-{version}"
    with coordinator_conn(broker.bootstrap_servers, group) as conn:
        assert commit(conn, group, {("t", 0): 10, ("t", 3): 33, ("u", 1): 7}, version=version,
                      metadata="meta") == {("t", 0): 0, ("t", 3): 0, ("u", 1): 0}
        for fv in range(1, 10):
            error, got = fetch(conn, group, {"t": [0, 1, 3], "u": [1]}, version=fv)
            assert error == 0
            assert got == {("t", 0): (10, "meta", 0), ("t", 1): (-1, "", 0),
                           ("t", 3): (33, "meta", 0), ("u", 1): (7, "meta", 0)}, fv
        # null topics: every committed partition (v2+)
        for fv in (2, 7, 8, 9):
            _, everything = fetch(conn, group, None, version=fv)
            assert set(everything) == {("t", 0), ("t", 3), ("u", 1)}


def test_fetch_v8_batches_groups_and_unknown_group(broker: Broker) -> None:
    with coordinator_conn(broker.bootstrap_servers, "a") as conn:
        commit(conn, "a", {("t", 1): 5})
        resp = conn.call(9, 8, groups=[("a", [("t", [1])]), ("zz-unknown", [("t", [1])])],
                         require_stable=False)
    found = {g.group_id: (g.error_code, [(p.partition_index, p.committed_offset)
                                         for t in g.topics for p in t.partitions])
             for g in resp.groups}
    # the unknown group may live on another partition of this same (only) broker
    assert found["a"] == (0, [(1, 5)])
    assert found["zz-unknown"] == (0, [(1, -1)])


def test_commit_checks_generation_and_member(broker: Broker) -> None:
    m = RawMember(broker.bootstrap_servers, "cg", protocols=[("range", b"")])
    find_coordinator(m.conn, "cg")
    assert m.join_once().error_code == 79
    resp = m.join_once()
    assert resp.error_code == 0
    # CompletingRebalance: the member knows its generation, the assignment is not out yet
    assert m.commit({("t", 0): 1}) == {("t", 0): 27}  # REBALANCE_IN_PROGRESS
    m.sync([(m.member_id, b"")])
    assert m.commit({("t", 0): 1}) == {("t", 0): 0}
    assert m.commit({("t", 0): 2}, generation=m.generation + 1) == {("t", 0): 22}
    with RawConnection(broker.bootstrap_servers) as conn:
        assert commit(conn, "cg", {("t", 0): 3}, generation=m.generation,
                      member_id="intruder") == {("t", 0): 25}  # UNKNOWN_MEMBER_ID
        # generation -1 and no member on a group with members: UNKNOWN_MEMBER_ID
        assert commit(conn, "cg", {("t", 0): 3}) == {("t", 0): 25}
        # a group nobody knows with a generation: ILLEGAL_GENERATION
        assert commit(conn, "cg-none", {("t", 0): 3}, generation=4,
                      member_id="x") == {("t", 0): 22}
        assert fetch(conn, "cg", {"t": [0]})[1] == {("t", 0): (1, "", 0)}
    m.close()


def test_commit_metadata_bound_and_unknown_partitions(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**FAST, **{"offset.metadata.max.bytes": "8"})
    b.create_topic("t", 2)
    with coordinator_conn(b.bootstrap_servers, "mb") as conn:
        assert commit(conn, "mb", {("t", 0): 1}, metadata="12345678") == {("t", 0): 0}
        assert commit(conn, "mb", {("t", 1): 1}, metadata="123456789") == {("t", 1): 12}
        assert commit(conn, "mb", {("t", 5): 1, ("nope", 0): 1}) == {("t", 5): 3,
                                                                     ("nope", 0): 3}
        assert fetch(conn, "mb", {"t": [0, 1]})[1] == {("t", 0): (1, "12345678", 0),
                                                       ("t", 1): (-1, "", 0)}


def test_not_coordinator_when_the_broker_does_not_lead(
        make_kafka_cluster: Callable[..., Any]) -> None:
    cluster = make_kafka_cluster(brokers=3, overrides=FAST)
    boot = cluster.bootstrap_servers.split(",")
    with RawConnection(boot[0]) as conn:
        c = find_coordinator(conn, "nc")
    assert c.error_code == 0
    other = next(a for a in boot if a != f"{c.host}:{c.port}")
    with RawConnection(other) as conn:
        assert commit(conn, "nc", {("x", 0): 1}) == {("x", 0): 16}  # NOT_COORDINATOR
        assert fetch(conn, "nc", {"x": [0]}, version=7)[0] == 16
        assert conn.call(12, 4, group_id="nc", generation_id=1, member_id="m",
                         group_instance_id=None).error_code == 16


# ------------------------------------------------------------------ OffsetDelete


def test_offset_delete(broker: Broker) -> None:
    with coordinator_conn(broker.bootstrap_servers, "od") as conn:
        commit(conn, "od", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
        resp = conn.call(OFFSET_DELETE, 0, group_id="od", topics=[("t", [(0,), (1,)])])
        assert resp.error_code == 0
        assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == \
            [(0, 0), (1, 0)]
        assert fetch(conn, "od", None)[1] == {("u", 0): (3, "", 0)}
        missing = conn.call(OFFSET_DELETE, 0, group_id="od-missing", topics=[("t", [(0,)])])
        assert missing.error_code == 69  # GROUP_ID_NOT_FOUND
    # a consumer group with members: its subscribed topics' offsets stay
    from tests.kafka.group_requests import subscription
    m = RawMember(broker.bootstrap_servers, "od2", protocols=[("range", subscription("t"))])
    find_coordinator(m.conn, "od2")
    m.join()
    m.sync([(m.member_id, b"")])
    m.commit({("t", 0): 1, ("u", 0): 2})
    resp = m.conn.call(OFFSET_DELETE, 0, group_id="od2", topics=[("t", [(0,)]),
                                                                  ("u", [(0,)])])
    assert resp.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in resp.topics} == {"t": 86, "u": 0}
    m.close()


# ------------------------------------------------------------------ durability


def test_offsets_and_group_survive_a_restart(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**FAST)
    b.create_topic("t", 2)
    m = RawMember(b.bootstrap_servers, "r", protocols=[("range", b"sub")])
    find_coordinator(m.conn, "r")
    m.join()
    m.sync([(m.member_id, b"asg")])
    assert m.commit({("t", 0): 100, ("t", 1): 200}, metadata="x") == {("t", 0): 0,
                                                                      ("t", 1): 0}
    m.close()
    # the records in the log are Kafka's: the last one is the offset of t-1
    tp = TopicPartition(OFFSETS_TOPIC, partition_for("r", 3))
    records = [r for batch in b.fetch(tp, 0).batches() for r in batch.records()]
    keys = [decode_key(r.key) for r in records if r.key is not None]
    assert OffsetKey("r", "t", 1) in keys and GroupKey("r") in keys
    b.shutdown()
    again = Broker({"broker.id": "1", "log.dirs": str(b.config["log.dirs"][0]),
                    "listeners": "PLAINTEXT://127.0.0.1:0", **FAST}).start()
    try:
        with coordinator_conn(again.bootstrap_servers, "r") as conn:
            assert fetch(conn, "r", {"t": [0, 1]})[1] == {("t", 0): (100, "x", 0),
                                                          ("t", 1): (200, "x", 0)}
            d = conn.call(15, 5, groups=["r"], include_authorized_operations=False).groups[0]
            assert (d.group_state, d.protocol_data) == ("Stable", "range")
            assert [(x.member_id, x.member_assignment) for x in d.members] == \
                [(m.member_id, b"asg")]
    finally:
        again.shutdown()


def test_snapshots_keep_the_offsets_topic_bounded(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Many commits of a few partitions: the coordinator snapshots the live records and
    moves the log start offset, so the partition keeps a bounded number of records and
    bytes; a restart reads the latest offsets from the snapshot and what follows."""
    b = make_kafka_broker(**FAST, **{"offsets.snapshot.min.records": "50",
                                     "offsets.topic.segment.bytes": "4096"})
    b.create_topic("t", 4)
    tp = TopicPartition(OFFSETS_TOPIC, partition_for("snap", 3))
    with coordinator_conn(b.bootstrap_servers, "snap") as conn:
        for i in range(600):
            commit(conn, "snap", {("t", i % 4): i})
        lg = b.log(tp)
        held = lg.log_end_offset - lg.log_start_offset
        assert lg.log_start_offset > 450
        assert held <= 2 * 4 + 50 + 4  # live keys twice, the threshold, one snapshot
        assert lg.size < 3 * 4096 + 2048  # a few small segments, not 600 records' worth
        assert fetch(conn, "snap", {"t": [0, 1, 2, 3]})[1] == {
            ("t", p): (596 + p, "", 0) for p in range(4)}
    log_dir = str(b.config["log.dirs"][0])
    b.shutdown()
    again = Broker({"broker.id": "1", "log.dirs": log_dir,
                    "listeners": "PLAINTEXT://127.0.0.1:0", **FAST}).start()
    try:
        with coordinator_conn(again.bootstrap_servers, "snap") as conn:
            assert fetch(conn, "snap", {"t": [0, 1, 2, 3]})[1] == {
                ("t", p): (596 + p, "", 0) for p in range(4)}
    finally:
        again.shutdown()


def test_retention_expires_an_empty_groups_offsets(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """offsets.retention.minutes: an empty group's offsets expire that long after it became
    empty; a group left without offsets is deleted."""
    from kafka_tiers.kafka.groups.coordinator import GroupCoordinator
    broker = make_kafka_broker(**FAST, **{"group.min.session.timeout.ms": "100"})
    broker.create_topic("t", 4)
    with coordinator_conn(broker.bootstrap_servers, "old") as conn:
        commit(conn, "old", {("t", 0): 9})
        m = RawMember(broker.bootstrap_servers, "kept", protocols=[("range", b"")])
        m.join()
        m.sync([(m.member_id, b"")])
        m.commit({("t", 0): 5})
        server = broker.kafka_server
        assert server is not None
        coordinator = server.component("group-coordinator", GroupCoordinator)
        week = 7 * 24 * 3600 * 1000
        now = int(time.time() * 1000)
        assert coordinator.expire_offsets(now) == 0  # nothing old yet
        assert coordinator.expire_offsets(now + week + 1000) == 1  # "old" only: "kept" has
        assert fetch(conn, "old", {"t": [0]})[1] == {("t", 0): (-1, "", 0)}  # a member
        assert fetch(conn, "kept", {"t": [0]})[1] == {("t", 0): (5, "", 0)}
        d = conn.call(15, 5, groups=["old"], include_authorized_operations=False).groups[0]
        assert d.group_state == "Dead"
        # an empty group that never got further than MEMBER_ID_REQUIRED is forgotten too
        ghost = RawMember(broker.bootstrap_servers, "ghost", session_ms=200)
        assert ghost.join_once().error_code == 79
        ghost.close()
        assert [g for g, _, _ in coordinator.list_groups()] == ["ghost", "kept"]
        assert coordinator.expire_offsets(now) == 0
        assert [g for g, _, _ in coordinator.list_groups()] == ["ghost", "kept"]  # pending
        time.sleep(0.4)  # the pending member's session ends
        coordinator.expire_offsets(now)
        assert [g for g, _, _ in coordinator.list_groups()] == ["kept"]
        m.close()


def test_committed_offsets_survive_the_coordinators_death(
        make_kafka_cluster: Callable[..., Any]) -> None:
    """A 3-broker cluster: offsets committed to the coordinator (acks=all into
    __consumer_offsets) are answered by the new coordinator after the old one's broker is
    killed."""
    cluster = make_kafka_cluster(brokers=3, overrides=FAST)
    cl = cluster.client()
    cl.create_topic("t", 3, 3)
    boot = cluster.bootstrap_servers
    with coordinator_conn(boot, "fo") as conn:
        assert commit(conn, "fo", {("t", 0): 11, ("t", 2): 22}) == {("t", 0): 0, ("t", 2): 0}
        old_c = find_coordinator(conn, "fo")
    old = old_c.node_id
    cluster.broker(old).kill()
    survivors = ",".join(a for a in boot.split(",") if a != f"{old_c.host}:{old_c.port}")
    deadline = time.monotonic() + 30
    while True:
        with RawConnection(survivors.split(",")[0]) as conn:
            c = find_coordinator(conn, "fo")
        if c.error_code == 0 and c.node_id != old:
            break
        assert time.monotonic() < deadline, f"no new coordinator: {c}"
        time.sleep(0.2)
    with RawConnection(f"{c.host}:{c.port}") as conn:
        deadline = time.monotonic() + 20
        while True:
            error, got = fetch(conn, "fo", {"t": [0, 1, 2]})
            if error == 0:
                break
            assert time.monotonic() < deadline, error
            time.sleep(0.2)
    assert got == {("t", 0): (11, "", 0), ("t", 1): (-1, "", 0), ("t", 2): (22, "", 0)}


def test_confluent_group_survives_its_coordinators_death(
        make_kafka_cluster: Callable[..., Any]) -> None:
    """A librdkafka consumer group on a 3-broker cluster: records read and committed, the
    coordinator's broker killed, the consumer goes on with the new coordinator (which
    loaded the group and its offsets) and a later consumer of the group reads only what
    was not committed."""
    from confluent_kafka import Consumer, KafkaError, KafkaException

    from tests.kafka.clients import confluent_consumer_conf, confluent_producer

    cluster = make_kafka_cluster(brokers=3, overrides=FAST)
    KafkaTarget("cluster", cluster).create_topic("t", 3, 3)
    boot = cluster.bootstrap_servers

    def produce(prefix: str) -> list[bytes]:
        values = [f"{prefix}{i}".encode() for i in range(30)]
        with confluent_producer(boot, acks="all") as producer:
            for i, v in enumerate(values):
                producer.produce("t", v, partition=i % 3)
            assert producer.flush(20) == 0
        return values

    def read(consumer: Any, n: int, timeout: float) -> list[bytes]:
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
        return got

    def commit(consumer: Any) -> None:
        deadline = time.monotonic() + 20
        while True:
            try:
                consumer.commit(asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError._NO_OFFSET:
                    return
                assert time.monotonic() < deadline, exc
                time.sleep(0.2)

    first = produce("a")
    conf = confluent_consumer_conf(boot, "survivor", enable_auto_commit=False)
    consumer = Consumer(conf)
    try:
        consumer.subscribe(["t"])
        assert sorted(read(consumer, 30, 20)) == sorted(first)
        commit(consumer)
        with RawConnection(boot.split(",")[0]) as conn:
            old_c = find_coordinator(conn, "survivor")
        old = old_c.node_id
        cluster.broker(old).kill()
        second = produce("b")
        assert sorted(read(consumer, 30, 30)) == sorted(second)
        commit(consumer)
    finally:
        consumer.close()
    alive = [a for a in boot.split(",") if a != f"{old_c.host}:{old_c.port}"]
    with RawConnection(alive[0]) as conn:
        c = find_coordinator(conn, "survivor")
    assert c.error_code == 0 and c.node_id != old
    with RawConnection(f"{c.host}:{c.port}") as conn:
        assert fetch(conn, "survivor", {"t": [0, 1, 2]})[1] == {
            ("t", p): (20, "", 0) for p in range(3)}
    third = produce("c")
    later = Consumer(confluent_consumer_conf(",".join(alive), "survivor",
                                             enable_auto_commit=False))
    try:
        later.subscribe(["t"])
        assert sorted(read(later, 30, 15)) == sorted(third)
        assert read(later, 1, 1.0) == []  # nothing committed comes back
    finally:
        later.close()


def test_snapshots_bound_every_replica_in_a_cluster(
        make_kafka_cluster: Callable[..., Any]) -> None:
    """In a cluster the snapshot's new log start offset reaches the followers too (they
    follow the leader's), so no replica of __consumer_offsets keeps the old records."""
    cluster = make_kafka_cluster(brokers=3, overrides={
        **FAST, "offsets.snapshot.min.records": "20", "offsets.topic.segment.bytes": "2048"})
    KafkaTarget("cluster", cluster).create_topic("t", 2, 3)
    with coordinator_conn(cluster.bootstrap_servers, "cs") as conn:
        for i in range(200):
            assert commit(conn, "cs", {("t", i % 2): i}) == {("t", i % 2): 0}
        assert fetch(conn, "cs", {"t": [0, 1]})[1] == {("t", 0): (198, "", 0),
                                                       ("t", 1): (199, "", 0)}
    tp = TopicPartition(OFFSETS_TOPIC, partition_for("cs", 3))

    def bounded() -> bool:
        starts = [cluster.broker(b).log(tp).log_start_offset for b in (1, 2, 3)]
        return min(starts) > 150

    deadline = time.monotonic() + 10
    while not bounded():
        assert time.monotonic() < deadline, [
            (b, cluster.broker(b).log(tp)) for b in (1, 2, 3)]
        time.sleep(0.05)
    for b in (1, 2, 3):
        assert cluster.broker(b).log(tp).size < 4 * 2048


def test_a_new_leader_loads_its_partitions_before_any_request(
        make_kafka_cluster: Callable[..., Any]) -> None:
    """Kafka loads a partition of __consumer_offsets when its broker becomes the leader: the
    coordinators of a cluster hold exactly the partitions their broker leads, and after a
    broker's death the new leaders load its partitions without being asked."""
    from kafka_tiers.kafka.groups.coordinator import GroupCoordinator

    cluster = make_kafka_cluster(brokers=3, overrides=FAST)
    for addr in cluster.bootstrap_servers.split(","):  # every broker's coordinator starts
        with RawConnection(addr) as conn:
            assert find_coordinator(conn, "x").error_code == 0

    def coordinator(b: int) -> GroupCoordinator:
        server = cluster.broker(b).kafka_server
        return server.component("group-coordinator", GroupCoordinator)

    def leads(b: int) -> list[int]:
        return [p for p in range(3)
                if cluster.broker(b).leadership(TopicPartition(OFFSETS_TOPIC, p))[0]]

    def settled(brokers: list[int]) -> bool:
        return all(coordinator(b).loaded_partitions() == leads(b) for b in brokers)

    deadline = time.monotonic() + 10
    while not settled([1, 2, 3]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    victim = next(b for b in (1, 2, 3) if leads(b))
    lost = leads(victim)
    cluster.broker(victim).kill()
    rest = [b for b in (1, 2, 3) if b != victim]
    deadline = time.monotonic() + 15
    while not (settled(rest) and sorted(p for b in rest for p in leads(b)) == [0, 1, 2]):
        assert time.monotonic() < deadline, (lost, {b: leads(b) for b in rest})
        time.sleep(0.05)


def test_requests_get_coordinator_load_in_progress_while_the_partition_loads(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a partition of __consumer_offsets loads (here: held by the test), its groups'
    requests are answered at once with COORDINATOR_LOAD_IN_PROGRESS (14, retriable), not
    parked on a handler thread; a Heartbeat gets NONE and ListGroups the error, as Kafka;
    librdkafka retries through it; once loaded, the committed offsets are served."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    from kafka_tiers.kafka.groups import coordinator as coordinator_module
    from kafka_tiers.kafka.groups.store import OffsetsPartition
    from tests.kafka.clients import confluent_consumer_conf

    with coordinator_conn(broker.bootstrap_servers, "slow") as conn:
        assert commit(conn, "slow", {("t", 1): 7}) == {("t", 1): 0}
        release = threading.Event()
        loading = threading.Event()
        original = OffsetsPartition.load

        def held_load(self: OffsetsPartition) -> dict[bytes, bytes]:
            loading.set()
            release.wait(30)
            return original(self)

        monkeypatch.setattr(OffsetsPartition, "load", held_load)
        tp = TopicPartition(OFFSETS_TOPIC, partition_for("slow", 3))
        broker.become_leader(tp, broker.leadership(tp)[1] + 1)  # a new epoch: reloaded
        assert loading.wait(10)
        try:
            started = time.monotonic()
            assert fetch(conn, "slow", {"t": [1]})[0] == 14
            assert commit(conn, "slow", {("t", 1): 8}) == {("t", 1): 14}
            m = RawMember(broker.bootstrap_servers, "slow")
            assert m.join_once().error_code == 14
            m.close()
            assert conn.call(12, 4, group_id="slow", generation_id=1, member_id="m",
                             group_instance_id=None).error_code == 0
            assert conn.call(16, 4, states_filter=[]).error_code == 14
            d = conn.call(15, 5, groups=["slow"], include_authorized_operations=False)
            assert d.groups[0].error_code == 14
            # each answered without waiting for the load (LOAD_WAIT_S at most)
            waited = time.monotonic() - started
            assert waited < 6 * coordinator_module.LOAD_WAIT_S + 3, waited
            consumer = Consumer(confluent_consumer_conf(broker.bootstrap_servers, "slow"))
            try:
                got: list[Any] = []
                reader = threading.Thread(target=lambda: got.extend(consumer.committed(
                    [CTopicPartition("t", 1)], timeout=20)), daemon=True)
                reader.start()
                time.sleep(1.0)  # librdkafka is answered 14 meanwhile and retries
                release.set()
                reader.join(25)
                assert [(x.topic, x.partition, x.offset) for x in got] == [("t", 1, 7)]
            finally:
                consumer.close()
        finally:
            release.set()
        assert fetch(conn, "slow", {"t": [1]}) == (0, {("t", 1): (7, "", 0)})


def test_offset_requests_bounded_by_max_request_partitions(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """OffsetCommit, OffsetFetch and OffsetDelete listing more partitions than
    max.request.partitions are refused with INVALID_REQUEST; nothing is written."""
    b = make_kafka_broker(**FAST, **{"max.request.partitions": "3"})
    b.create_topic("t", 3)
    b.create_topic("u", 1)
    with coordinator_conn(b.bootstrap_servers, "bound") as conn:
        four = {("t", 0): 1, ("t", 1): 1, ("t", 2): 1, ("u", 0): 1}
        assert commit(conn, "bound", four) == {k: 42 for k in four}
        assert commit(conn, "bound", {("t", 0): 1}) == {("t", 0): 0}
        assert fetch(conn, "bound", {"t": [0, 1, 2], "u": [0]})[0] == 42
        assert fetch(conn, "bound", {"t": [0, 1, 2]})[1][("t", 0)] == (1, "", 0)
        resp = conn.call(OFFSET_DELETE, 0, group_id="bound",
                         topics=[("t", [(0,), (1,), (2,)]), ("u", [(0,)])])
        assert resp.error_code == 42
        assert fetch(conn, "bound", {"t": [0]})[1] == {("t", 0): (1, "", 0)}
