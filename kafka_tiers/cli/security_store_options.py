"""Where a security command (``kafka-tiers acls``, ``kafka-tiers scram``) reaches a cluster's
security state: its Kafka listeners, or the state written directly.

- ``--bootstrap-server HOST:PORT[,...]`` (else ``$KAFKA_TIERS_BOOTSTRAP``, else
  127.0.0.1:9092): the Kafka protocol, with ``--command-config FILE`` for the client's
  security settings (:mod:`kafka_tiers.cli.command_config`);
- ``--dir DIR`` (a stopped cluster's directory or a standalone broker's first log dir),
  ``--config server.properties`` (that broker's ZooKeeper, or its embedded store while it is
  stopped) or ``--zookeeper-connect HOST:PORT[/CHROOT]``: the security state store opened
  without a broker (:func:`~kafka_tiers.kafka.security.state_store.open_offline_store`),
  for the first users and ACLs before anyone can log in; only for the owner of the files.

:func:`security_store_options` adds the five options to a command; :class:`SecurityTarget`
checks what was given and opens the way chosen.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

#: the listeners asked when neither --bootstrap-server nor $KAFKA_TIERS_BOOTSTRAP is given
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

_OPTIONS = [
    click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]",
                 help="The cluster's Kafka listeners (default: $KAFKA_TIERS_BOOTSTRAP, else "
                 f"{DEFAULT_BOOTSTRAP})."),
    click.option("--command-config", type=click.Path(dir_okay=False),
                 help="Kafka client properties for --bootstrap-server: security.protocol, "
                 "ssl.* (PEM), sasl.mechanism, sasl.jaas.config (as Kafka's tools' "
                 "--command-config)."),
    click.option("--dir", "directory", type=click.Path(file_okay=False),
                 help="Write directly (no broker): a stopped cluster's directory (kafka-tiers "
                 "cluster start --dir) or a standalone broker's first log dir; files must "
                 "be yours."),
    click.option("--config", "config_path", type=click.Path(dir_okay=False),
                 help="Write directly (no broker) to the security state of the broker of "
                 "this server.properties (its ZooKeeper, or its embedded store while it is "
                 "stopped); files must be yours."),
    click.option("--zookeeper-connect", metavar="HOST:PORT[/CHROOT]",
                 help="Write directly through the cluster's ZooKeeper."),
]


def security_store_options(fn: Any) -> Any:
    """Add ``--bootstrap-server``, ``--command-config``, ``--dir``, ``--config`` and
    ``--zookeeper-connect`` to a click command; it receives them as ``bootstrap``,
    ``command_config``, ``directory``, ``config_path`` and ``zookeeper_connect``, the
    arguments of :class:`SecurityTarget`."""
    for opt in reversed(_OPTIONS):
        fn = opt(fn)
    return fn


class SecurityTarget:
    """The way a command was told to reach the security state (one at most; none: the
    Kafka listeners of ``$KAFKA_TIERS_BOOTSTRAP`` or 127.0.0.1:9092).

    Raises:
        click.UsageError: (on construction) two ways given, or ``--command-config`` with a
            direct way.
    """

    def __init__(self, bootstrap: str | None, command_config: str | None,
                 directory: str | None, config_path: str | None,
                 zookeeper_connect: str | None, timeout: float) -> None:
        given = [n for n, v in (("--bootstrap-server", bootstrap), ("--dir", directory),
                                ("--config", config_path),
                                ("--zookeeper-connect", zookeeper_connect)) if v]
        if len(given) > 1:
            raise click.UsageError(f"give one of {', '.join(given)}")
        if command_config and given and given[0] != "--bootstrap-server":
            raise click.UsageError(f"--command-config is for --bootstrap-server, not "
                                   f"{given[0]} (written directly, without a client)")
        self.bootstrap = bootstrap
        self.command_config = command_config
        self.directory = directory
        self.config_path = config_path
        self.zookeeper_connect = zookeeper_connect
        self.timeout = timeout

    @property
    def direct(self) -> bool:
        """True when the store is written without a broker."""
        return bool(self.directory or self.config_path or self.zookeeper_connect)

    def bootstrap_servers(self) -> list[str]:
        """The Kafka listeners to ask: ``--bootstrap-server``, else
        ``$KAFKA_TIERS_BOOTSTRAP``, else :data:`DEFAULT_BOOTSTRAP`.

        Raises:
            click.UsageError: an address that is not HOST:PORT (naming where it came from).
        """
        from kafka_tiers.cli.cluster import parse_bootstrap

        if self.bootstrap:
            return parse_bootstrap(self.bootstrap, "--bootstrap-server")
        if os.environ.get("KAFKA_TIERS_BOOTSTRAP"):
            return parse_bootstrap(os.environ["KAFKA_TIERS_BOOTSTRAP"],
                                   "$KAFKA_TIERS_BOOTSTRAP")
        return [DEFAULT_BOOTSTRAP]

    def client_settings(self) -> dict[str, Any]:
        """The kafka-python client arguments of ``--command-config`` (``{}`` without one;
        :func:`kafka_tiers.cli.command_config.client_settings`)."""
        from kafka_tiers.cli.command_config import client_settings

        return client_settings(self.command_config)

    @contextmanager
    def open_store(self) -> Iterator[Any]:
        """The security state store of a direct way (``--dir``, ``--config``,
        ``--zookeeper-connect``), closed on exit; ZooKeeper is waited for ``timeout``
        seconds.

        Raises:
            SecurityStateError: see
                :func:`~kafka_tiers.kafka.security.state_store.open_offline_store`.
            ConfigError: the ``--config`` file is not a valid broker configuration.
        """
        from kafka_tiers.kafka.security.state_store import open_offline_store

        config = None
        if self.config_path:
            from kafka_tiers.config import BrokerConfig

            config = BrokerConfig.from_file(self.config_path)
        if not logging.getLogger().handlers:  # kazoo's retry lines are not ours to print
            logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        with open_offline_store(self.directory, zookeeper_connect=self.zookeeper_connect,
                                config=config, timeout=self.timeout) as store:
            yield store


__all__ = ["DEFAULT_BOOTSTRAP", "SecurityTarget", "security_store_options"]
