"""``kafka-tiers spark audit`` and ``spark export`` on a real local SparkSession: the audit
passes a clean remote tier and catches a flipped byte, a missing segment and an offset gap;
export round-trips a topic as Parquet and JSON partitioned by partition and date."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kafka_tiers.api import TopicPartition
from tests.spark.helpers import TieredTopic, produce_topic, start_broker

pytestmark = pytest.mark.slow


@pytest.fixture
def topic(tmp_path: Path) -> tuple[TieredTopic, Path]:
    broker = start_broker(tmp_path)
    try:
        topic = produce_topic(broker, "audited", partitions=2, records=700, codec="lz4")
    finally:
        broker.shutdown()
    return topic, tmp_path / "remote"


def _storage(remote: Path) -> Any:
    from kafka_tiers.remote.guarded import GuardedRemoteStorage

    return GuardedRemoteStorage.load("local", {"dir": str(remote)})


def _segments(remote: Path, partition: int) -> list[Any]:
    return _storage(remote).list_remote_segments(TopicPartition("audited", partition))


def _log_file(remote: Path, md: Any) -> Path:
    return remote / f"audited-{md.topic_partition.partition}" / (
        f"{md.start_offset:020d}-{md.segment_id}.log")


def _cli(args: list[str]) -> Any:
    from kafka_tiers.cli import cli

    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_a_clean_remote_tier_passes(spark: Any, topic: tuple[TieredTopic, Path]) -> None:
    from kafka_tiers.spark.audit import audit

    tiered, remote = topic
    report = audit(spark, "local", {"dir": str(remote)}, ["audited"])
    assert report.ok, report.faults
    assert len(report.segments) == len(_segments(remote, 0)) + len(_segments(remote, 1)) > 4
    assert sum(s.records for s in report.segments) == len(tiered.remote_rows())
    # and every topic is found when none is named
    assert [s.segment_id for s in audit(spark, "local", {"dir": str(remote)}).segments] == [
        s.segment_id for s in report.segments]


def test_audit_catches_a_flipped_byte(spark: Any, topic: tuple[TieredTopic, Path],
                                      tmp_path: Path) -> None:
    from kafka_tiers.log.records import iter_batches

    _tiered, remote = topic
    md = _segments(remote, 1)[2]
    path = _log_file(remote, md)
    data = bytearray(path.read_bytes())
    victim = list(iter_batches(bytes(data)))[3]
    data[victim.position + 80] ^= 0x01
    path.write_bytes(bytes(data))
    config = tmp_path / "local.properties"
    config.write_text(f"dir={remote}\n")
    report_path = tmp_path / "audit.json"
    result = _cli(["spark", "audit", "--storage", "local", "--config", str(config),
                   "--topics", "audited", "--report", str(report_path)])
    assert result.exit_code == 1, result.output
    assert "crc" in result.output
    doc = json.loads(report_path.read_text())
    assert doc["ok"] is False
    crc = [f for f in doc["faults"] if f["kind"] == "crc"]
    key = path.relative_to(remote).as_posix()
    assert [(f["segment_id"], f["object"], f["position"]) for f in crc] == [
        (md.segment_id, key, victim.position)]
    assert any(f["kind"] == "manifest" and "the crc32c of" in f["message"] for f in doc["faults"])
    assert {f["kind"] for f in doc["faults"]} == {"crc", "manifest"}


def test_audit_catches_a_missing_segment_and_an_offset_gap(
        spark: Any, topic: tuple[TieredTopic, Path]) -> None:
    from kafka_tiers.spark.audit import audit

    _tiered, remote = topic
    missing = _segments(remote, 0)[1]
    _log_file(remote, missing).unlink()
    segments = _segments(remote, 1)
    assert len(segments) >= 4
    gone = segments[1]
    _storage(remote).delete_log_segment_data(gone)
    report = audit(spark, "local", {"dir": str(remote)}, ["audited"])
    kinds = {(f.kind, f.partition) for f in report.faults}
    assert ("missing", 0) in kinds and ("gap", 1) in kinds
    miss = next(f for f in report.faults if f.kind == "missing")
    assert miss.segment_id == missing.segment_id
    gap = next(f for f in report.faults if f.kind == "gap")
    assert f"offsets {gone.start_offset}-{gone.end_offset} are in no remote segment" in (
        gap.message)
    assert not any(f.kind == "gap" for f in report.faults if f.partition == 0)


def test_audit_json_output_for_tools(spark: Any, topic: tuple[TieredTopic, Path],
                                     tmp_path: Path) -> None:
    _tiered, remote = topic
    config = tmp_path / "local.properties"
    config.write_text("dir=/nonexistent\n")
    result = _cli(["spark", "audit", "--storage", "local", "--config", str(config),
                   "--set", f"dir={remote}", "--topics", "audited", "--format", "json",
                   "--report", "-"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["ok"] is True and doc["faults"] == [] and doc["segments"] > 4
    assert [p["partition"] for p in doc["partitions"]] == [0, 1]


def _expected_by_date(tiered: TieredTopic) -> set[tuple]:
    out = set()
    for p, off, key, value, ts, headers in tiered.remote_rows():
        day = dt.datetime.fromtimestamp(ts / 1000, dt.UTC).date().isoformat()
        out.add((p, day, off, key, value, ts, headers))
    return out


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_export_round_trips_partitioned_by_partition_and_date(
        spark: Any, topic: tuple[TieredTopic, Path], tmp_path: Path, fmt: str) -> None:
    tiered, remote = topic
    config = tmp_path / "local.properties"
    config.write_text(f"dir={remote}\n")
    out = tmp_path / "export"
    result = _cli(["spark", "export", "--storage", "local", "--config", str(config),
                   "--topic", "audited", "--to", str(out), "--format", fmt])
    assert result.exit_code == 0, result.output
    expected = _expected_by_date(tiered)
    dirs = {(p.parent.name, p.name) for p in out.glob("partition=*/date=*")}
    assert dirs == {(f"partition={p}", f"date={d}") for p, d, *_ in expected}
    assert len({d for _p, d, *_ in expected}) >= 2
    assert f"exported {len(expected)} record(s)" in result.output
    rows = spark.read.format(fmt).load(str(out)).collect()
    got = set()
    for r in rows:
        if fmt == "json":
            def unb64(v: Any) -> bytes | None:
                return None if v is None else base64.b64decode(v)
            key, value = unb64(r["key"]), unb64(r["value"])
            headers = tuple((h["key"], unb64(h["value"])) for h in (r["headers"] or []))
            ts = int(dt.datetime.fromisoformat(r["timestamp"]).timestamp() * 1000)
        else:
            key = None if r["key"] is None else bytes(r["key"])
            value = None if r["value"] is None else bytes(r["value"])
            headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                            for h in r["headers"])
            ts = int(r["timestamp"].replace(tzinfo=dt.UTC).timestamp() * 1000)
        got.add((r["partition"], str(r["date"]), r["offset"], key, value, ts, headers))
    assert got == expected
    # refuses to overwrite by default
    again = _cli(["spark", "export", "--storage", "local", "--config", str(config),
                  "--topic", "audited", "--to", str(out), "--format", fmt])
    assert again.exit_code != 0 and "already exists" in again.output
