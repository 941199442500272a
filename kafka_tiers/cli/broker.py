"""``kafka-tiers broker start``: one broker (:class:`~kafka_tiers.broker.Broker`, a cluster
member) as its own process on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import click

from kafka_tiers.cli.output import parse_kv


@click.group()
def broker() -> None:
    """Run a cluster broker.

    \b
    Examples:
      kafka-tiers broker start --config server.properties
      kafka-tiers broker start --config server.properties --override broker.id=2 \\
          --override listeners=PLAINTEXT://127.0.0.1:9093
    """


@broker.command("start")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="server.properties (broker.id, log.dirs, listeners (the Kafka listener), "
              "port (the internal transport, 0: any free port), metadata.store, "
              "zookeeper.connect, broker.rack, ...).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A config value replacing the file's (repeatable).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              help="Log level of the cluster messages (stderr).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="json: the ready line is one JSON object "
              '({"event": "ready", "broker_id", "address", "bootstrap_servers"}).')
def start(config_path: str, overrides: tuple[str, ...], log_level: str, fmt: str) -> None:
    """Start a broker in the foreground until SIGTERM or Ctrl-C (then a controlled shutdown:
    its leaderships move to other brokers before it stops). The process ends within
    broker.shutdown.timeout.ms of the signal: exit code 0 after a clean shutdown, 1 with
    one ERROR line when the shutdown did not finish in time (logs flushed, no clean-shutdown
    marker: the next start recovers them).

    The broker registers in the metadata store (metadata.store=zookeeper with
    zookeeper.connect, or embedded with metadata.dir for brokers of one machine sharing
    nothing else), takes part in the controller election and serves its replicas. With
    `listeners` (e.g. listeners=PLAINTEXT://127.0.0.1:9092) it opens that Kafka listener for
    Kafka clients. One line "broker <id> ready on <internal address>; bootstrap <host:port>
    (Kafka listener)" is printed once it is registered (without listeners: "no Kafka
    listener").
    """
    from kafka_tiers.broker import Broker
    from kafka_tiers.cli.config import print_config_warnings
    from kafka_tiers.cli.stopping import TIMEOUT_KEY, StopOnSignal
    from kafka_tiers.config import BrokerConfig

    setup_logging(log_level)
    cfg = BrokerConfig.from_file(config_path, parse_kv(overrides, "--override"))
    print_config_warnings(cfg.warnings)
    cfg.check_plugins()
    node = Broker(cfg, cluster=True)
    # SIGTERM / SIGINT: a clean shutdown, and the process ends within broker.shutdown.timeout.ms
    # of the signal whatever that shutdown does (even during the start)
    guard = StopOnSignal(cfg[TIMEOUT_KEY], f"broker {node.broker_id}",
                         flush=node.flush_logs).install()
    node.start()  # a failed start cleans up after itself
    try:
        if not guard.requested.is_set():
            announce_ready(node, fmt)
        while not guard.requested.wait(0.5):
            pass
    finally:
        click.echo(f"broker {node.broker_id} stopping", err=True)
        node.shutdown()
        guard.done()


def announce_ready(node: Any, fmt: str) -> None:
    """Print that ``node`` (a started cluster broker) serves: its internal address and the
    bootstrap address of its Kafka listeners (one line, or one JSON object)."""
    import json

    bootstrap = node.bootstrap_servers
    if fmt == "json":
        click.echo(json.dumps({"event": "ready", "broker_id": node.broker_id,
                               "address": node.address, "bootstrap_servers": bootstrap or None}))
        return
    tail = (f"bootstrap {bootstrap} (Kafka listener)" if bootstrap else
            "no Kafka listener (set listeners=PLAINTEXT://127.0.0.1:9092)")
    click.echo(f"broker {node.broker_id} ready on {node.address}; {tail}")


def setup_logging(level: str) -> None:
    """Cluster messages at ``level`` on stderr; the log engine's own at WARNING."""
    import logging

    logging.basicConfig(level=getattr(logging, level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("kafka_tiers.log", "kazoo"):
        logging.getLogger(name).setLevel(max(logging.WARNING, getattr(logging, level)))


__all__ = ["announce_ready", "broker", "setup_logging"]
