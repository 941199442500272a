"""``kafka-tiers remote rekey``: re-wrap the data keys of a topic's encrypted remote segments
with the active key pair (``encryption.key.pair.id``) after a key rotation.

Only manifests are rewritten, never segment data: each segment's data key is unwrapped with
the private key of the pair its manifest names and wrapped again with the active pair's public
key, through the storage manager's ``rekey`` (an optional operation of the object-store
level, offered by :class:`~kafka_tiers.remote.guarded.GuardedRemoteStorage`). Running it again
rekeys nothing: every segment is then already on the active pair. Output never holds key
material: key pair ids only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import click

from kafka_tiers.cli.output import FORMAT_OPTION, console, emit_json, parse_kv

#: a segment's outcome, as the JSON output's ``status`` and summary keys name it
REKEYED = "rekeyed"
ALREADY_CURRENT = "already_current"
NOT_ENCRYPTED = "not_encrypted"
#: the segment was deleted (retention, a topic delete) after it was listed: nothing to rekey
DELETED = "deleted"
FAILED = "failed"
STATUSES = (REKEYED, ALREADY_CURRENT, NOT_ENCRYPTED, DELETED, FAILED)


def active_key_id(config: Mapping[str, Any]) -> str:
    """The key pair new data keys are wrapped with (``encryption.key.pair.id``).

    Raises:
        ConfigError: it is not set, or ``encryption.key.pairs`` does not list it.
    """
    from kafka_tiers.api.errors import ConfigError

    active = str(config.get("encryption.key.pair.id", "") or "").strip()
    if not active:
        raise ConfigError("remote rekey needs encryption.key.pair.id: the key pair to re-wrap "
                          "the data keys with (listed in encryption.key.pairs, with its key "
                          "files)", key="encryption.key.pair.id")
    listed = [p.strip() for p in str(config.get("encryption.key.pairs", "")).split(",")
              if p.strip()]
    if active not in listed:
        raise ConfigError(f"encryption.key.pair.id={active} is not listed in "
                          f"encryption.key.pairs ({', '.join(listed) or 'empty'}): list every "
                          "key pair, the old ones included", key="encryption.key.pairs")
    return active


@contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (only on a terminal, for the table output); yields a
    function advancing it by one."""
    if not enabled or total == 0:
        yield lambda: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("rekeying"), BarColumn(), MofNCompleteColumn(),
                  console=console(stderr=True), transient=True) as progress:
        task = progress.add_task("rekey", total=total)
        yield lambda: progress.advance(task)


def rekey_segments(rsm: Any, active: str, segments: list[Any], *, dry_run: bool,
                   advance: Any = lambda: None) -> list[dict[str, Any]]:
    """Re-wrap each segment's data key with ``active`` (or, with ``dry_run``, only say which
    would be). ``rsm`` is a guarded plugin offering ``read_manifest`` and ``rekey``.

    Returns:
        One row per segment: ``partition``, ``segment_id``, ``from_key_id`` (None when not
        encrypted), ``status`` (one of :data:`STATUSES`; under ``dry_run`` :data:`REKEYED`
        means "would be rekeyed") and ``error`` (one line, or None). A failure of one segment
        (its old pair's private key is not configured, the manifest is unreadable) is its
        row's ``failed``; the others go on. A segment deleted since it was listed (before or
        while it was rekeyed: ``rekey`` then removes its rewritten manifest again) is
        :data:`DELETED`, not a failure.
    """
    from kafka_tiers.api import RemoteResourceNotFoundError, RemoteStorageError

    rows = []
    for md in segments:
        row: dict[str, Any] = {"partition": md.topic_partition.partition,
                               "segment_id": md.segment_id, "from_key_id": None,
                               "status": FAILED, "error": None}
        try:
            encryption = rsm.read_manifest(md).encryption
            if encryption is None:
                row["status"] = NOT_ENCRYPTED
            else:
                row["from_key_id"] = encryption.key_id
                if encryption.key_id == active:
                    row["status"] = ALREADY_CURRENT
                elif dry_run:
                    row["status"] = REKEYED
                else:
                    row["status"] = REKEYED if rsm.rekey(md) else ALREADY_CURRENT
        except RemoteResourceNotFoundError:
            row["status"] = DELETED
        except RemoteStorageError as exc:
            row["error"] = " ".join(str(exc).split())
        rows.append(row)
        advance()
    return rows


@click.command("rekey")
@click.option("--storage", "storage", metavar="NAME_OR_PATH",
              help="The storage plugin: an entry-point name (s3) or pkg.module:Class. Default: "
                   "remote.storage.manager.class of a server.properties --config.")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              metavar="FILE", help="A broker's server.properties (rsm.config.* keys), or a file "
                                   "of the plugin's own keys.")
@click.option("--set", "overrides", multiple=True, metavar="K=V",
              help="A plugin key overriding the file (repeatable).")
@click.option("--topic", required=True, help="The topic.")
@click.option("--partition", type=click.IntRange(min=0), default=None,
              help="One partition. Default: every partition with remote segments.")
@click.option("--segment", "segment_id", default=None, metavar="ID",
              help="One remote segment id (as `remote ls` shows it). Default: every segment.")
@click.option("--dry-run", is_flag=True, help="Say which segments would be rekeyed; change "
                                              "nothing.")
@FORMAT_OPTION
@click.pass_context
def rekey(ctx: click.Context, storage: str | None, config_file: str | None,
          overrides: tuple[str, ...], topic: str, partition: int | None,
          segment_id: str | None, dry_run: bool, fmt: str) -> None:
    """Re-wrap the data keys of encrypted remote segments with the active key pair.

    After a key rotation (a new pair added to encryption.key.pairs and made the
    encryption.key.pair.id), old segments stay readable with the old pair's private key; this
    command re-wraps their data keys with the active pair, so the old pair can be retired.
    Only manifests are rewritten, never segment data; a second run rekeys nothing. The
    settings need the active pair's public key and the private key of every pair the
    segments use now. Exit status 1 when a segment could not be rekeyed.

    \b
    Examples:
      kafka-tiers remote rekey --config /etc/kafka/server.properties --topic orders --dry-run
      kafka-tiers remote rekey --config /etc/kafka/server.properties --topic orders
      kafka-tiers remote rekey --storage s3 --config s3.properties --topic orders \\
          --partition 2 --format json
    """
    from kafka_tiers.cli.remote import _find, _tp, open_read_only
    from kafka_tiers.remote.guarded import UnsupportedStorageOperationError
    from kafka_tiers.remote.storage_config import storage_settings

    _tp(topic, partition or 0)
    settings = storage_settings(storage, config_file, parse_kv(overrides, "--set"))
    active = active_key_id(settings.config)
    # opened as every remote command opens it (no tier or cache directory is created);
    # rekey writes nothing but the manifests it re-wraps
    with open_read_only(settings) as rsm:
        for operation in ("read_manifest", "rekey"):
            if not rsm.supports(operation):
                raise UnsupportedStorageOperationError(
                    f"storage plugin {rsm.name!r} does not support {operation} (it is not "
                    "built on the object-store level): nothing to rekey",
                    plugin=rsm.name, operation=operation)
        if partition is not None:
            partitions = [partition]
        elif rsm.supports("list_partitions"):
            partitions = rsm.list_partitions(topic)
        else:
            partitions = [0]
        segments: list[Any] = []
        for p in partitions:
            tp = _tp(topic, p)
            segments += ([_find(rsm, tp, segment_id)] if segment_id
                         else rsm.list_remote_segments(tp))
        with _progress(len(segments), fmt == "table" and sys.stderr.isatty()) as advance:
            rows = rekey_segments(rsm, active, segments, dry_run=dry_run, advance=advance)
    summary = {status: sum(r["status"] == status for r in rows) for status in STATUSES}
    if fmt == "json":
        emit_json({"version": 1, "topic": topic, "partitions": partitions,
                   "active_key_id": active, "dry_run": dry_run, **summary, "segments": rows})
    else:
        out = console()
        for r in rows:
            if r["status"] == FAILED:
                out.print(f"{r['partition']}  {r['segment_id']}  FAILED: {r['error']}")
            elif r["status"] == REKEYED:
                verb = "would rekey" if dry_run else "rekeyed"
                out.print(f"{r['partition']}  {r['segment_id']}  {verb} "
                          f"{r['from_key_id']} -> {active}")
        done = "to rekey" if dry_run else "rekeyed"
        out.print(f"{len(rows)} segments of {topic}: {summary[REKEYED]} {done}, "
                  f"{summary[ALREADY_CURRENT]} already on {active}, "
                  f"{summary[NOT_ENCRYPTED]} not encrypted, "
                  + (f"{summary[DELETED]} deleted meanwhile, " if summary[DELETED] else "")
                  + f"{summary[FAILED]} failed"
                  + (" (dry run: nothing changed)" if dry_run else ""))
    if summary[FAILED]:
        ctx.exit(1)


__all__ = ["ALREADY_CURRENT", "DELETED", "FAILED", "NOT_ENCRYPTED", "REKEYED", "STATUSES",
           "active_key_id", "rekey", "rekey_segments"]
