"""``kafka-tiers broker start``: one broker (:class:`~kafka_tiers.broker.Broker`, a cluster
member) as its own process on 127.0.0.1."""

from __future__ import annotations

import click

from kafka_tiers.cli.output import parse_kv


@click.group()
def broker() -> None:
    """Run a cluster broker.

    \b
    Examples:
      kafka-tiers broker start --config server.properties
      kafka-tiers broker start --config server.properties --override broker.id=2 \\
          --override port=9093
    """


@broker.command("start")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="server.properties (broker.id, log.dirs, port or listeners, "
              "metadata.store, zookeeper.connect, broker.rack, ...).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A config value replacing the file's (repeatable).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              help="Log level of the cluster messages (stderr).")
def start(config_path: str, overrides: tuple[str, ...], log_level: str) -> None:
    """Start a broker in the foreground until SIGTERM or Ctrl-C (then a controlled shutdown:
    its leaderships move to other brokers before it stops).

    The broker registers in the metadata store (metadata.store=zookeeper with
    zookeeper.connect, or embedded with metadata.dir for brokers of one machine sharing
    nothing else), takes part in the controller election and serves its replicas. One line
    "broker <id> ready on 127.0.0.1:<port>" is printed once it is registered.
    """
    import signal
    import threading

    from kafka_tiers.broker import Broker
    from kafka_tiers.cli.config import print_config_warnings
    from kafka_tiers.config import BrokerConfig

    setup_logging(log_level)
    cfg = BrokerConfig.from_file(config_path, parse_kv(overrides, "--override"))
    print_config_warnings(cfg.warnings)
    cfg.check_plugins()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    node = Broker(cfg, cluster=True).start()
    click.echo(f"broker {node.broker_id} ready on {node.address}", err=False)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        click.echo(f"broker {node.broker_id} stopping", err=True)
        node.shutdown()


def setup_logging(level: str) -> None:
    """Cluster messages at ``level`` on stderr; the log engine's own at WARNING."""
    import logging

    logging.basicConfig(level=getattr(logging, level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("kafka_tiers.log", "kazoo"):
        logging.getLogger(name).setLevel(max(logging.WARNING, getattr(logging, level)))


__all__ = ["broker", "setup_logging"]
