"""The ``kafka-tiers`` command: one entry point, subcommands loaded lazily so ``--help`` is instant.

Library errors (:class:`~kafka_tiers.api.KafkaTiersError`) become one ``error: ...`` line and exit
status 1 here, at the CLI boundary; usage errors exit 2. Set ``KAFKA_TIERS_DEBUG=1`` to see the
traceback instead.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from kafka_tiers import __version__

#: subcommand name -> "module:attribute" of its click command, imported only when used.
COMMANDS: dict[str, str] = {
    "quickstart": "kafka_tiers.cli.quickstart:quickstart",
    "place": "kafka_tiers.cli.place:place",
    "plugins": "kafka_tiers.cli.plugins:plugins",
    "conformance": "kafka_tiers.cli.conformance:conformance",
    "config": "kafka_tiers.cli.config:config",
    "dump-log": "kafka_tiers.cli.dump_log:dump_log",
    "spark": "kafka_tiers.cli.spark:spark",
    "remote": "kafka_tiers.cli.remote:remote",
    "log-dirs": "kafka_tiers.cli.log_dirs:log_dirs",
    "reassign": "kafka_tiers.cli.reassign:reassign",
    "broker": "kafka_tiers.cli.broker:broker",
    "cluster": "kafka_tiers.cli.cluster:cluster",
    "topics": "kafka_tiers.cli.cluster:topics",
}

#: one-line help per subcommand, so the listing needs no import.
SUMMARIES: dict[str, str] = {
    "quickstart": "Run the core on embedded defaults and show what kafka-tiers does.",
    "place": "Place a topic's replicas on a cluster through a replica placer.",
    "plugins": "List and inspect installed plugins.",
    "conformance": "Run the conformance suite against a placer or storage plugin.",
    "config": "Validate and show a broker configuration.",
    "dump-log": "Dump the batches and index entries of Kafka segment files.",
    "spark": "Spark jobs over the remote tier: audit it, export a topic's history.",
    "remote": "List, describe, print and verify a partition's remote segments.",
    "log-dirs": "Describe a broker's log dirs (JBOD) and plan moves between them.",
    "reassign": "Move replicas between log dirs (--execute, --verify).",
    "broker": "Run one cluster broker (broker start --config server.properties).",
    "cluster": "Run a cluster in one process; describe it, reassign, elect leaders.",
    "topics": "Create, describe and delete a cluster's topics; produce and consume.",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        ref = COMMANDS.get(cmd_name)
        if ref is None:
            return None
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUMMARIES.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafka-tiers")
def cli() -> None:
    """kafka-tiers: replica placement and tiered storage for Kafka-style brokers.

    \b
    Examples:
      kafka-tiers quickstart
      kafka-tiers place --cluster cluster.json --partitions 12 --replication-factor 3
      kafka-tiers plugins list
      kafka-tiers conformance placer multi-level-rack
    """


def fail(message: str) -> None:
    """Print one error line and exit 1."""
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def main(argv: list[str] | None = None) -> Any:
    """Console entry point."""
    from kafka_tiers.api.errors import KafkaTiersError

    debug = os.environ.get("KAFKA_TIERS_DEBUG") == "1"
    try:
        return cli.main(args=argv, prog_name="kafka-tiers", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KafkaTiersError as exc:
        if debug:
            raise
        fail(str(exc))
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)


__all__ = ["COMMANDS", "SUMMARIES", "cli", "fail", "main"]
