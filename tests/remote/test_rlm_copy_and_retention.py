"""The remote log manager's copy task: failures cleaned up and retried with backoff, local
retention waiting for the remote commit, remote retention by time and bytes, orphans, and a
new leader continuing where the old one stopped."""

from __future__ import annotations

import io
import itertools
import os
import shutil
import time

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.storage import RemoteLogSegmentId
from kafka_tiers.objectstore import ObjectKind, segment_key
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    produce,
    read_values,
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    tiered,
    value,
)


def _remote_files(tmp_path) -> set[str]:
    root = tmp_path / "remote"
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and ".kt-tmp" not in p.parts}


def test_failed_copy_is_cleaned_up_and_retried_with_backoff(tmp_path):
    broker, store, rec = make_broker(tmp_path, remote_log_manager_task_retry_backoff_ms="400",
                                     remote_log_manager_task_retry_backoff_max_ms="1000")
    tp = tiered(broker)
    produce(broker, tp, 0, 40)
    rlm = broker.rlm
    store.fail_puts, store.fail_suffix = 1, ".manifest"  # fails midway: after the log is stored
    result = rlm.run_once(tp)
    assert result.error is not None and not result.copied
    failed = rec.of("segment_copy_failed")
    assert len(failed) == 1 and failed[0][1].start_offset == 0
    assert _remote_files(tmp_path) == set()  # the attempt's objects were deleted
    assert rlm.remote_segments(tp) == []
    assert 390 <= rlm.next_run_in_ms(tp) <= 400  # jitter 0: the first backoff
    assert "injected fault" in rlm.last_error(tp)
    store.fail_puts = 1
    rlm.run_once(tp)
    assert 790 <= rlm.next_run_in_ms(tp) <= 800  # doubled
    store.fail_puts = 5
    for _ in range(3):
        rlm.run_once(tp)
    assert 990 <= rlm.next_run_in_ms(tp) <= 1000  # capped at backoff.max.ms
    produce(broker, tp, 40, 10)  # produce is never blocked by the failing tier
    store.fail_puts = 0
    result = rlm.run_once(tp)
    assert result.error is None and result.copied[0].start_offset == 0
    tried = {c[1].segment_id for c in rec.of("segment_copy_failed")}
    assert result.copied[0].segment_id not in tried  # a fresh id per attempt
    assert rlm.last_error(tp) is None and rlm.next_run_in_ms(tp) > 3_000_000
    assert broker.metrics.value("RemoteCopyErrorsPerSec", tp) == 5
    broker.shutdown()


def test_scheduled_retries_happen_in_the_background(tmp_path):
    broker, store, rec = make_broker(tmp_path, background=True,
                                     remote_log_manager_task_interval_ms="3600000",
                                     remote_log_manager_task_retry_backoff_ms="50",
                                     remote_log_manager_task_retry_backoff_max_ms="100")
    store.fail_puts, store.fail_suffix = 2, ".log"
    tp = tiered(broker)
    produce(broker, tp, 0, 30)  # the rolls trigger the task
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not rec.of("segment_copied"):
        time.sleep(0.02)
    assert len(rec.of("segment_copy_failed")) == 2
    assert rec.of("segment_copied")[0][1].start_offset == 0
    broker.shutdown()


def test_local_retention_waits_for_the_remote_commit(tmp_path):
    broker, store, _ = make_broker(tmp_path)
    tp = tiered(broker, local_retention_bytes="0", local_retention_ms="0")
    produce(broker, tp, 0, 60)
    lg = broker.log(tp)
    before = lg.segment_bases()
    store.mode = "fail"
    result = broker.run_tiering()[tp]
    assert result.error is not None and result.local_deleted == 0
    assert lg.segment_bases() == before and lg.local_log_start_offset == 0
    store.fail_puts, store.fail_suffix, store.mode = 1, ".manifest", "ok"  # 1st copy fails
    result = broker.run_tiering()[tp]
    assert result.error is not None and result.local_deleted == 0
    assert lg.segment_bases() == before
    result = broker.run_tiering()[tp]
    assert result.error is None and result.local_deleted == len(before) - 1
    assert lg.local_log_start_offset == before[-1]
    broker.shutdown()


def test_local_retention_by_time_keeps_recent_segments(tmp_path):
    broker, _, _ = make_broker(tmp_path)
    tp = tiered(broker, local_retention_ms="60000")
    old = int(time.time() * 1000) - 3_600_000
    produce(broker, tp, 0, 30, timestamp=old)
    produce(broker, tp, 30, 30)
    lg = broker.log(tp)
    result = broker.run_tiering()[tp]
    assert result.copied and result.local_deleted >= 1
    # the segments left locally hold the recent records: none is older than the limit
    assert all(s.max_timestamp_and_offset.timestamp > old for s in lg.segments()[:-1])
    assert lg.local_log_start_offset <= 30
    assert read_values(broker, tp, 0, 60)[0] == (value(0), "remote")
    broker.shutdown()


def test_remote_retention_by_time(tmp_path):
    broker, _, rec = make_broker(tmp_path)
    tp = tiered(broker, remote_retention_period="3600000", local_retention_ms="0")
    old = int(time.time() * 1000) - 2 * 3_600_000
    produce(broker, tp, 0, 30, timestamp=old)
    broker.log(tp).roll()
    first_recent = broker.log(tp).log_end_offset
    produce(broker, tp, 30, 30)
    result = broker.run_tiering()[tp]
    assert result.error is None and result.remote_deleted
    assert all(m.max_timestamp_ms == old for m in result.remote_deleted)
    assert [m.end_offset for m in result.remote_deleted][-1] == first_recent - 1
    left = broker.rlm.remote_segments(tp)
    assert left[0].start_offset == first_recent
    assert broker.log(tp).log_start_offset == first_recent
    assert len(rec.of("remote_segment_deleted")) == len(result.remote_deleted)
    assert read_values(broker, tp, first_recent, 60)[first_recent][1] == "remote"
    broker.shutdown()


def test_remote_retention_by_bytes(tmp_path):
    broker, _, _ = make_broker(tmp_path)
    tp = tiered(broker, remote_retention_bytes="6000", local_retention_bytes="0")
    produce(broker, tp, 0, 100)
    result = broker.run_tiering()[tp]
    left = broker.rlm.remote_segments(tp)
    kept = sum(m.segment_size_in_bytes for m in left) + broker.log(tp).size
    # Kafka's rule: delete the oldest while what is left stays at or above the limit
    assert result.remote_deleted and kept >= 6000
    assert kept - left[0].segment_size_in_bytes < 6000  # deleting one more would go below
    assert left[0].start_offset == result.remote_deleted[-1].end_offset + 1
    assert broker.log(tp).log_start_offset == left[0].start_offset
    broker.shutdown()


def test_orphans_are_collected_after_the_remote_retention_time(tmp_path):
    broker, store, _ = make_broker(tmp_path)
    tp = tiered(broker, remote_retention_period="600000")
    produce(broker, tp, 0, 30)
    # a failed copy whose cleanup failed too leaves garbage behind
    store.fail_puts, store.fail_suffix, store.fail_deletes = 1, ".manifest", True
    assert broker.run_tiering()[tp].error is not None
    store.fail_deletes = False
    garbage = _remote_files(tmp_path)
    assert garbage and not any(g.endswith(".manifest") for g in garbage)
    # the plugin's own store (no key.prefix), not through the broker's guard
    young = segment_key("", RemoteLogSegmentId.generate(tp), 900, ObjectKind.LOG)
    store.put(young, io.BytesIO(b"fresh garbage"), 13)
    assert broker.rlm.collect_orphans(tp) == []  # younger than remote.retention.period
    old = time.time() - 3600
    for name in garbage:
        os.utime(tmp_path / "remote" / name, (old, old))
    removed = broker.rlm.collect_orphans(tp)
    assert sorted(removed) == sorted(garbage)
    assert _remote_files(tmp_path) == {young}
    result = broker.run_tiering()[tp]  # copying works again, with a new id
    assert result.copied and result.error is None
    broker.shutdown()


def test_new_leader_continues_with_no_gap_and_no_duplicate(tmp_path):
    a, _, rec_a = make_broker(tmp_path, "a", broker_id=1, controlled=False)
    tp = tiered(a, local_retention_bytes="0")
    produce(a, tp, 0, 60)
    first = a.run_tiering()[tp].copied
    assert first
    produce(a, tp, 60, 60)  # rolled, not copied yet by the old leader
    a.become_follower(tp)
    assert a.run_tiering()[tp].copied == []  # a follower never copies
    a.shutdown()
    # the new leader holds a replica of the log (as replication would have given it): the
    # partition's dir only; broker 1's meta.properties and lock stay broker 1's
    shutil.copytree(tmp_path / "a", tmp_path / "b",
                    ignore=shutil.ignore_patterns(".lock", "meta.properties"))
    b, _, rec_b = make_broker(tmp_path, "b", broker_id=2, controlled=False)
    b.become_follower(tp)
    b.run_tiering()
    assert [m.segment_id for m in b.rlm.remote_segments(tp)] == [m.segment_id for m in first]
    b.become_leader(tp, 1)
    second = b.run_tiering()[tp].copied
    assert second and second[0].start_offset == first[-1].end_offset + 1
    assert all(m.broker_id == 2 for m in second)
    assert set(second[-1].segment_leader_epochs) <= {0, 1}
    listed = b.rlm.remote_segments(tp)
    assert [m.segment_id for m in listed] == [m.segment_id for m in first + second]
    starts = [m.start_offset for m in listed]
    assert starts[0] == 0 and len(set(starts)) == len(starts)
    assert all(n.start_offset == m.end_offset + 1 for m, n in itertools.pairwise(listed))
    got = read_values(b, tp, 0, 120)
    assert {o: v for o, (v, _) in got.items()} == {i: value(i) for i in range(120)}
    produce(b, tp, 120, 5)  # stamped with the new epoch
    assert b.log(tp).leader_epoch_cache.latest_epoch == 1
    b.shutdown()
    assert not rec_a.of("segment_copy_failed") and not rec_b.of("segment_copy_failed")


def test_stop_partition_without_delete_keeps_remote_data(tmp_path):
    broker, _, _ = make_broker(tmp_path)
    tp = tiered(broker)
    produce(broker, tp, 0, 30)
    copied = broker.run_tiering()[tp].copied
    broker.rlm.stop_partition(tp)
    assert broker.rlm.partitions() == []
    assert [m.segment_id for m in broker.rlm.remote_segments(tp)] == [
        m.segment_id for m in copied]
    assert broker.rlm.remote_segments(TopicPartition("other", 0)) == []
    broker.shutdown()
