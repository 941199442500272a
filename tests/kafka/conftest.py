"""Shared fixtures of the Kafka-protocol tests (every part uses them).

- ``make_kafka_broker(**config)`` / ``kafka_broker``: a started standalone
  :class:`~kafka_tiers.broker.broker.Broker` with a Kafka listener on a free port
  (``broker.bootstrap_servers``); keyword ``background`` is the Broker's.
- ``make_kafka_cluster(brokers=3, overrides=..., **kwargs)`` / ``kafka_cluster``: a started
  in-process :class:`~kafka_tiers.cluster.local_cluster.LocalCluster` (embedded store), every
  broker with a Kafka listener (``cluster.bootstrap_servers``).
- ``make_process_cluster(n=3, extra=...)`` / ``process_cluster``: broker processes on a real
  ZooKeeper (:class:`tests.kafka.processes.KafkaProcessCluster`), each with a Kafka listener.
- ``kafka_target``: parametrized over a standalone broker and a 3-broker in-process cluster,
  as a :class:`tests.kafka.targets.KafkaTarget` (``bootstrap_servers``, ``create_topic``).
- ``system_target``: the same two, then 3 broker processes on ZooKeeper (marked ``servers``
  and ``slow``).
- ``kcat``: the path of ``kcat`` (Debian's package, installed on first use when root).

Every broker gets :data:`tests.kafka.targets.FAST_GROUPS` unless the test overrides it (a
group's first rebalance does not wait 3 s; a small offsets topic). Everything started is
stopped at the end of the test. Client settings with short timeouts are
in :mod:`tests.kafka.clients`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.fixtures import broker_factory, cluster_factory, kcat_or_skip, zookeeper_chroot
from tests.kafka.processes import KafkaProcessCluster
from tests.kafka.targets import KafkaTarget


@pytest.fixture
def make_kafka_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """``make(background=True, **config)``: a started standalone broker (ids 1, 2, ... in
    ``tmp_path/broker-<n>``); ``config`` adds to or replaces ``broker.id``, ``log.dirs`` and
    ``listeners``. Shut down at the end of the test (:func:`tests.kafka.fixtures.
    broker_factory`)."""
    with broker_factory(tmp_path) as make:
        yield make


@pytest.fixture
def kafka_broker(make_kafka_broker: Callable[..., Broker]) -> Broker:
    """A started standalone broker with a Kafka listener."""
    return make_kafka_broker()


@pytest.fixture
def make_kafka_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """``make(brokers=3, overrides=None, name="kc", **kwargs)``: a started in-process
    LocalCluster (embedded store; ``kwargs`` are LocalCluster's) whose brokers open a Kafka
    listener on a free port each. Closed at the end of the test (:func:`tests.kafka.fixtures.
    cluster_factory`)."""
    with cluster_factory(tmp_path) as make:
        yield make


@pytest.fixture
def kafka_cluster(make_kafka_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    """A started 3-broker in-process cluster with Kafka listeners."""
    return make_kafka_cluster()


@pytest.fixture
def make_process_cluster(zookeeper_server: Any, tmp_path: Path
                         ) -> Iterator[Callable[..., KafkaProcessCluster]]:
    """``make(n=3, extra=None)``: ``n`` broker processes on a fresh chroot of the session's
    ZooKeeper, each with a Kafka listener; started (a controller is elected). Every process
    is killed at the end of the test."""
    made: list[KafkaProcessCluster] = []

    def make(n: int = 3, extra: Mapping[str, str] | None = None) -> KafkaProcessCluster:
        chroot = zookeeper_chroot(zookeeper_server)
        workdir = tmp_path / f"pc{len(made) + 1}"
        cluster = KafkaProcessCluster(workdir, zookeeper_server.connection_string + chroot, n,
                                      extra)
        made.append(cluster)
        return cluster.start()

    yield make
    for c in reversed(made):
        c.close()


@pytest.fixture
def process_cluster(make_process_cluster: Callable[..., KafkaProcessCluster]
                    ) -> KafkaProcessCluster:
    """A started 3-broker multi-process ZooKeeper cluster with Kafka listeners."""
    return make_process_cluster()


@pytest.fixture(params=["standalone", "cluster"])
def kafka_target(request: pytest.FixtureRequest, make_kafka_broker: Callable[..., Broker],
                 make_kafka_cluster: Callable[..., LocalCluster]) -> KafkaTarget:
    """A standalone broker, then a 3-broker in-process cluster (embedded store)."""
    if request.param == "standalone":
        return KafkaTarget("standalone", make_kafka_broker())
    return KafkaTarget("cluster", make_kafka_cluster())


@pytest.fixture(params=["standalone", "cluster",
                        pytest.param("zookeeper", marks=[pytest.mark.servers,
                                                         pytest.mark.slow])])
def system_target(request: pytest.FixtureRequest, make_kafka_broker: Callable[..., Broker],
                  make_kafka_cluster: Callable[..., LocalCluster]) -> KafkaTarget:
    """``kafka_target``'s two, then 3 broker processes on ZooKeeper (``servers``, ``slow``)."""
    if request.param == "standalone":
        return KafkaTarget("standalone", make_kafka_broker())
    if request.param == "cluster":
        return KafkaTarget("cluster", make_kafka_cluster())
    make: Callable[..., KafkaProcessCluster] = request.getfixturevalue("make_process_cluster")
    return KafkaTarget("zookeeper", make())


@pytest.fixture(scope="session")
def kcat() -> str:
    """The ``kcat`` binary (:func:`tests.kafka.fixtures.kcat_or_skip`)."""
    return kcat_or_skip()
