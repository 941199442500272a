"""Spark read benchmark: a tiered topic read through the ``kafka-tiers`` data source on Spark
``local[2]``, against decoding the same remote segments in one Python process with the log
engine's own reader, in the same run.

Data: a topic of 2 partitions written by our broker (lz4 batches of 500 records, 16-byte keys,
100-byte values, one header on every tenth record) and tiered to the local backend in 16 MiB
segments (at least 5 million records across tens of segments in the full run; 2 MiB
segments with --quick).

* spark: ``spark.read.format("kafka-tiers")`` on a ``local[2]`` session, an aggregation that
  uses every record (count, sum of value lengths, max offset). Timed from the action's start
  to its result: planning (``list_remote_segments``), fetching through the storage plugin, CRC
  checks, decompression, decoding to Arrow and the transfer to the JVM included; the session's
  start is not. One warm-up run, then the best of ``--runs``.
* baseline: one Python process fetches every segment through the same plugin and decodes it
  with ``RecordBatch.validate()`` and ``RecordBatch.records()`` (the log engine's reader).
* also reported: our Arrow decoder in one process (``read_slice`` over every slice in turn),
  to separate the decoder's speed from Spark's parallelism, and the machine's 1-minute load
  average before and after the Spark runs (other work on the machine slows every figure);
* ``spark_ceiling_records_s``: the same aggregation over a Python data source that yields as
  many prebuilt Arrow rows of the same schema, with no fetching or decoding at all: what
  Spark's Python data source path itself allows on this machine, the upper bound of the read.

Goal: Spark at least 1.5x the baseline on 2 cores, and at least 1 million records per second
end to end. Usage: ``python benchmarks/spark_read.py [--quick] [--records N] [--runs N]``.
The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker import Broker
from kafka_tiers.log.records import ProducerRecord, build_batch, iter_batches

TOPIC = "bench"
PARTITIONS = 2
PER_BATCH = 500
SEGMENT_BYTES = 16 * 1024 * 1024
DISTINCT_BATCHES = 64


def make_batches(codec: str) -> list[bytes]:
    """Distinct encoded batches, cycled when producing (offsets are assigned on append)."""
    rng = random.Random(7)
    out = []
    now = int(time.time() * 1000)
    for b in range(DISTINCT_BATCHES):
        recs = []
        for i in range(PER_BATCH):
            n = b * PER_BATCH + i
            value = rng.randbytes(50) + bytes(50)
            headers = (("trace", rng.randbytes(8)),) if n % 10 == 0 else ()
            recs.append(ProducerRecord(value, f"key-{n:012d}".encode(), headers, now + n))
        out.append(build_batch(recs, compression=codec))
    return out


def build_topic(work: Path, records: int, codec: str, segment_bytes: int) -> tuple[Path, int]:
    """Produce and tier the topic; returns the remote dir and the records in the remote tier."""
    cfg = {"log.dirs": str(work / "logs"), "broker.id": "1",
           "remote.log.storage.enable": "true", "rsm.config.dir": str(work / "remote"),
           "remote.log.manager.task.interval.ms": "3600000"}
    broker = Broker(cfg, background=False)
    broker.start()
    try:
        broker.create_topic(TOPIC, PARTITIONS, {"remote.storage.enable": "true",
                                                "segment.bytes": str(segment_bytes),
                                                "retention.ms": "-1"})
        batches = make_batches(codec)
        per_partition = -(-records // PARTITIONS)
        group = 8  # batches per produce call
        record_bytes = sum(len(b) for b in batches) / (len(batches) * PER_BATCH)
        # the active segment is never tiered: produce one more segment's worth
        extra = int(segment_bytes / record_bytes) + PER_BATCH * group
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            produced = 0
            k = 0
            while produced < per_partition + extra:
                chunk = b"".join(batches[(k + j) % len(batches)] for j in range(group))
                broker.produce(tp, chunk)
                produced += PER_BATCH * group
                k += group
        broker.run_tiering([TOPIC])
        assert broker.rlm is not None
        total = sum(md.end_offset - md.start_offset + 1
                    for p in range(PARTITIONS)
                    for md in broker.rlm.remote_segments(TopicPartition(TOPIC, p)))
    finally:
        broker.shutdown()
    shutil.rmtree(work / "logs", ignore_errors=True)
    return work / "remote", total


def baseline(remote: Path) -> tuple[int, float]:
    """Records decoded per second by the log engine's reader in this one process."""
    from kafka_tiers.remote.guarded import GuardedRemoteStorage

    storage = GuardedRemoteStorage.load("local", {"dir": str(remote)})
    start = time.perf_counter()
    count = 0
    for p in range(PARTITIONS):
        for md in storage.list_remote_segments(TopicPartition(TOPIC, p)):
            with storage.fetch_log_segment(md, 0) as stream:
                data = stream.read()
            for batch in iter_batches(data):
                batch.validate()
                count += len(batch.records())
    return count, time.perf_counter() - start


def arrow_one_process(remote: Path) -> tuple[int, float]:
    """Records per second of our Arrow decoder over every slice, in this one process."""
    from kafka_tiers.spark.planning import ReadOptions, plan
    from kafka_tiers.spark.reading import load_storage, read_slice

    opts = ReadOptions.parse({"storage": "local", "rsm.config.dir": str(remote),
                              "topic": TOPIC})
    storage = load_storage("local", opts.storage_config)
    pieces = plan(opts, storage)
    for _rb in read_slice(pieces[0], storage):  # warm-up: numba loads its compiled walk
        break
    start = time.perf_counter()
    count = 0
    for piece in plan(opts, storage):
        for rb in read_slice(piece, storage):
            count += rb.num_rows
    return count, time.perf_counter() - start


def ceiling_source(total: int, tasks: int) -> Any:
    """A Python data source of the same schema yielding ``total`` rows of prebuilt Arrow
    batches (16-byte keys, 100-byte values, no headers) in ``tasks`` partitions: no fetch, no
    decoding. Spark's cost of taking Arrow batches from Python workers, alone."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafka_tiers.spark.arrow import SPARK_SCHEMA_DDL

    class CeilingReader(DataSourceReader):
        def __init__(self, schema: Any) -> None:
            self.schema = schema

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(total // tasks + (1 if i < total % tasks else 0))
                    for i in range(tasks)]

        def read(self, partition: InputPartition) -> Any:
            import numpy as np
            import pyarrow as pa
            from pyspark.sql.pandas.types import to_arrow_schema

            schema = to_arrow_schema(self.schema, timezone="UTC")
            size = 65536
            keys = pa.array([b"key-%012d" % i for i in range(size)], pa.binary())
            values = pa.array([bytes(100)] * size, pa.binary())
            headers_type = schema.field("headers").type
            headers = pa.ListArray.from_arrays(pa.array(np.zeros(size + 1, dtype=np.int32)),
                                               pa.array([], type=headers_type.value_type),
                                               type=headers_type)
            batch = pa.RecordBatch.from_arrays([
                keys, values, pa.repeat(pa.scalar(TOPIC), size),
                pa.array(np.zeros(size, dtype=np.int32)),
                pa.array(np.arange(size, dtype=np.int64)),
                pa.array(np.arange(size, dtype=np.int64) * 1000,
                         type=schema.field("timestamp").type),
                pa.array(np.zeros(size, dtype=np.int32)), headers], schema=schema)
            left = partition.value
            while left > 0:
                yield batch.slice(0, min(size, left))
                left -= size

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafka-tiers-bench-ceiling"

        def schema(self) -> str:
            return SPARK_SCHEMA_DDL

        def reader(self, schema: Any) -> DataSourceReader:
            return CeilingReader(schema)

    return CeilingSource


def spark_runs(remote: Path, runs: int, total: int
               ) -> tuple[list[tuple[int, float]], int, list[float]]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kafka_tiers.spark import register

    spark = (SparkSession.builder.master("local[2]").appName("kafka-tiers spark_read")
             .config("spark.driver.memory", "2g").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        def load() -> Any:
            return (spark.read.format("kafka-tiers").option("storage", "local")
                    .option("rsm.config.dir", str(remote)).option("topic", TOPIC).load())

        partitions = load().rdd.getNumPartitions()
        results = []
        for _ in range(runs + 1):  # the first is the warm-up
            start = time.perf_counter()
            # a new DataFrame each run: re-running one would reuse its shuffle output
            agg = load().agg(F.count(F.lit(1)).alias("n"),
                             F.sum(F.length("value")).alias("bytes"),
                             F.max("offset").alias("max_offset"))
            row = agg.collect()[0]
            results.append((int(row["n"]), time.perf_counter() - start))
        spark.dataSource.register(ceiling_source(total, partitions))
        ceiling = []
        for _ in range(runs + 1):
            start = time.perf_counter()
            row = spark.read.format("kafka-tiers-bench-ceiling").load().agg(
                F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("bytes"),
                F.max("offset").alias("max_offset")).collect()[0]
            assert int(row["n"]) == total
            ceiling.append(time.perf_counter() - start)
        return results, partitions, ceiling
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300k records, for a smoke run")
    parser.add_argument("--records", type=int, default=None,
                        help="records in the remote tier (default 5,000,000)")
    parser.add_argument("--runs", type=int, default=3, help="timed Spark runs (after warm-up)")
    parser.add_argument("--codec", default="lz4", choices=["none", "gzip", "snappy", "lz4",
                                                           "zstd"])
    args = parser.parse_args(argv)
    records = args.records or (300_000 if args.quick else 5_000_000)
    work = Path(tempfile.mkdtemp(prefix="kt-spark-bench-"))
    try:
        t0 = time.perf_counter()
        remote, total = build_topic(work, records, args.codec,
                                    2 * 1024 * 1024 if args.quick else SEGMENT_BYTES)
        build_s = time.perf_counter() - t0
        segments = sum(1 for _ in remote.rglob("*.log"))
        size = sum(p.stat().st_size for p in remote.rglob("*.log"))
        print(f"tiered {total} records in {segments} remote segments ({size / 1e6:.0f} MB) "
              f"in {build_s:.0f} s", file=sys.stderr)
        base_n, base_s = baseline(remote)
        assert base_n == total, (base_n, total)
        arrow_n, arrow_s = arrow_one_process(remote)
        assert arrow_n == total, (arrow_n, total)
        load_before = os.getloadavg()[0]
        runs, partitions, ceiling = spark_runs(remote, args.runs, total)
        assert all(n == total for n, _ in runs), runs
        warm = min(s for _, s in runs[1:])
        spark_rps = total / warm
        cold_rps = total / runs[0][1]
        base_rps = base_n / base_s
        ratio = spark_rps / base_rps
        out = {
            "benchmark": "spark_read",
            "goal": "Spark local[2] at least 1.5x the log engine's reader in one process, and "
                    "at least 1,000,000 records/s end to end",
            "goal_met": ratio >= 1.5 and spark_rps >= 1_000_000,
            "quick": args.quick,
            "codec": args.codec,
            "records": total,
            "remote_segments": segments,
            "input_partitions": partitions,
            "remote_mb": round(size / 1e6, 1),
            "spark_records_s": round(spark_rps),
            "spark_first_run_records_s": round(cold_rps),
            "spark_seconds": round(warm, 2),
            "baseline_records_s": round(base_rps),
            "baseline_seconds": round(base_s, 2),
            "spark_vs_baseline": round(ratio, 2),
            "arrow_one_process_records_s": round(arrow_n / arrow_s),
            "spark_ceiling_records_s": round(total / min(ceiling[1:])),
            "cores": os.cpu_count(),
            "load_average_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        }
        print(json.dumps(out))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
