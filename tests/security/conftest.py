"""Shared fixtures of the security tests (every security part uses them).

- ``certs``: the standard test certificates (:func:`tests.security.certs.write_test_certs`),
  written once per session into a temporary directory, as a
  :class:`tests.security.certs.TestCerts` of paths.
- ``make_kafka_broker(**config)``: a started standalone broker (as tests/kafka's fixture of
  the same name; ``config`` adds to or replaces ``broker.id``, ``log.dirs``, ``listeners``).
- ``make_kafka_cluster(brokers=3, overrides=None, name="kc", **kwargs)``: a started
  in-process LocalCluster whose brokers each open the listeners of ``overrides``.
- ``kcat``: the ``kcat`` binary (skips when it cannot be had, fails under CI).
- ``zookeeper_state_stores``: two security state stores over one new ZooKeeper chroot, each
  with its own session (two brokers' views); needs the ``servers`` mark's ZooKeeper.

Everything started is stopped at the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.fixtures import (
    broker_factory,
    cluster_factory,
    kcat_or_skip,
    zookeeper_chroot,
)
from tests.security.certs import TestCerts, write_test_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    """The standard test certificates (CA, broker, client, expired, foreign), made once."""
    return write_test_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def make_kafka_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """``make(background=True, **config)``: a started standalone broker (ids 1, 2, ... in
    ``tmp_path/broker-<n>``). Shut down at the end of the test (:func:`tests.kafka.fixtures.
    broker_factory`, as tests/kafka's fixture)."""
    with broker_factory(tmp_path) as make:
        yield make


@pytest.fixture
def make_kafka_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """``make(brokers=3, overrides=None, name="kc", **kwargs)``: a started in-process
    LocalCluster (embedded store) whose brokers open the Kafka listeners of ``overrides``
    (``PLAINTEXT://127.0.0.1:0`` by default). Closed at the end of the test
    (:func:`tests.kafka.fixtures.cluster_factory`)."""
    with cluster_factory(tmp_path) as make:
        yield make


@pytest.fixture
def zookeeper_state_stores(zookeeper_server: Any) -> Iterator[list[Any]]:
    """Two :class:`~kafka_tiers.kafka.security.state_store.MetadataStoreStateStore` over
    one new chroot of the session's ZooKeeper, each on its own ZooKeeper session; closed
    (stores, then sessions) at the end of the test."""
    from kafka_tiers.cluster.zookeeper_store import ZooKeeperStore
    from kafka_tiers.kafka.security.state_store import MetadataStoreStateStore

    chroot = zookeeper_chroot(zookeeper_server, "/security-")
    zks = [ZooKeeperStore(zookeeper_server.connection_string + chroot) for _ in range(2)]
    for zk in zks:
        zk.start()
    stores = [MetadataStoreStateStore(zk) for zk in zks]
    try:
        yield stores
    finally:
        for s in stores:
            s.close()
        for zk in zks:
            zk.close()


@pytest.fixture(scope="session")
def kcat() -> str:
    """The ``kcat`` binary (:func:`tests.kafka.fixtures.kcat_or_skip`)."""
    return kcat_or_skip()
