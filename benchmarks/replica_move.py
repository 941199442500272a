"""Replica move benchmark (document 000, KIP-113): moving a partition between two log dirs
against copying the same files with plain file I/O, and a move at a set throttle.

A partition of real segments (``--size-mib``, 1 GiB by default) is written to log dir ``a``.
Then, in the same run and on the same file system:

1. **plain copy**: every file of the partition directory copied to another directory with
   ``read``/``write`` in 1 MiB chunks and an ``fsync`` per file (what the move must also do);
2. **move**: ``LogManager.alter_replica_log_dirs`` moves the partition from ``a`` to ``b``,
   unthrottled, timed from the request until the swap is done (future log, bulk copy,
   catch-up, swap);
3. **throttled move**: the partition moves back at ``intra.broker.throttled.rate`` =
   ``--rate-mib`` MiB/s (a ``--throttle-mib`` MiB partition; 256 MiB at 64 MiB/s by default,
   a 4 s move), and the achieved rate (bytes copied / elapsed from request to swap done) is
   compared with the setting. The swap's fixed cost (fsyncs, renames, checkpoints: tens of
   milliseconds) is outside the throttle, so the achieved rate is a little below the setting.

Goals: the move at least 0.8x the plain copy's throughput; the throttled rate within 10% of the
setting. The page cache is warm for both copies (the data was just written), so neither pays
for cold reads; dirty pages are written back (``sync``) before each timed part, so none pays
for another's writes.

Usage: ``python benchmarks/replica_move.py [--quick] [--dir DIR] [--size-mib N]
[--rate-mib R] [--throttle-mib N]``. Everything is written under a temporary directory (in
``--dir`` when given) and removed at the end. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.records import ProducerRecord, build_batch

MIB = 1 << 20


def fill(manager: LogManager, tp: TopicPartition, size: int) -> None:
    """Append ~1 MiB batches of 1 KiB records until the log holds ``size`` bytes."""
    recs = [ProducerRecord(os.urandom(512).hex().encode(), b"key-%d" % i, (),
                           1_700_000_000_000 + i) for i in range(1000)]
    batch = build_batch(recs)
    log = manager.get_log(tp)
    assert log is not None
    while log.size < size:
        manager.append(tp, batch, leader_epoch=1)
    log.flush()


def plain_copy(src: Path, dest: Path) -> tuple[float, int]:
    """Copy every file of ``src`` to ``dest`` with plain reads and writes; (seconds, bytes)."""
    settle()
    start = time.perf_counter()
    dest.mkdir(parents=True)
    total = 0
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        if not entry.is_file():
            continue
        with open(entry.path, "rb") as fin, open(dest / entry.name, "wb") as fout:
            while chunk := fin.read(MIB):
                fout.write(chunk)
                total += len(chunk)
            fout.flush()
            os.fsync(fout.fileno())
    fd = os.open(dest, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - start, total


def settle() -> None:
    """Write back every dirty page first, so no timing pays for earlier writes."""
    os.sync()


def timed_move(manager: LogManager, tp: TopicPartition, dest: Path) -> tuple[float, int]:
    settle()
    start = time.perf_counter()
    result = manager.alter_replica_log_dirs({tp: str(dest)})
    assert result[tp] == "NONE", result
    assert manager.wait_for_moves(3600)
    elapsed = time.perf_counter() - start
    status = manager.replica_move_status(tp)[-1]
    assert status.state == "done", status
    assert manager.log_dir_of(tp) == dest
    return elapsed, status.bytes_copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB instead of 1 GiB")
    parser.add_argument("--dir", help="parent of the temporary directory")
    parser.add_argument("--size-mib", type=int)
    parser.add_argument("--rate-mib", type=float)
    parser.add_argument("--throttle-mib", type=int)
    args = parser.parse_args()
    size_mib = args.size_mib or (64 if args.quick else 1024)
    rate_mib = args.rate_mib or (16.0 if args.quick else 64.0)
    throttle_mib = args.throttle_mib or (64 if args.quick else 256)
    segment = (16 if args.quick else 128) * MIB
    config = LogConfig(segment_bytes=segment, retention_ms=-1)
    work = Path(tempfile.mkdtemp(prefix="kt-replica-move-", dir=args.dir))
    try:
        a, b, c = work / "a", work / "b", work / "copy"
        manager = LogManager([a, b], config)
        manager.startup()
        tp = TopicPartition("bench", 0)
        manager.get_or_create_log(tp, log_dir=a)
        fill(manager, tp, size_mib * MIB)
        src = manager.get_log(tp).dir  # type: ignore[union-attr]
        copy_seconds, copy_bytes = plain_copy(src, c / "bench-0")
        shutil.rmtree(c)
        move_seconds, move_bytes = timed_move(manager, tp, b)
        manager.mover.deleter.wait(600)
        copy_rate = copy_bytes / copy_seconds
        move_rate = move_bytes / move_seconds
        ratio = move_rate / copy_rate

        small = TopicPartition("bench-throttled", 0)
        manager.get_or_create_log(small, log_dir=a)
        fill(manager, small, throttle_mib * MIB)
        manager.throttle.set_rate(int(rate_mib * MIB))
        throttled_seconds, throttled_bytes = timed_move(manager, small, b)
        achieved = throttled_bytes / throttled_seconds
        error = achieved / (rate_mib * MIB) - 1
        manager.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"partition          {move_bytes / MIB:.0f} MiB in {size_mib * MIB // segment} "
          f"segments of {segment // MIB} MiB")
    print(f"plain copy         {copy_seconds:.2f} s  {copy_rate / MIB:.0f} MiB/s")
    print(f"move (unthrottled) {move_seconds:.2f} s  {move_rate / MIB:.0f} MiB/s  "
          f"= {ratio:.2f}x the plain copy (goal >= 0.8x)")
    print(f"throttled move     {throttled_bytes / MIB:.0f} MiB at {rate_mib:g} MiB/s: "
          f"{throttled_seconds:.2f} s, {achieved / MIB:.2f} MiB/s ({error:+.1%}; goal within "
          "10%)")
    goal_met = ratio >= 0.8 and abs(error) <= 0.10
    print(json.dumps({
        "benchmark": "replica_move",
        "goal": "unthrottled move >= 0.8x plain file copy; throttled rate within 10%",
        "goal_met": goal_met,
        "bytes": move_bytes,
        "copy_seconds": round(copy_seconds, 3),
        "copy_mib_s": round(copy_rate / MIB, 1),
        "move_seconds": round(move_seconds, 3),
        "move_mib_s": round(move_rate / MIB, 1),
        "move_vs_copy": round(ratio, 3),
        "throttle_mib_s": rate_mib,
        "throttled_bytes": throttled_bytes,
        "throttled_seconds": round(throttled_seconds, 3),
        "throttle_achieved_mib_s": round(achieved / MIB, 2),
        "throttle_error": round(error, 4),
        "quick": bool(args.quick),
    }))


if __name__ == "__main__":
    main()
