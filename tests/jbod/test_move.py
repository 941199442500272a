"""Moving replicas between the log dirs of a broker while they serve (document 000, section 1
and its system test 1 adapted to one machine)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.logdirs import LogDirInfo
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.records import ProducerRecord, build_batch
from kafka_tiers.log.replica_mover import (
    CANCELLED,
    DONE,
    LOG_DIR_NOT_FOUND,
    NONE,
    QUEUED,
    REPLICA_NOT_AVAILABLE,
)
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
from kafka_tiers.plugins.hookspecs import hookimpl
from tests.jbod.helpers import CONFIG, Consumer, Producer, produce, read_values, value


def leftovers(*dirs: Path) -> list[str]:
    return sorted(p.name for d in dirs for p in d.iterdir()
                  if p.name.endswith(("-future", "-delete")))


def check_exact(values: list[tuple[int, bytes]], tp: TopicPartition, count: int) -> None:
    """Offsets 0..count-1 exactly once each, each with its own value."""
    assert [o for o, _ in values] == list(range(count))
    assert all(v == value(tp, o) for o, v in values)


def test_move_every_replica_to_the_other_dir_under_traffic(manager_factory, recorder,
                                                           tmp_path: Path) -> None:
    m = manager_factory()
    d0, d1 = m.log_dirs
    tps = [TopicPartition("orders", i) for i in range(4)]
    for i, tp in enumerate(tps):
        m.get_or_create_log(tp, log_dir=(d0, d1)[i % 2])
        produce(m, tp, 0, 1500 + 500 * i)
    producers = [Producer(m, tp) for tp in tps]
    for p, tp in zip(producers, tps, strict=True):
        p.next = m.get_log(tp).log_end_offset
        p.acked = list(range(p.next))
    consumers = [Consumer(m, tp) for tp in tps]
    for t in (*producers, *consumers):
        t.start()
    time.sleep(0.05)
    results = m.alter_replica_log_dirs(
        {tp: str((d1, d0)[i % 2]) for i, tp in enumerate(tps)})
    assert results == {tp: NONE for tp in tps}
    assert m.wait_for_moves(30)
    time.sleep(0.05)  # appends continue on the moved logs
    for t in producers:
        t.stop.set()
        t.join()
    for t in consumers:
        t.stop.set()
        t.join()
    for i, (tp, p, c) in enumerate(zip(tps, producers, consumers, strict=True)):
        assert not p.errors and not c.errors
        assert m.log_dir_of(tp) == (d1, d0)[i % 2]
        assert [s.state for s in m.replica_move_status(tp)] == [DONE]
        assert m.get_log(tp).log_end_offset == p.next == len(p.acked)
        check_exact(read_values(m, tp), tp, p.next)
        check_exact(c.values, tp, p.next)  # the consumer saw every record once
    assert sorted((tp, s, d) for tp, s, d in recorder.moved) == sorted(
        (tp, str((d0, d1)[i % 2]), str((d1, d0)[i % 2])) for i, tp in enumerate(tps))
    assert m.mover.deleter.wait(10)
    assert leftovers(d0, d1) == []
    counts = {tp: m.get_log(tp).log_end_offset for tp in tps}
    m.shutdown()
    again = LogManager([d0, d1], CONFIG)
    again.startup()
    try:
        for i, tp in enumerate(tps):
            assert again.log_dir_of(tp) == (d1, d0)[i % 2]
            check_exact(read_values(again, tp), tp, counts[tp])
        assert again.get_log(tps[0]).leader_epoch_cache.entries()[-1].epoch == 3
    finally:
        again.shutdown()


def test_move_keeps_offsets_epochs_producer_state_and_log_start(manager_factory) -> None:
    m = manager_factory()
    d0, d1 = m.log_dirs
    tp = TopicPartition("ledger", 0)
    log = m.get_or_create_log(tp, log_dir=d0)
    for i in range(300):
        recs = [ProducerRecord(value(tp, i), b"k", (), 1_000 + i)]
        log.append(build_batch(recs, producer_id=7, producer_epoch=0, base_sequence=i),
                   leader_epoch=1 + i // 100)
    log.update_high_watermark(250)
    log.advance_log_start_offset(120)
    before_epochs = log.leader_epoch_cache.entries()
    assert m.alter_replica_log_dirs({tp: str(d1)}) == {tp: NONE}
    assert m.wait_for_moves(20)
    moved = m.get_log(tp)
    assert moved is not log and log.closed and m.log_dir_of(tp) == d1
    assert (moved.log_start_offset, moved.high_watermark, moved.log_end_offset) == (120, 250,
                                                                                    300)
    assert moved.leader_epoch_cache.entries() == before_epochs
    assert moved.producer_state.producers[7].last_sequence == 299
    recs = [ProducerRecord(b"next", b"k", (), 5_000)]
    info = m.append(tp, build_batch(recs, producer_id=7, producer_epoch=0, base_sequence=300),
                    leader_epoch=4)
    assert info.first_offset == 300


def test_truncated_source_makes_the_move_start_over(manager_factory) -> None:
    m = manager_factory(intra_broker_throttled_rate=200_000)
    d0, d1 = m.log_dirs
    tp = TopicPartition("trunc", 0)
    m.get_or_create_log(tp, log_dir=d0)
    produce(m, tp, 0, 2000)
    m.alter_replica_log_dirs({tp: str(d1)})
    deadline = time.monotonic() + 10
    while m.mover.in_progress()[tp].bytes_copied < 60_000:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    source = m.get_log(tp)
    source.truncate_to(500)  # as a follower truncating to its leader: then new data
    for n in range(500, 1800, 5):
        recs = [ProducerRecord(b"new-%d" % (n + i), b"k", (), 9_000 + n + i) for i in range(5)]
        m.append(tp, build_batch(recs), leader_epoch=9)
    m.throttle.set_rate(None)
    assert m.wait_for_moves(30)
    assert m.log_dir_of(tp) == d1
    assert m.replica_move_status(tp)[0].restarts >= 1
    got = read_values(m, tp)
    assert [o for o, _ in got] == list(range(1800))
    assert all(v == value(tp, o) for o, v in got[:500])
    assert all(v == b"new-%d" % o for o, v in got[500:])


def test_any_cancels_and_unknown_replicas_are_remembered(manager_factory, tmp_path) -> None:
    m = manager_factory(intra_broker_throttled_rate=100_000)
    d0, d1 = m.log_dirs
    tp = TopicPartition("slow", 0)
    m.get_or_create_log(tp, log_dir=d0)
    produce(m, tp, 0, 3000)
    m.alter_replica_log_dirs({tp: str(d1)})
    deadline = time.monotonic() + 10
    while not leftovers(d1):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert m.alter_replica_log_dirs({tp: "any"}) == {tp: NONE}
    assert [s.state for s in m.replica_move_status(tp)] == [CANCELLED]
    assert m.mover.deleter.wait(10)
    assert leftovers(d0, d1) == [] and m.log_dir_of(tp) == d0
    check_exact(read_values(m, tp), tp, 3000)

    later = TopicPartition("later", 2)
    assert m.alter_replica_log_dirs({later: str(d1)}) == {later: REPLICA_NOT_AVAILABLE}
    assert m.mover.pending == {later: d1}
    m.get_or_create_log(later)
    assert m.log_dir_of(later) == d1 and m.mover.pending == {}
    assert m.alter_replica_log_dirs({tp: str(tmp_path / "nowhere")}) == {tp: LOG_DIR_NOT_FOUND}
    with pytest.raises(ValueError, match="absolute"):
        m.alter_replica_log_dirs({tp: "relative/dir"})
    with pytest.raises(ValueError, match=r"\.\."):
        m.alter_replica_log_dirs({tp: f"{d1}/../../etc"})


def test_moves_wait_for_a_free_thread(manager_factory) -> None:
    m = manager_factory(num_replica_move_threads=1, intra_broker_throttled_rate=400_000)
    d0, d1 = m.log_dirs
    a, b = TopicPartition("a", 0), TopicPartition("b", 0)
    for tp in (a, b):
        m.get_or_create_log(tp, log_dir=d0)
        produce(m, tp, 0, 1500)
    m.alter_replica_log_dirs({a: str(d1), b: str(d1)})
    assert m.mover.in_progress()[b].state == QUEUED
    assert m.wait_for_moves(30)
    first, second = m.replica_move_status(a)[0], m.replica_move_status(b)[0]
    assert first.state == second.state == DONE
    assert second.finished >= first.finished


class _Pick:
    def __init__(self) -> None:
        self.seen: list[list[LogDirInfo]] = []

    @hookimpl
    def kafka_tiers_choose_log_dir(self, topic_partition, log_dirs):  # type: ignore[no-untyped-def]
        self.seen.append(list(log_dirs))
        return log_dirs[-1].path if topic_partition.topic == "pinned" else None


def test_new_replica_dir_comes_from_the_hook_default_least_bytes(tmp_path) -> None:
    pick = _Pick()
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[pick]))
    m = LogManager([tmp_path / "x", tmp_path / "y", tmp_path / "z"], CONFIG, hooks=hooks)
    m.startup()
    try:
        big = TopicPartition("big", 0)
        m.get_or_create_log(big, log_dir=tmp_path / "x")
        produce(m, big, 0, 500)
        for i in range(3):  # y and z hold fewer bytes than x, whatever the counts
            m.get_or_create_log(TopicPartition("small", i))
        assert m.log_dir_of(TopicPartition("small", 0)) == tmp_path / "y"
        assert m.log_dir_of(TopicPartition("small", 1)) == tmp_path / "z"
        assert m.log_dir_of(TopicPartition("small", 2)) in (tmp_path / "y", tmp_path / "z")
        m.get_or_create_log(TopicPartition("pinned", 0))
        assert m.log_dir_of(TopicPartition("pinned", 0)) == tmp_path / "z"
        infos = pick.seen[0]
        assert [i.path for i in infos] == [str(tmp_path / d) for d in "xyz"]
        assert infos[0].bytes_used == m.get_log(big).size > 0 and infos[0].replica_count == 1
        assert infos[0].total_bytes > 0 and all(i.online for i in infos)
    finally:
        m.shutdown()


def test_clean_shutdown_mid_move_resumes_at_restart(manager_factory, tmp_path) -> None:
    m = manager_factory(intra_broker_throttled_rate=100_000)
    d0, d1 = m.log_dirs
    tp = TopicPartition("resume", 0)
    m.get_or_create_log(tp, log_dir=d0)
    produce(m, tp, 0, 3000)
    m.alter_replica_log_dirs({tp: str(d1)})
    deadline = time.monotonic() + 10
    while m.mover.in_progress()[tp].bytes_copied < 50_000:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    m.shutdown()
    assert leftovers(d1) and not leftovers(d0)  # the future log stays for the restart
    again = LogManager([d0, d1], CONFIG)
    report = again.startup()
    try:
        assert [a for a, _ in report.jbod_actions] == ["resumed"]
        assert again.wait_for_moves(30) and again.log_dir_of(tp) == d1
        check_exact(read_values(again, tp), tp, 3000)
    finally:
        again.shutdown()
