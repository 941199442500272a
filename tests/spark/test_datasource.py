"""The kafka-tiers data source through a real local SparkSession: data written by our broker,
tiered through the local backend, read back record by record for every codec; offset and
timestamp ranges; pushdown; splitting; corrupt data; source=local and both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import (
    BASE_TS,
    CODECS,
    STEP,
    TieredTopic,
    produce_topic,
    spark_rows,
    start_broker,
)

pytestmark = pytest.mark.slow


def read(spark: Any, remote: Path, topic: str, **options: Any) -> Any:
    reader = (spark.read.format("kafka-tiers").option("storage", "local")
              .option("rsm.config.dir", str(remote)).option("topic", topic))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def test_found_without_registration_and_schema_is_sparks_kafka_schema(
        spark: Any, tiered_topics: dict[str, Any]) -> None:
    # This runs before any test calls register(): PySpark found pyspark_kafka_tiers itself.
    df = read(spark, tiered_topics["remote"], "t-none")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>")]
    assert df.count() == len(tiered_topics["topics"]["none"].remote_rows())


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_reads_back_record_by_record(spark: Any, tiered_topics: dict[str, Any],
                                                 codec: str) -> None:
    topic: TieredTopic = tiered_topics["topics"][codec]
    expected = topic.remote_rows()
    assert len(expected) > 1000 and all(e > 0 for e in topic.remote_end.values())
    df = read(spark, tiered_topics["remote"], topic.topic)
    assert df.rdd.getNumPartitions() >= 4  # one input partition per remote segment
    table = df.toArrow()
    assert spark_rows(table) == expected
    assert set(table.column("topic").to_pylist()) == {topic.topic}
    assert set(table.column("timestampType").to_pylist()) == {0}


def test_offset_ranges_are_exact(spark: Any, tiered_topics: dict[str, Any]) -> None:
    topic: TieredTopic = tiered_topics["topics"]["lz4"]
    rows = topic.remote_rows()
    end0 = topic.remote_end[0]
    # mid-segment start and end in partition 0, earliest..latest (-2/-1) in partition 1
    spec = {"t-lz4": {"0": 123, "1": -2}}
    ending = {"t-lz4": {"0": end0 - 77, "1": -1}}
    df = read(spark, tiered_topics["remote"], "t-lz4", startingOffsets=json.dumps(spec),
              endingOffsets=json.dumps(ending))
    want = [r for r in rows if (r[0] == 0 and 123 <= r[1] < end0 - 77) or r[0] == 1]
    assert spark_rows(df.toArrow()) == want
    # a single offset, and a range inside one batch
    df = read(spark, tiered_topics["remote"], "t-lz4", partitions="1",
              startingOffsets='{"t-lz4":{"1":501}}', endingOffsets='{"t-lz4":{"1":504}}')
    assert [r[1] for r in spark_rows(df.toArrow())] == [501, 502, 503]
    # an empty range
    df = read(spark, tiered_topics["remote"], "t-lz4", partitions="0",
              startingOffsets='{"t-lz4":{"0":10}}', endingOffsets='{"t-lz4":{"0":10}}')
    assert df.count() == 0


def test_splitting_large_segments_by_the_offset_index(spark: Any,
                                                      tiered_topics: dict[str, Any]) -> None:
    topic: TieredTopic = tiered_topics["topics"]["none"]
    whole = read(spark, tiered_topics["remote"], "t-none")
    split = read(spark, tiered_topics["remote"], "t-none", maxBytesPerPartition=4096)
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert spark_rows(split.toArrow()) == topic.remote_rows()
    ranged = read(spark, tiered_topics["remote"], "t-none", maxBytesPerPartition=4096,
                  startingOffsets='{"t-none":{"0":333,"1":7}}',
                  endingOffsets='{"t-none":{"0":801,"1":8}}')
    want = [r for r in topic.remote_rows()
            if (r[0] == 0 and 333 <= r[1] < 801) or (r[0] == 1 and r[1] == 7)]
    assert spark_rows(ranged.toArrow()) == want


def test_timestamp_ranges_are_exact(spark: Any, tiered_topics: dict[str, Any]) -> None:
    topic: TieredTopic = tiered_topics["topics"]["zstd"]
    lo, hi = BASE_TS + 200 * STEP + 1, BASE_TS + 650 * STEP
    df = read(spark, tiered_topics["remote"], "t-zstd", startingTimestamp=lo,
              endingTimestamp=hi)
    want = [r for r in topic.remote_rows() if lo <= r[4] < hi]
    assert want and spark_rows(df.toArrow()) == want


def test_pushed_down_filters_return_exactly_the_matching_rows(
        spark: Any, tiered_topics: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    from kafka_tiers.spark import register

    register(spark)
    topic: TieredTopic = tiered_topics["topics"]["snappy"]
    df = read(spark, tiered_topics["remote"], "t-snappy")
    q = df.where((F.col("partition") == 1) & (F.col("offset") >= 250) & (F.col("offset") < 701))
    plan = q._jdf.queryExecution().executedPlan().toString()
    assert "BatchScan" in plan and "250" not in plan and "701" not in plan  # pushed down
    want = [r for r in topic.remote_rows() if r[0] == 1 and 250 <= r[1] < 701]
    assert spark_rows(q.toArrow()) == want
    q = df.where(F.col("offset").isin(3, 17, 700) & (F.col("partition") > 0))
    assert [(r[0], r[1]) for r in spark_rows(q.toArrow())] == [(1, 3), (1, 17), (1, 700)]
    import datetime as dt

    lo = dt.datetime.fromtimestamp((BASE_TS + 100 * STEP) / 1000, dt.UTC)
    q = df.where((F.col("timestamp") > F.lit(lo)) & (F.col("partition") == 0))
    want = [r for r in topic.remote_rows() if r[0] == 0 and r[4] > BASE_TS + 100 * STEP]
    assert spark_rows(q.toArrow()) == want


def test_pushed_filters_prune_segments_when_planning(tiered_topics: dict[str, Any]) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    from kafka_tiers.spark.datasource import (
        KafkaTiersPushdownReader,
        RegisteredKafkaTiersDataSource,
    )

    topic: TieredTopic = tiered_topics["topics"]["none"]
    options = {"storage": "local", "rsm.config.dir": str(tiered_topics["remote"]),
               "topic": "t-none"}
    source = RegisteredKafkaTiersDataSource(options)
    every = source.reader(None).partitions()
    reader = source.reader(None)
    assert isinstance(reader, KafkaTiersPushdownReader)
    filters = [EqualTo(("partition",), 1), GreaterThanOrEqual(("offset",), 250),
               LessThan(("offset",), 300), EqualTo(("key",), b"x")]
    left = list(reader.pushFilters(filters))
    assert left == [filters[3]]  # partition and offset are handled by the reader
    pruned = reader.partitions()
    assert 1 <= len(pruned) < len(every) / 4
    assert {p.value.partition for p in pruned} == {1}
    assert all(p.value.min_offset == 250 and p.value.max_offset == 300 for p in pruned)
    assert topic.remote_end[1] >= 300


def _corrupt_topic(tmp: Path, codec: str = "gzip") -> tuple[TieredTopic, Path]:
    broker = start_broker(tmp)
    try:
        topic = produce_topic(broker, "c", partitions=1, records=600, codec=codec)
    finally:
        broker.shutdown()
    return topic, tmp / "remote"


def _flip(remote: Path, nth_segment: int, at: int) -> tuple[Path, int]:
    logs = sorted(remote.rglob("*.log"))
    path = logs[nth_segment]
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    return path, at


def test_corrupt_batch_fails_the_task_naming_object_and_position(spark: Any,
                                                                  tmp_path: Path) -> None:
    from kafka_tiers.log.records import iter_batches

    topic, remote = _corrupt_topic(tmp_path)
    path = sorted(remote.rglob("*.log"))[1]
    batches = list(iter_batches(path.read_bytes()))
    victim = batches[2]
    _flip(remote, 1, victim.position + 70)  # inside the records: only the CRC can tell
    key = path.relative_to(remote).as_posix()
    with pytest.raises(Exception) as info:
        read(spark, remote, "c").collect()
    text = str(info.value)
    assert "CorruptDataError" in text and key in text
    assert f"byte position {victim.position}" in text
    # PERMISSIVE: that batch is skipped and counted, every other row is right
    skipped_dir = tmp_path / "skipped"
    df = read(spark, remote, "c", mode="PERMISSIVE", corruptBatchesPath=skipped_dir)
    got = spark_rows(df.toArrow())
    lost = set(range(victim.base_offset, victim.last_offset + 1))
    assert got == [r for r in topic.remote_rows() if r[1] not in lost]
    lines = [json.loads(line) for f in skipped_dir.glob("*.jsonl")
             for line in f.read_text().splitlines()]
    assert [(x["object"], x["position"]) for x in lines] == [(key, victim.position)]
    assert "CRC" in lines[0]["reason"]


def test_corrupt_batch_size_in_permissive_mode_resyncs_at_the_next_index_entry(
        spark: Any, tmp_path: Path) -> None:
    from kafka_tiers.log.records import iter_batches

    topic, remote = _corrupt_topic(tmp_path, "none")
    path = sorted(remote.rglob("*.log"))[0]
    batches = list(iter_batches(path.read_bytes()))
    victim = batches[0]
    data = bytearray(path.read_bytes())
    data[victim.position + 8:victim.position + 12] = (5).to_bytes(4, "big")  # size 17
    path.write_bytes(bytes(data))
    with pytest.raises(Exception, match="impossible batch size"):
        read(spark, remote, "c").collect()
    got = spark_rows(read(spark, remote, "c", mode="PERMISSIVE").toArrow())
    rows = topic.remote_rows()
    assert got and set(got) < set(rows)  # only right rows, some lost up to the index entry
    assert all(r[1] > victim.last_offset for r in got if r[1] <= batches[-1].last_offset)


def test_source_local_reads_a_broker_log_dir_offline(spark: Any, tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        topic = produce_topic(broker, "plain", partitions=2, records=700, codec="lz4",
                              tiered=False)
    finally:
        broker.shutdown()
    df = (spark.read.format("kafka-tiers").option("source", "local")
          .option("logDirs", str(tmp_path / "logs")).option("topic", "plain").load())
    assert df.rdd.getNumPartitions() > 2
    assert spark_rows(df.toArrow()) == topic.all_rows()


def test_source_both_joins_remote_and_local_without_duplicates(spark: Any,
                                                               tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        topic = produce_topic(broker, "mixed", partitions=1, records=800, codec="zstd")
    finally:
        broker.shutdown()
    assert 0 < topic.remote_end[0] < 799
    df = (spark.read.format("kafka-tiers").option("source", "both").option("storage", "local")
          .option("rsm.config.dir", str(tmp_path / "remote"))
          .option("logDirs", str(tmp_path / "logs")).option("topic", "mixed").load())
    assert spark_rows(df.toArrow()) == topic.all_rows()
    remote_only = read(spark, tmp_path / "remote", "mixed")
    assert spark_rows(remote_only.toArrow()) == topic.remote_rows()


def test_bad_options_fail_with_one_clear_message(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="option topic is required"):
        (spark.read.format("kafka-tiers").option("storage", "local")
         .option("rsm.config.dir", str(tmp_path)).load().collect())
    with pytest.raises(Exception, match="endingOffsets"):
        read(spark, tmp_path, "x", endingOffsets='{"x":{"0":-2}}').collect()


def test_secret_options_never_appear_in_errors(spark: Any, tmp_path: Path) -> None:
    secret = "s3cr3t-never-shown"
    with pytest.raises(Exception) as info:
        (spark.read.format("kafka-tiers").option("storage", "no_such_pkg.mod:Storage")
         .option("rsm.config.aws.secret.access.key", secret).option("topic", "x")
         .load().collect())
    assert "no_such_pkg" in str(info.value) and secret not in str(info.value)
    df = read(spark, tmp_path / "nowhere", "x", **{"rsm.config.api.token": secret})
    assert secret not in df._jdf.queryExecution().toString()


def test_a_damaged_base_offset_is_corruption_not_a_short_read(spark: Any,
                                                              tmp_path: Path) -> None:
    from kafka_tiers.log.records import iter_batches

    topic, remote = _corrupt_topic(tmp_path, "lz4")
    path = sorted(remote.rglob("*.log"))[0]
    victim = list(iter_batches(path.read_bytes()))[2]
    _flip(remote, 0, victim.position + 1)  # a high byte of the base offset (outside the CRC)
    with pytest.raises(Exception, match=f"byte position {victim.position}"):
        read(spark, remote, "c").collect()
    got = spark_rows(read(spark, remote, "c", mode="PERMISSIVE").toArrow())
    lost = set(range(victim.base_offset, victim.last_offset + 1))
    assert got == [r for r in topic.remote_rows() if r[1] not in lost]
