"""The factories behind the broker and cluster fixtures, shared by every conftest that offers
them (tests/kafka's, tests/security's): each is a context manager yielding ``make``, and
stops everything made when it exits.

- :func:`broker_factory`: ``make(background=True, **config)``, a started standalone
  :class:`~kafka_tiers.broker.broker.Broker` with a Kafka listener on a free port.
- :func:`cluster_factory`: ``make(brokers=3, overrides=None, name="kc", **kwargs)``, a started
  in-process :class:`~kafka_tiers.cluster.local_cluster.LocalCluster` (embedded store).
- :func:`zookeeper_chroot`: a new, empty chroot on a test ZooKeeper, for one cluster or store.
- :func:`kcat_or_skip`: the ``kcat`` binary, or the test is skipped (failed under CI).
- :func:`no_aws_environment`: a fixture (for ``pytest.mark.usefixtures``) hiding a
  developer's AWS set-up from brokers tiering to moto.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.targets import FAST_GROUPS, LISTENER


@pytest.fixture
def no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of a developer's AWS set-up is read (credentials, profile, endpoint variables
    removed); no instance-metadata lookups."""
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@contextmanager
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """``make(background=True, **config)``: a started standalone broker (ids 1, 2, ... in
    ``tmp_path/broker-<n>``, :data:`LISTENER` and :data:`FAST_GROUPS`); ``config`` adds to or
    replaces any of those keys. Every broker made is shut down on exit."""
    made: list[Broker] = []

    def make(background: bool = True, **config: str) -> Broker:
        n = len(made) + 1
        cfg = {"broker.id": str(n), "log.dirs": str(tmp_path / f"broker-{n}" / "data"),
               "listeners": LISTENER, **FAST_GROUPS}
        cfg.update({k: str(v) for k, v in config.items()})
        broker = Broker(cfg, background=background)
        made.append(broker)
        return broker.start()

    try:
        yield make
    finally:
        for b in reversed(made):
            b.shutdown()


@contextmanager
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """``make(brokers=3, overrides=None, name="kc", **kwargs)``: a started in-process
    LocalCluster in ``tmp_path/<name>`` (embedded store; ``kwargs`` are LocalCluster's) whose
    brokers open the Kafka listeners of ``overrides`` (:data:`LISTENER` by default, with
    :data:`FAST_GROUPS`); returns once every broker's listener is open. Every cluster made is
    closed on exit.

    Raises:
        TimeoutError: (from ``make``) a broker opened no listener within 10 s.
    """
    made: list[LocalCluster] = []

    def make(brokers: int = 3, overrides: Mapping[str, str] | None = None, name: str = "kc",
             **kwargs: Any) -> LocalCluster:
        cfg = {"listeners": LISTENER, **FAST_GROUPS}
        cfg.update(overrides or {})
        cluster = LocalCluster(tmp_path / name, brokers, overrides=cfg, **kwargs)
        made.append(cluster)
        cluster.start()
        _wait_listeners(cluster, brokers)
        return cluster

    try:
        yield make
    finally:
        for c in reversed(made):
            c.close()


def _wait_listeners(cluster: LocalCluster, brokers: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len([a for a in cluster.bootstrap_servers.split(",") if a]) < brokers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every broker opened its Kafka listener within {timeout}s: "
                               f"{cluster.bootstrap_servers!r}")
        time.sleep(0.02)


def zookeeper_chroot(zookeeper_server: Any, prefix: str = "/kt") -> str:
    """Create a chroot no other test uses (``prefix`` then a clock reading) on
    ``zookeeper_server`` (a :class:`tests.servers.zookeeper.ZooKeeperServer`) and return its
    path: ``zookeeper_server.connection_string + chroot`` is a ``zookeeper.connect``."""
    chroot = f"{prefix}{time.monotonic_ns()}"
    admin = zookeeper_server.client()
    try:
        admin.ensure_path(chroot)
    finally:
        admin.stop()
        admin.close()
    return chroot


def kcat_or_skip() -> str:
    """The ``kcat`` binary (Debian's package, installed on first use when root; see
    :mod:`tests.servers.kcat`). Skips the test when it cannot be had, fails it under CI."""
    from tests.servers.base import ServerUnavailable
    from tests.servers.fixtures import unavailable
    from tests.servers.kcat import kcat_binary

    try:
        return kcat_binary()
    except ServerUnavailable as exc:
        unavailable(exc)
