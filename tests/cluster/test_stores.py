"""The metadata store contract, run against the embedded store (always) and a real ZooKeeper
(marked ``servers``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.embedded_store import JOURNAL, EmbeddedMetadataServer, EmbeddedStore
from kafka_tiers.cluster.metadata_store import (
    BadVersionError,
    BrokerRegistration,
    ClusterMetadata,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    PartitionState,
    SessionEvent,
    TopicAssignment,
)
from kafka_tiers.cluster.transport import wait_for


@pytest.fixture(params=["embedded", pytest.param("zookeeper", marks=pytest.mark.servers)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple]:
    """A factory of sessions on one store, and a way to expire a session."""
    made: list[MetadataStore] = []
    if request.param == "embedded":
        server = EmbeddedMetadataServer(tmp_path / "meta")

        def make() -> MetadataStore:
            s = EmbeddedStore(server, session_timeout_ms=300)
            s.start()
            made.append(s)
            return s

        def expire(s: MetadataStore) -> None:
            assert isinstance(s, EmbeddedStore)
            s.expire_now()
    else:
        from kafka_tiers.cluster.zookeeper_store import ZooKeeperStore

        zk = request.getfixturevalue("zookeeper_server")
        chroot = f"/t{time.monotonic_ns()}"
        admin = zk.client()
        admin.ensure_path(chroot)
        admin.stop()
        admin.close()

        def make() -> MetadataStore:
            s = ZooKeeperStore(zk.connection_string + chroot, session_timeout_ms=4000)
            s.start()
            made.append(s)
            return s

        def expire(s: MetadataStore) -> None:
            s.close()
    yield make, expire
    for s in made:
        s.close()
    if request.param == "embedded":
        server.close()


def test_versions_conditional_writes_and_multi(stores: tuple) -> None:
    make, _ = stores
    s = make()
    s.create("/a/b", {"x": 1})
    assert s.get("/a/b") == ({"x": 1}, 0)
    assert s.set("/a/b", {"x": 2}, 0) == 1
    with pytest.raises(BadVersionError):
        s.set("/a/b", {"x": 3}, 0)
    with pytest.raises(NodeExistsError):
        s.create("/a/b", {})
    with pytest.raises(NotEmptyError):
        s.delete("/a")
    s.create("/a/c", [1])
    with pytest.raises(BadVersionError):  # all or nothing
        s.multi([Op.set("/a/c", [2]), Op.set("/a/b", {"x": 9}, 0)])
    assert s.get("/a/c") == ([1], 0)
    assert s.multi([Op.set("/a/c", [2], 0), Op.create("/a/d", "new"),
                    Op.delete("/a/b", 1)])[:2] == [1, 0]
    assert s.children("/a") == ["c", "d"]
    with pytest.raises(NoNodeError):
        s.get("/a/b")
    s.delete("/a", recursive=True)
    assert s.exists("/a") is None


def test_ephemeral_nodes_go_with_the_session_and_watches_fire(stores: tuple) -> None:
    make, expire = stores
    owner, watcher = make(), make()
    watcher.ensure_path("/brokers/ids")
    seen: list[list[str]] = []
    lock = threading.Lock()

    def on_change(path: str) -> None:
        with lock:
            seen.append(watcher.children(path))

    watcher.watch_children("/brokers/ids", on_change)
    owner.create("/brokers/ids/1", {"host": "127.0.0.1"}, ephemeral=True)
    assert wait_for(lambda: ["1"] in seen, 10)
    expire(owner)
    assert wait_for(lambda: watcher.exists("/brokers/ids/1") is None, 15)
    assert wait_for(lambda: bool(seen) and seen[-1] == [], 10)


def test_cluster_metadata_controller_election_and_batched_state_writes(stores: tuple) -> None:
    make, expire = stores
    a, b = ClusterMetadata(make()), ClusterMetadata(make())
    a.ensure_layout()
    assert a.try_become_controller(1) == 1
    assert b.try_become_controller(2) is None
    assert b.controller() == (1, 1)
    expire(a.store)
    assert wait_for(lambda: b.controller() is None, 15)
    assert b.try_become_controller(2) == 2
    b.register_broker(BrokerRegistration(2, "127.0.0.1", 9092, "/dc1/r1"))
    assert b.live_brokers()[2].rack == "/dc1/r1"
    asg = TopicAssignment("t", {0: (2, 3), 1: (3, 2)})
    states = {0: PartitionState(2, 0, (2, 3)), 1: PartitionState(3, 0, (3, 2))}
    b.store.multi(b.create_topic_ops(asg, states))
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    cur = {tp: b.partition_state(tp) for tp in (tp0, tp1)}
    assert cur[tp0] is not None and cur[tp0].version == 0
    # a leader's ISR write lands first: the controller's batch falls back per partition
    b.store.set("/brokers/topics/t/partitions/1/state",
                PartitionState(3, 0, (3,)).to_json(), 0)
    new = {tp0: PartitionState(3, 1, (3,), 2, 0), tp1: PartitionState(2, 1, (2,), 2, 0)}
    written, failed = b.write_states(new, batch=True)
    assert failed == [tp1] and written[tp0].version == 1
    got = b.partition_state(tp0)
    assert got is not None and (got.leader, got.leader_epoch, got.isr) == (3, 1, (3,))


def test_a_batch_with_stale_states_is_rewritten_once_without_them(stores: tuple) -> None:
    """Leaders' ISR writes that land during a failover make a few of the controller's states
    stale: the batch is retried once without those (found in one read), not written one
    partition at a time."""
    make, _ = stores
    md = ClusterMetadata(make())
    md.ensure_layout()
    assert md.try_become_controller(1) == 1
    n = 200
    md.store.multi(md.create_topic_ops(TopicAssignment("f", {p: (1, 2) for p in range(n)}),
                                       {p: PartitionState(1, 0, (1, 2)) for p in range(n)}))
    stale = [TopicPartition("f", p) for p in (3, 77, 150)]
    for tp in stale:  # the leaders shrank these ISRs first
        md.store.set(f"/brokers/topics/f/partitions/{tp.partition}/state",
                     PartitionState(1, 0, (1,)).to_json(), 0)
    calls = {"multi": 0, "set": 0}
    real_multi, real_set = md.store.multi, md.store.set

    def multi(ops):  # type: ignore[no-untyped-def]
        calls["multi"] += 1
        return real_multi(ops)

    def set_(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["set"] += 1
        return real_set(*args, **kwargs)

    md.store.multi, md.store.set = multi, set_  # type: ignore[method-assign]
    states = {TopicPartition("f", p): PartitionState(2, 1, (2,), 1, 0) for p in range(n)}
    written, failed = md.write_states(states, batch=True)
    assert sorted(failed) == stale
    assert len(written) == n - 3 and all(st.version == 1 for st in written.values())
    # one retry of the batch, no single writes (the embedded store's multi_many calls multi
    # for the first try too; ZooKeeper's pipelines it)
    assert calls["set"] == 0 and calls["multi"] in (1, 2)
    for p in (0, 3, 199):
        got = md.partition_state(TopicPartition("f", p))
        assert got is not None
        assert (got.leader, got.isr) == ((1, (1,)) if p == 3 else (2, (2,)))


def test_writing_no_states_writes_nothing(stores: tuple) -> None:
    """A controller whose retry finds every stale state already as it wants it writes an empty
    batch: nothing, and no error (a failover raced by leaders' ISR writes failed its whole
    BrokersChanged event with a zip length error, electing no new leader)."""
    make, _ = stores
    md = ClusterMetadata(make())
    md.ensure_layout()
    assert md.try_become_controller(1) == 1
    assert md.write_states({}, batch=True) == ({}, [])
    assert md.write_states({}, batch=False) == ({}, [])


def test_embedded_store_survives_a_restart_and_a_torn_journal(tmp_path: Path) -> None:
    server = EmbeddedMetadataServer(tmp_path / "m")
    s = EmbeddedStore(server)
    s.start()
    s.create("/keep", {"v": 1})
    s.set("/keep", {"v": 2})
    s.create("/eph", 1, ephemeral=True)
    s.close()
    server.close()
    with open(tmp_path / "m" / JOURNAL, "ab") as fh:
        fh.write(b'[["put","/half"')  # a crash mid-write
    server = EmbeddedMetadataServer(tmp_path / "m")
    s = EmbeddedStore(server)
    s.start()
    try:
        assert s.get("/keep") == ({"v": 2}, 1)
        assert s.exists("/eph") is None and s.exists("/half") is None
        server.compact_bytes = 0  # the next write folds the journal into a snapshot
        s.create("/more", 3)
    finally:
        s.close()
        server.close()
    server = EmbeddedMetadataServer(tmp_path / "m")
    try:
        assert server.read("/more")[1] == 0 and server.read("/keep")[1] == 1
        assert (tmp_path / "m" / JOURNAL).stat().st_size == 0
    finally:
        server.close()


def test_suspended_session_expires_and_reconnects(tmp_path: Path) -> None:
    server = EmbeddedMetadataServer(None)
    s = EmbeddedStore(server, session_timeout_ms=200)
    events: list[SessionEvent] = []
    s.on_session_event(events.append)
    s.start()
    try:
        s.create("/x", 1, ephemeral=True)
        s.suspend()
        assert wait_for(lambda: SessionEvent.EXPIRED in events, 5)
        assert s.exists("/x") is None
        s.resume()
        assert wait_for(lambda: SessionEvent.RECONNECTED in events, 5)
        s.create("/x", 2, ephemeral=True)
    finally:
        s.close()
        server.close()


def test_batched_state_writes_stay_under_the_multi_size_cap(tmp_path: Path) -> None:
    from kafka_tiers.cluster.metadata_store import MAX_MULTI_BYTES

    server = EmbeddedMetadataServer(tmp_path / "cap")
    s = EmbeddedStore(server)
    s.start()
    try:
        md = ClusterMetadata(s)
        md.ensure_layout()
        topic = "t" * 200
        n = 3000
        s.multi(md.create_topic_ops(TopicAssignment(topic, {p: (1,) for p in range(n)}),
                                    {p: PartitionState(1, 0, (1,)) for p in range(n)}))
        sizes: list[int] = []
        real = s.multi_many

        def counting(batches):
            sizes.extend(len(b) for b in batches)
            return real(batches)

        s.multi_many = counting  # type: ignore[method-assign]
        states = {TopicPartition(topic, p): PartitionState(1, 1, (1,), 1, 0) for p in range(n)}
        written, failed = md.write_states(states, batch=True, batch_size=100000)
        assert len(written) == n and not failed
        assert len(sizes) > 1 and all(k * (200 + 120) <= MAX_MULTI_BYTES for k in sizes)
    finally:
        s.close()
        server.close()


def test_pipelined_reads_of_partition_states(stores: tuple) -> None:
    make, _ = stores
    md = ClusterMetadata(make())
    md.ensure_layout()
    asg = TopicAssignment("r", {p: (1, 2) for p in range(50)})
    md.store.multi(md.create_topic_ops(asg, {p: PartitionState(1 + p % 2, p, (1, 2))
                                             for p in range(50)}))
    tps = [TopicPartition("r", p) for p in range(50)] + [TopicPartition("r", 99)]
    got = md.partition_states(tps)
    assert got[TopicPartition("r", 99)] is None
    assert [got[TopicPartition("r", p)].leader_epoch for p in range(50)] == list(range(50))
    assert got[TopicPartition("r", 3)].leader == 2 and got[TopicPartition("r", 3)].version == 0
