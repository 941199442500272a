"""The Spark data source and ``spark audit`` read a remote tier whose segments are chunked,
zstd-compressed and encrypted, given the key files in the storage settings (a broker's
settings: ``encryption.enabled``, a disk chunk cache), transparently; without the private key
every segment is one fault naming the key pair; a changed stored byte is found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.conformance.storage import write_key_pair
from tests.spark.helpers import TieredTopic, produce_topic, spark_rows, start_broker

pytestmark = pytest.mark.slow


@pytest.fixture
def encrypted(tmp_path: Path) -> tuple[TieredTopic, dict[str, str]]:
    keys = tmp_path / "keys"
    keys.mkdir()
    rsm = {"dir": str(tmp_path / "remote"), "chunk.size": "4096",
           "compression.enabled": "true", "encryption.enabled": "true",
           "encryption.key.pair.id": "k1", "encryption.key.pairs": "k1",
           **write_key_pair(keys, "k1"),
           "fetch.chunk.cache.class": "disk", "fetch.chunk.cache.path": str(tmp_path / "cache")}
    broker = start_broker(tmp_path, rsm_config=rsm)
    try:
        topic = produce_topic(broker, "enc", partitions=2, records=400, codec="none",
                              segment_bytes=20000)
    finally:
        broker.shutdown()
    assert all(end > 0 for end in topic.remote_end.values())
    return topic, rsm


def test_datasource_and_audit_read_the_encrypted_tier(
        spark: Any, encrypted: tuple[TieredTopic, dict[str, str]]) -> None:
    from kafka_tiers.spark import register
    from kafka_tiers.spark.audit import audit

    register(spark)
    tiered, rsm = encrypted
    reader = spark.read.format("kafka-tiers").option("storage", "local").option("topic", "enc")
    for key, value in rsm.items():
        reader = reader.option(f"rsm.config.{key}", value)
    assert spark_rows(reader.load().toArrow()) == sorted(tiered.remote_rows(),
                                                         key=lambda r: (r[0], r[1]))
    report = audit(spark, "local", rsm, ["enc"])
    assert report.ok, report.faults[:3]
    assert sum(s.records for s in report.segments) == len(tiered.remote_rows())


def test_audit_names_a_missing_key_and_finds_a_changed_stored_byte(
        spark: Any, encrypted: tuple[TieredTopic, dict[str, str]]) -> None:
    from kafka_tiers.spark.audit import audit

    _tiered, rsm = encrypted
    no_keys = {"dir": rsm["dir"]}
    report = audit(spark, "local", no_keys, ["enc"])
    assert report.segments and not report.ok
    assert {f.segment_id for f in report.faults} == {s.segment_id for s in report.segments}
    assert all("key pair 'k1'" in f.message for f in report.faults), report.faults[0]
    assert all("BEGIN" not in f.message for f in report.faults)
    (log,) = sorted(Path(rsm["dir"]).rglob("*.log"))[:1]
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x01
    log.write_bytes(bytes(data))
    report = audit(spark, "local", rsm, ["enc"])
    assert not report.ok
    bad = {f.segment_id for f in report.faults}
    assert len(bad) == 1 and log.name.endswith(f"{bad.pop()}.log")
