"""``kafka-tiers log-dirs``: see what is where on a broker's disks (document 000's
``kafka-log-dirs --describe``) and plan moves that even out their usage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from kafka_tiers.cli.cluster import COMMAND_CONFIG_OPTION
from kafka_tiers.cli.output import broker_ids_callback, check_output_file, console, emit_json

if TYPE_CHECKING:
    from rich.console import JustifyMethod


def _csv(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise click.BadParameter("expected a comma-separated list")
    return items


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _bar(fraction: float, width: int = 24) -> str:
    fraction = min(max(fraction, 0.0), 1.0)
    full = round(fraction * width)
    return "█" * full + "░" * (width - full)


def load_dirs(config_path: str) -> tuple[Any, list[str]]:
    """The broker config and its ``log.dirs`` (absolute)."""
    import os

    from kafka_tiers.config import BrokerConfig

    cfg = BrokerConfig.from_file(config_path)
    return cfg, [os.path.abspath(d) for d in cfg["log.dirs"]]


def describe_dirs(dirs: list[str], log_dirs: list[str] | None = None,
                  topics: list[str] | None = None) -> tuple[list[Any], bool]:
    """DescribeDirs from disk, with the running broker's offline dirs; returns the
    descriptions and whether a broker is running."""
    from kafka_tiers.broker.admin_channel import broker_running, read_broker_state
    from kafka_tiers.log.describe import scan_log_dirs

    running = broker_running(dirs)
    offline: list[str] = []
    if running:
        state = read_broker_state(dirs)
        if state:
            offline = list(state.get("offline_dirs", {}))
    return scan_log_dirs(dirs, log_dirs, topics, offline), running


@click.group(name="log-dirs")
def log_dirs() -> None:
    """See what is where on a broker's log dirs (JBOD), and plan moves between them.

    \b
    Examples:
      kafka-tiers log-dirs describe --config server.properties
      kafka-tiers log-dirs describe --config server.properties --topics orders --format json
      kafka-tiers log-dirs plan --config server.properties --output plan.json
      kafka-tiers reassign --config server.properties --reassignment-json-file plan.json --execute
    """


_BOOTSTRAP = click.option(
    "--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]",
    help="Instead of --config: a running cluster's Kafka listeners (also Apache Kafka), "
    "asked through the Kafka protocol (DescribeLogDirs, Metadata).")


def describe_remote(bootstrap: str, broker_ids: list[int] | None,
                    topics: list[str] | None) -> dict[int, list[Any]]:
    """Per broker (every broker of the cluster, or ``broker_ids``), its log dirs as
    :class:`~kafka_tiers.log.describe.LogDirDescription`, from DescribeLogDirs.

    Raises:
        click.BadParameter: a broker id that is not in the cluster.
    """
    from kafka_tiers.cli.cluster import open_client, target

    with open_client(target(bootstrap, None)) as admin:
        known = [b["broker_id"] for b in admin.metadata([])["brokers"]]
        wanted = known if broker_ids is None else broker_ids
        unknown = [b for b in wanted if b not in known]
        if unknown:
            raise click.BadParameter(f"broker {', '.join(map(str, unknown))} is not in the "
                                     f"cluster at {bootstrap} (brokers {known})",
                                     param_hint="--broker-ids")
        return {b: descriptions_of(admin.describe_log_dirs(b, topics)) for b in wanted}


def descriptions_of(dirs: list[dict[str, Any]]) -> list[Any]:
    """DescribeLogDirs results (``KafkaAdmin.describe_log_dirs``) as log dir descriptions
    (the log end offset is not in Kafka's answer: -1)."""
    from kafka_tiers.log.describe import LogDirDescription, ReplicaDescription

    return [LogDirDescription(
        d["path"], d["error"],
        tuple(ReplicaDescription(p["topic"], p["partition"], p["size"], -1, p["is_future"])
              for p in sorted(d["partitions"], key=lambda p: (p["topic"], p["partition"]))),
        max(d["total_bytes"], 0), max(d["usable_bytes"], 0),
        None if d["error"] is None else "reported by the broker") for d in dirs]


@log_dirs.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="The broker's server.properties (its log.dirs are described).")
@_BOOTSTRAP
@COMMAND_CONFIG_OPTION
@click.option("--broker-ids", callback=broker_ids_callback,
              help="With --bootstrap-server: only these brokers, e.g. 1,2 (default all).")
@click.option("--log-dirs", "only_dirs", callback=_csv, help="Only these dirs: d1,d2.")
@click.option("--topics", callback=_csv, help="Only these topics: t1,t2.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="json: document 000's kafka-log-dirs format.")
def describe(config_path: str | None, bootstrap: str | None, broker_ids: list[int] | None,
             only_dirs: list[str] | None, topics: list[str] | None, fmt: str) -> None:
    """Show each log dir's state, usage and partitions (size, log end offset, and whether
    the replica is temporary: the -future log of a move in progress).

    Reads the dirs from disk, so it works with or without a running broker; a dir the
    running broker took offline, or one that cannot be read, shows as offline.

    \b
    Examples:
      kafka-tiers log-dirs describe --config server.properties
      kafka-tiers log-dirs describe --config server.properties --log-dirs /data/d1 --format json
      kafka-tiers log-dirs describe --bootstrap-server 127.0.0.1:9092 --broker-ids 1

    With --bootstrap-server, every broker of a running cluster (or --broker-ids) answers
    through the Kafka protocol (DescribeLogDirs); --format json is then
    {"version": 1, "brokers": [{"broker": ID, "log_dirs": [...]}]}.
    """
    from kafka_tiers.log.describe import to_json

    if (config_path is None) == (bootstrap is None):
        raise click.UsageError("give --config (this broker's log dirs) or --bootstrap-server "
                               "(a running cluster's Kafka listeners): exactly one of them")
    if bootstrap is not None:
        per_broker = describe_remote(bootstrap, broker_ids, topics)
        if only_dirs:
            import os

            keep = {os.path.normpath(d) for d in only_dirs}
            per_broker = {b: [d for d in ds if os.path.normpath(d.path) in keep]
                          for b, ds in per_broker.items()}
        if fmt == "json":
            emit_json({"version": 1, "brokers": [{"broker": b, **to_json(ds)}
                                                 for b, ds in per_broker.items()]})
            return
        for b, ds in per_broker.items():
            _print_dirs(ds, f"broker {b}: {len(ds)} log dir(s)")
        return
    assert config_path is not None
    _cfg, dirs = load_dirs(config_path)
    descs, running = describe_dirs(dirs, only_dirs, topics)
    if fmt == "json":
        emit_json(to_json(descs))
        return
    state = "running" if running else "not running"
    _print_dirs(descs, f"broker {state}; {len(descs)} log dir(s)")


def _print_dirs(descs: list[Any], heading: str) -> None:
    """One broker's log dirs for people: state, usage bar, replicas."""
    from rich.table import Table

    out = console()
    out.soft_wrap = True
    biggest = max((d.bytes_used for d in descs), default=0) or 1
    out.print(heading)
    for d in descs:
        out.print()
        if not d.is_live:
            out.print(f"[bold]{d.path}[/bold]  [red]OFFLINE[/red] ({d.error}: "
                      f"{d.error_message or ''})")
            continue
        fs_used = d.total_bytes - d.usable_bytes
        fs = (f"file system {_human(fs_used)} of {_human(d.total_bytes)} used"
              if d.total_bytes else "file system size unknown")
        count = sum(1 for p in d.partitions if not p.is_temporary)
        out.print(f"[bold]{d.path}[/bold]  [green]live[/green]  {_bar(d.bytes_used / biggest)}"
                  f"  {_human(d.bytes_used)} in {count} partition(s); {fs}")
        if not d.partitions:
            continue
        table = Table(show_edge=False, pad_edge=False, box=None)
        # DescribeLogDirs (--bootstrap-server) carries no log end offset: no such column
        with_leo = any(p.log_end_offset >= 0 for p in d.partitions)
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("partition", "left"), ("size", "right"),
            *((("log end offset", "right"),) if with_leo else ()), ("", "left"))
        for col, just in columns:
            table.add_column(col, justify=just)
        for p in d.partitions:
            leo = (str(p.log_end_offset),) if with_leo else ()
            table.add_row(f"  {p.topic}-{p.partition}", _human(p.size), *leo,
                          "temporary (move in progress)" if p.is_temporary else "")
        out.print(table)


def plan_moves(descs: list[Any]) -> list[tuple[Any, str, str]]:
    """Greedy balancing of replica bytes across the live dirs: repeatedly move, from the
    fullest dir to the emptiest, the partition that brings them closest to even, while that
    strictly narrows their gap. Returns ``(replica, from dir, to dir)``."""
    live = [d for d in descs if d.is_live]
    if len(live) < 2:
        return []
    used = {d.path: d.bytes_used for d in live}
    where = {d.path: [p for p in d.partitions if not p.is_temporary] for d in live}
    if any(p.is_temporary for d in live for p in d.partitions):
        moving = {(p.topic, p.partition) for d in live for p in d.partitions if p.is_temporary}
        for path in where:
            where[path] = [p for p in where[path] if (p.topic, p.partition) not in moving]
    moves: list[tuple[Any, str, str]] = []
    for _ in range(10000):
        hi = max(used, key=lambda k: (used[k], k))
        lo = min(used, key=lambda k: (used[k], k))
        gap = used[hi] - used[lo]
        candidates = [p for p in where[hi] if 0 < p.size < gap]
        if not candidates:
            break
        best = min(candidates, key=lambda p: (abs(gap / 2 - p.size), p.topic, p.partition))
        where[hi].remove(best)
        where[lo].append(best)
        used[hi] -= best.size
        used[lo] += best.size
        moves.append((best, hi, lo))
    # a replica moved twice ends where it ended: keep its first source and last destination
    final: dict[tuple[str, int], tuple[Any, str, str]] = {}
    for p, src, dst in moves:
        key = (p.topic, p.partition)
        first_src = final[key][1] if key in final else src
        final[key] = (p, first_src, dst)
    return [m for m in final.values() if m[1] != m[2]]


@log_dirs.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="The broker's server.properties.")
@_BOOTSTRAP
@COMMAND_CONFIG_OPTION
@click.option("--broker-id", type=click.IntRange(min=0),
              help="With --bootstrap-server: the broker whose log dirs to even out.")
@click.option("--output", type=click.Path(dir_okay=False, writable=True),
              help="Write the reassignment JSON here (for `kafka-tiers reassign`).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="json: print the reassignment JSON to stdout.")
def plan(config_path: str | None, bootstrap: str | None, broker_id: int | None,
         output: str | None, fmt: str) -> None:
    """Propose moves that even out the bytes held by a broker's log dirs.

    This automates the operational procedure of document 000: describe the dirs, decide
    which replicas to move, and write Kafka's reassignment JSON with a log dir per replica.
    Nothing moves until you run `kafka-tiers reassign --execute` on the file.

    \b
    Examples:
      kafka-tiers log-dirs plan --config server.properties --output plan.json
      kafka-tiers reassign --config server.properties --reassignment-json-file plan.json --execute
      kafka-tiers log-dirs plan --bootstrap-server 127.0.0.1:9092 --broker-id 2 \\
          --output plan.json
      kafka-tiers reassign --bootstrap-server 127.0.0.1:9092 --reassignment-json-file \\
          plan.json --execute

    With --bootstrap-server the dirs come from DescribeLogDirs, and each partition's
    current replicas from Metadata (the live cluster's ClusterView): the file keeps every
    replica where it is ("any") and names a dir for the broker's replica only.
    """
    import json

    from kafka_tiers.log.checkpoints import write_atomic

    if (config_path is None) == (bootstrap is None):
        raise click.UsageError("give --config (this broker's log dirs) or --bootstrap-server "
                               "with --broker-id (a running cluster): exactly one of them")
    if bootstrap is not None:
        if broker_id is None:
            raise click.UsageError("--bootstrap-server needs --broker-id (the broker whose log "
                                   "dirs to even out)")
        broker = broker_id
        descs = describe_remote(bootstrap, [broker], None)[broker]
        moves = plan_moves(descs)
        from kafka_tiers.api import TopicPartition
        from kafka_tiers.cli.place import live_cluster_view

        current = live_cluster_view(bootstrap).assignments
        entries = []
        for p, _src, dst in moves:
            replicas = list(current.get(TopicPartition(p.topic, p.partition), [broker]))
            entries.append({"topic": p.topic, "partition": p.partition, "replicas": replicas,
                            "log_dirs": [dst if r == broker else "any" for r in replicas]})
        doc = {"version": 1, "partitions": entries}
        apply = f"--bootstrap-server {bootstrap}"
    else:
        assert config_path is not None
        cfg, dirs = load_dirs(config_path)
        broker = cfg["broker.id"]
        descs, _running = describe_dirs(dirs)
        moves = plan_moves(descs)
        doc = {"version": 1, "partitions": [
            {"topic": p.topic, "partition": p.partition, "replicas": [broker],
             "log_dirs": [dst]} for p, _src, dst in moves]}
        apply = f"--config {config_path}"
    if output:
        check_output_file(output, "--output")
        try:
            write_atomic(output, (json.dumps(doc, indent=2) + "\n").encode())
        except OSError as exc:
            from kafka_tiers.api.errors import KafkaTiersError

            raise KafkaTiersError(f"cannot write --output {output}: {exc.strerror or exc} "
                                  "(give a file in an existing, writable directory)") from None
    if fmt == "json":
        emit_json(doc)
        return
    out = console()
    out.soft_wrap = True
    before = {d.path: d.bytes_used for d in descs if d.is_live}
    after = dict(before)
    for p, src, dst in moves:
        after[src] -= p.size
        after[dst] += p.size
    biggest = max([*before.values(), *after.values(), 1])
    out.print(f"broker {broker}: {len(moves)} move(s) proposed")
    for path in before:
        out.print(f"  {path}")
        out.print(f"    now    {_bar(before[path] / biggest)}  {_human(before[path])}")
        out.print(f"    after  {_bar(after[path] / biggest)}  {_human(after[path])}")
    for p, src, dst in moves:
        out.print(f"  move {p.topic}-{p.partition} ({_human(p.size)}): {src} -> {dst}")
    if not moves:
        out.print("  the dirs are as even as moving whole replicas can make them")
    elif output:
        out.print(f"written to {output}; apply with: kafka-tiers reassign {apply} "
                  f"--reassignment-json-file {output} --execute")
    else:
        out.print("add --output plan.json to write the reassignment file")


__all__ = ["describe_dirs", "describe_remote", "descriptions_of", "load_dirs", "log_dirs",
           "plan_moves"]
