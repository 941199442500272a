"""Tiered storage in the cluster: only the leader copies, followers learn remote segments from
the storage listing, a new leader continues copying with no gap, consumers read old offsets
from the remote tier through the leader."""

from __future__ import annotations

import itertools
from pathlib import Path

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.broker import flaky_storage


def test_only_the_leader_copies_and_a_new_leader_continues(make_cluster, tmp_path: Path
                                                           ) -> None:
    # background=False: no scheduled copies (a roll would copy at once, see below), so the
    # test decides when each broker's task runs
    c: LocalCluster = make_cluster(overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000",
        "remote.log.manager.task.retry.jitter": "0"}, background=False)
    cl = c.client()
    cl.create_topic("tiered", 1, 3, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                      "local.retention.bytes": "0"})
    tp = TopicPartition("tiered", 0)
    for i in range(60):
        cl.produce("tiered", 0, [f"value-{i:04d}-" + "x" * 40])
    leader = cl.leader("tiered", 0, refresh=True)
    followers = [b for b in c.live if b != leader]
    c.wait_until(lambda: all(c.broker(b).log_manager.get_log(tp).log_end_offset == 60
                             for b in followers), 10, "followers caught up")
    for b in followers:  # followers copy nothing
        assert c.broker(b).rlm.role(tp) == "follower"
        assert not c.broker(b).rlm.run_once(tp).copied
    first = c.broker(leader).rlm.run_once(tp)
    assert first.error is None and first.copied
    end1 = c.broker(leader).rlm.highest_remote_offset(tp)
    # followers learn the remote segments from the storage listing (their own task)
    assert not c.broker(followers[0]).rlm.run_once(tp).copied
    assert [m.segment_id for m in c.broker(followers[0]).rlm.remote_segments(tp)] == \
        [m.segment_id for m in first.copied]
    # consumers read below the leader's local log start from the remote tier
    assert c.broker(leader).log_manager.get_log(tp).local_log_start_offset > 0
    values = [r.value for r in cl.read_all("tiered", 0)]
    assert values == [f"value-{i:04d}-".encode() + b"x" * 40 for i in range(60)]
    c.kill(leader)
    c.wait_until(lambda: cl.leader("tiered", 0, refresh=True) not in (-1, leader), 20,
                 "new leader")
    new = cl.leader("tiered", 0)
    for i in range(60, 100):
        cl.produce("tiered", 0, [f"value-{i:04d}-" + "x" * 40])
    assert c.broker(new).rlm.role(tp) == "leader"
    again = c.broker(new).rlm.run_once(tp)
    assert again.error is None and again.copied
    assert again.copied[0].start_offset == end1 + 1  # no gap, no overlap
    segs = c.broker(new).rlm.remote_segments(tp)
    assert all(a.end_offset + 1 == b.start_offset for a, b in itertools.pairwise(segs))
    values = [r.value for r in cl.read_all("tiered", 0)]
    assert len(values) == 100 and values[0] == b"value-0000-" + b"x" * 40


def test_a_roll_copies_at_once_without_waiting_for_the_task_interval(make_cluster,
                                                                    tmp_path: Path) -> None:
    """The cluster member wires ``on_roll``: with an hour-long task interval, a rolled segment
    below the high watermark still reaches the remote tier within seconds (only from the
    leader), and local retention follows."""
    c: LocalCluster = make_cluster(overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000",
        "remote.log.manager.task.retry.jitter": "0"})
    cl = c.client()
    cl.create_topic("rolled", 1, 3, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                      "local.retention.bytes": "0"})
    tp = TopicPartition("rolled", 0)
    leader = cl.leader("rolled", 0, refresh=True)
    rlm = c.broker(leader).rlm
    c.wait_until(lambda: rlm.role(tp) == "leader", 10, "the leader's remote tier leads")
    # the first task run after becoming leader is due at once; let it pass, so that what
    # follows is the interval's wait unless a roll triggers a run
    c.wait_until(lambda: rlm.next_run_in_ms(tp) > 60_000, 10, "first run done")
    for i in range(60):
        cl.produce("rolled", 0, [f"value-{i:04d}-" + "x" * 40])
    lg = c.broker(leader).log_manager.get_log(tp)
    assert lg.segment_bases()[-1] > 0  # it rolled
    c.wait_until(lambda: rlm.highest_remote_offset(tp) >= 0, 10,
                 "a rolled segment copied without waiting for the task interval")
    c.wait_until(lambda: lg.local_log_start_offset > 0, 10, "local retention after the copy")
    for b in c.live:
        if b != leader:
            assert c.broker(b).rlm.role(tp) == "follower"
    values = [r.value for r in cl.read_all("rolled", 0)]
    assert values == [f"value-{i:04d}-".encode() + b"x" * 40 for i in range(60)]


def test_a_cluster_member_starts_while_the_remote_tier_is_down_and_has_metrics(
        make_cluster, tmp_path: Path) -> None:
    """Remote-tier start-up is the standalone broker's: a plugin that cannot reach its tier
    at start does not fail the cluster member (its tasks retry, secrets stay out of the
    errors), and the member has the broker's tiered-storage metrics."""
    flaky_storage.DOWN.set()
    try:
        c: LocalCluster = make_cluster(1, overrides={
            "remote.log.storage.enable": "true",
            "remote.storage.manager.class": flaky_storage.PATH,
            "rsm.config.dir": str(tmp_path / "remote"), "rsm.config.password": "hunter2",
            "remote.log.manager.task.interval.ms": "3600000",
            "remote.log.manager.task.retry.backoff.ms": "50",
            "remote.log.manager.task.retry.backoff.max.ms": "100",
            "remote.log.manager.task.retry.jitter": "0"})
        broker = c.broker(1)
        assert broker.started and broker.rlm is not None and not broker.rlm.storage_loaded
        cl = c.client()
        cl.create_topic("t", 1, 1, {"remote.storage.enable": "true", "segment.bytes": "2048"})
        tp = TopicPartition("t", 0)
        for i in range(40):
            cl.produce("t", 0, [f"value-{i:04d}-" + "x" * 40])
        assert cl.read_all("t", 0)[0].value == b"value-0000-" + b"x" * 40
        c.wait_until(lambda: broker.rlm.last_error(tp) is not None, 10, "a failed retry")
        error = broker.rlm.last_error(tp)
        assert "not available" in error and "hunter2" not in error
    finally:
        flaky_storage.DOWN.clear()  # the remote tier comes back
    c.wait_until(lambda: broker.rlm.storage_loaded, 20, "the plugin loaded on a retry")
    c.wait_until(lambda: broker.rlm.highest_remote_offset(tp) >= 0, 20, "copied")
    assert broker.metrics.value("RemoteCopyRequestsPerSec", tp) >= 1
    assert "remotecopyrequestspersec" in broker.metrics_text()
