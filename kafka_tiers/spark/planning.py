"""Read options and input-partition planning for the ``kafka-tiers`` Spark data source.

Planning turns the options of a read into :class:`SegmentSlice` values, one Spark input
partition each:

* one slice per remote segment (from ``list_remote_segments``), or per local ``.log`` file;
* a segment larger than ``maxBytesPerPartition`` is cut at offset-index entries (each entry
  points at a batch boundary), so every slice holds whole batches and no batch is in two;
* a starting offset inside a segment starts the slice at the index entry before it, and an
  ending offset ends it after the batch that holds it, so readers fetch only those bytes;
* segments wholly outside the offset range, or (remote) wholly older than the starting
  timestamp, are not planned at all.

Offsets follow Spark's Kafka source: ``startingOffsets`` / ``endingOffsets`` are
``earliest``, ``latest`` or JSON ``{"orders":{"0":23,"1":-2}}`` with -2 meaning earliest and -1
latest; the ending offset is exclusive. Partitions a JSON object does not name use the default
(earliest for the start, latest for the end).

Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api import (
    ConfigError,
    IndexType,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    TopicPartition,
)
from kafka_tiers.remote.storage_config import StorageSettings, storage_settings

EARLIEST = -2
LATEST = -1

#: Default size above which a segment is split into several input partitions.
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
#: Default number of records per Arrow batch a reader yields (at most).
DEFAULT_MAX_RECORDS_PER_BATCH = 65536

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")

SOURCES = ("remote", "local", "both")
MODES = ("FAILFAST", "PERMISSIVE")


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {key} must be true or false, got {raw!r}", key=key)


def _int(options: Mapping[str, str], key: str, default: int | None, minimum: int = 0
         ) -> int | None:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"option {key} must be an integer, got {raw!r}", key=key) from None
    if value < minimum:
        raise ConfigError(f"option {key} must be >= {minimum}, got {value}", key=key)
    return value


def parse_offsets(text: str | None, key: str, *, ending: bool) -> int | dict[str, dict[int, int]]:
    """``earliest`` / ``latest`` (as :data:`EARLIEST` / :data:`LATEST`) or Spark-Kafka JSON
    ``{"topic":{"partition":offset}}`` as ``{topic: {partition: offset}}``.

    Raises:
        ConfigError: malformed JSON, a negative offset other than -2/-1, or -2 as an ending
            offset (Spark's rule).
    """
    default = LATEST if ending else EARLIEST
    if text is None or not str(text).strip():
        return default
    raw = str(text).strip()
    if raw.lower() == "earliest":
        if ending:
            raise ConfigError(f"{key} cannot be earliest", key=key)
        return EARLIEST
    if raw.lower() == "latest":
        return LATEST
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"{key} must be earliest, latest or JSON like "
                          f'{{"orders":{{"0":23,"1":-2}}}}: {exc}', key=key) from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{key} JSON must be an object of topics", key=key)
    out: dict[str, dict[int, int]] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"{key}: {topic} must map partitions to offsets", key=key)
        for part, offset in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise ConfigError(f"{key}: partition {part!r} of {topic} is not a number",
                                  key=key) from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise ConfigError(f"{key}: offset {offset!r} of {topic}-{part} must be an "
                                  f"integer >= 0, -2 (earliest) or -1 (latest)", key=key)
            if ending and offset == EARLIEST:
                raise ConfigError(f"{key}: -2 (earliest) is not allowed as an ending offset "
                                  f"({topic}-{part})", key=key)
            out.setdefault(str(topic), {})[p] = offset
    return out


def _storage_settings(options: Mapping[str, str]) -> StorageSettings:
    """The plugin (option ``storage``) and its config: ``rsm.config.file`` (a broker's
    ``server.properties``, which may name the plugin, or a file of the plugin's own keys: see
    :mod:`kafka_tiers.remote.storage_config`) overlaid by ``rsm.config.<key>`` options
    (lower-cased by Spark)."""
    overrides = {str(k)[len("rsm.config."):]: str(v) for k, v in options.items()
                 if str(k).lower().startswith("rsm.config.")
                 and str(k).lower() != "rsm.config.file"}
    return storage_settings(options.get("storage") or None,
                            options.get("rsm.config.file") or None, overrides,
                            storage_option="option storage")


@dataclass(frozen=True)
class ReadOptions:
    """The parsed options of one read (see ``docs/spark.md`` for the table).

    Raises:
        ConfigError: from :meth:`parse`, for a missing or malformed option.
    """

    topics: tuple[str, ...]
    storage: str | None
    storage_config: Mapping[str, str] = field(repr=False)
    source: str = "remote"
    log_dirs: tuple[str, ...] = ()
    partitions: tuple[int, ...] | None = None
    starting: Any = EARLIEST
    ending: Any = LATEST
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    mode: str = "FAILFAST"
    corrupt_batches_path: str | None = None
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    push_filters: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Parse data source options (keys case-insensitive)."""
        opts = {str(k).lower(): v for k, v in options.items()}
        raw_topics = opts.get("topic") or opts.get("topics") or ""
        topics = tuple(t.strip() for t in str(raw_topics).split(",") if t.strip())
        if not topics:
            raise ConfigError("option topic is required (a topic name, or several separated "
                              "by commas)", key="topic")
        source = str(opts.get("source", "remote")).strip().lower()
        if source not in SOURCES:
            raise ConfigError(f"option source must be remote, local or both, got {source!r}",
                              key="source")
        storage = opts.get("storage")
        if source != "local" and not storage and not opts.get("rsm.config.file"):
            raise ConfigError("option storage is required (a storage plugin's entry-point "
                              "name such as local or s3, or an import path)", key="storage")
        settings = _storage_settings(opts) if source != "local" else None
        log_dirs = tuple(d.strip() for d in str(opts.get("logdirs", "")).split(",")
                         if d.strip())
        if source != "remote" and not log_dirs:
            raise ConfigError(f"source={source} needs option logDirs (the broker's log "
                              f"directories, separated by commas)", key="logDirs")
        partitions = None
        if opts.get("partitions"):
            try:
                partitions = tuple(sorted({int(p) for p in str(opts["partitions"]).split(",")
                                           if p.strip()}))
            except ValueError:
                raise ConfigError(f"option partitions must be numbers separated by commas, "
                                  f"got {opts['partitions']!r}", key="partitions") from None
        mode = str(opts.get("mode", "FAILFAST")).strip().upper()
        if mode not in MODES:
            raise ConfigError(f"option mode must be FAILFAST or PERMISSIVE, got {mode!r}",
                              key="mode")
        min_ts = _int(opts, "startingtimestamp", None)
        max_ts = _int(opts, "endingtimestamp", None)
        if min_ts is not None and max_ts is not None and max_ts < min_ts:
            raise ConfigError("endingTimestamp is before startingTimestamp",
                              key="endingTimestamp")
        return cls(
            topics=topics,
            storage=settings.plugin if settings else (str(storage) if storage else None),
            storage_config=dict(settings.config) if settings else {},
            source=source,
            log_dirs=log_dirs,
            partitions=partitions,
            starting=parse_offsets(opts.get("startingoffsets"), "startingOffsets",
                                   ending=False),
            ending=parse_offsets(opts.get("endingoffsets"), "endingOffsets", ending=True),
            min_timestamp=min_ts,
            max_timestamp=max_ts,
            mode=mode,
            corrupt_batches_path=opts.get("corruptbatchespath") or None,
            max_bytes_per_partition=_int(opts, "maxbytesperpartition",
                                         DEFAULT_MAX_BYTES_PER_PARTITION, 1) or 1,
            max_records_per_batch=_int(opts, "maxrecordsperbatch",
                                       DEFAULT_MAX_RECORDS_PER_BATCH, 1) or 1,
            push_filters=_bool(opts, "pushfilters", False),
        )

    def start_for(self, topic: str, partition: int) -> int:
        """The starting offset asked for a partition (or :data:`EARLIEST` / :data:`LATEST`)."""
        if isinstance(self.starting, dict):
            return self.starting.get(topic, {}).get(partition, EARLIEST)
        return int(self.starting)

    def end_for(self, topic: str, partition: int) -> int:
        """The (exclusive) ending offset asked for a partition, or :data:`LATEST`."""
        if isinstance(self.ending, dict):
            return self.ending.get(topic, {}).get(partition, LATEST)
        return int(self.ending)


# --------------------------------------------------------------------------------------------
# Remote segment metadata travels to executors as a plain tuple (its mapping field is a
# MappingProxyType, which does not pickle).


def metadata_to_tuple(md: RemoteLogSegmentMetadata) -> tuple:
    """A picklable form of remote segment metadata (:func:`metadata_from_tuple` reverses)."""
    return (md.topic_partition.topic, md.topic_partition.partition, md.segment_id,
            md.start_offset, md.end_offset, md.max_timestamp_ms, md.broker_id,
            md.event_timestamp_ms, md.segment_size_in_bytes,
            tuple(md.segment_leader_epochs.items()), md.custom_metadata, md.state.value)


def metadata_from_tuple(t: tuple) -> RemoteLogSegmentMetadata:
    """The metadata :func:`metadata_to_tuple` packed."""
    (topic, partition, sid, start, end, max_ts, broker, event_ts, size, epochs, custom,
     state) = t
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TopicPartition(topic, partition), sid), start, end, max_ts, broker,
        event_ts, size, dict(epochs), custom, RemoteLogSegmentState(state))


def parse_offset_index(raw: bytes, base_offset: int) -> list[tuple[int, int]]:
    """Entries ``(absolute offset, position)`` of an ``.index`` file's bytes, stopping at the
    zero padding of a preallocated (active) index."""
    out: list[tuple[int, int]] = []
    usable = len(raw) - len(raw) % _OFFSET_ENTRY.size
    for i, (rel, pos) in enumerate(_OFFSET_ENTRY.iter_unpack(raw[:usable])):
        if i > 0 and rel == 0 and pos == 0:
            break
        out.append((base_offset + rel, pos))
    return out


def parse_time_index(raw: bytes, base_offset: int) -> list[tuple[int, int]]:
    """Entries ``(timestamp, absolute offset)`` of a ``.timeindex`` file's bytes, stopping at
    zero padding."""
    out: list[tuple[int, int]] = []
    usable = len(raw) - len(raw) % _TIME_ENTRY.size
    for i, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(raw[:usable])):
        if i > 0 and ts == 0 and rel == 0:
            break
        out.append((ts, base_offset + rel))
    return out


@dataclass(frozen=True)
class SegmentSlice:
    """One input partition: whole batches of one segment between two byte positions, and the
    offset and timestamp bounds of the rows to keep.

    Attributes:
        topic, partition: the topic partition.
        source: ``remote`` or ``local``.
        name: the object (remote key or local file) in messages.
        segment: the remote segment metadata (:func:`metadata_to_tuple`), remote only.
        path: the ``.log`` file, local only.
        start_position: the first byte to read (a batch start).
        end_position: the last byte to read (inclusive), or None for the end of the segment.
        min_offset, max_offset: rows with ``min_offset <= offset < max_offset`` (max None: no
            upper bound).
        min_timestamp, max_timestamp: rows with timestamps in ``[min, max)`` (epoch ms).
        resync_positions: batch starts (from the offset index) after ``start_position``, where
            a PERMISSIVE read continues after a batch whose size is unreadable.
        last_segment: the last segment of its partition (a local active segment may end in a
            half-written batch, which is the end of data, not corruption).
    """

    topic: str
    partition: int
    source: str
    name: str
    segment: tuple | None
    path: str | None
    start_position: int
    end_position: int | None
    min_offset: int
    max_offset: int | None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    resync_positions: tuple[int, ...] = ()
    last_segment: bool = False


@dataclass(frozen=True)
class SegmentInfo:
    """What planning needs of one segment, remote or local.

    Attributes:
        start_offset: the base offset.
        end_offset: the last offset (inclusive), or None when unknown (a local last segment).
        size: bytes of the log.
        max_timestamp: the largest timestamp, or None when unknown.
        name: the object or file in messages.
        segment: remote metadata tuple, or None.
        path: local ``.log`` path, or None.
        load_index: returns the offset index bytes.
    """

    start_offset: int
    end_offset: int | None
    size: int
    max_timestamp: int | None
    name: str
    segment: tuple | None
    path: str | None
    load_index: Callable[[], bytes] = field(compare=False, repr=False)


def remote_object_name(storage: RemoteStorageManager, md: RemoteLogSegmentMetadata) -> str:
    """The key of a remote segment's log object when the plugin is built on the object-store
    level, else ``<topic>-<partition>/<segment id> (start offset N)``."""
    from kafka_tiers.remote.guarded import guard

    guarded = guard(storage)
    if guarded.supports("object_key"):
        try:
            return guarded.object_key(md, "log")
        except Exception:  # an unusual topic name: fall back to the id
            pass
    return f"{md.remote_log_segment_id} (start offset {md.start_offset})"


def remote_partitions(storage: RemoteStorageManager, topic: str, *, probe_limit: int = 10000
                      ) -> list[int]:
    """The partitions of ``topic`` that have remote segments.

    Plugins on the object-store level are listed by key prefix; for other plugins partitions
    0, 1, 2, ... are probed with ``list_remote_segments`` until one has no segment (so name
    the partitions with the ``partitions`` option when a topic has holes).
    """
    from kafka_tiers.remote.guarded import guard

    guarded = guard(storage)
    if guarded.supports("list_partitions"):
        return guarded.list_partitions(topic)
    out = []
    for p in range(probe_limit):
        if not storage.list_remote_segments(TopicPartition(topic, p)):
            break
        out.append(p)
    return out


def remote_segments(storage: RemoteStorageManager, topic: str, partition: int
                    ) -> list[SegmentInfo]:
    """The remote segments of a partition as :class:`SegmentInfo`."""
    out = []
    for md in storage.list_remote_segments(TopicPartition(topic, partition)):
        def load(md: RemoteLogSegmentMetadata = md) -> bytes:
            with storage.fetch_index(md, IndexType.OFFSET) as stream:
                return stream.read()
        out.append(SegmentInfo(md.start_offset, md.end_offset, md.segment_size_in_bytes,
                               md.max_timestamp_ms if md.max_timestamp_ms >= 0 else None,
                               remote_object_name(storage, md), metadata_to_tuple(md), None,
                               load))
    return out


def plan_segments(segments: list[SegmentInfo], topic: str, partition: int, source: str,
                  start: int, end: int, opts: ReadOptions) -> list[SegmentSlice]:
    """Slices of one partition's segments (sorted by start offset) for the offset range
    ``[start, end)`` (``end`` :data:`LATEST` = no bound), split by ``opts``."""
    slices: list[SegmentSlice] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        seg_end = seg.end_offset
        if seg_end is None and not last:
            seg_end = segments[i + 1].start_offset - 1
        if seg_end is not None and seg_end < start:
            continue
        if end != LATEST and seg.start_offset >= end:
            break
        if (opts.min_timestamp is not None and seg.max_timestamp is not None
                and seg.max_timestamp < opts.min_timestamp):
            continue
        if seg.size == 0:
            continue
        need_start = start > seg.start_offset
        need_end = end != LATEST and (seg_end is None or end <= seg_end)
        too_big = seg.size > opts.max_bytes_per_partition
        entries: list[tuple[int, int]] = []
        if need_start or need_end or too_big:
            entries = parse_offset_index(seg.load_index(), seg.start_offset)
        first = 0
        if need_start:
            for off, pos in entries:
                if off < start:
                    first = pos
                else:
                    break
        last_pos: int | None = None
        if need_end:
            for j, (off, _pos) in enumerate(entries):
                if off >= end:
                    if j + 1 < len(entries):
                        last_pos = entries[j + 1][1] - 1
                    break
        stop = seg.size if last_pos is None else last_pos + 1
        cuts = [first]
        for _off, pos in entries:
            if pos > cuts[-1] and pos < stop and pos - cuts[-1] >= opts.max_bytes_per_partition:
                cuts.append(pos)
        resync = tuple(pos for _off, pos in entries if pos > first and pos < stop)
        for k, a in enumerate(cuts):
            b = cuts[k + 1] - 1 if k + 1 < len(cuts) else (None if last_pos is None
                                                             else last_pos)
            upper = b if b is not None else seg.size - 1
            slices.append(SegmentSlice(
                topic, partition, source, seg.name, seg.segment, seg.path, a, b,
                start, None if end == LATEST else end, opts.min_timestamp, opts.max_timestamp,
                tuple(p for p in resync if a < p <= upper), last and k == len(cuts) - 1))
    return slices


def resolve_range(segments: list[SegmentInfo], topic: str, partition: int, opts: ReadOptions
                  ) -> tuple[int, int]:
    """``(start, end)`` offsets for a partition, -2 / -1 resolved against its segments'
    earliest offset (``end`` stays :data:`LATEST` = no bound)."""
    start = opts.start_for(topic, partition)
    end = opts.end_for(topic, partition)
    earliest = segments[0].start_offset if segments else 0
    if start == EARLIEST:
        start = earliest
    elif start == LATEST:
        latest = max((s.end_offset for s in segments if s.end_offset is not None), default=-1)
        start = latest + 1 if segments and segments[-1].end_offset is not None else 2**63 - 1
    return start, end


def plan(opts: ReadOptions, storage: RemoteStorageManager | None,
         partition_filter: Callable[[int], bool] | None = None,
         offset_bounds: Callable[[int, int], tuple[int, int]] | None = None
         ) -> list[SegmentSlice]:
    """Every slice of a read.

    Args:
        storage: the loaded storage plugin (None for ``source=local``).
        partition_filter: partitions to keep (pushed-down filters), or None.
        offset_bounds: narrows ``(start, end)`` of a partition (pushed-down filters).

    Raises:
        RemoteStorageError: listing or index fetches failed.
    """
    from kafka_tiers.spark import local_source

    out: list[SegmentSlice] = []
    for topic in opts.topics:
        remote_parts: list[int] = []
        local_parts: list[int] = []
        if opts.source in ("remote", "both") and storage is not None:
            remote_parts = (list(opts.partitions) if opts.partitions is not None
                            else remote_partitions(storage, topic))
        if opts.source in ("local", "both"):
            local_parts = (list(opts.partitions) if opts.partitions is not None
                           else local_source.local_partitions(opts.log_dirs, topic))
        for partition in sorted(set(remote_parts) | set(local_parts)):
            if partition_filter is not None and not partition_filter(partition):
                continue
            remote = (remote_segments(storage, topic, partition)
                      if storage is not None and opts.source != "local" else [])
            local = (local_source.local_segments(opts.log_dirs, topic, partition)
                     if opts.source != "remote" else [])
            if opts.source == "both" and remote:
                remote_end = max(s.end_offset or 0 for s in remote)
                local = [s for k, s in enumerate(local)
                         if k + 1 >= len(local) or local[k + 1].start_offset - 1 > remote_end]
            every = sorted(remote + local, key=lambda s: s.start_offset)
            start, end = resolve_range(every, topic, partition, opts)
            if offset_bounds is not None:
                start, end = offset_bounds(start, end)
            if end != LATEST and end <= start:
                continue
            out += plan_segments(remote, topic, partition, "remote", start, end, opts)
            if local:
                local_start = start
                if remote:
                    local_start = max(start, max(s.end_offset or 0 for s in remote) + 1)
                out += plan_segments(local, topic, partition, "local", local_start, end, opts)
    return out


__all__ = [
    "DEFAULT_MAX_BYTES_PER_PARTITION",
    "DEFAULT_MAX_RECORDS_PER_BATCH",
    "EARLIEST",
    "LATEST",
    "ReadOptions",
    "SegmentInfo",
    "SegmentSlice",
    "metadata_from_tuple",
    "metadata_to_tuple",
    "parse_offset_index",
    "parse_offsets",
    "parse_time_index",
    "plan",
    "plan_segments",
    "remote_object_name",
    "remote_partitions",
    "remote_segments",
    "resolve_range",
]
