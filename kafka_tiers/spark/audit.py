"""The remote tier audit: every remote segment verified in parallel on Spark.

Per segment (one Spark task each, :func:`audit_segment`):

* the log object can be fetched whole and has the size the metadata gives (``missing``,
  ``size``);
* every batch parses and its CRC-32C matches (``crc``, ``corrupt``), offsets increase from the
  segment's start offset to its end offset, and the largest timestamp is the metadata's
  (``offsets``, ``metadata``);
* the offset index points at batch starts with offsets inside the batch's range, increasing;
  the time index holds increasing timestamps no larger than the segment's largest, at offsets
  inside the segment (``index``);
* for plugins on the object-store level, the manifest lists the objects with the sizes and
  checksums (CRC-32C, or SHA-256 in format 1 manifests) of what is stored, and the segment
  metadata of the listing (``manifest``).

Across segments, on the driver: each partition's segments must follow each other with no gap
and no overlap (``gap``, ``overlap``).

Every fault names the segment, and where it applies the object and byte position. Nothing here
ever logs or reports the plugin's configuration.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_tiers.api import (
    IndexType,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    TopicPartition,
)
from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.records import LOG_OVERHEAD, RecordBatch
from kafka_tiers.spark.planning import (
    metadata_from_tuple,
    metadata_to_tuple,
    parse_offset_index,
    parse_time_index,
    remote_object_name,
    remote_partitions,
)

FAULT_KINDS = ("missing", "size", "crc", "corrupt", "offsets", "metadata", "index",
               "manifest", "gap", "overlap", "error")


@dataclass(frozen=True)
class Fault:
    """One problem found.

    Attributes:
        kind: one of :data:`FAULT_KINDS`.
        topic, partition: where.
        segment_id: the remote segment (None for a fault between segments).
        object: the object (key) at fault, when one is.
        position: the byte position in that object, when known.
        message: what is wrong, in words.
    """

    kind: str
    topic: str
    partition: int
    segment_id: str | None
    object: str | None
    position: int | None
    message: str


@dataclass
class SegmentAudit:
    """The result of auditing one remote segment."""

    topic: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int
    size: int
    batches: int = 0
    records: int = 0
    faults: list[Fault] = field(default_factory=list)


@dataclass
class AuditReport:
    """Everything the audit found.

    Attributes:
        segments: one entry per remote segment, by topic, partition and start offset.
        faults: every fault, the segments' and the ones between segments.
    """

    segments: list[SegmentAudit]
    faults: list[Fault]

    @property
    def ok(self) -> bool:
        """True when no fault was found."""
        return not self.faults

    def partitions(self) -> list[dict[str, Any]]:
        """One summary row per partition: segments, offsets, records, bytes, faults."""
        rows: dict[tuple[str, int], dict[str, Any]] = {}
        for s in self.segments:
            row = rows.setdefault((s.topic, s.partition), {
                "topic": s.topic, "partition": s.partition, "segments": 0, "records": 0,
                "bytes": 0, "first_offset": s.start_offset, "last_offset": s.end_offset,
                "faults": 0})
            row["segments"] += 1
            row["records"] += s.records
            row["bytes"] += s.size
            row["first_offset"] = min(row["first_offset"], s.start_offset)
            row["last_offset"] = max(row["last_offset"], s.end_offset)
        for f in self.faults:
            key = (f.topic, f.partition)
            if key in rows:
                rows[key]["faults"] += 1
        return [rows[k] for k in sorted(rows)]

    def to_json(self) -> str:
        """The report as JSON: ``ok``, totals, per-partition rows, faults, segments."""
        doc = {
            "ok": self.ok,
            "segments": len(self.segments),
            "records": sum(s.records for s in self.segments),
            "bytes": sum(s.size for s in self.segments),
            "faults": [asdict(f) for f in self.faults],
            "partitions": self.partitions(),
            "segment_details": [
                {k: v for k, v in asdict(s).items() if k != "faults"}
                | {"faults": len(s.faults)} for s in self.segments],
        }
        return json.dumps(doc, indent=2, sort_keys=True)


def _read(stream: Any) -> bytes:
    with stream:
        return stream.read()


def audit_segment(storage: RemoteStorageManager, segment: tuple) -> SegmentAudit:
    """Verify one remote segment (see the module docstring); never raises for what it finds.

    Args:
        segment: the segment metadata as :func:`~kafka_tiers.spark.planning.metadata_to_tuple`.
    """
    md = metadata_from_tuple(segment)
    tp = md.topic_partition
    name = remote_object_name(storage, md)
    result = SegmentAudit(tp.topic, tp.partition, md.segment_id, md.start_offset,
                          md.end_offset, md.segment_size_in_bytes)

    def fault(kind: str, message: str, position: int | None = None,
              obj: str | None = name) -> None:
        result.faults.append(Fault(kind, tp.topic, tp.partition, md.segment_id, obj,
                                   position, message))

    try:
        data = _read(storage.fetch_log_segment(md, 0)) if md.segment_size_in_bytes else b""
    except RemoteResourceNotFoundError as exc:
        fault("missing", f"the log of segment {md.remote_log_segment_id} (offsets "
                         f"{md.start_offset}-{md.end_offset}) is missing: {exc}")
        return result
    except RemoteStorageError as exc:
        fault("error", f"cannot fetch the log of segment {md.remote_log_segment_id}: {exc}")
        return result
    if len(data) != md.segment_size_in_bytes:
        fault("size", f"the log holds {len(data)} bytes, the metadata says "
                      f"{md.segment_size_in_bytes}")
    starts: dict[int, RecordBatch] = {}
    pos = 0
    prev_last: int | None = None
    max_ts = -1
    first_base: int | None = None
    while pos < len(data):
        if len(data) - pos < LOG_OVERHEAD:
            fault("corrupt", f"{len(data) - pos} trailing bytes are not a batch", pos)
            break
        try:
            batch = RecordBatch(data, pos)
        except CorruptRecordError as exc:
            fault("corrupt", f"unreadable batch: {exc}", pos)
            break
        try:
            batch.validate()
        except CorruptRecordError as exc:
            fault("crc" if "CRC" in str(exc) else "corrupt", f"bad batch: {exc}", pos)
        else:
            if batch.base_offset < md.start_offset or batch.last_offset > md.end_offset:
                fault("offsets", f"batch offsets {batch.base_offset}-{batch.last_offset} are "
                                 f"outside the segment's {md.start_offset}-{md.end_offset}",
                      pos)
            if prev_last is not None and batch.base_offset <= prev_last:
                fault("offsets", f"batch at offset {batch.base_offset} does not follow the "
                                 f"previous batch's last offset {prev_last}", pos)
            if first_base is None:
                first_base = batch.base_offset
            prev_last = batch.last_offset
            max_ts = max(max_ts, batch.max_timestamp)
            if not batch.is_control:
                result.records += batch.records_count
        result.batches += 1
        starts[pos] = batch
        pos += batch.size
    if first_base is not None and first_base != md.start_offset:
        fault("offsets", f"the first batch starts at offset {first_base}, the segment at "
                         f"{md.start_offset}", 0)
    if prev_last is not None and prev_last != md.end_offset:
        fault("offsets", f"the last batch ends at offset {prev_last}, the segment at "
                         f"{md.end_offset}")
    if md.max_timestamp_ms >= 0 and max_ts >= 0 and max_ts != md.max_timestamp_ms:
        fault("metadata", f"the largest batch timestamp is {max_ts}, the metadata says "
                          f"{md.max_timestamp_ms}")
    indexes: dict[IndexType, bytes] = {}
    for index_type in (IndexType.OFFSET, IndexType.TIMESTAMP):
        try:
            indexes[index_type] = _read(storage.fetch_index(md, index_type))
        except RemoteStorageError as exc:
            fault("missing", f"the {index_type.name} index is missing or unreadable: {exc}")
    if IndexType.OFFSET in indexes:
        _check_offset_index(indexes[IndexType.OFFSET], md.start_offset, md.end_offset,
                            starts, fault)
    if IndexType.TIMESTAMP in indexes:
        _check_time_index(indexes[IndexType.TIMESTAMP], md.start_offset, md.end_offset,
                          md.max_timestamp_ms if md.max_timestamp_ms >= 0 else max_ts, fault)
    _check_manifest(storage, md, data, indexes, fault)
    return result


def _check_offset_index(raw: bytes, start: int, end: int, starts: Mapping[int, RecordBatch],
                        fault: Any) -> None:
    if len(raw) % 8:
        fault("index", f"the offset index has {len(raw)} bytes, not a whole number of entries")
    prev = (-1, -1)
    for offset, position in parse_offset_index(raw, start):
        if offset < start or offset > end:
            fault("index", f"offset index entry {offset} -> {position} is outside the "
                           f"segment's offsets {start}-{end}", position)
        batch = starts.get(position)
        if batch is None:
            fault("index", f"offset index entry {offset} -> {position} does not point at a "
                           f"batch", position)
        elif offset < batch.base_offset:
            fault("index", f"offset index entry {offset} -> {position} points at the batch "
                           f"of offsets {batch.base_offset}-{batch.last_offset}", position)
        if offset <= prev[0] or position <= prev[1]:
            fault("index", f"offset index entry {offset} -> {position} does not increase",
                  position)
        prev = (offset, position)


def _check_time_index(raw: bytes, start: int, end: int, max_ts: int, fault: Any) -> None:
    if len(raw) % 12:
        fault("index", f"the time index has {len(raw)} bytes, not a whole number of entries")
    prev_ts = None
    for ts, offset in parse_time_index(raw, start):
        if offset < start or offset > end:
            fault("index", f"time index entry {ts} -> {offset} is outside the segment's "
                           f"offsets {start}-{end}")
        if max_ts >= 0 and ts > max_ts:
            fault("index", f"time index entry {ts} -> {offset} is later than the segment's "
                           f"largest timestamp {max_ts}")
        if prev_ts is not None and ts < prev_ts:
            fault("index", f"time index entry {ts} -> {offset} goes back in time")
        prev_ts = ts


def _check_manifest(storage: RemoteStorageManager, md: Any, data: bytes,
                    indexes: Mapping[IndexType, bytes], fault: Any) -> None:
    from kafka_tiers.objectstore.keys import ObjectKind
    from kafka_tiers.remote.guarded import guard

    guarded = guard(storage)
    if not guarded.supports("read_manifest"):
        return
    try:
        manifest = guarded.read_manifest(md)
    except RemoteStorageError as exc:
        fault("manifest", f"the manifest cannot be read: {exc}", obj=None)
        return
    if (manifest.metadata.start_offset, manifest.metadata.end_offset,
            manifest.metadata.segment_size_in_bytes) != (
            md.start_offset, md.end_offset, md.segment_size_in_bytes):
        fault("manifest", "the manifest's segment metadata differs from the listing",
              obj=None)
    checks = [(ObjectKind.LOG, data), (ObjectKind.OFFSET_INDEX, indexes.get(IndexType.OFFSET)),
              (ObjectKind.TIME_INDEX, indexes.get(IndexType.TIMESTAMP))]
    for kind, content in checks:
        listed = manifest.object(kind)
        if listed is None:
            fault("manifest", f"the manifest lists no {kind.value} object", obj=None)
            continue
        if content is None:
            continue
        if listed.size != len(content):
            fault("manifest", f"the manifest gives {listed.name} {listed.size} bytes, "
                              f"{len(content)} are stored", obj=listed.name)
        elif not listed.matches(content):
            fault("manifest", f"the {listed.checksum_algorithm} of {listed.name} differs "
                              "from the manifest's", obj=listed.name)


def check_continuity(segments: Sequence[SegmentAudit]) -> list[Fault]:
    """Gaps and overlaps between consecutive segments of each partition."""
    faults = []
    by_tp: dict[tuple[str, int], list[SegmentAudit]] = {}
    for s in segments:
        by_tp.setdefault((s.topic, s.partition), []).append(s)
    for (topic, partition), segs in sorted(by_tp.items()):
        segs.sort(key=lambda s: s.start_offset)
        for a, b in itertools.pairwise(segs):
            if b.start_offset > a.end_offset + 1:
                faults.append(Fault(
                    "gap", topic, partition, b.segment_id, None, None,
                    f"offsets {a.end_offset + 1}-{b.start_offset - 1} are in no remote segment "
                    f"(between segments {a.segment_id} and {b.segment_id})"))
            elif b.start_offset <= a.end_offset:
                faults.append(Fault(
                    "overlap", topic, partition, b.segment_id, None, None,
                    f"segment {b.segment_id} starts at {b.start_offset}, inside segment "
                    f"{a.segment_id} ({a.start_offset}-{a.end_offset})"))
    return faults


def list_segments(storage: RemoteStorageManager, topics: Iterable[str],
                  partitions: Iterable[int] | None = None) -> list[tuple]:
    """The metadata tuples of every remote segment of ``topics``."""
    out = []
    for topic in topics:
        parts = list(partitions) if partitions is not None else remote_partitions(storage,
                                                                                  topic)
        for p in parts:
            out += [metadata_to_tuple(md)
                    for md in storage.list_remote_segments(TopicPartition(topic, p))]
    return out


def discover_topics(storage: RemoteStorageManager) -> list[str]:
    """Every topic with remote data, for plugins on the object-store level.

    Raises:
        ValueError: the plugin is not on the object-store level (name the topics).
    """
    from kafka_tiers.remote.guarded import guard

    guarded = guard(storage)
    if not guarded.supports("list_topics"):
        raise ValueError("this storage plugin cannot list its topics: name them with --topics")
    return guarded.list_topics()


def _task(args: tuple[str, dict[str, str], tuple]) -> SegmentAudit:
    from kafka_tiers.spark.reading import load_storage

    name, config, segment = args
    return audit_segment(load_storage(name, config), segment)


def audit(spark: Any, storage_name: str, config: Mapping[str, str],
          topics: Sequence[str] | None = None) -> AuditReport:
    """Audit every remote segment of ``topics`` (all topics when None and the plugin can list
    them), one Spark task per segment.

    Raises:
        PluginError, ConfigError: the plugin cannot be loaded.
        RemoteStorageError: the listing failed.
        ValueError: no topics given and the plugin cannot list them.
    """
    from kafka_tiers.spark.reading import load_storage

    cfg = dict(config)
    storage = load_storage(storage_name, cfg)
    names = list(topics) if topics else discover_topics(storage)
    segments = list_segments(storage, names)
    results: list[SegmentAudit] = []
    if segments:
        items = [(storage_name, cfg, s) for s in segments]
        rdd = spark.sparkContext.parallelize(items, len(items))
        results = rdd.map(_task).collect()
    results.sort(key=lambda s: (s.topic, s.partition, s.start_offset))
    faults = [f for s in results for f in s.faults] + check_continuity(results)
    return AuditReport(results, faults)


__all__ = [
    "FAULT_KINDS",
    "AuditReport",
    "Fault",
    "SegmentAudit",
    "audit",
    "audit_segment",
    "check_continuity",
    "discover_topics",
    "list_segments",
]
