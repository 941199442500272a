"""Shared fixtures of the security tests (every security part uses them).

- ``certs``: the standard test certificates (:func:`tests.security.certs.write_test_certs`),
  written once per session into a temporary directory, as a
  :class:`tests.security.certs.TestCerts` of paths.
- ``make_kafka_broker(**config)``: a started standalone broker (as tests/kafka's fixture of
  the same name; ``config`` adds to or replaces ``broker.id``, ``log.dirs``, ``listeners``).
- ``make_kafka_cluster(brokers=3, overrides=None, name="kc", **kwargs)``: a started
  in-process LocalCluster whose brokers each open the listeners of ``overrides``.
- ``kcat``: the ``kcat`` binary (skips when it cannot be had, fails under CI).

Everything started is stopped at the end of the test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.targets import FAST_GROUPS, LISTENER
from tests.security.certs import TestCerts, write_test_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    """The standard test certificates (CA, broker, client, expired, foreign), made once."""
    return write_test_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def make_kafka_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """``make(background=True, **config)``: a started standalone broker (ids 1, 2, ... in
    ``tmp_path/broker-<n>``). Shut down at the end of the test."""
    made: list[Broker] = []

    def make(background: bool = True, **config: str) -> Broker:
        n = len(made) + 1
        cfg = {"broker.id": str(n), "log.dirs": str(tmp_path / f"broker-{n}" / "data"),
               "listeners": LISTENER, **FAST_GROUPS}
        cfg.update({k: str(v) for k, v in config.items()})
        broker = Broker(cfg, background=background)
        made.append(broker)
        return broker.start()

    yield make
    for b in reversed(made):
        b.shutdown()


@pytest.fixture
def make_kafka_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """``make(brokers=3, overrides=None, name="kc", **kwargs)``: a started in-process
    LocalCluster (embedded store) whose brokers open the Kafka listeners of ``overrides``
    (``PLAINTEXT://127.0.0.1:0`` by default). Closed at the end of the test."""
    made: list[LocalCluster] = []

    def make(brokers: int = 3, overrides: Mapping[str, str] | None = None, name: str = "kc",
             **kwargs: Any) -> LocalCluster:
        cfg = {"listeners": LISTENER, **FAST_GROUPS}
        cfg.update(overrides or {})
        cluster = LocalCluster(tmp_path / name, brokers, overrides=cfg, **kwargs)
        made.append(cluster)
        cluster.start()
        deadline = time.monotonic() + 10.0
        while len([a for a in cluster.bootstrap_servers.split(",") if a]) < brokers:
            if time.monotonic() > deadline:
                raise TimeoutError("not every broker opened its Kafka listener within 10s: "
                                   f"{cluster.bootstrap_servers!r}")
            time.sleep(0.02)
        return cluster

    yield make
    for c in reversed(made):
        c.close()


@pytest.fixture(scope="session")
def kcat() -> str:
    """The ``kcat`` binary (see :mod:`tests.servers.kcat`). Skips when it cannot be had,
    fails under CI."""
    from tests.servers.base import ServerUnavailable
    from tests.servers.fixtures import unavailable
    from tests.servers.kcat import kcat_binary

    try:
        return kcat_binary()
    except ServerUnavailable as exc:
        unavailable(exc)
