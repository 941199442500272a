"""``kafka-tiers config``: validate and show a broker configuration."""

from __future__ import annotations

import click

from kafka_tiers.cli.output import FORMAT_OPTION, console, emit_json


@click.group()
def config() -> None:
    """Validate and show a broker configuration."""


@config.command("show")
@click.option("--config", "path", required=True, type=click.Path(dir_okay=False),
              help="The broker's server.properties.")
@FORMAT_OPTION
def show(path: str, fmt: str) -> None:
    """Validate server.properties and show every setting with its effective value.

    Secrets are shown as <hidden>. A bad value is one error line naming the key, the value and
    what was expected.

    \b
    Example:
      kafka-tiers config show --config server.properties
    """
    from kafka_tiers.config import BrokerConfig

    cfg = BrokerConfig.from_file(path)
    rows = list(cfg.describe())
    if fmt == "json":
        emit_json({"version": 1, "settings": [
            {"key": k, "value": v, "default": d} for k, v, d in rows]})
        return
    from rich.table import Table

    table = Table(title=f"{path}: valid")
    table.add_column("key")
    table.add_column("value")
    table.add_column("source")
    for key, value, is_default in rows:
        table.add_row(key, value, "default" if is_default else "file")
    console().print(table)


__all__ = ["config"]
