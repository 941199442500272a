"""The ``kafka-tiers`` command: one entry point, subcommands loaded lazily so ``--help`` is instant.

Every error ends at one boundary (:mod:`kafka_tiers.cli.boundary`): an expected one is one
``error: ...`` line and exit status 2, a bug one ``internal error: ...`` line and exit status 3;
``kafka-tiers --debug ...`` (or ``KAFKA_TIERS_DEBUG=1``) adds the full traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, NoReturn

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
    "scram": "kafka_tiers.cli.scram:scram",
    "acls": "kafka_tiers.cli.acls:acls",
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
    "remote": "List, describe, print, verify and rekey a partition's remote segments.",
    "log-dirs": "Describe a broker's log dirs (JBOD) and plan moves between them.",
    "reassign": "Move replicas between log dirs (--execute, --verify).",
    "broker": "Run one cluster broker (broker start --config server.properties).",
    "cluster": "Run a cluster in one process; describe it, reassign, elect leaders.",
    "topics": "Create, describe and delete a cluster's topics; produce and consume.",
    "scram": "Add, delete and list SCRAM users (SCRAM-SHA-256/512) of a broker or cluster.",
    "acls": "Add, list and remove a cluster's ACLs over its Kafka listeners.",
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

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; a broken pipe goes to the error boundary as it is (click would
        turn it into a silent exit 1, whatever pipe it was)."""
        from kafka_tiers.cli.boundary import PipeClosed

        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise PipeClosed(exc) from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUMMARIES.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class _Debug:
    """Whether ``--debug`` was given to this run (set while the command line is parsed)."""

    on = False


def _set_debug(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    _Debug.on = _Debug.on or value
    return value


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafka-tiers")
@click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
              help="On an error, print the full traceback too (also KAFKA_TIERS_DEBUG=1).")
def cli() -> None:
    """kafka-tiers: replica placement and tiered storage for Kafka-style brokers.

    \b
    Examples:
      kafka-tiers quickstart
      kafka-tiers place --cluster cluster.json --partitions 12 --replication-factor 3
      kafka-tiers plugins list
      kafka-tiers conformance placer multi-level-rack
    """


def fail(message: str) -> NoReturn:
    """Print one ``error:`` line and exit with status 2 (an expected error)."""
    from kafka_tiers.cli.boundary import EXIT_ERROR, one_line

    click.echo(f"error: {one_line(message)}", err=True)
    sys.exit(EXIT_ERROR)


def debug_requested() -> bool:
    """Whether this run prints tracebacks: ``--debug`` was given, or ``KAFKA_TIERS_DEBUG=1``."""
    from kafka_tiers.cli.boundary import DEBUG_ENV

    return _Debug.on or os.environ.get(DEBUG_ENV) == "1"


def main(argv: list[str] | None = None) -> NoReturn:
    """Console entry point: run the command line ``argv`` (default ``sys.argv[1:]``) behind the
    error boundary (:mod:`kafka_tiers.cli.boundary`) and exit with its status: 0 done, 1 the
    command's answer is "no", 2 an error (one ``error:`` line), 3 a bug (one ``internal
    error:`` line), 130 interrupted."""
    from kafka_tiers.cli.boundary import run

    _Debug.on = False
    sys.exit(run(lambda: cli.main(args=argv, prog_name="kafka-tiers", standalone_mode=False),
                 debug_requested))


__all__ = ["COMMANDS", "SUMMARIES", "cli", "debug_requested", "fail", "main"]
