"""``kafka-tiers plugins``: what plugins are installed and whether they load."""

from __future__ import annotations

import click

from kafka_tiers.cli.output import FORMAT_OPTION, console, emit_json


@click.group()
def plugins() -> None:
    """List and inspect installed plugins."""


@plugins.command("list")
@FORMAT_OPTION
def list_plugins(fmt: str) -> None:
    """Show every discovered plugin: group, name, distribution, version, and whether it loads.

    \b
    Examples:
      kafka-tiers plugins list
      kafka-tiers plugins list --format json
    """
    from kafka_tiers.plugins import discover

    found = discover()
    if fmt == "json":
        emit_json({"version": 1, "plugins": [
            {"group": p.group, "name": p.name, "target": p.target,
             "distribution": p.distribution, "version": p.version, "loads": p.loads,
             "error": p.error} for p in found]})
        return
    from rich.table import Table

    out = console()
    table = Table(title="kafka-tiers plugins")
    for col in ("group", "name", "distribution", "version", "loads"):
        table.add_column(col, no_wrap=True)
    for p in found:
        status = "[green]yes[/green]" if p.loads else "[red]no[/red]"
        table.add_row(p.group, p.name, p.distribution or "?", p.version or "?", status)
    out.print(table)
    for p in found:
        if not p.loads:
            out.print(f"[red]{p.name}[/red]: {p.error}", soft_wrap=True)


__all__ = ["plugins"]
