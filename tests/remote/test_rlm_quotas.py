"""KIP-956 quotas of the remote log manager: the copy quota (shared by every copy, FIFO, a copy
never cut, an oversized segment still goes once the rate allows; over it a task ends its copy
phase and comes back after the throttle time instead of waiting on its pool thread) and the
fetch quota (a remote read skipped without error while it is exceeded), and their metrics."""

from __future__ import annotations

import threading
import time

from kafka_tiers.api import TopicPartition
from kafka_tiers.config import BrokerConfig
from kafka_tiers.remote.quota import UNLIMITED, RateQuota, WindowedRate
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    produce,
    shutdown_brokers,  # noqa: F401
)
from tests.kafka.raw_requests import RawConnection, request_class
from tests.kafka.targets import LISTENER


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_keys_have_kafkas_names_and_defaults() -> None:
    cfg = BrokerConfig({})
    assert cfg["remote.log.manager.copy.max.bytes.per.second"] == UNLIMITED == 2 ** 63 - 1
    assert cfg["remote.log.manager.fetch.max.bytes.per.second"] == UNLIMITED
    assert cfg["remote.log.manager.copy.quota.window.num"] == 11
    assert cfg["remote.log.manager.fetch.quota.window.num"] == 11
    assert cfg["remote.log.manager.copy.quota.window.size.seconds"] == 1
    assert cfg["remote.log.manager.fetch.quota.window.size.seconds"] == 1


def test_the_sampled_rate_spans_at_least_the_full_windows_and_forgets_old_ones() -> None:
    clock = Clock()
    rate = WindowedRate(11, 1, clock)
    rate.record(1000)
    assert rate.span() == 10 and rate.rate() == 100  # a first burst is not a huge rate
    clock.now = 30.0
    assert rate.total() == 0 and rate.rate() == 0  # older than the 11 windows: gone


def test_an_oversized_copy_goes_at_once_then_the_next_waits_for_the_rate() -> None:
    clock = Clock()
    quota = RateQuota(100, 2, 1, clock)
    assert quota.try_acquire(5000, "A") == 0  # larger than the quota, yet the rate allowed it
    assert quota.exceeded() and quota.throttle_time_ms() > 0
    wait_ms = quota.try_acquire(10, "B")  # the broker's copy rate is over the quota
    assert wait_ms >= 300 and quota.throttle_ms.max() >= 300
    clock.now = 100.0
    assert quota.try_acquire(10, "B") == 0


def test_try_acquire_never_waits_and_keeps_the_line_in_arrival_order(monkeypatch) -> None:
    clock = Clock()
    quota = RateQuota(100, 2, 1, clock)
    assert quota.try_acquire(1000, "A") == 0  # under the bound: granted and counted
    start = time.monotonic()
    wait_b = quota.try_acquire(1000, "B")
    assert wait_b > 0 and quota.try_acquire(1000, "C") > 0  # over it: told to come back
    assert time.monotonic() - start < 0.1  # nobody waited
    assert quota.throttle_ms.max() > 0
    clock.now += 100  # the rate falls under the bound
    assert quota.try_acquire(1000, "C") > 0  # B is ahead of C in the line
    assert quota.try_acquire(1000, "B") == 0
    clock.now += 100
    assert quota.try_acquire(1000, "C") == 0
    # a key that does not come back loses its place after its throttle time + grace
    monkeypatch.setattr(RateQuota, "WAITER_GRACE_S", 0.05)
    clock.now += 100
    assert quota.try_acquire(101, "X") == 0  # the rate is now just over the bound
    assert 0 < quota.try_acquire(1000, "D") <= 20  # told to come back in ~10 ms
    clock.now += 100
    assert quota.try_acquire(10, "E") > 0  # D is ahead
    time.sleep(0.2)  # D did not come back: its place expired
    assert quota.try_acquire(10, "E") == 0
    clock.now += 100
    assert quota.try_acquire(1000, "F") == 0 and quota.try_acquire(10, "G") > 0
    quota.forget("G")  # stopped: its place goes at once
    clock.now += 100
    assert quota.try_acquire(10, "H") == 0


def test_an_exceeded_copy_quota_ends_the_copy_phase_and_retention_still_runs(tmp_path) -> None:
    broker, _store, rec = make_broker(
        tmp_path, **{"remote.log.manager.copy.max.bytes.per.second": "4096",
                     "remote.log.manager.copy.quota.window.num": "2",
                     "remote.log.manager.copy.quota.window.size.seconds": "1"})
    broker.create_topic("a", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("a", 0)
    produce(broker, tp, 0, 40)
    lg = broker.log(tp)
    backlog = len(lg.inactive_segments())
    assert backlog >= 6
    start = time.monotonic()
    result = broker.rlm.run_once(tp)
    assert time.monotonic() - start < 1.0  # the pool thread is not held for the backlog
    assert result.error is None and result.copy_throttle_ms > 0
    assert 0 < len(result.copied) < backlog
    # local retention ran in the same run: the copied segments are gone locally
    assert lg.local_log_start_offset == result.copied[-1].end_offset + 1
    assert 0 < broker.rlm.next_run_in_ms(tp) <= result.copy_throttle_ms + 1  # back soon
    deadline = time.monotonic() + 30
    while len(rec.of("segment_copied")) < backlog and time.monotonic() < deadline:
        time.sleep(max(broker.rlm.next_run_in_ms(tp), 0) / 1000)
        assert broker.rlm.run_once(tp).error is None
    assert len(rec.of("segment_copied")) == backlog


def test_unlimited_quota_never_waits_and_still_measures() -> None:
    quota = RateQuota(UNLIMITED, 11, 1)
    for _ in range(100):
        assert quota.try_acquire(1 << 30, "A") == 0
    assert not quota.exceeded() and quota.rate() > 0


def test_two_partitions_share_the_copy_quota_and_both_progress(tmp_path) -> None:
    broker, _store, rec = make_broker(
        tmp_path, **{"remote.log.manager.copy.max.bytes.per.second": "8192",
                     "remote.log.manager.copy.quota.window.num": "2",
                     "remote.log.manager.copy.quota.window.size.seconds": "1"})
    tps = []
    for name in ("a", "b"):
        broker.create_topic(name, 1, {"remote.storage.enable": "true", "segment.bytes": "2048"})
        tp = TopicPartition(name, 0)
        produce(broker, tp, 0, 45)
        tps.append(tp)
    rlm = broker.rlm
    segments = {tp: len(broker.log(tp).inactive_segments()) for tp in tps}
    assert all(n >= 4 for n in segments.values())
    start = time.monotonic()

    def copy_all(tp: TopicPartition) -> None:
        """Run the task as the scheduler would: again after each copy throttle time."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            result = rlm.run_once(tp)
            if result.error is None and result.copy_throttle_ms == 0:
                return
            time.sleep(max(rlm.next_run_in_ms(tp), 0) / 1000)

    runs = [threading.Thread(target=copy_all, args=(tp,)) for tp in tps]
    for t in runs:
        t.start()
    for t in runs:
        t.join(30)
    took = time.monotonic() - start
    copied = [c[0].topic for c in rec.of("segment_copied")]
    assert sorted(copied) == sorted(tp.topic for tp in tps for _ in range(segments[tp]))
    # FIFO: neither partition's copies all went before the other's
    half = copied[:len(copied) // 2]
    assert half.count("a") >= 2 and half.count("b") >= 2, copied
    total = sum(info.size for tp in tps for info in broker.log(tp).inactive_segments())
    assert took >= (total - 2 * 8192) / 8192 * 0.8, (took, total)  # the quota held them
    m = broker.metrics
    assert m.value("RemoteLogManager:remote-copy-throttle-time-max") > 0
    assert m.value("RemoteLogManager:remote-copy-throttle-time-avg") > 0
    assert m.value("RLMCopy:byte-rate") > 0
    text = m.text()
    assert "kafka_log_remote_remotelogmanager_remote_copy_throttle_time_max" in text
    assert "kafka_log_remote_rlmcopy_byte_rate" in text


def _fetch(broker, topic: str, offset: int) -> tuple[int, bytes]:
    req = request_class(1, 12)
    part = req.FetchTopic.FetchPartition(
        version=12, partition=0, current_leader_epoch=-1, fetch_offset=offset,
        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    with RawConnection(broker.bootstrap_servers) as c:
        resp = c.call(1, 12, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20,
                      isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                      topics=[req.FetchTopic(version=12, topic=topic, partitions=[part])],
                      forgotten_topics_data=[])
    p = resp.responses[0].partitions[0]
    return p.error_code, bytes(p.records or b"")


def test_remote_reads_are_skipped_without_error_over_the_fetch_quota(tmp_path) -> None:
    broker, _store, _rec = make_broker(
        tmp_path, listeners=LISTENER,
        **{"remote.log.manager.fetch.max.bytes.per.second": "1000",
           "remote.log.manager.fetch.quota.window.num": "2",
           "remote.log.manager.fetch.quota.window.size.seconds": "1"})
    broker.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("t", 0)
    produce(broker, tp, 0, 60)
    broker.run_tiering()
    assert broker.log(tp).local_log_start_offset > 10
    code, records = _fetch(broker, "t", 0)  # under the quota: read (and counted)
    assert code == 0 and records
    assert broker.metrics.value("RLMFetch:byte-rate") > 0
    code, records = _fetch(broker, "t", 0)  # over it: no records, no error
    assert code == 0 and records == b""
    assert broker.metrics.value("RemoteLogManager:remote-fetch-throttle-time-max") > 0
    local = broker.log(tp).local_log_start_offset
    code, records = _fetch(broker, "t", local)  # the local tier is never throttled
    assert code == 0 and records
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the rate falls: the client's retry reads
        code, records = _fetch(broker, "t", 0)
        if records:
            break
        time.sleep(0.2)
    assert code == 0 and records


def test_a_remote_read_reserves_its_budget_and_is_charged_what_it_fetched(tmp_path) -> None:
    import pytest

    from kafka_tiers.api import RemoteResourceNotFoundError

    broker, _store, _rec = make_broker(tmp_path, **{"remote.log.reader.threads": "1"})
    broker.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("t", 0)
    produce(broker, tp, 0, 30)
    broker.run_tiering()
    rlm = broker.rlm
    total = rlm.fetch_quota._rate.total
    with pytest.raises(RemoteResourceNotFoundError):
        rlm.read(tp, 10 ** 6, 1 << 20)
    assert total() == 0  # a failed read's reservation is taken back
    gate = threading.Event()
    rlm.reader.submit(gate.wait)  # the only reader thread is busy: the read queues
    future = rlm.submit_read(tp, 0, 5000)
    assert total() == 5000  # reserved as it starts
    assert future.cancel()
    gate.set()
    assert total() == 0  # cancelled before it ran: nothing charged
    result = rlm.read(tp, 0, 100)
    assert total() == result.bytes_fetched > 0  # charged what it fetched, not its budget
