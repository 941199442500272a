"""``kafka-tiers remote ls|describe|cat|verify|rekey``: look into a partition's remote tier
through a storage plugin, without a broker (``rekey``, in :mod:`kafka_tiers.cli.remote_rekey`,
rewrites manifests; the others only read).

The config file is either a broker's ``server.properties`` (the plugin is its
``remote.storage.manager.class``, its settings the ``rsm.config.*`` keys; ``--storage`` may then
be left out) or a file of the plugin's own keys, as they appear after ``rsm.config.``; both are
read by :func:`kafka_tiers.remote.storage_config.storage_settings`, as every command that takes
storage settings does. ``verify`` exits with status 1 when a segment has a problem.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import click

from kafka_tiers.cli.output import FORMAT_OPTION, console, emit_json, parse_kv


def _common(fn: Any) -> Any:
    options = [
        click.option("--storage", "storage", metavar="NAME_OR_PATH",
                     help="The storage plugin: an entry-point name (local) or "
                          "pkg.module:Class. Default: remote.storage.manager.class of a "
                          "server.properties --config."),
        click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
                     metavar="FILE", help="A broker's server.properties (rsm.config.* keys), "
                                          "or a file of the plugin's own keys."),
        click.option("--set", "overrides", multiple=True, metavar="K=V",
                     help="A plugin key overriding the file (repeatable)."),
        click.option("--topic", required=True, help="The topic."),
        click.option("--partition", type=click.IntRange(min=0), default=0, show_default=True),
        FORMAT_OPTION,
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _segment_option(required: bool) -> Any:
    return click.option("--segment", "segment_id", required=required, metavar="ID",
                        help="A remote segment id (as `remote ls` shows it)." + (
                            "" if required else " Default: every segment."))


def read_only_config(plugin: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` for opening ``plugin`` only to read: the ``local`` plugin gets
    ``dir.create=false`` (unless given), so a mistyped ``dir`` is an error, not a new empty
    tier; and the object-store data path
    (:func:`~kafka_tiers.remote.storage_config.reader_data_config`) needs only the private
    keys of the segments read and creates no cache directory.

    Raises:
        PluginError: ``plugin`` cannot be resolved.
    """
    from kafka_tiers.plugins import STORAGE_GROUP, resolve_class
    from kafka_tiers.remote.local import LocalObjectStore
    from kafka_tiers.remote.storage_config import reader_data_config

    out = reader_data_config(config)
    store_class = getattr(resolve_class(STORAGE_GROUP, plugin)[0], "store_class", None)
    if isinstance(store_class, type) and issubclass(store_class, LocalObjectStore):
        out.setdefault("dir.create", "false")
    return out


def open_read_only(settings: Any) -> Any:
    """The storage plugin of ``settings`` (a
    :class:`~kafka_tiers.remote.storage_config.StorageSettings`), loaded, configured with
    :func:`read_only_config` and guarded: it creates nothing (no tier directory, no cache
    directory). ``remote rekey`` opens it this way too and writes only the manifests it
    re-wraps.

    Raises:
        PluginError, ConfigError: the plugin does not load or refuses its settings.
    """
    from kafka_tiers.remote.guarded import GuardedRemoteStorage

    return GuardedRemoteStorage.load(settings.plugin,
                                     read_only_config(settings.plugin, settings.config))


def _open(storage: str | None, config_file: str | None, overrides: tuple[str, ...]) -> Any:
    """The storage plugin, opened read-only (:func:`open_read_only`): every ``remote``
    command only reads, so it creates nothing."""
    from kafka_tiers.remote.storage_config import storage_settings

    return open_read_only(storage_settings(storage, config_file, parse_kv(overrides, "--set")))


def _tp(topic: str, partition: int) -> Any:
    from kafka_tiers.api import TopicPartition
    from kafka_tiers.log.names import validate_topic

    validate_topic(topic)
    return TopicPartition(topic, partition)


def _find(rsm: Any, tp: Any, segment_id: str) -> Any:
    from kafka_tiers.api import RemoteResourceNotFoundError

    for md in rsm.list_remote_segments(tp):
        if md.segment_id == segment_id:
            return md
    raise RemoteResourceNotFoundError(f"no remote segment {segment_id} in {tp}",
                                      segment_id=segment_id, resource="segment")


def _md_json(md: Any) -> dict[str, Any]:
    return {
        "segment_id": md.segment_id,
        "topic": md.topic_partition.topic,
        "partition": md.topic_partition.partition,
        "start_offset": md.start_offset,
        "end_offset": md.end_offset,
        "max_timestamp_ms": md.max_timestamp_ms,
        "broker_id": md.broker_id,
        "event_timestamp_ms": md.event_timestamp_ms,
        "size_bytes": md.segment_size_in_bytes,
        "leader_epochs": {str(k): v for k, v in md.segment_leader_epochs.items()},
        "state": md.state.value,
        "custom_metadata_base64": (None if md.custom_metadata is None
                                   else base64.b64encode(md.custom_metadata).decode("ascii")),
    }


@click.group()
def remote() -> None:
    """Look into a partition's remote tier through a storage plugin.

    \b
    Examples:
      kafka-tiers remote ls --storage local --set dir=/data/tier --topic orders
      kafka-tiers remote describe --storage local --config tier.properties --topic orders \\
          --segment 7_TGvhOvS_iIF3viOf6qnw --format json
      kafka-tiers remote cat --storage s3 --config s3.properties --topic orders --partition 2 \\
          --segment 7_TGvhOvS_iIF3viOf6qnw --max-records 20
      kafka-tiers remote verify --storage local --set dir=/data/tier --topic orders
      kafka-tiers remote ls --config /etc/kafka/server.properties --topic orders
      kafka-tiers remote rekey --config /etc/kafka/server.properties --topic orders --dry-run
    """


@remote.command("ls")
@_common
def ls(storage: str | None, config_file: str | None, overrides: tuple[str, ...], topic: str,
       partition: int, fmt: str) -> None:
    """List a partition's remote segments, oldest first."""
    tp = _tp(topic, partition)
    with _open(storage, config_file, overrides) as rsm:
        segments = rsm.list_remote_segments(tp)
    if fmt == "json":
        emit_json({"version": 1, "topic": topic, "partition": partition,
                   "segments": [_md_json(md) for md in segments]})
        return
    from rich.table import Table

    table = Table(title=f"remote segments of {tp}")
    table.add_column("segment id", no_wrap=True)
    for column in ("start", "end", "bytes", "max timestamp", "broker"):
        table.add_column(column, justify="right")
    table.add_column("leader epochs")
    for md in segments:
        table.add_row(md.segment_id, str(md.start_offset), str(md.end_offset),
                      str(md.segment_size_in_bytes), str(md.max_timestamp_ms),
                      str(md.broker_id),
                      ", ".join(f"{e}@{o}" for e, o in md.segment_leader_epochs.items()))
    out = console()
    out.print(table)
    out.print(f"{len(segments)} segments, "
              f"{sum(m.segment_size_in_bytes for m in segments)} bytes")


@remote.command("describe")
@_common
@_segment_option(required=True)
def describe(storage: str | None, config_file: str | None, overrides: tuple[str, ...], topic: str,
             partition: int, fmt: str, segment_id: str) -> None:
    """Show one remote segment's metadata and, for object-store plugins, how it is stored.

    Besides the metadata and the manifest's objects (sizes and checksums of the original
    bytes), ``data`` says how the segment is stored: the manifest's format version, its
    chunks and chunk size, the original and the stored size, the compression and its ratio
    (original / stored), whether it is encrypted and the id of the key pair that wraps its
    data key (never the key). ``cache`` holds the hits and misses of the chunk and manifest
    caches for the reads this command did, and the downloads it made.
    """
    tp = _tp(topic, partition)
    with _open(storage, config_file, overrides) as rsm:
        md = _find(rsm, tp, segment_id)
        manifest = _manifest(rsm, md)
        layout = _layout(rsm, md)
        cache = _cache_stats(rsm)
    doc = _md_json(md)
    doc["objects"] = None if manifest is None else _objects_json(manifest.objects)
    doc["data"] = layout
    doc["cache"] = cache
    if fmt == "json":
        # 2: objects carry checksum_algorithm + checksum; 3: "data" and "cache"
        emit_json({"version": 3, "segment": doc})
        return
    out = console()
    for key, value in doc.items():
        if key not in ("objects", "data", "cache"):
            out.print(f"{key:24} {value}")
    for obj in doc["objects"] or []:
        stored = ("" if obj["stored_size"] is None
                  else f"  stored {obj['stored_size']} bytes ({obj['stored_in']})")
        out.print(f"{'object':24} {obj['kind']:24} {obj['size']:>10} bytes  "
                  f"{obj['checksum_algorithm']} {obj['checksum'][:16]}{stored}")
    for line in _data_lines(doc["data"], cache):
        out.print(line)


def _manifest(rsm: Any, md: Any) -> Any:
    """The segment's manifest through the guard, or None when the plugin keeps none."""
    from kafka_tiers.remote.guarded import guard

    guarded = guard(rsm)
    if not guarded.supports("read_manifest"):
        return None
    return guarded.read_manifest(md)


def _manifest_objects(rsm: Any, md: Any) -> Any:
    manifest = _manifest(rsm, md)
    return None if manifest is None else manifest.objects


def _objects_json(objects: Any) -> list[dict[str, Any]]:
    out = []
    for o in objects:
        stored_in = (None if o.stored_size is None else "inline" if o.inline is not None
                     else "indexes object" if o.stored_offset is not None else "object")
        out.append({"kind": o.kind.value, "name": o.name, "size": o.size,
                    "checksum_algorithm": o.checksum_algorithm, "checksum": o.checksum,
                    "stored_size": o.stored_size, "stored_in": stored_in})
    return out


def _layout(rsm: Any, md: Any) -> dict[str, Any] | None:
    """How the segment is stored (the storage manager's ``describe_segment``: format version,
    chunks, chunk size, original and stored size, ``ratio`` stored / original, compression,
    ``key_id``, where the indexes are) plus ``encrypted``; None when the plugin cannot say.
    Never key material: the manager reads the manifest only."""
    from kafka_tiers.remote.guarded import guard

    guarded = guard(rsm)
    if not guarded.supports("describe_segment"):
        return None
    layout = _plain(guarded.describe_segment(md))
    if not isinstance(layout, dict):
        return None
    layout["encrypted"] = layout.get("key_id") is not None
    return layout


def _plain(value: Any) -> Any:
    """Counters as JSON values: dataclasses and mappings become dicts, recursively."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _cache_stats(rsm: Any) -> dict[str, Any] | None:
    """The plugin's cache counters (``cache_stats``), or None when it has no caches."""
    from kafka_tiers.remote.guarded import guard

    guarded = guard(rsm)
    if not guarded.supports("cache_stats"):
        return None
    stats = _plain(guarded.cache_stats())
    return stats if isinstance(stats, dict) else {"stats": stats}


def _data_lines(data: dict[str, Any] | None, cache: dict[str, Any] | None) -> list[str]:
    """The human lines of ``describe``'s ``data`` and ``cache``."""
    lines = []
    if data is not None:
        ratio = data.get("ratio")
        stored = data.get("stored_size")
        lines += [
            f"{'format_version':24} {data.get('format_version')}",
            f"{'chunks':24} {data.get('chunks')} of {data.get('chunk_size')} bytes",
            f"{'size':24} {data.get('original_size')} bytes, stored {stored} bytes"
            + ("" if ratio is None else f" (ratio {ratio:.3f})"),
            f"{'compression':24} {data.get('compression') or 'none'}",
            f"{'encryption':24} " + (f"AES-256-GCM, data key wrapped with key pair "
                                     f"{data['key_id']}" if data.get("key_id") else "none"),
        ]
        if data.get("indexes"):
            lines.append(f"{'indexes':24} {data['indexes']}")
    for name, counters in (cache or {}).items():
        label = name.replace("_", " ")
        if isinstance(counters, dict) and "hits" in counters:
            lines.append(f"{label:24} {counters['hits']} hits, {counters['misses']} misses")
        elif counters is None:
            lines.append(f"{label:24} none")
        elif not isinstance(counters, dict):
            lines.append(f"{label:24} {counters}")
    return lines


def _text(data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {"text": None}
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


@remote.command("cat")
@_common
@_segment_option(required=True)
@click.option("--from-offset", type=click.IntRange(min=0), default=None,
              help="Start at this offset (default: the segment's first).")
@click.option("--max-records", type=click.IntRange(min=1), default=None,
              help="Print at most this many records.")
def cat(storage: str | None, config_file: str | None, overrides: tuple[str, ...], topic: str,
        partition: int, fmt: str, segment_id: str, from_offset: int | None,
        max_records: int | None) -> None:
    """Print the records of a remote segment.

    The segment is verified before anything is printed, by the same function as ``remote
    verify`` (:func:`verify_segment`): every batch's CRC-32C, magic and header consistency,
    its leader epoch (never negative, never below the batch before), the offset rules for the
    header fields outside the CRC (base offsets strictly increase from the segment's start
    offset, each batch ends before the next one and within the segment's end offset), the
    size, both indexes and, for object-store plugins, the manifest's checksums. A segment
    ``remote verify`` calls broken prints nothing: one ``error:`` line naming the first
    problem, exit status 2 (``remote verify`` lists every problem). The text output ends with
    a line on stderr saying what was verified; the JSON output carries it as ``verified``.
    """
    from kafka_tiers.log.errors import CorruptRecordError
    from kafka_tiers.log.records import verified_batches

    tp = _tp(topic, partition)
    with _open(storage, config_file, overrides) as rsm:
        md = _find(rsm, tp, segment_id)
        report, data = _verify(rsm, md)
    try:
        if report["problems"]:
            raise CorruptRecordError(report["problems"][0])
        batches = verified_batches(data, floor=md.start_offset, ceiling=md.end_offset + 1)
    except CorruptRecordError as exc:
        more = len(report["problems"]) - 1
        raise CorruptRecordError(
            f"remote segment {segment_id} of {tp.topic}-{tp.partition} is corrupt, nothing "
            f"printed: {exc}{f' (and {more} more problems)' if more > 0 else ''}; run "
            "'kafka-tiers remote verify' for every problem", position=exc.position) from None
    verified = {"batches": len(batches), "checks": list(report["checks"])}
    records = []
    for batch in batches:
        for rec in batch.records():
            if from_offset is not None and rec.offset < from_offset:
                continue
            records.append(rec)
            if max_records is not None and len(records) >= max_records:
                break
        if max_records is not None and len(records) >= max_records:
            break
    if fmt == "json":
        emit_json({"version": 1, "segment_id": segment_id, "verified": verified, "records": [
            {"offset": r.offset, "timestamp": r.timestamp, "key": _text(r.key),
             "value": _text(r.value),
             "headers": [{"key": k, "value": _text(v)} for k, v in r.headers]}
            for r in records]})
        return
    for r in records:
        key = _text(r.key)
        value = _text(r.value)
        click.echo(f"offset={r.offset} timestamp={r.timestamp} "
                   f"key={key.get('text', key.get('base64'))!s} "
                   f"value={value.get('text', value.get('base64'))!s}")
    names = ", ".join(_CHECK_NAMES.get(c, c) for c in report["checks"])
    click.echo(f"verified {len(batches)} batches of segment {segment_id}: {names}", err=True)


#: the checks of :func:`verify_segment` (as its report's ``checks`` names them), for people
_CHECK_NAMES = {"crc32c": "CRC-32C", "leader_epochs": "leader epochs",
                "manifest_checksums": "manifest checksums"}


def verify_segment(rsm: Any, md: Any) -> dict[str, Any]:
    """Check one remote segment: the log's batches (CRC, offsets within the metadata's range
    and increasing, the size), the offset index (every entry points at the batch holding its
    offset), the time index (offsets in range, timestamps not decreasing) and, for
    object-store plugins, the manifest's checksum (crc32c, or sha256 in a format 1
    manifest) of the log and the two indexes. Returns a report with
    ``problems`` (empty when the segment is sound) and ``checks`` (what was checked). The one
    verification of a remote segment: ``remote cat`` prints nothing that fails it."""
    return _verify(rsm, md)[0]


def _verify(rsm: Any, md: Any) -> tuple[dict[str, Any], bytes]:
    """:func:`verify_segment`'s report and the log bytes it checked."""
    from kafka_tiers.api import IndexType, RemoteStorageError
    from kafka_tiers.log.errors import CorruptRecordError
    from kafka_tiers.log.index import OffsetIndex, TimeIndex
    from kafka_tiers.log.records import (
        LOG_OVERHEAD,
        RecordBatch,
        epoch_violations,
        leader_epoch_problem,
        offset_violations,
    )

    problems: list[str] = []
    checks = ["crc32c", "magic", "leader_epochs", "offsets", "size", "indexes"]
    batches = records = 0
    with rsm.fetch_log_segment(md, 0) as stream:
        data = stream.read()
    if len(data) != md.segment_size_in_bytes:
        problems.append(f"log has {len(data)} bytes, metadata says {md.segment_size_in_bytes}")
    starts: dict[int, RecordBatch] = {}
    pos = 0
    while pos < len(data):
        try:
            if len(data) - pos < LOG_OVERHEAD:
                raise CorruptRecordError(f"{len(data) - pos} trailing bytes")
            batch = RecordBatch(data, pos)
            if pos + batch.size > len(data):
                raise CorruptRecordError("the last batch is cut short")
        except CorruptRecordError as exc:
            problems.append(f"byte {pos}: {exc}")
            break
        try:
            batch.validate()
            why = leader_epoch_problem(batch.partition_leader_epoch)
        except CorruptRecordError as exc:
            why = str(exc)
        if why is not None:
            problems.append(f"batch at byte {pos} (offset {batch.base_offset}): {why}")
        starts[pos] = batch
        batches += 1
        records += batch.records_count
        pos += batch.size
    # baseOffset is outside the CRC: the offset rules name the damaged batch
    found = list(starts.items())
    for i, why in sorted(offset_violations([(b.base_offset, b.last_offset) for _, b in found],
                                           md.start_offset, md.end_offset + 1).items()):
        bad_pos, bad = found[i]
        problems.append(f"batch at byte {bad_pos} holds offsets {bad.base_offset}-"
                        f"{bad.last_offset}, outside {md.start_offset}-{md.end_offset} or out "
                        f"of order: {why}")
    for i, why in sorted(epoch_violations([b.partition_leader_epoch
                                           for _, b in found]).items()):
        bad_pos, bad = found[i]
        problems.append(f"batch at byte {bad_pos} (offset {bad.base_offset}): {why}")
    indexes: dict[str, bytes] = {}
    for index_type in (IndexType.OFFSET, IndexType.TIMESTAMP):
        try:
            with rsm.fetch_index(md, index_type) as stream:
                indexes[index_type.name] = stream.read()
        except RemoteStorageError as exc:
            problems.append(f"{index_type.name} index: {exc}")
    raw = indexes.get("OFFSET", b"")
    entry = OffsetIndex.ENTRY
    last = -1
    for n in range(len(raw) // entry.size):
        rel, position = entry.unpack_from(raw, n * entry.size)
        if n and rel == 0 and position == 0:
            break  # a preallocated tail
        offset = md.start_offset + rel
        holder = starts.get(position)
        if offset <= last:
            problems.append(f"offset index entry {n}: offset {offset} not increasing")
        elif holder is None:
            problems.append(f"offset index entry {n}: position {position} is not a batch start")
        elif not holder.base_offset <= offset <= holder.last_offset:
            problems.append(f"offset index entry {n}: offset {offset} is not in the batch at "
                            f"position {position} ({holder.base_offset}-{holder.last_offset})")
        last = offset
    raw = indexes.get("TIMESTAMP", b"")
    entry = TimeIndex.ENTRY
    last_ts = -1
    for n in range(len(raw) // entry.size):
        ts, rel = entry.unpack_from(raw, n * entry.size)
        if n and ts == 0 and rel == 0:
            break
        offset = md.start_offset + rel
        if not md.start_offset <= offset <= md.end_offset:
            problems.append(f"time index entry {n}: offset {offset} outside the segment")
        if ts < last_ts:
            problems.append(f"time index entry {n}: timestamp {ts} decreases")
        last_ts = ts
    manifest = _manifest_objects(rsm, md)
    if manifest is not None:
        checks.append("manifest_checksums")
    for obj in manifest or []:
        kind = obj.kind.value
        if kind == "log" and not obj.matches(data):
            problems.append(f"log content differs from the {obj.checksum_algorithm} in the "
                            "manifest")
        elif kind in ("index", "timeindex"):
            got = indexes.get("OFFSET" if kind == "index" else "TIMESTAMP")
            if got is not None and not obj.matches(got):
                problems.append(f"{kind} content differs from the {obj.checksum_algorithm} "
                                "in the manifest")
    return {"segment_id": md.segment_id, "start_offset": md.start_offset,
            "end_offset": md.end_offset, "batches": batches, "records": records,
            "ok": not problems, "problems": problems, "checks": checks}, data


@remote.command("verify")
@_common
@_segment_option(required=False)
@click.pass_context
def verify(ctx: click.Context, storage: str | None, config_file: str | None,
           overrides: tuple[str, ...], topic: str, partition: int, fmt: str,
           segment_id: str | None) -> None:
    """Verify CRCs and indexes of remote segments; exit status 1 when one has a problem."""
    tp = _tp(topic, partition)
    with _open(storage, config_file, overrides) as rsm:
        segments = ([_find(rsm, tp, segment_id)] if segment_id
                    else rsm.list_remote_segments(tp))
        reports = [verify_segment(rsm, md) for md in segments]
    ok = all(r["ok"] for r in reports)
    if fmt == "json":
        emit_json({"version": 1, "topic": topic, "partition": partition, "ok": ok,
                   "segments": reports})
    else:
        out = console()
        for r in reports:
            status = "ok" if r["ok"] else "BROKEN"
            out.print(f"{r['segment_id']}  {r['start_offset']}-{r['end_offset']}  "
                      f"{r['batches']} batches, {r['records']} records  {status}")
            for problem in r["problems"]:
                out.print(f"    {problem}")
        out.print(f"{len(reports)} segments verified: "
                  f"{'all sound' if ok else 'problems found'}")
    if not ok:
        ctx.exit(1)


def _add_rekey() -> None:
    from kafka_tiers.cli.remote_rekey import rekey

    remote.add_command(rekey)


_add_rekey()

__all__ = ["open_read_only", "read_only_config", "remote", "verify_segment"]
