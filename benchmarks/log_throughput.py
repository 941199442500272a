"""Log throughput benchmark: append and read MB/s against plain file I/O of the same bytes in
the same run (the physical limit here), and record batch decode speed against kafka-python
decoding the same batches.

* append: batches of 100 records x 1 KiB, appended through ``Log.append`` (offsets assigned,
  every batch CRC-checked, indexes maintained, segments rolled at 128 MiB) then one flush;
  baseline: ``os.write`` of the same batch bytes to one file, then one fsync.
Each of append and read is measured in three interleaved rounds (plain, then log) and the
medians are reported.

* read: the whole log read back with ``Log.read(offset, 1 MiB)`` (index lookup, whole batches,
  CRC of every batch served); baseline: ``os.pread`` of the file in 1 MiB chunks.
* decode: every record of every batch decoded (uncompressed and lz4) by ours and by
  ``kafka.record.DefaultRecordBatch``.

Goals: append and read at least half the plain-file rate (the log does real work per batch),
decode at least as fast as kafka-python.

Usage: ``python benchmarks/log_throughput.py [--quick] [--mb N]``. The last line printed is one
JSON object with the figures.
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

from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import ProducerRecord, RecordBatch, build_batch

RECORDS_PER_BATCH = 100
VALUE_SIZE = 1024


def make_batches(total_bytes: int, compression: str = "none") -> list[bytes]:
    template = [ProducerRecord(os.urandom(VALUE_SIZE // 2).hex().encode()[:VALUE_SIZE],
                               b"key-%d" % i, (("h", b"v"),), 1_700_000_000_000 + i)
                for i in range(RECORDS_PER_BATCH)]
    one = build_batch(template, compression=compression)
    return [one] * max(1, total_bytes // len(one))


def bench_append(work: Path, batches: list[bytes]) -> tuple[float, float, Log]:
    total = sum(len(b) for b in batches)
    shutil.rmtree(work / "bench-0", ignore_errors=True)
    plain = work / "plain.bin"
    start = time.perf_counter()
    fd = os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for b in batches:
        os.write(fd, b)
    os.fsync(fd)
    os.close(fd)
    plain_s = time.perf_counter() - start
    log = Log.open(work / "bench-0", LogConfig(segment_bytes=128 * 1024 * 1024,
                                               retention_ms=-1))
    start = time.perf_counter()
    for b in batches:
        log.append(b)
    log.flush()
    ours_s = time.perf_counter() - start
    return total / plain_s / 1e6, total / ours_s / 1e6, log


def bench_read(work: Path, log: Log) -> tuple[float, float]:
    plain = work / "plain.bin"
    size = plain.stat().st_size
    chunk = 1 << 20
    start = time.perf_counter()
    fd = os.open(plain, os.O_RDONLY)
    pos = 0
    while pos < size:
        pos += len(os.pread(fd, chunk, pos))
    os.close(fd)
    plain_s = time.perf_counter() - start
    start = time.perf_counter()
    offset = 0
    read = 0
    while offset < log.log_end_offset:
        data = log.read(offset, chunk)
        read += len(data.records)
        offset = data.next_offset
    ours_s = time.perf_counter() - start
    assert read == size, (read, size)
    return size / plain_s / 1e6, read / ours_s / 1e6


def bench_decode(batches: list[bytes]) -> tuple[float, float]:
    from kafka.record.default_records import DefaultRecordBatch

    n = len(batches) * RECORDS_PER_BATCH
    start = time.perf_counter()
    for b in batches:
        for _r in DefaultRecordBatch(b):
            pass
    theirs = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for b in batches:
        RecordBatch(b).records()
    ours = n / (time.perf_counter() - start)
    return ours, theirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("--mb", type=int, default=None, help="MB to append and read")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    mb = args.mb or (16 if args.quick else 256)
    work = Path(tempfile.mkdtemp(prefix="kt-throughput-", dir=args.dir))
    try:
        batches = make_batches(mb * 1_000_000)
        rounds = []
        for _ in range(3):  # interleaved rounds, medians reported
            plain_w, ours_w, log = bench_append(work, batches)
            plain_r, ours_r = bench_read(work, log)
            log.close()
            rounds.append((plain_w, ours_w, plain_r, ours_r))
        plain_w, ours_w, plain_r, ours_r = (statistics.median(r[i] for r in rounds)
                                            for i in range(4))
        decode_n = max(50, len(batches) // (4 if args.quick else 8))
        ours_d, theirs_d = bench_decode(batches[:decode_n])
        lz4 = make_batches(decode_n * len(batches[0]), "lz4")
        ours_lz4, theirs_lz4 = bench_decode(lz4[:decode_n])
        print(f"append: {ours_w:.0f} MB/s (plain file {plain_w:.0f} MB/s); read: {ours_r:.0f}"
              f" MB/s (plain file {plain_r:.0f} MB/s); decode: {ours_d:,.0f} rec/s "
              f"(kafka-python {theirs_d:,.0f}); lz4 decode: {ours_lz4:,.0f} rec/s "
              f"(kafka-python {theirs_lz4:,.0f})", file=sys.stderr, flush=True)
        append_ratio = ours_w / plain_w
        read_ratio = ours_r / plain_r
        decode_ratio = ours_d / theirs_d
        out = {
            "benchmark": "log_throughput",
            "goal": "append and read at least 0.5x plain file I/O of the same bytes; batch "
                    "decode at least 1x kafka-python",
            "goal_met": append_ratio >= 0.5 and read_ratio >= 0.5 and decode_ratio >= 1
            and ours_lz4 / theirs_lz4 >= 1,
            "quick": args.quick,
            "mb": round(sum(len(b) for b in batches) / 1e6, 1),
            "batch_bytes": len(batches[0]),
            "append_mb_s": round(ours_w, 1),
            "plain_write_mb_s": round(plain_w, 1),
            "append_vs_plain": round(append_ratio, 2),
            "read_mb_s": round(ours_r, 1),
            "plain_read_mb_s": round(plain_r, 1),
            "read_vs_plain": round(read_ratio, 2),
            "decode_records_s": round(ours_d),
            "kafka_python_decode_records_s": round(theirs_d),
            "decode_vs_kafka_python": round(decode_ratio, 2),
            "lz4_decode_records_s": round(ours_lz4),
            "kafka_python_lz4_decode_records_s": round(theirs_lz4),
            "lz4_decode_vs_kafka_python": round(ours_lz4 / theirs_lz4, 2),
        }
        print(json.dumps(out))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
