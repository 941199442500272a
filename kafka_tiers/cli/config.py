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

    Secrets are shown as <hidden>. A bad value, a key given twice, a contradiction (a key and
    its alias disagreeing, log.dir beside log.dirs, a directory twice in log.dirs) or a plugin
    name no installed plugin has is one error line naming the key, the value and what was
    expected. Unknown keys (with the closest known key) and the Kafka broker keys kafka-tiers
    ignores are printed as "warning:" lines on stderr (and listed under "warnings" in JSON);
    broker start and cluster start print the same warnings.

    \b
    Example:
      kafka-tiers config show --config server.properties
    """
    from kafka_tiers.config import BrokerConfig

    cfg = BrokerConfig.from_file(path)
    print_config_warnings(cfg.warnings)
    cfg.check_plugins()
    rows = list(cfg.describe())
    if fmt == "json":
        emit_json({"version": 1, "settings": [
            {"key": k, "value": v, "default": d} for k, v, d in rows],
            "warnings": cfg.warnings})
        return
    from rich.table import Table

    noted = f" ({len(cfg.warnings)} warning(s))" if cfg.warnings else ""
    table = Table(title=f"{path}: valid{noted}")
    table.add_column("key")
    table.add_column("value")
    table.add_column("source")
    for key, value, is_default in rows:
        table.add_row(key, value, "default" if is_default else "file")
    console().print(table)


def print_config_warnings(warnings: list[str]) -> None:
    """Print a config's warnings (:attr:`BrokerConfig.warnings`) on stderr, one
    ``warning:`` line each (``config show``, ``broker start`` and ``cluster start``)."""
    for line in warnings:
        click.echo(f"warning: {line}", err=True)


__all__ = ["config", "print_config_warnings"]
