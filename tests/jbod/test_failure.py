"""A failed disk during traffic (document 000's system test 2 on one machine): the failing
file-system shim of :func:`tests.jbod.helpers.failing_dir` injects EIO into every operation
on one log dir (root ignores ``chmod 000``; no loop or tmpfs mounts here)."""

from __future__ import annotations

import errno
import time

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.describe import KAFKA_STORAGE_ERROR
from kafka_tiers.log.log_dir_failure import LogDirOfflineError
from kafka_tiers.log.replica_mover import FAILED
from kafka_tiers.log.replica_mover import KAFKA_STORAGE_ERROR as MOVE_STORAGE_ERROR
from tests.jbod.helpers import Consumer, Producer, failing_dir, produce, read_values, value


def test_failed_dir_takes_only_its_replicas_offline(manager_factory, recorder) -> None:
    stopped: list[BaseException] = []
    m = manager_factory(on_all_dirs_offline=stopped.append)
    d0, d1 = m.log_dirs
    good, bad = TopicPartition("topic1", 0), TopicPartition("topic2", 0)
    m.get_or_create_log(good, log_dir=d0)
    m.get_or_create_log(bad, log_dir=d1)
    threads = [Producer(m, good), Consumer(m, good), Producer(m, bad), Consumer(m, bad)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    with failing_dir(d1):
        deadline = time.monotonic() + 10
        while not (threads[2].errors and threads[3].errors):
            assert time.monotonic() < deadline, "the failed dir was never noticed"
            time.sleep(0.01)
        before = threads[0].next
        deadline = time.monotonic() + 5
        while threads[0].next < before + 50:  # the good dir keeps taking appends
            assert time.monotonic() < deadline and not threads[0].errors
            time.sleep(0.01)
        for t in (threads[0], threads[1]):
            t.stop.set()
            t.join()
    p_good, c_good, p_bad, c_bad = threads
    assert not p_good.errors and not c_good.errors
    assert isinstance(p_bad.errors[0], LogDirOfflineError)
    assert isinstance(c_bad.errors[0], LogDirOfflineError)
    assert [o for o, _ in c_good.values] == list(range(p_good.next))
    assert all(v == value(good, o) for o, v in c_good.values)
    assert set(m.offline_dirs) == {d1} and m.offline_partitions == {bad: d1}
    assert [(d, ps) for d, ps, _ in recorder.failed] == [(str(d1), [bad])]
    assert getattr(recorder.failed[0][2], "errno", None) == errno.EIO
    desc = {d.path: d for d in m.describe_log_dirs()}
    assert desc[str(d1)].error == KAFKA_STORAGE_ERROR and not desc[str(d1)].is_live
    assert desc[str(d1)].partitions == ()
    assert desc[str(d0)].is_live and [p.topic for p in desc[str(d0)].partitions] == ["topic1"]
    with pytest.raises(LogDirOfflineError):
        m.append(bad, b"")
    new = m.get_or_create_log(TopicPartition("topic3", 0))  # new replicas avoid the dead dir
    assert new.dir.parent == d0
    assert stopped == []
    with failing_dir(d0), pytest.raises(LogDirOfflineError):  # the last dir fails too
        produce(m, good, p_good.next, 1)
    assert len(stopped) == 1 and m.failure.all_offline.is_set()


def test_a_move_stops_when_its_destination_fails(manager_factory) -> None:
    m = manager_factory(intra_broker_throttled_rate=150_000)
    d0, d1 = m.log_dirs
    tp = TopicPartition("moving", 0)
    m.get_or_create_log(tp, log_dir=d0)
    produce(m, tp, 0, 3000)
    m.alter_replica_log_dirs({tp: str(d1)})
    deadline = time.monotonic() + 10
    while m.mover.in_progress().get(tp) is None or not m.mover.in_progress()[tp].bytes_copied:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with failing_dir(d1):
        assert m.wait_for_moves(10)
        status = m.replica_move_status(tp)[0]
        assert status.state == FAILED and status.error
        assert set(m.offline_dirs) == {d1}
        assert m.log_dir_of(tp) == d0  # the source keeps serving
        produce(m, tp, 3000, 10)
        assert [o for o, _ in read_values(m, tp)] == list(range(3010))
        assert m.alter_replica_log_dirs({tp: str(d1)}) == {tp: MOVE_STORAGE_ERROR}


def test_a_move_stops_when_its_source_fails_and_keeps_the_future(manager_factory) -> None:
    m = manager_factory(intra_broker_throttled_rate=150_000)
    d0, d1 = m.log_dirs
    tp = TopicPartition("moving", 1)
    m.get_or_create_log(tp, log_dir=d0)
    produce(m, tp, 0, 3000)
    m.alter_replica_log_dirs({tp: str(d1)})
    deadline = time.monotonic() + 10
    while m.mover.in_progress().get(tp) is None or not m.mover.in_progress()[tp].bytes_copied:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with failing_dir(d0):
        m.mark_log_dir_offline(d0, OSError(errno.EIO, "disk gone"))
        assert m.wait_for_moves(10)
    assert m.replica_move_status(tp)[0].state == FAILED
    assert m.offline_partitions == {tp: d0}
    assert [p.name for p in d1.iterdir() if p.name.endswith("-future")]  # left for rule 3


def test_an_io_error_on_the_source_during_a_copy_blames_the_source(manager_factory) -> None:
    m = manager_factory(intra_broker_throttled_rate=150_000)
    d0, d1 = m.log_dirs
    tp = TopicPartition("moving", 2)
    m.get_or_create_log(tp, log_dir=d0)
    produce(m, tp, 0, 3000)
    m.alter_replica_log_dirs({tp: str(d1)})
    deadline = time.monotonic() + 10
    while m.mover.in_progress().get(tp) is None or not m.mover.in_progress()[tp].bytes_copied:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with failing_dir(d0):
        assert m.wait_for_moves(10)
    assert m.replica_move_status(tp)[0].state == FAILED
    assert set(m.offline_dirs) == {d0} and m.offline_partitions == {tp: d0}
    assert [p.name for p in d1.iterdir() if p.name.endswith("-future")]  # left for rule 3
