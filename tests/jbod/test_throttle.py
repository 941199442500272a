"""intra.broker.throttled.rate: the token bucket, and a real move at a set rate taking the
expected time (the issue asks for within 10%)."""

from __future__ import annotations

import os
import time

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.config import LONG_MAX, LogConfig
from kafka_tiers.log.replica_mover import DONE
from kafka_tiers.log.throttle import BURST_SECONDS, Throttle
from tests.jbod.helpers import produce


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bucket_starts_empty_and_shares_one_rate() -> None:
    clock = FakeClock()
    t = Throttle(1000, clock=clock)
    assert t.reserve(500) == 0.5  # empty at start: 500 bytes cost 0.5 s
    assert t.reserve(500) == 1.0  # a second caller queues behind the first
    clock.now += 1.0
    assert t.reserve(0) == 0.0  # debt paid after the time passed
    clock.now += 10.0  # idle: at most BURST_SECONDS of tokens pile up
    assert t.reserve(int(1000 * BURST_SECONDS)) == 0.0
    assert t.reserve(100) == 0.1
    assert t.total_bytes == 1000 + int(1000 * BURST_SECONDS) + 100


def test_unlimited_and_rate_changes() -> None:
    clock = FakeClock()
    for rate in (None, 0, LONG_MAX):
        t = Throttle(rate, clock=clock)
        assert t.unlimited and t.rate is None and t.reserve(1 << 40) == 0.0
    t = Throttle(None, clock=clock)
    t.set_rate(2000)
    assert t.rate == 2000 and t.reserve(1000) == 0.5
    t.set_rate(None)
    assert t.reserve(1 << 30) == 0.0


def test_acquire_sleeps_and_cancel_wakes_it() -> None:
    import threading

    t = Throttle(1 << 20)
    start = time.monotonic()
    slept = t.acquire(1 << 18)  # a quarter second
    assert slept >= 0.2 and time.monotonic() - start < 0.5
    cancel = threading.Event()
    cancel.set()
    assert t.acquire(1 << 30, cancel) < 0.1


def test_move_at_a_set_rate_takes_the_expected_time(manager_factory) -> None:
    # 2 MiB at 512 KiB/s: a 4 s move, so the swap's few fsyncs (tens of ms, outside any
    # throttle) stay a small share of the time measured
    rate = 512 << 10
    config = LogConfig(segment_bytes=256 << 10, retention_ms=-1)
    m = manager_factory(config=config, intra_broker_throttled_rate=rate)
    d0, d1 = m.log_dirs
    tp = TopicPartition("throttled", 0)
    m.get_or_create_log(tp, log_dir=d0)
    n = 0
    while m.get_log(tp).size < 2 << 20:  # 2 MiB
        n = produce(m, tp, n, 500, per_batch=50)
    size = m.get_log(tp).size
    m.flush_all()  # the producer's data is written back first: the move pays only for itself
    os.sync()
    start = time.monotonic()
    m.alter_replica_log_dirs({tp: str(d1)})
    assert m.wait_for_moves(30)
    elapsed = time.monotonic() - start
    status = m.replica_move_status(tp)[0]
    assert status.state == DONE
    expected = status.bytes_copied / rate  # every byte copied went through the throttle
    assert status.bytes_copied >= size
    assert abs(elapsed - expected) <= 0.10 * expected, (elapsed, expected)
