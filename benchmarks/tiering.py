"""Tiering benchmark on the ``local`` backend: copy throughput against plain file I/O of the same
files in the same run, and a remote read of one batch from the middle of a 256 MiB remote
segment against fetching the whole segment.

* copy: one rolled segment (256 MiB; 32 MiB with ``--quick``) of batches of 100 records x 1 KiB
  copied by the remote log manager (fresh segment id, data and index objects written to
  temporary files, fsynced and renamed, sha256 of each, manifest last) through the core's
  wrapper; baseline: the same files (log, offset index, time index, producer snapshot) copied
  with plain ``read``/``write`` into a directory, each fsynced. Three rounds, alternating which
  goes first; the medians reported.
* remote read: ``Broker.fetch(tp, offset, max_bytes=1)`` of a batch in the middle of the
  remote segment (the offset index fetched once into the cache, then a ranged read); bytes of
  the log fetched from the remote tier and latency (the first read, index included, and the
  median of warm reads), against reading the whole segment with ``fetch_log_segment``.

Goals: copy at least 0.5x plain file I/O (the copy also hashes every byte and writes a
manifest); the one-batch read fetches at most the batch plus 64 KiB of the log and its first
read (index fetch included) is at least 10x faster than fetching the whole segment.

Usage: ``python benchmarks/tiering.py [--quick]``. The last line printed is one JSON object with
the figures.
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
from kafka_tiers.broker import Broker
from kafka_tiers.log.records import ProducerRecord, build_batch
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager

RECORDS_PER_BATCH = 100
VALUE_SIZE = 1024
MIB = 1 << 20


def make_batch() -> bytes:
    now = int(time.time() * 1000)  # recent: remote retention (7 days) keeps the segment
    records = [ProducerRecord(os.urandom(VALUE_SIZE // 2).hex().encode(), b"key-%d" % i, (),
                              now + i) for i in range(RECORDS_PER_BATCH)]
    return build_batch(records)


def plain_copy(files: list[Path], dest: Path) -> int:
    """Copy files with read/write and fsync each; returns the bytes copied."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    total = 0
    for src in files:
        with open(src, "rb") as fin, open(dest / src.name, "wb") as fout:
            while chunk := fin.read(MIB):
                fout.write(chunk)
                total += len(chunk)
            fout.flush()
            os.fsync(fout.fileno())
    fd = os.open(dest, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return total


def start_broker(work: Path, segment_bytes: int, name: str) -> Broker:
    shutil.rmtree(work / name, ignore_errors=True)
    shutil.rmtree(work / f"{name}-remote", ignore_errors=True)
    broker = Broker({"log.dirs": str(work / name), "remote.log.storage.enable": "true",
                     "rsm.config.dir": str(work / f"{name}-remote"),
                     "remote.log.manager.task.interval.ms": "3600000"},
                    hooks=Hooks(make_plugin_manager(load_entrypoints=False)), background=False)
    broker.start()
    broker.create_topic("bench", 1, {"remote.storage.enable": "true",
                                     "segment.bytes": str(segment_bytes + 4 * MIB)})
    return broker


def fill(broker: Broker, tp: TopicPartition, batch: bytes, target: int) -> int:
    """Append batches until the active segment holds ``target`` bytes, then roll; returns the
    number of records."""
    lg = broker.log(tp)
    count = 0
    while lg.active_segment.size + len(batch) <= target:
        lg.append(batch, leader_epoch=0)
        count += RECORDS_PER_BATCH
    lg.flush()
    lg.roll()
    lg.append(batch, leader_epoch=0)  # the new active segment is never copied
    lg.flush()
    lg.update_high_watermark(lg.log_end_offset)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 32 MiB segment instead of 256")
    args = parser.parse_args(argv)
    segment_mib = 32 if args.quick else 256
    batch = make_batch()
    tp = TopicPartition("bench", 0)
    work = Path(tempfile.mkdtemp(prefix="kt-bench-tiering-"))
    try:
        plain_rates, copy_rates = [], []
        broker = None
        records = 0
        for round_no in range(3):
            if broker is not None:
                broker.shutdown()
            broker = start_broker(work, segment_mib * MIB, f"b{round_no}")
            records = fill(broker, tp, batch, segment_mib * MIB)
            seg = broker.log(tp).inactive_segments()[0]
            files = [p for p in (seg.log_path, seg.offset_index_path, seg.time_index_path,
                                 seg.producer_snapshot_path) if p is not None]
            copied_bytes = sum(p.stat().st_size for p in files)

            def plain(files: list[Path] = files, copied_bytes: int = copied_bytes,
                      dest: Path = work / f"plain-{round_no}") -> None:
                start = time.perf_counter()
                plain_copy(files, dest)  # new files, as the remote tier writes
                plain_rates.append(copied_bytes / MIB / (time.perf_counter() - start))

            def tiered(broker: Broker = broker, copied_bytes: int = copied_bytes) -> None:
                start = time.perf_counter()
                result = broker.run_tiering()[tp]
                elapsed = time.perf_counter() - start
                if result.error is not None or len(result.copied) != 1:
                    raise RuntimeError(f"the copy failed: {result.error}")
                copy_rates.append(copied_bytes / MIB / elapsed)

            for step in ((plain, tiered) if round_no % 2 == 0 else (tiered, plain)):
                os.sync()  # both start with no dirty pages of the other pending
                step()  # the order alternates, so neither always runs on a warmer cache
            # local retention's step: the copied segment leaves the local disk
            lg = broker.log(tp)
            lg.advance_local_log_start_offset(lg.segment_bases()[-1])
            shutil.rmtree(work / f"plain-{round_no}", ignore_errors=True)
            if round_no < 2:
                shutil.rmtree(work / f"b{round_no}-remote", ignore_errors=True)
        assert broker is not None
        md = broker.rlm.remote_segments(tp)[0]
        size = md.segment_size_in_bytes
        middle = md.start_offset + records // 2
        metrics = broker.metrics
        before = metrics.value("RemoteFetchBytesPerSec", tp)
        start = time.perf_counter()
        first = broker.fetch(tp, middle, 1)
        first_ms = (time.perf_counter() - start) * 1000
        one_bytes = metrics.value("RemoteFetchBytesPerSec", tp) - before
        if first.tier != "remote" or first.records_list()[0].offset != middle:
            raise RuntimeError("the read did not come from the remote tier")
        warm = []
        for i in range(20):
            start = time.perf_counter()
            broker.fetch(tp, middle + (i - 10) * RECORDS_PER_BATCH, 1)
            warm.append((time.perf_counter() - start) * 1000)
        warm_ms = statistics.median(warm)
        whole = []
        for _ in range(3):
            start = time.perf_counter()
            with broker.rlm.storage.fetch_log_segment(md, 0) as stream:
                got = 0
                while chunk := stream.read(MIB):
                    got += len(chunk)
            whole.append((time.perf_counter() - start) * 1000)
            if got != size:
                raise RuntimeError(f"whole fetch read {got} of {size} bytes")
        whole_ms = statistics.median(whole)
        broker.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    plain_mib_s = statistics.median(plain_rates)
    copy_mib_s = statistics.median(copy_rates)
    copy_ratio = copy_mib_s / plain_mib_s
    speedup = whole_ms / first_ms
    out = {
        "benchmark": "tiering",
        "goal": "copy at least 0.5x plain file I/O of the same files; a one-batch remote read "
                "from the middle of the segment fetches at most the batch + 64 KiB and is at "
                "least 10x faster than fetching the whole segment",
        "goal_met": (copy_ratio >= 0.5 and one_bytes <= len(batch) + 64 * 1024
                     and speedup >= 10),
        "quick": args.quick,
        "segment_mib": round(size / MIB, 1),
        "batch_bytes": len(batch),
        "copy_mib_per_s": round(copy_mib_s, 1),
        "plain_copy_mib_per_s": round(plain_mib_s, 1),
        "copy_vs_plain": round(copy_ratio, 3),
        "one_batch_read_bytes_fetched": int(one_bytes),
        "one_batch_read_first_ms": round(first_ms, 2),
        "one_batch_read_warm_ms": round(warm_ms, 3),
        "whole_segment_fetch_bytes": size,
        "whole_segment_fetch_ms": round(whole_ms, 1),
        "one_batch_vs_whole_speedup": round(speedup, 1),
        "python": sys.version.split()[0],
    }
    print(f"copy {copy_mib_s:.0f} MiB/s vs plain {plain_mib_s:.0f} MiB/s ({copy_ratio:.2f}x); "
          f"one batch from the middle of {size / MIB:.0f} MiB: {int(one_bytes)} bytes in "
          f"{first_ms:.1f} ms (warm {warm_ms:.2f} ms) vs whole segment {whole_ms:.0f} ms")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
