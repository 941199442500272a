"""Startup benchmark (document 002, KIP-263): LogManager startup with the sanity check of all
segments on and off, after a clean shutdown.

A broker log dir is built with thousands of real segments (valid v2 batches, Kafka-layout
indexes, checkpoints, ``.kafka_cleanshutdown``) across many partitions, then loaded several
times with ``sanity.check.all.logs.enabled`` true and false. The same figures are taken with 10x
more segments (same partitions, 10x segments each) to show the lazy startup stays nearly flat.

Document 002 reports LinkedIn's LogManager startup going from 311 s to 15 s (about 20x). Goals:
at 3,000 segments, startup with the check off at least 20x faster than with it on; with 10x the
segments, the check-off startup under 2x its time at 3,000.

Each configuration is also timed without kafka-tiers' segment list (as for a log dir last shut
down by Kafka itself), where every partition directory is listed.

Caveat: the page cache is warm (dropping it needs root), so the check-on figure is a lower bound
of what a cold broker pays; the ratio is therefore conservative.

Usage: ``python benchmarks/startup.py [--quick] [--runs N] [--partitions N] [--segments N]``.
The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SEGMENT_LIST_FILE,
    OffsetCheckpointFile,
    write_clean_shutdown,
    write_meta_properties,
)
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.records import ProducerRecord, RecordBatch, build_batch, set_base_offset

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=1024, retention_ms=-1)


def _template(work: Path, batches: int, records_per_batch: int) -> tuple[bytes, bytes, bytes,
                                                                          list[int], int]:
    """One real segment written by our Log: log bytes, index, time index, batch positions and
    the number of offsets it holds."""
    log = Log.open(work / "template-0", CONFIG)
    for i in range(batches):
        recs = [ProducerRecord(b"v" * 180, b"key-%d" % i, (), 1_700_000_000_000 + i)
                for _ in range(records_per_batch)]
        log.append(build_batch(recs))
    log.roll()
    seg = log.segments()[0]
    data = seg.log_path.read_bytes()
    index = seg.offset_index.path.read_bytes()
    timeindex = seg.time_index.path.read_bytes()
    log.close()
    positions, pos = [], 0
    while pos < len(data):
        positions.append(pos)
        pos += RecordBatch(data, pos).size
    return data, index, timeindex, positions, batches * records_per_batch


def build_log_dir(root: Path, partitions: int, segments_per_partition: int) -> int:
    """Write a clean-shutdown broker log dir; returns the number of segments."""
    work = Path(tempfile.mkdtemp(dir=root.parent))
    data, index, timeindex, positions, span = _template(work, batches=24, records_per_batch=1)
    shutil.rmtree(work)
    root.mkdir(parents=True)
    write_meta_properties(root, {"version": "1", "node.id": "1", "cluster.id": "bench"})
    ends: dict[TopicPartition, int] = {}
    buf = bytearray(data)
    for p in range(partitions):
        tp = TopicPartition("bench", p)
        d = root / f"bench-{p}"
        d.mkdir()
        for s in range(segments_per_partition):
            base = s * span
            for i, pos in enumerate(positions):
                set_base_offset(buf, pos, base + i)
            name = f"{base:020d}"
            with open(d / f"{name}.log", "wb") as fh:
                fh.write(buf)
            with open(d / f"{name}.index", "wb") as fh:
                fh.write(index)
            with open(d / f"{name}.timeindex", "wb") as fh:
                fh.write(timeindex)
        ends[tp] = segments_per_partition * span
        (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT).write(ends)
    OffsetCheckpointFile(root / REPLICATION_OFFSET_CHECKPOINT).write(ends)
    OffsetCheckpointFile(root / LOG_START_OFFSET_CHECKPOINT).write({tp: 0 for tp in ends})
    write_clean_shutdown(root)
    return partitions * segments_per_partition


def time_startup(root: Path, check_all: bool, runs: int, *,
                 segment_list: bool = True) -> tuple[list[float], int]:
    """Seconds of each LogManager startup (after a clean shutdown) and segments loaded.

    ``segment_list=False`` removes kafka-tiers' segment list before each run, as for a log dir
    last shut down by Kafka itself: every partition directory is listed."""
    times = []
    segments = 0
    for _ in range(runs + 1):  # the first run warms imports and the page cache, not counted
        if not segment_list:
            (root / SEGMENT_LIST_FILE).unlink(missing_ok=True)
        manager = LogManager([root], CONFIG, sanity_check_all=check_all,
                             recovery_threads_per_dir=1)
        start = time.perf_counter()
        report = manager.startup()
        times.append(time.perf_counter() - start)
        segments = report.segments
        if check_all:
            assert report.unchecked_segments == 0
        else:
            assert report.unchecked_segments == report.segments - report.logs
        manager.shutdown()  # clean again for the next run
    return times[1:], segments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--segments", type=int, default=None,
                        help="total segments of the base case (10x for the growth case)")
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: tmp)")
    args = parser.parse_args(argv)
    partitions = args.partitions or (20 if args.quick else 50)
    segments = args.segments or (600 if args.quick else 3000)
    runs = args.runs or (2 if args.quick else 5)
    per_partition = max(1, segments // partitions)
    base = Path(tempfile.mkdtemp(prefix="kt-startup-", dir=args.dir))
    try:
        results = {}
        for label, seg_per_part in (("base", per_partition), ("x10", per_partition * 10)):
            root = base / label / "logs"
            root.parent.mkdir(parents=True)
            t0 = time.perf_counter()
            total = build_log_dir(root, partitions, seg_per_part)
            built = time.perf_counter() - t0
            on, _ = time_startup(root, True, runs) if label == "base" else ([], total)
            off, _ = time_startup(root, False, runs)
            listed, _ = time_startup(root, False, runs, segment_list=False)
            results[label] = {"segments": total, "build_s": built, "on": on, "off": off,
                              "listed": listed}
            print(f"{label}: {total} segments in {partitions} partitions (built in {built:.1f}s)"
                  f"  check on: {_fmt(on)}  check off: {_fmt(off)}  check off, dirs listed: "
                  f"{_fmt(listed)}", file=sys.stderr, flush=True)
            shutil.rmtree(root.parent)
        on_s = statistics.median(results["base"]["on"])
        off_s = statistics.median(results["base"]["off"])
        off_x10 = statistics.median(results["x10"]["off"])
        speedup = on_s / off_s
        growth = off_x10 / off_s
        goal_met = speedup >= 20 and growth < 2
        out = {
            "benchmark": "startup",
            "goal": "at >=3,000 segments, startup with sanity.check.all.logs.enabled=false at "
                    "least 20x faster than with it on (doc 002: 311 s -> 15 s); 10x more "
                    "segments cost under 2x the check-off time",
            "goal_met": goal_met if segments >= 3000 else False,
            "quick": args.quick,
            "partitions": partitions,
            "segments": results["base"]["segments"],
            "segments_x10": results["x10"]["segments"],
            "runs": runs,
            "check_on_s": round(on_s, 4),
            "check_off_s": round(off_s, 4),
            "check_off_x10_s": round(off_x10, 4),
            "speedup_off_vs_on": round(speedup, 1),
            "growth_x10_segments": round(growth, 2),
            "check_on_runs_s": [round(t, 4) for t in results["base"]["on"]],
            "check_off_runs_s": [round(t, 4) for t in results["base"]["off"]],
            "check_off_x10_runs_s": [round(t, 4) for t in results["x10"]["off"]],
            "check_off_dirs_listed_s": round(statistics.median(results["base"]["listed"]), 4),
            "check_off_dirs_listed_x10_s": round(statistics.median(results["x10"]["listed"]),
                                                 4),
            "page_cache": "warm",
        }
        print(json.dumps(out))
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _fmt(times: list[float]) -> str:
    return ", ".join(f"{t * 1000:.0f}ms" for t in times) if times else "-"


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
