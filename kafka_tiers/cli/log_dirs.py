"""``kafka-tiers log-dirs``: see what is where on a broker's disks (document 000's
``kafka-log-dirs --describe``) and plan moves that even out their usage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from kafka_tiers.cli.output import check_output_file, console, emit_json

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


@log_dirs.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="The broker's server.properties (its log.dirs are described).")
@click.option("--log-dirs", "only_dirs", callback=_csv, help="Only these dirs: d1,d2.")
@click.option("--topics", callback=_csv, help="Only these topics: t1,t2.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="json: document 000's kafka-log-dirs format.")
def describe(config_path: str, only_dirs: list[str] | None, topics: list[str] | None,
             fmt: str) -> None:
    """Show each log dir's state, usage and partitions (size, log end offset, and whether
    the replica is temporary: the -future log of a move in progress).

    Reads the dirs from disk, so it works with or without a running broker; a dir the
    running broker took offline, or one that cannot be read, shows as offline.

    \b
    Examples:
      kafka-tiers log-dirs describe --config server.properties
      kafka-tiers log-dirs describe --config server.properties --log-dirs /data/d1 --format json
    """
    from kafka_tiers.log.describe import to_json

    _cfg, dirs = load_dirs(config_path)
    descs, running = describe_dirs(dirs, only_dirs, topics)
    if fmt == "json":
        emit_json(to_json(descs))
        return
    from rich.table import Table

    out = console()
    out.soft_wrap = True
    biggest = max((d.bytes_used for d in descs), default=0) or 1
    state = "running" if running else "not running"
    out.print(f"broker {state}; {len(descs)} log dir(s)")
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
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("partition", "left"), ("size", "right"), ("log end offset", "right"), ("", "left"))
        for col, just in columns:
            table.add_column(col, justify=just)
        for p in d.partitions:
            table.add_row(f"  {p.topic}-{p.partition}", _human(p.size), str(p.log_end_offset),
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
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="The broker's server.properties.")
@click.option("--output", type=click.Path(dir_okay=False, writable=True),
              help="Write the reassignment JSON here (for `kafka-tiers reassign`).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="json: print the reassignment JSON to stdout.")
def plan(config_path: str, output: str | None, fmt: str) -> None:
    """Propose moves that even out the bytes held by a broker's log dirs.

    This automates the operational procedure of document 000: describe the dirs, decide
    which replicas to move, and write Kafka's reassignment JSON with a log dir per replica.
    Nothing moves until you run `kafka-tiers reassign --execute` on the file.

    \b
    Examples:
      kafka-tiers log-dirs plan --config server.properties --output plan.json
      kafka-tiers reassign --config server.properties --reassignment-json-file plan.json --execute
    """
    import json

    from kafka_tiers.log.checkpoints import write_atomic

    cfg, dirs = load_dirs(config_path)
    broker = cfg["broker.id"]
    descs, _running = describe_dirs(dirs)
    moves = plan_moves(descs)
    doc = {"version": 1, "partitions": [
        {"topic": p.topic, "partition": p.partition, "replicas": [broker], "log_dirs": [dst]}
        for p, _src, dst in moves]}
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
        out.print(f"written to {output}; apply with: kafka-tiers reassign --config "
                  f"{config_path} --reassignment-json-file {output} --execute")
    else:
        out.print("add --output plan.json to write the reassignment file")


__all__ = ["describe_dirs", "load_dirs", "log_dirs", "plan_moves"]
