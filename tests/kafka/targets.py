"""What a real-client test runs against, one interface for each kind: a standalone broker, an
in-process :class:`~kafka_tiers.cluster.local_cluster.LocalCluster` (embedded store) and a
multi-process ZooKeeper cluster (:class:`tests.kafka.processes.KafkaProcessCluster`).

Topics are created through the project's own API (not the Kafka admin API), so a client test
does not depend on CreateTopics; ``create_topic`` returns once every partition has a leader
that the Kafka listener reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.processes import KafkaProcessCluster, wait_until

LISTENER = "PLAINTEXT://127.0.0.1:0"
"""The Kafka listener every in-process test broker opens (any free port)."""

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
"""Group settings of every test broker (as Kafka's own test harness does): a new group's first
rebalance does not wait for more members, and the offsets topic has 5 partitions, not 50."""


@dataclass
class KafkaTarget:
    """A running broker or cluster with Kafka listeners.

    ``kind`` is ``standalone``, ``cluster`` (in-process, embedded store) or ``zookeeper``
    (broker processes); ``server`` is the :class:`Broker`, :class:`LocalCluster` or
    :class:`KafkaProcessCluster`.
    """

    kind: str
    server: Any

    @property
    def bootstrap_servers(self) -> str:
        return str(self.server.bootstrap_servers)

    @property
    def brokers(self) -> int:
        """How many brokers (the largest replication factor possible)."""
        if isinstance(self.server, Broker):
            return 1
        return len(self.server.brokers)

    def create_topic(self, name: str, partitions: int = 1,
                     replication_factor: int | None = None,
                     config: Mapping[str, str] | None = None) -> None:
        """Create a topic (replication factor: every broker, at most 3, by default) and wait
        until each partition has a leader."""
        cfg = dict(config or {})
        if isinstance(self.server, Broker):
            if replication_factor not in (None, 1):
                raise ValueError("a standalone broker holds one replica per partition")
            self.server.create_topic(name, partitions, cfg)
            return
        rf = replication_factor or min(3, self.brokers)
        if isinstance(self.server, LocalCluster):
            cl = self.server.client()
            cl.create_topic(name, partitions, rf, cfg)
            brokers = [self.server.broker(b) for b in self.server.live]
        else:
            assert isinstance(self.server, KafkaProcessCluster)
            self.server.create_topic(name, partitions, rf, cfg)
            return

        def led() -> bool:  # every member's metadata view knows the leaders
            for br in brokers:
                md = br.metadata
                if md is None or md.topic(name) is None:
                    return False
            return True

        wait_until(led, 20, f"every broker knows topic {name}")


__all__ = ["FAST_GROUPS", "LISTENER", "KafkaTarget"]
