"""The data source and the audit over S3 (the moto server): data written by our broker and
tiered through the S3 storage plugin (entry point ``s3``), read back through Spark record by
record. Skipped, saying why, until the plugin distribution (plugins/kafka-tiers-s3) is
installed."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import produce_topic, spark_rows, start_broker

pytestmark = [pytest.mark.slow, pytest.mark.servers]

#: The plugin under test: its entry-point name, as a user names it.
STORAGE = os.environ.get("KT_SPARK_S3_STORAGE", "s3")


@pytest.fixture(scope="session")
def s3_storage() -> str:
    if ":" not in STORAGE and not (entry_points(group="kafka_tiers.object_store", name=STORAGE)
                                   or entry_points(group="kafka_tiers.remote_storage",
                                                   name=STORAGE)):
        pytest.skip(f"the S3 storage plugin (entry point {STORAGE!r} in group "
                    f"kafka_tiers.object_store, distribution plugins/kafka-tiers-s3) is not "
                    f"installed")
    return STORAGE


def test_s3_tiered_topic_reads_back_through_spark(s3_storage: str, spark: Any, s3_server: Any,
                                                  tmp_path: Path) -> None:
    from kafka_tiers.spark.audit import audit

    bucket = s3_server.create_bucket()
    config = {"s3.bucket.name": bucket, "s3.region": s3_server.region,
              "s3.endpoint.url": s3_server.url, "s3.path.style.access.enabled": "true",
              "aws.access.key.id": s3_server.access_key,
              "aws.secret.access.key": s3_server.secret_key}
    broker = start_broker(tmp_path, s3_storage, config)
    try:
        topic = produce_topic(broker, "orders", partitions=2, records=900, codec="zstd")
    finally:
        broker.shutdown()
    assert all(end > 0 for end in topic.remote_end.values())
    reader = spark.read.format("kafka-tiers").option("storage", s3_storage)
    for key, value in config.items():
        reader = reader.option(f"rsm.config.{key}", value)
    df = reader.option("topic", "orders").load()
    assert spark_rows(df.toArrow()) == topic.remote_rows()
    ranged = reader.option("topic", "orders").option(
        "startingOffsets", '{"orders":{"0":101,"1":-2}}').option(
        "endingOffsets", '{"orders":{"0":402,"1":3}}').load()
    want = [r for r in topic.remote_rows()
            if (r[0] == 0 and 101 <= r[1] < 402) or (r[0] == 1 and r[1] < 3)]
    assert spark_rows(ranged.toArrow()) == want
    report = audit(spark, s3_storage, config, ["orders"])
    assert report.ok, report.faults
    assert sum(s.records for s in report.segments) == len(topic.remote_rows())
    assert s3_server.secret_key not in report.to_json()
