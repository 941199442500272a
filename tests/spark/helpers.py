"""Data for the Spark tests: topics written by our broker and tiered through a storage plugin,
with the records that were produced, to compare with what Spark reads back."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker import Broker
from kafka_tiers.log.records import ProducerRecord, build_batch

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: 2026-11-20T00:00:00Z; records are STEP (three minutes) apart, so a topic spans dates.
BASE_TS = 1795132800000
STEP = 180_000

Row = tuple[int, int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def record(partition: int, i: int) -> ProducerRecord:
    """The ``i``-th record produced to ``partition``: null keys and values, empty and large
    values, headers with null values, all deterministic."""
    key = None if i % 11 == 0 else f"key-{partition}-{i}".encode()
    size = (i * 37) % 700
    seed = hashlib.sha256(f"{partition}/{i}".encode()).digest()
    half = random.Random(seed).randbytes(size // 2)  # half random, half compressible
    value = None if i % 13 == 5 else half + bytes(size - len(half))
    headers = tuple((f"h{j}", None if j == 1 else seed[:j + 3]) for j in range(i % 4))
    return ProducerRecord(value, key, headers, BASE_TS + i * STEP)


def as_row(partition: int, offset: int, rec: ProducerRecord) -> Row:
    assert rec.timestamp is not None
    return (partition, offset, rec.key, rec.value, rec.timestamp, tuple(rec.headers))


def spark_rows(table: Any) -> list[Row]:
    """Rows of an Arrow table (``df.toArrow()``) in the same shape, sorted."""
    out = []
    for r in table.to_pylist():
        ts = r["timestamp"]
        ms = int(ts.timestamp() * 1000) if hasattr(ts, "timestamp") else ts
        out.append((r["partition"], r["offset"], r["key"], r["value"], ms,
                    tuple((h["key"], h["value"]) for h in (r["headers"] or []))))
    return sorted(out, key=lambda x: (x[0], x[1]))


@dataclass
class TieredTopic:
    """A topic produced through a broker and tiered.

    Attributes:
        topic: its name.
        produced: partition -> every row produced, by offset.
        remote_end: partition -> the last offset in the remote tier.
        log_dir: the broker's log dir; remote_dir: the local backend's directory.
    """

    topic: str
    produced: dict[int, list[Row]] = field(default_factory=dict)
    remote_end: dict[int, int] = field(default_factory=dict)
    log_dir: Path | None = None
    remote_dir: Path | None = None

    def remote_rows(self) -> list[Row]:
        """Every produced row the remote tier holds."""
        return [r for p, rows in sorted(self.produced.items()) for r in rows
                if r[1] <= self.remote_end.get(p, -1)]

    def all_rows(self) -> list[Row]:
        return [r for _p, rows in sorted(self.produced.items()) for r in rows]


def start_broker(tmp: Path, storage: str = "local",
                 rsm_config: Mapping[str, str] | None = None) -> Broker:
    """A broker with a tiered remote storage (the local backend in ``tmp/remote`` by
    default), never tiering by itself (tests call ``run_tiering``)."""
    cfg = {"log.dirs": str(tmp / "logs"), "broker.id": "1",
           "remote.log.storage.enable": "true", "remote.storage.manager.class": storage,
           "remote.log.manager.task.interval.ms": "3600000"}
    if rsm_config is None:
        rsm_config = {"dir": str(tmp / "remote")}
    cfg.update({f"rsm.config.{k}": v for k, v in rsm_config.items()})
    broker = Broker(cfg, background=False)
    broker.start()
    return broker


def produce_topic(broker: Broker, topic: str, *, partitions: int = 2, records: int = 1200,
                  codec: str = "none", per_batch: int = 20, segment_bytes: int = 30000,
                  tiered: bool = True) -> TieredTopic:
    """Create ``topic``, produce ``records`` per partition in batches of ``per_batch`` with
    ``codec``, and (when tiered) copy its rolled segments to the remote tier."""
    config = {"segment.bytes": str(segment_bytes), "retention.ms": "-1",
              "local.retention.ms": "-2"}
    if tiered:
        config["remote.storage.enable"] = "true"
    broker.create_topic(topic, partitions, config)
    out = TieredTopic(topic)
    for p in range(partitions):
        tp = TopicPartition(topic, p)
        rows: list[Row] = []
        for start in range(0, records, per_batch):
            recs = [record(p, i) for i in range(start, min(start + per_batch, records))]
            first = broker.produce(tp, build_batch(recs, compression=codec))
            rows += [as_row(p, first + k, r) for k, r in enumerate(recs)]
        out.produced[p] = rows
    if tiered:
        broker.run_tiering([topic])
        for p in range(partitions):
            segs = broker.rlm.remote_segments(TopicPartition(topic, p)) if broker.rlm else []
            out.remote_end[p] = max((m.end_offset for m in segs), default=-1)
    return out


__all__ = ["BASE_TS", "CODECS", "STEP", "Row", "TieredTopic", "as_row", "produce_topic",
           "record", "spark_rows", "start_broker"]
