"""A broker process for the SIGKILL tests: it appends to ``jbod-0`` (printing each acknowledged
offset), moves that replica from the first log dir to the second, and gets killed.

Usage: python move_worker.py DIRS RATE CRASH_AT
  DIRS      comma-separated log dirs (the replica starts in the first, moves to the second)
  RATE      intra.broker.throttled.rate in bytes/s (0: unlimited)
  CRASH_AT  ``none`` (the test SIGKILLs it), ``before_swap_rename`` or ``after_source_rename``
            (the process SIGKILLs itself right before / after renaming the source to
            ``-delete`` during the swap)
Every record at offset ``o`` holds ``value(tp, o)``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.log_manager import LogManager
from tests.jbod.helpers import CONFIG, produce

TP = TopicPartition("jbod", 0)
_OUT = threading.Lock()


def say(line: str) -> None:
    """One whole line on stdout (two threads print; their lines must not interleave)."""
    with _OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> None:
    dirs, rate, crash_at = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
    real_replace = os.replace

    def replace(src, dst, *a, **kw):  # type: ignore[no-untyped-def]
        deleting = str(dst).endswith("-delete") and "-future" not in str(src)
        if deleting and crash_at == "before_swap_rename":
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst, *a, **kw)
        if deleting and crash_at == "after_source_rename":
            os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace
    manager = LogManager(dirs, CONFIG, intra_broker_throttled_rate=rate or None)
    manager.startup()
    manager.get_or_create_log(TP, log_dir=dirs[0])
    produce(manager, TP, 0, 2500, per_batch=5)
    say("acked 2500")

    def producer() -> None:
        n = 2500
        while True:
            n = produce(manager, TP, n, 1, 1)
            say(f"acked {n}")
            time.sleep(0.002)

    threading.Thread(target=producer, daemon=True).start()
    time.sleep(0.05)
    manager.alter_replica_log_dirs({TP: dirs[1]})
    last = None
    while True:
        status = manager.replica_move_status(TP)
        now = (status[0].state, status[0].bytes_copied > 0) if status else None
        if now != last:
            say(f"state {now[0] if now else None} {int(bool(now and now[1]))}")
            last = now
        time.sleep(0.005)


if __name__ == "__main__":
    main()
