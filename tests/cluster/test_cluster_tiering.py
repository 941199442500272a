"""Tiered storage in the cluster: only the leader copies, followers learn remote segments from
the storage listing, a new leader continues copying with no gap, consumers read old offsets
from the remote tier through the leader."""

from __future__ import annotations

import itertools
from pathlib import Path

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.local_cluster import LocalCluster


def test_only_the_leader_copies_and_a_new_leader_continues(make_cluster, tmp_path: Path
                                                           ) -> None:
    c: LocalCluster = make_cluster(overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000",
        "remote.log.manager.task.retry.jitter": "0"})
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
