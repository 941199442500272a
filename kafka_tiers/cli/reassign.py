"""``kafka-tiers reassign``: move replicas between log dirs (document 000's
``kafka-reassign-partitions.sh`` with ``log_dirs``), ``--execute`` and ``--verify``."""

from __future__ import annotations

import re
import time
from typing import Any

import click

from kafka_tiers.cli.cluster import COMMAND_CONFIG_OPTION
from kafka_tiers.cli.output import check_seconds, console, emit_json, read_json

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*")


def parse_duration(text: str) -> float:
    """``"10s"``, ``"500ms"``, ``"2m"``, ``"1h"`` or plain seconds -> seconds."""
    m = _DURATION.fullmatch(text)
    if not m:
        raise click.BadParameter(f"expected a duration like 10s, 500ms or 2m, got {text!r}")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m[2] or "s"]
    return float(m[1]) * scale


def _duration(ctx: click.Context, param: click.Parameter, value: str | None
              ) -> float | None:
    if value is None:
        return None
    seconds = parse_duration(value)
    check_seconds(seconds, 7 * 86400.0, param, ctx)
    return seconds


def split_local(assignments: list[Any], broker: int, dirs: list[str]
                ) -> tuple[dict[Any, str], list[Any]]:
    """The moves for this broker (tp -> dir) and the replicas on other brokers.

    Raises:
        KafkaTiersError: a destination that is not one of this broker's log dirs (nothing
            outside them is ever touched).
    """
    import os

    from kafka_tiers.api.errors import KafkaTiersError

    norm = {os.path.normpath(d) for d in dirs}
    local: dict[Any, str] = {}
    remote = []
    for a in assignments:
        if a.broker != broker:
            remote.append(a)
            continue
        if a.log_dir != "any" and a.log_dir not in norm:
            raise KafkaTiersError(
                f"{a.topic_partition.topic}-{a.topic_partition.partition}: {a.log_dir} is not a "
                f"log dir of broker {broker} (log.dirs: {', '.join(dirs)})")
        local[a.topic_partition] = a.log_dir
    return local, remote


def _progress_rows(rows: list[dict[str, Any]]) -> tuple[int, int, bool]:
    total = sum(max(r.get("bytes_total") or 0, r.get("bytes_copied") or 0) for r in rows)
    done = sum(max(r.get("bytes_total") or 0, r.get("bytes_copied") or 0) if r["state"] == "done"
               else min(r.get("bytes_copied") or 0, r.get("bytes_total") or 0) for r in rows)
    settled = all(r["state"] in ("done", "failed", "cancelled") for r in rows)
    return done, total, settled


def _show_progress(poll: Any, quiet: bool) -> list[dict[str, Any]]:
    """Poll ``poll()`` (-> rows or None) until every replica settles, with a progress bar."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    rows: list[dict[str, Any]] = poll() or []
    if quiet:
        while not _progress_rows(rows)[2]:
            time.sleep(0.1)
            rows = poll() or rows
        return rows
    with Progress(TextColumn("moving replicas"), BarColumn(), DownloadColumn(),
                  TextColumn("{task.fields[state]}"), TimeElapsedColumn(),
                  console=console(stderr=True), transient=False) as bar:
        task = bar.add_task("move", total=None, state="")
        while True:
            done, total, settled = _progress_rows(rows)
            states = [r["state"] for r in rows]
            summary = ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states)))
            bar.update(task, completed=done, total=max(total, 1), state=summary)
            if settled:
                bar.update(task, completed=max(total, 1))
                return rows
            time.sleep(0.1)
            rows = poll() or rows


def _report(rows: list[dict[str, Any]], fmt: str, extra: dict[str, Any]) -> int:
    failed = [r for r in rows if r["state"] in ("failed", "cancelled")]
    if fmt == "json":
        emit_json({"version": 1, **extra, "replicas": rows})
    else:
        for r in rows:
            tail = f" ({r['error']})" if r.get("error") else ""
            click.echo(f"{r['topic']}-{r['partition']} -> {r['log_dir']}: {r['state']}{tail}")
    return 1 if failed else 0


def _execute_in_process(cfg: Any, local: dict[Any, str], quiet: bool) -> list[dict[str, Any]]:
    from kafka_tiers.broker.admin_channel import replica_states
    from kafka_tiers.log.log_manager import LogManager
    from kafka_tiers.log.replica_mover import REPLICA_NOT_AVAILABLE

    # the log dirs must be this broker's (meta.properties), as when the broker starts
    manager = LogManager.from_config(
        cfg, meta_properties={"version": "1", "node.id": str(cfg["broker.id"])})
    manager.startup(set(local))  # only the replicas to move are loaded (recovered)
    try:
        results = manager.alter_replica_log_dirs(local)
        for tp, r in results.items():
            if r == REPLICA_NOT_AVAILABLE:  # nobody would remember it: no broker runs
                manager.mover.take_pending(tp)
                results[tp] = "REPLICA_NOT_AVAILABLE: no such replica in the log dirs"
        _show_progress(lambda: replica_states(manager, local, results), quiet)
        manager.wait_for_moves()
        return replica_states(manager, local, results)
    finally:
        manager.shutdown()


def _execute_via_broker(dirs: list[str], local: dict[Any, str], timeout: float, wait: bool,
                        quiet: bool) -> list[dict[str, Any]] | None:
    from kafka_tiers.api.errors import KafkaTiersError
    from kafka_tiers.broker.admin_channel import read_status, submit_reassignment

    request_id = submit_reassignment(dirs, local)
    deadline = time.monotonic() + timeout
    status = read_status(dirs, request_id)
    while status is None:
        if time.monotonic() > deadline:
            raise KafkaTiersError(
                f"the running broker did not take request {request_id} within {timeout:g}s "
                "(is its log scheduler running?); the request stays queued")
        time.sleep(0.1)
        status = read_status(dirs, request_id)
    if status.get("error"):
        raise KafkaTiersError(f"the broker refused the request: {status['error']}")
    if not wait:
        return None

    def poll() -> list[dict[str, Any]] | None:
        doc = read_status(dirs, request_id)
        return doc.get("replicas") if doc else None

    return _show_progress(poll, quiet)


def verify_rows(dirs: list[str], local: dict[Any, str]) -> list[dict[str, Any]]:
    """Per replica: ``done`` when it sits in the requested dir (``any``: anywhere),
    ``in_progress`` when a future log of it exists, ``pending`` when there is no replica
    yet, else ``not_moved``."""
    import os

    from kafka_tiers.cli.log_dirs import describe_dirs

    descs, _ = describe_dirs(dirs)
    where: dict[Any, str] = {}
    moving: dict[Any, str] = {}
    sizes: dict[Any, int] = {}
    for d in descs:
        for p in d.partitions:
            if p.is_temporary:
                moving[p.topic_partition] = d.path
            else:
                where[p.topic_partition] = d.path
                sizes[p.topic_partition] = p.size
    rows = []
    for tp, want in local.items():
        here = where.get(tp)
        if here is None:
            state = "pending"
        elif want == "any" or os.path.normpath(here) == want:
            state = "done"
        elif tp in moving:
            state = "in_progress"
        else:
            state = "not_moved"
        rows.append({"topic": tp.topic, "partition": tp.partition, "log_dir": want,
                     "current_log_dir": here, "state": state, "size": sizes.get(tp, 0)})
    return rows


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="The broker's server.properties (broker.id and log.dirs): moves between "
              "the log dirs of this broker.")
@click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]",
              help="A running cluster's Kafka listeners: the whole file goes to the cluster "
              "through the Kafka protocol (AlterReplicaLogDirs, AlterPartitionReassignments; "
              "also Apache Kafka), which moves replicas between brokers and into the "
              "requested log dirs.")
@COMMAND_CONFIG_OPTION
@click.option("--reassignment-json-file", "json_file", required=True,
              type=click.Path(dir_okay=False),
              help='Kafka\'s reassignment JSON with "log_dirs" per replica (document 000).')
@click.option("--execute", "action", flag_value="execute", help="Start the moves.")
@click.option("--verify", "action", flag_value="verify",
              help="Report per replica whether it sits in the requested dir.")
@click.option("--timeout", default=None, callback=_duration,
              help="How long --execute waits for the running broker to take the request "
              "(default 10s), or with --bootstrap-server for the controller to finish "
              "(default 300s).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="With a running broker: follow the moves until they finish.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def reassign(config_path: str | None, bootstrap: str | None, json_file: str,
             action: str | None, timeout: float | None, wait: bool, fmt: str) -> None:
    """Move replicas between the log dirs of a broker.

    The file is Kafka's reassignment JSON; document 000 adds "log_dirs", one per replica:
    "any" (no preference; cancels a move in progress) or the absolute path of one of the
    broker's log.dirs. With a running broker the request goes through its admin dir
    (<log dir>/.kafka-tiers-admin) and the broker moves the replicas while serving; with no
    broker running, this command opens the log dirs and moves them itself. A progress bar
    follows the moves. --verify reports per replica whether it sits in the requested dir.

    With --bootstrap-server (Kafka listeners) the file goes to a running cluster through the
    Kafka protocol instead (document 003 section F): replicas move between brokers, into the
    log dirs requested (document 000 section 2: AlterReplicaLogDirs). With --config alone,
    replicas on other brokers are named and skipped.

    \b
    Examples:
      kafka-tiers log-dirs plan --config server.properties --output plan.json
      kafka-tiers reassign --config server.properties --reassignment-json-file plan.json --execute
      kafka-tiers reassign --config server.properties --reassignment-json-file plan.json --verify
      kafka-tiers reassign --bootstrap-server 127.0.0.1:9092 --reassignment-json-file r.json \\
          --execute
    """
    from kafka_tiers.api.errors import KafkaTiersError
    from kafka_tiers.broker.admin_channel import (
        ReassignmentError,
        broker_running,
        parse_reassignment,
    )
    from kafka_tiers.cli.log_dirs import load_dirs

    if action is None:
        raise click.UsageError("give --execute or --verify")
    if bootstrap:
        from kafka_tiers.cli.cluster import Target, parse_bootstrap, reassign_on_cluster

        servers = parse_bootstrap(bootstrap, "--bootstrap-server")
        reassign_on_cluster(Target(servers, True), json_file, action, wait=wait,
                            timeout=300.0 if timeout is None else timeout, fmt=fmt)
        return
    if config_path is None:
        raise click.UsageError("give --config (this broker's log dirs) or --bootstrap-server "
                               "(a cluster)")
    timeout = 10.0 if timeout is None else timeout
    cfg, dirs = load_dirs(config_path)
    broker = cfg["broker.id"]
    try:
        assignments = parse_reassignment(read_json(json_file))
    except ReassignmentError as exc:
        raise KafkaTiersError(f"{json_file}: {exc}") from None
    local, remote = split_local(assignments, broker, dirs)
    if remote:
        names = sorted({f"{a.topic_partition.topic}-{a.topic_partition.partition}@broker"
                        f"{a.broker}" for a in remote})
        click.echo(f"note: {len(names)} replica(s) on other brokers skipped "
                   f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): "
                   "give --bootstrap-server to move replicas between brokers through the "
                   "cluster's controller", err=True)
    if not local:
        raise KafkaTiersError(f"nothing to do on broker {broker} (broker.id in {config_path})")
    quiet = fmt == "json"
    if action == "verify":
        rows = verify_rows(dirs, local)
        code = _report(rows, fmt, {"action": "verify", "broker": broker})
        if fmt != "json":
            done = sum(1 for r in rows if r["state"] == "done")
            click.echo(f"{done} of {len(rows)} replica(s) in their requested dir")
        raise SystemExit(0 if all(r["state"] == "done" for r in rows) else (code or 1))
    if broker_running(dirs):
        rows_or_none = _execute_via_broker(dirs, local, timeout, wait, quiet)
        if rows_or_none is None:
            click.echo("submitted; follow with --verify", err=True)
            return
        rows, mode = rows_or_none, "broker"
    else:
        rows, mode = _execute_in_process(cfg, local, quiet), "in-process"
    raise SystemExit(_report(rows, fmt, {"action": "execute", "broker": broker, "mode": mode}))


__all__ = ["parse_duration", "reassign", "split_local", "verify_rows"]
