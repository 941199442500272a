"""Kafka-listening brokers as OS processes on loopback (``python -m kafka_tiers broker start``)
coordinated by a real ZooKeeper: the multi-process cluster of the real-client system tests.

Each broker has ``listeners=PLAINTEXT://127.0.0.1:<free port>`` chosen once, so a restarted
broker listens where it did and clients reconnect to it. The embedded metadata store lives in
one process (see docs/cluster.md), so a multi-process cluster is a ZooKeeper one; the embedded
3-broker cluster of these tests is :class:`~kafka_tiers.cluster.local_cluster.LocalCluster`
(in-process) or ``kafka-tiers cluster start`` (one process).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafka_tiers.cluster.client import ClusterClient
from kafka_tiers.cluster.transport import TransportError
from tests.cluster.processes import BrokerProcess
from tests.servers.base import free_port


def wait_until(pred: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.05) -> None:
    """Poll ``pred`` (a ``TransportError`` counts as false) until true; ``TimeoutError``
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s: {what}")
        time.sleep(interval)


class KafkaBrokerProcess(BrokerProcess):
    """A :class:`~tests.cluster.processes.BrokerProcess` with a Kafka listener on a fixed free
    port (``kafka_address``)."""

    def __init__(self, broker_id: int, workdir: Path, zk_connect: str,
                 extra: Mapping[str, str] | None = None) -> None:
        self.kafka_port = free_port()
        self.kafka_address = f"127.0.0.1:{self.kafka_port}"
        props = {"listeners": f"PLAINTEXT://{self.kafka_address}",
                 "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
        props.update(extra or {})
        super().__init__(broker_id, workdir, zk_connect, props)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        """What the process wrote to stderr (its log) so far."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


class KafkaProcessCluster:
    """``n`` broker processes (ids 1..n) on one ZooKeeper chroot, each with a Kafka listener.

    Args:
        workdir: where each broker's dir (``broker-<id>``) goes.
        zk_connect: ``host:port/chroot`` of the ZooKeeper to use (a fresh chroot per cluster).
        n: how many brokers.
        extra: broker config for every broker (e.g. ``min.insync.replicas``).
    """

    def __init__(self, workdir: Path, zk_connect: str, n: int = 3,
                 extra: Mapping[str, str] | None = None) -> None:
        self.brokers = {b: KafkaBrokerProcess(b, workdir, zk_connect, extra)
                        for b in range(1, n + 1)}
        self._clients: list[ClusterClient] = []
        self._admin: ClusterClient | None = None

    def start(self) -> KafkaProcessCluster:
        """Start every broker (each returns once registered) and wait for a controller."""
        try:
            for p in self.brokers.values():
                p.start()
            cl = self.client()
            wait_until(lambda: cl.metadata()["controller"] >= 0, 30, "a controller")
        except BaseException:
            self.close()
            raise
        return self

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's Kafka address (clients skip the dead ones)."""
        return ",".join(p.kafka_address for p in self.brokers.values())

    def live(self) -> list[int]:
        return [b for b, p in self.brokers.items() if p.alive]

    def client(self, timeout: float = 20.0) -> ClusterClient:
        """A client of the internal protocol (topics, leaders), closed with the cluster."""
        c = ClusterClient([p.address for p in self.brokers.values()], timeout=timeout)
        self._clients.append(c)
        return c

    @property
    def admin(self) -> ClusterClient:
        """One shared internal-protocol client (topics, leaders, ISR)."""
        if self._admin is None:
            self._admin = self.client()
        return self._admin

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: Mapping[str, str] | None = None) -> None:
        """Create a topic through the controller and wait until every partition leads."""
        self.admin.create_topic(name, partitions, replication_factor, dict(config or {}))

    def leader(self, topic: str, partition: int) -> int:
        """The current leader (fresh metadata; -1 while none)."""
        return self.admin.leader(topic, partition, refresh=True)

    def isr(self, topic: str) -> dict[int, list[int]]:
        """The ISR of each partition of ``topic``."""
        return {int(p["partition"]): list(p["isr"]) for p in self.admin.describe_topic(topic)}

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker."""
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int) -> None:
        """Start a killed or stopped broker again on its data and ports."""
        p = self.brokers[broker_id]
        p.kill()
        p.start()

    def logs(self) -> dict[int, str]:
        return {b: p.log_text() for b, p in self.brokers.items()}

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()
        self._admin = None
        for p in self.brokers.values():
            p.kill()

    def __enter__(self) -> KafkaProcessCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["KafkaBrokerProcess", "KafkaProcessCluster", "wait_until"]
