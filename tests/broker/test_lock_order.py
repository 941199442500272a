"""The lock audit of issue 13 ("no component waits for another while holding a lock the other
may need"), one test per wait that was found under a lock: each makes the waited-for call
block, and checks the lock is free meanwhile (it was not: a deadlock waiting to happen)."""

from __future__ import annotations

import threading
from pathlib import Path

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_manager import LogManager


def test_a_replica_move_reads_the_log_size_without_holding_the_movers_lock(
        tmp_path: Path) -> None:
    """get_or_create_log holds the log manager's lock and takes the mover's (a move requested
    before the replica existed); a move request held the mover's lock while asking the log
    manager for the log's size: lock-order inversion."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    lm = LogManager([d1, d2], LogConfig())
    lm.startup()
    try:
        tp = TopicPartition("t", 0)
        lm.get_or_create_log(tp, log_dir=d1)
        real_get_log = lm.get_log
        asking, release = threading.Event(), threading.Event()
        mover_thread: list[threading.Thread] = []

        def get_log(t: TopicPartition) -> Log | None:
            if threading.current_thread() in mover_thread:
                asking.set()  # what another thread holding the manager's lock would cause
                release.wait(10)
            return real_get_log(t)

        lm.get_log = get_log  # type: ignore[method-assign,assignment]
        requester = threading.Thread(target=lm.alter_replica_log_dirs, args=({tp: str(d2)},),
                                     daemon=True)
        mover_thread.append(requester)
        requester.start()
        assert asking.wait(10)
        free = lm.mover._lock.acquire(timeout=2)
        if free:
            lm.mover._lock.release()
        release.set()
        requester.join(10)
        assert free, "the mover's lock was held while waiting for the log manager"
        assert lm.wait_for_moves(30)
        assert lm.log_dir_of(tp) == d2
    finally:
        lm.shutdown()
