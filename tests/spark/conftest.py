"""One local SparkSession (``local[2]``, small memory, no UI, quiet) for the Spark tests, and
the topics they read: produced by our broker and tiered through the local backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import CODECS, TieredTopic, produce_topic, start_broker

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession. The repository root is put on the workers' PYTHONPATH, as an
    installed distribution puts ``pyspark_kafka_tiers`` on theirs, so PySpark's lookup of
    ``pyspark_*`` modules finds the data source."""
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    pytest.importorskip("pyarrow", reason="the spark extra is not installed")
    from pyspark.sql import SparkSession

    paths = [str(REPO), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    session = (SparkSession.builder.master("local[2]").appName("kafka-tiers-tests")
               .config("spark.driver.memory", "1g")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def tiered_topics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One topic per codec (``t-none``, ``t-gzip``, ...), 2 partitions of 900 records in
    about a dozen remote segments each, written by a broker and tiered to the local
    backend; plus the broker's dirs."""
    tmp = tmp_path_factory.mktemp("tiered")
    broker = start_broker(tmp)
    try:
        topics: dict[str, TieredTopic] = {}
        for codec in CODECS:
            topic = produce_topic(broker, f"t-{codec}", codec=codec, records=900)
            topic.log_dir = tmp / "logs"
            topic.remote_dir = tmp / "remote"
            topics[codec] = topic
    finally:
        broker.shutdown()
    yield {"topics": topics, "remote": tmp / "remote", "logs": tmp / "logs"}
