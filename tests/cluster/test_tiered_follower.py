"""A replica of a tiered topic behind the leader's local log start (KIP-405's follower fetch
from a tiered offset): it starts its local log at the leader's local start with the leader's
log start offset, and takes the leader epochs (and producer state) of the records below from
the remote tier, so the remote offsets stay readable when it later leads."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.producer_state import (
    CorruptSnapshotError,
    ProducerStateEntry,
    encode_snapshot,
)

TOPIC = "tiered"
TP = TopicPartition(TOPIC, 0)


def _value(i: int) -> bytes:
    return f"value-{i:04d}-".encode() + b"x" * 40


def _produce(cl, first: int, count: int) -> None:  # type: ignore[no-untyped-def]
    for i in range(first, first + count):
        cl.produce(TOPIC, 0, [_value(i)])


def test_a_restarted_replica_behind_the_local_log_keeps_the_log_start_and_leads(
        make_cluster, tmp_path: Path) -> None:
    """The reviewer's scenario: the leader is killed, the new leader tiers and deletes its
    local segments, the old leader restarts behind the new leader's local log start and is
    made leader again (preferred election): earliest offset 0, every record readable from
    0, every replica's log start offset 0, and the new leader's remote retention deletes
    nothing (its log start is the partition's)."""
    c: LocalCluster = make_cluster(overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000",
        "remote.log.manager.task.retry.jitter": "0"}, background=False)
    cl = c.client()
    cl.create_topic(TOPIC, 1, 3, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                  "local.retention.bytes": "0"})
    _produce(cl, 0, 60)
    first = cl.leader(TOPIC, 0, refresh=True)
    c.wait_until(lambda: all(c.broker(b).log_manager.get_log(TP).log_end_offset == 60
                             for b in c.live), 10, "every replica caught up")
    c.kill(first)
    c.wait_until(lambda: cl.leader(TOPIC, 0, refresh=True) not in (-1, first), 20,
                 "a new leader")
    new = cl.leader(TOPIC, 0)
    _produce(cl, 60, 60)
    done = c.broker(new).rlm.run_once(TP)  # copies every rolled segment, deletes them locally
    assert done.error is None and done.copied and done.local_deleted
    local_start = c.broker(new).log_manager.get_log(TP).local_log_start_offset
    assert local_start > 60  # the restarted replica ends below it
    remote_before = [m.segment_id for m in c.broker(new).rlm.remote_segments(TP)]

    c.restart(first)
    lg = c.broker(first).log_manager.get_log(TP)
    c.wait_until(lambda: lg.log_end_offset == 120, 15, "the restarted replica caught up")
    assert lg.log_start_offset == 0  # not the leader's local log start
    assert lg.local_log_start_offset >= local_start
    # its leader epochs below its local log come from the remote segment's checkpoint
    assert lg.leader_epoch_cache.entries()[0].start_offset == 0
    c.wait_until(lambda: first in next(p for p in cl.describe_topic(TOPIC)
                                       if p["partition"] == 0)["isr"], 15, "back in the ISR")

    cl.elect_preferred_leaders([(TOPIC, 0)])
    c.wait_until(lambda: cl.leader(TOPIC, 0, refresh=True) == first, 15, "preferred leader")
    c.wait_until(lambda: c.broker(first).rlm.role(TP) == "leader", 10, "its tier leads")
    leader = c.broker(first)
    assert leader.log_start_offset(TP) == 0  # ListOffsets' earliest
    again = leader.rlm.run_once(TP)
    assert again.error is None and not again.remote_deleted
    assert [m.segment_id for m in leader.rlm.remote_segments(TP)][:len(remote_before)] == \
        remote_before
    assert [r.value for r in cl.read_all(TOPIC, 0)] == [_value(i) for i in range(120)]
    batch = leader.fetch(TP, 0)
    assert batch.records  # offset 0, from the remote tier, on the new leader
    for b in c.live:
        c.wait_until(lambda b=b: c.broker(b).log_manager.get_log(TP).log_end_offset == 120,
                     10, "replicas caught up")
        assert c.broker(b).log_manager.get_log(TP).log_start_offset == 0


def test_a_replica_added_by_reassignment_starts_from_the_remote_tier_and_leads(
        make_cluster, tmp_path: Path) -> None:
    """A new replica (reassignment to a broker that never held the partition) of a tiered
    topic whose leader deleted its tiered segments locally: it starts after the remote
    tier, keeps log start 0, and once it leads every record is readable from 0."""
    c: LocalCluster = make_cluster(3, overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000",
        "remote.log.manager.task.retry.jitter": "0"}, background=False)
    cl = c.client()
    cl.create_topic(TOPIC, 1, 2, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                  "local.retention.bytes": "0"}, assignment={0: [1, 2]})
    _produce(cl, 0, 60)
    leader = cl.leader(TOPIC, 0, refresh=True)
    c.wait_until(lambda: all(c.broker(b).log_manager.get_log(TP).log_end_offset == 60
                             for b in (1, 2)), 10, "both replicas caught up")
    done = c.broker(leader).rlm.run_once(TP)
    assert done.error is None and done.local_deleted
    assert c.broker(leader).log_manager.get_log(TP).local_log_start_offset > 0
    cl.reassign([{"topic": TOPIC, "partition": 0, "replicas": [3, leader]}])
    c.wait_until(lambda: cl.describe_topic(TOPIC)[0]["replicas"] == [3, leader]
                 and not cl.reassignments(), 20, "reassignment done")
    lg = c.broker(3).log_manager.get_log(TP)
    assert lg.log_start_offset == 0 and lg.log_end_offset == 60
    cl.elect_preferred_leaders([(TOPIC, 0)])
    c.wait_until(lambda: cl.leader(TOPIC, 0, refresh=True) == 3, 15, "the new replica leads")
    assert c.broker(3).log_start_offset(TP) == 0
    assert [r.value for r in cl.read_all(TOPIC, 0)] == [_value(i) for i in range(60)]


def _tiered_log(path: Path, **kwargs: object) -> Log:
    return Log.open(path / f"{TOPIC}-0", LogConfig(segment_bytes=1024,
                                                   remote_storage_enable=True),
                    **kwargs)  # type: ignore[arg-type]


def test_emptying_a_tiered_log_never_moves_its_log_start_up(tmp_path: Path) -> None:
    with _tiered_log(tmp_path, log_start_offset=0) as lg:
        lg.truncate_fully_and_start_at(500)
        assert (lg.log_start_offset, lg.local_log_start_offset, lg.log_end_offset) == \
            (0, 500, 500)
        lg.truncate_fully_and_start_at(700, log_start_offset=300)  # the leader's
        assert (lg.log_start_offset, lg.local_log_start_offset) == (300, 700)
        lg.truncate_fully_and_start_at(100)  # below it: lowered
        assert lg.log_start_offset == 100
        with pytest.raises(ValueError, match="log start offset 900"):
            lg.truncate_fully_and_start_at(800, log_start_offset=900)
    local = Log.open(tmp_path / "local-0", LogConfig(segment_bytes=1024))
    with local:
        local.truncate_fully_and_start_at(500)  # nothing is kept below it
        assert local.log_start_offset == 500


def test_start_after_remote_takes_the_epochs_and_the_producer_snapshot(tmp_path: Path
                                                                      ) -> None:
    import time

    # a producer's state at offset 400, as the remote segment before it ships it
    entry = ProducerStateEntry(producer_id=7, producer_epoch=2, last_sequence=41,
                               last_offset=399, offset_delta=0,
                               timestamp=int(time.time() * 1000))
    with _tiered_log(tmp_path) as lg:
        lg.start_after_remote(400, 0, [(0, 0), (3, 250), (5, 400)], encode_snapshot([entry]))
        assert (lg.log_start_offset, lg.local_log_start_offset, lg.log_end_offset) == \
            (0, 400, 400)
        assert [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries()] == \
            [(0, 0), (3, 250)]
        assert lg.leader_epoch_cache.end_offset_for(0, lg.log_end_offset) == (0, 250)
        assert (lg.dir / "leader-epoch-checkpoint").read_text().split() == \
            ["0", "2", "0", "0", "3", "250"]  # durable
        assert lg.producer_state.producers[7].producer_epoch == 2
        assert lg.producer_state.producers[7].last_sequence == 41
        with pytest.raises(CorruptSnapshotError):
            lg.start_after_remote(500, 0, [], b"garbage")
        assert not list(lg.dir.glob("*.snapshot"))
