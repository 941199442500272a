"""The cluster in one process on the embedded store: topics through the placer, replication,
failover, zombie fencing, ISR, elections, controlled shutdown, reassignment, restart."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.transport import ApiKey, ErrorCode, TransportError
from tests.cluster.helpers import AckedProducer, HookRecorder, assert_exactly_once

RACKS = ["/dc1/r1", "/dc1/r2", "/dc2/r1"]
Make = Callable[..., LocalCluster]


def replica_logs(c: LocalCluster, topic: str, partition: int) -> dict[int, list[bytes | None]]:
    """Every live replica's records (whole log, committed or not)."""
    tp = TopicPartition(topic, partition)
    out = {}
    for b in c.live:
        lm = c.broker(b).log_manager
        lg = lm.get_log(tp) if lm is not None else None
        if lg is None:
            continue
        data = lg.read(lg.log_start_offset, 1 << 30)
        out[b] = [r.value for batch in data.batches() for r in batch.records()]
    return out


def wait_converged(c: LocalCluster, topic: str, partition: int, timeout: float = 15) -> None:
    def same() -> bool:
        logs = replica_logs(c, topic, partition)
        return len(logs) > 1 and all(v == next(iter(logs.values())) for v in logs.values())

    c.wait_until(same, timeout, f"replicas of {topic}-{partition} converge")


def test_creating_an_existing_topic_never_grows_it(make_cluster: Make) -> None:
    """Creation is refused for a topic that exists, however many ask at once (exactly one
    of concurrent creations wins, the others get TOPIC_ALREADY_EXISTS and nothing changes);
    growing is its own request naming the new total, so repeating it never grows twice."""
    import threading

    c = make_cluster()
    outcomes: list[object] = []
    start = threading.Barrier(4)

    def create() -> None:
        cl = c.client()
        try:
            start.wait(10)
            outcomes.append(sorted(cl.create_topic("once", 3, 3, wait=False)))
        except TransportError as exc:
            outcomes.append(exc.code)
        finally:
            cl.close()

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes.count([0, 1, 2]) == 1, outcomes
    assert outcomes.count(ErrorCode.TOPIC_ALREADY_EXISTS) == 3, outcomes
    cl = c.client()
    cl.wait_for_leaders("once")
    with pytest.raises(TransportError) as err:
        cl.create_topic("once", 3, 3)
    assert err.value.code == ErrorCode.TOPIC_ALREADY_EXISTS and "exists" in str(err.value)
    assert len(cl.describe_topic("once")) == 3
    # growing names the total: a repeat is refused, not applied twice
    assert sorted(cl.add_partitions("once", 5)) == [3, 4]
    for total in (5, 4):
        with pytest.raises(TransportError) as err:
            cl.add_partitions("once", total)
        assert err.value.code == ErrorCode.INVALID_PARTITIONS
        assert "has 5 partitions" in str(err.value)
    assert len(cl.describe_topic("once")) == 5
    with pytest.raises(TransportError) as err:
        cl.add_partitions("nope", 2)
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # a manual assignment: one per new partition, in the topic's replication factor
    for bad, why in (([[1, 2, 3]], "1 assignments for 2 new partitions"),
                     ([[1, 2, 3], [1, 2]], "replication factor 3")):
        with pytest.raises(TransportError) as err:
            cl.add_partitions("once", 7, assignment=bad)
        assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and why in str(err.value)
    assert cl.add_partitions("once", 7, assignment=[[2, 3, 1], [3, 1, 2]]) == \
        {5: [2, 3, 1], 6: [3, 1, 2]}
    assert len(cl.describe_topic("once")) == 7
    cl.close()


def test_create_topic_through_placer_and_admin_placement(make_cluster: Make,
                                                         recorder: HookRecorder) -> None:
    c = make_cluster(racks=RACKS, overrides={"broker.replica.placer": "multi-level-rack"}) \
        if _has_multi_level() else make_cluster(racks=RACKS)
    cl = c.client()
    asg = cl.create_topic("orders", 6, 3)
    assert sorted(asg) == list(range(6))
    for reps in asg.values():
        assert sorted(reps) == [1, 2, 3]
    leaders = [reps[0] for reps in asg.values()]
    assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]
    desc = cl.describe_topic("orders")
    assert [p["leader"] for p in desc] == leaders
    assert all(sorted(p["isr"]) == [1, 2, 3] for p in desc)
    # adding partitions continues the topic (start_partition)
    more = cl.add_partitions("orders", 9)
    assert sorted(more) == [6, 7, 8]
    with pytest.raises(TransportError) as err:
        cl.create_topic("wide", partitions=None, replication_factor=9, wait=False,
                        timeout=2)
    assert err.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    # document 001's admin operation, served by the controller
    placement = cl.create_replica_placement(4, 2, force_simple=True, broker_ids=[1, 2])
    assert len(placement) == 4 and all(sorted(r) == [1, 2] for r in placement)
    assert ("topic", "orders", {p: r for p, r in asg.items()}) in recorder.of("topic")
    elected = {(c_[1], c_[2]) for c_ in recorder.of("leader")}
    assert (TopicPartition("orders", 0), asg[0][0]) in elected
    assert {c_[1] for c_ in recorder.of("up")} >= {1, 2, 3}


def _has_multi_level() -> bool:
    from kafka_tiers.plugins import load_placer

    try:
        load_placer("multi-level-rack", {}).close()
        return True
    except Exception:
        return False


def test_acks_all_survives_repeated_leader_kills(make_cluster: Make,
                                                 recorder: HookRecorder) -> None:
    c = make_cluster()
    cl = c.client()
    cl.create_topic("t", 1, 3)
    prod = AckedProducer(c.client(), "t").start()
    reported: list[int] = []  # killed while another broker was the controller
    try:
        for _ in range(3):
            prod.wait_acked(20, 20)
            leader = cl.leader("t", 0, refresh=True)
            if c.controller_id() != leader:
                reported.append(leader)
            c.kill(leader)
            c.wait_until(lambda old=leader: cl.leader("t", 0, refresh=True) not in (-1, old),
                         20, "a new leader")
            prod.wait_acked(20, 20)
            c.restart(leader)
            c.wait_until(lambda b=leader: b in cl.describe_topic("t")[0]["isr"], 20,
                         "the restarted broker back in the ISR")
        prod.wait_acked(10, 20)
    finally:
        prod.stop()
    assert len(prod.acked) >= 130
    c.wait_until(lambda: prod.acked[-1].encode() in [r.value for r in cl.read_all("t", 0)],
                 20, "the high watermark covers the last acknowledged record")
    assert_exactly_once([r.value for r in cl.read_all("t", 0)], prod.acked)
    wait_converged(c, "t", 0)
    for values in replica_logs(c, "t", 0).values():
        assert_exactly_once(values, prod.acked)
    downs = [x[1] for x in recorder.of("down")]
    assert sorted(downs) == sorted(reported)
    assert any(x[0] == "isr" for x in recorder.calls)


def test_paused_leader_woken_after_a_new_election_commits_nothing(make_cluster: Make,
                                                                  caplog: pytest.LogCaptureFixture
                                                                  ) -> None:
    c = make_cluster()
    cl = c.client()
    cl.create_topic("z", 1, 3)
    for i in range(5):
        cl.produce("z", 0, [f"before{i}"])
    old = cl.leader("z", 0, refresh=True)
    old_address = c.broker(old).address
    c.pause(old)
    c.wait_until(lambda: cl.leader("z", 0, refresh=True) not in (-1, old), 20, "new leader")
    new = cl.leader("z", 0)
    cl.produce("z", 0, ["under-new-leader"])
    caplog.set_level(logging.WARNING)
    c.resume(old)
    # straight to the old leader, as a client with stale routing would
    from kafka_tiers.cluster.client import encode_records

    try:
        cl.transport.send(old_address, ApiKey.PRODUCE,
                          {"topic": "z", "partition": 0, "acks": -1, "timeout_ms": 4000},
                          payload=encode_records(["zombie"]), timeout=10)
        committed = True
    except TransportError as exc:
        committed = False
        assert exc.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT)
    assert not committed
    c.wait_until(lambda: not c.broker(old).replicas.partitions[TopicPartition("z", 0)]
                 .is_leader, 20, "the old leader steps down")
    cl.produce("z", 0, ["after"])
    values = [r.value for r in cl.read_all("z", 0)]
    assert b"zombie" not in values
    assert values[-2:] == [b"under-new-leader", b"after"]
    assert cl.leader("z", 0, refresh=True) == new
    wait_converged(c, "z", 0)
    assert all(b"zombie" not in v for v in replica_logs(c, "z", 0).values())


def test_controller_failover_keeps_the_cluster_working(make_cluster: Make) -> None:
    c = make_cluster()
    cl = c.client()
    cl.create_topic("a", 3, 3)
    first = c.controller_id()
    epoch = c.controller().epoch
    assert first is not None
    c.kill(first)
    c.wait_until(lambda: c.controller_id() not in (None, first), 20, "a new controller")
    assert c.controller().epoch > epoch
    cl.create_topic("b", 2, 2)
    for p in range(3):
        cl.produce("a", p, [b"x"])
        assert cl.leader("a", p, refresh=True) != first
    # a request of the old controller epoch is refused by brokers
    live = c.live[0]
    with pytest.raises(TransportError) as err:
        cl.transport.send(c.broker(live).address, ApiKey.LEADER_AND_ISR,
                          {"controller_epoch": epoch, "partitions": []}, timeout=5)
    assert err.value.code == ErrorCode.STALE_CONTROLLER_EPOCH


def test_min_insync_replicas_and_isr_shrink_and_expand(make_cluster: Make,
                                                      recorder: HookRecorder) -> None:
    c = make_cluster(overrides={"min.insync.replicas": "2"})
    cl = c.client()
    cl.create_topic("m", 1, 3)
    leader = cl.leader("m", 0, refresh=True)
    f1, f2 = [b for b in (1, 2, 3) if b != leader]
    cl.produce("m", 0, ["one"])
    # a follower that stops fetching (alive, registered) leaves the ISR after the lag time
    c.broker(f1).replicas.paused.set()
    c.wait_until(lambda: f1 not in cl.describe_topic("m")[0]["isr"], 15, "ISR shrink")
    cl.produce("m", 0, ["two"])
    c.kill(f2)
    c.wait_until(lambda: cl.describe_topic("m")[0]["isr"] == [leader], 15, "ISR of one")
    with pytest.raises(TransportError) as err:
        cl.produce("m", 0, ["refused"], timeout=3)
    assert err.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    cl.produce("m", 0, ["acks1"], acks=1)
    c.broker(f1).replicas.paused.clear()
    c.wait_until(lambda: f1 in cl.describe_topic("m")[0]["isr"], 15, "ISR expand")
    cl.produce("m", 0, ["three"])
    values = [r.value for r in cl.read_all("m", 0)]
    assert values == [b"one", b"two", b"acks1", b"three"]
    isr_events = [x for x in recorder.of("isr") if x[1] == TopicPartition("m", 0)]
    assert any(f1 not in x[2] for x in isr_events) and any(f1 in x[2] for x in isr_events)


@pytest.mark.parametrize("unclean", [False, True])
def test_leader_election_without_an_in_sync_replica(make_cluster: Make, unclean: bool,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    c = make_cluster(2, overrides={"unclean.leader.election.enable": str(unclean).lower()})
    cl = c.client()
    cl.create_topic("u", 1, 2)
    leader = cl.leader("u", 0, refresh=True)
    follower = 3 - leader
    cl.produce("u", 0, ["x"])
    c.broker(follower).replicas.paused.set()
    c.wait_until(lambda: cl.describe_topic("u")[0]["isr"] == [leader], 15, "ISR shrink")
    caplog.set_level(logging.WARNING)
    c.kill(leader)  # while the follower is still out of the ISR
    c.broker(follower).replicas.paused.clear()
    if unclean:
        c.wait_until(lambda: cl.leader("u", 0, refresh=True) == follower, 15, "unclean")
        assert "UNCLEAN LEADER ELECTION" in caplog.text
    else:
        c.wait_until(lambda: c.controller_id() == follower and
                     c.controller().states[TopicPartition("u", 0)].leader == -1, 15,
                     "offline partition")
        assert cl.describe_topic("u")[0]["leader"] == -1
        c.restart(leader)  # the ISR replica returns and leads again
        c.wait_until(lambda: cl.leader("u", 0, refresh=True) == leader, 15, "leader back")
        assert [r.value for r in cl.read_all("u", 0)] == [b"x"]


def test_controlled_shutdown_and_preferred_leader_election(make_cluster: Make) -> None:
    c = make_cluster()
    cl = c.client()
    asg = cl.create_topic("p", 3, 3)
    victim = asg[0][0]
    led = [p for p, r in asg.items() if r[0] == victim]
    c.stop_broker(victim, controlled=True)
    desc = cl.describe_topic("p")
    assert all(desc[p]["leader"] not in (victim, -1) for p in led)
    assert all(victim not in d["isr"] for d in desc)
    for p in range(3):
        cl.produce("p", p, ["during"])
    c.restart(victim)
    c.wait_until(lambda: all(victim in d["isr"] for d in cl.describe_topic("p")), 20,
                 "restarted broker in every ISR")
    results = cl.elect_preferred_leaders()
    assert any("->" in v for v in results.values())
    assert [d["leader"] for d in cl.describe_topic("p")] == [asg[p][0] for p in range(3)]


def test_reassignment_under_load_moves_replicas_and_log_dirs(make_cluster: Make) -> None:
    c = make_cluster(4, log_dirs_per_broker=2)
    cl = c.client()
    cl.create_topic("r", 1, 2, assignment={0: [1, 2]})
    prod = AckedProducer(c.client(), "r").start()
    try:
        prod.wait_acked(30, 20)
        target_dir = c.broker_config(4)["log.dirs"].split(",")[1]
        cl.reassign([{"topic": "r", "partition": 0, "replicas": [3, 4],
                      "log_dirs": ["any", target_dir]}])
        c.wait_until(lambda: cl.describe_topic("r")[0]["replicas"] == [3, 4]
                     and not cl.reassignments(), 30, "reassignment done")
        prod.wait_acked(30, 20)
    finally:
        prod.stop()
    d = cl.describe_topic("r")[0]
    assert d["leader"] in (3, 4) and sorted(d["isr"]) == [3, 4]
    tp = TopicPartition("r", 0)
    assert c.broker(1).log_manager.get_log(tp) is None
    assert c.broker(2).log_manager.get_log(tp) is None
    assert str(c.broker(4).log_manager.log_dir_of(tp)) == target_dir
    assert_exactly_once([r.value for r in cl.read_all("r", 0)], prod.acked)
    wait_converged(c, "r", 0)


def test_delete_topic_and_whole_cluster_restart(make_cluster: Make, tmp_path) -> None:
    c = make_cluster(name="persist")
    cl = c.client()
    cl.create_topic("keep", 2, 3)
    cl.create_topic("gone", 1, 3)
    for i in range(3):
        cl.produce("keep", 1, [f"k{i}"])
    cl.delete_topic("gone")
    assert all(c.broker(b).log_manager.get_log(TopicPartition("gone", 0)) is None
               for b in c.live)
    c.close()
    c2 = LocalCluster(tmp_path / "persist", 3)
    try:
        c2.start()
        cl2 = c2.client()
        cl2.wait_for_leaders("keep", timeout=20)
        assert [r.value for r in cl2.read_all("keep", 1)] == [b"k0", b"k1", b"k2"]
        assert "gone" not in [t["topic"] for t in cl2.metadata()["topics"]]
    finally:
        c2.close()


def test_a_broker_that_died_and_registered_again_unseen_is_handled_as_a_bounce(
        make_cluster: Make, recorder: HookRecorder) -> None:
    c = make_cluster()
    cl = c.client()
    cl.create_topic("bounce", 3, 3)
    ctl_id = c.controller_id()
    victim = next(b for b in c.live if b != ctl_id)
    led = [p["partition"] for p in cl.describe_topic("bounce") if p["leader"] == victim]
    epochs = {p["partition"]: p["leader_epoch"] for p in cl.describe_topic("bounce")}
    ctl = c.controller()
    ctl.paused.set()  # the controller sees the death and the new registration at once
    try:
        c.kill(victim)
        c.restart(victim)
    finally:
        ctl.paused.clear()
    c.wait_until(lambda: victim in [x[1] for x in recorder.of("down")], 15, "bounce seen")
    for p in led:
        c.wait_until(lambda p=p: cl.describe_topic("bounce")[p]["leader_epoch"] > epochs[p],
                     15, "a new leader epoch for the partitions it led")
    for p in range(3):
        cl.produce("bounce", p, ["ok"], timeout=10)
        assert [r.value for r in cl.read_all("bounce", p)] == [b"ok"]
    c.wait_until(lambda: all(victim in d["isr"] for d in cl.describe_topic("bounce")), 15,
                 "the bounced broker follows again")


def test_topic_deletion_requested_through_the_admin_path(make_cluster: Make) -> None:
    c = make_cluster()
    cl = c.client()
    cl.create_topic("doomed", 2, 2)
    cl.produce("doomed", 0, ["x"])
    md = c.broker(c.live[0]).metadata
    md.request_topic_deletion("doomed")
    c.wait_until(lambda: "doomed" not in md.topics() and
                 not md.store.children_or_empty("/admin/delete_topics"), 15, "deleted")
    assert all(c.broker(b).log_manager.get_log(TopicPartition("doomed", p)) is None
               for b in c.live for p in (0, 1))


def test_consumers_read_only_up_to_the_high_watermark(make_cluster: Make) -> None:
    c = make_cluster(2, overrides={"replica.lag.time.max.ms": "60000"})
    cl = c.client()
    cl.create_topic("hw", 1, 2)
    cl.produce("hw", 0, ["committed"])
    leader = cl.leader("hw", 0, refresh=True)
    follower = 3 - leader
    c.broker(follower).replicas.paused.set()  # still in the ISR, not fetching
    try:
        cl.produce("hw", 0, ["pending"], acks=1)
        lg = c.broker(leader).log_manager.get_log(TopicPartition("hw", 0))
        assert lg.log_end_offset == 2 and lg.high_watermark == 1
        assert [r.value for r in cl.read_all("hw", 0)] == [b"committed"]
        assert cl.fetch("hw", 0, 1) == ([], 1)  # between HW and LEO: nothing yet
    finally:
        c.broker(follower).replicas.paused.clear()
    c.wait_until(lambda: [r.value for r in cl.read_all("hw", 0)] == [b"committed",
                                                                     b"pending"], 10,
                 "visible once the follower has it")


def test_the_only_live_broker_stops_without_controlled_shutdown_warnings(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """With no other live broker to take over, a controlled shutdown has nothing to move: it
    says so at INFO instead of warning once per retry that the broker still leads."""
    with LocalCluster(tmp_path / "one", 1) as cluster:
        cluster.client().create_topic("solo", 2, 1)
        cluster.wait_until(lambda: bool(cluster.broker(1).topics()), 20, "replicas hosted")
        with caplog.at_level(logging.INFO, logger="kafka_tiers.cluster.member"):
            cluster.stop_broker(1, controlled=True)
    member_lines = [r for r in caplog.records if r.name == "kafka_tiers.cluster.member"]
    assert not [r for r in member_lines if r.levelno >= logging.WARNING], [
        r.getMessage() for r in member_lines]
    assert any("no other live broker" in r.getMessage() for r in member_lines)
