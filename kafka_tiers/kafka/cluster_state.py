"""What a Kafka handler reads of the cluster, the same way for a standalone broker and a
cluster member: brokers (as advertised on a listener), the controller, topics, and each
partition's replicas, leader, epoch and ISR.

A cluster member reads the metadata store (the routing truth every broker shares); a
standalone broker is a one-broker cluster that leads every partition it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_tiers.api import KafkaTiersError, TopicPartition

if TYPE_CHECKING:
    from kafka_tiers.broker.broker import Broker


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker as clients reach it on one listener."""

    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class PartitionView:
    """One partition: replicas (preferred leader first), leader (-1: none), leader epoch,
    ISR and the replicas on brokers that are not live (``offline``)."""

    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True)
class TopicView:
    """One topic: its partitions by number and its topic-level config overrides."""

    name: str
    partitions: dict[int, PartitionView]
    config: dict[str, str]


class ClusterState:
    """A consistent-enough read of the cluster for one request (see the module docstring).

    Args:
        broker: the broker serving the request.
        listener: the listener name whose advertised addresses clients are told.
    """

    def __init__(self, broker: Broker, listener: str) -> None:
        self.broker = broker
        self.listener = listener
        member = broker.member
        self._md = member.metadata if member is not None else None
        self._local_topics: dict[str, Any] | None = None

    @property
    def clustered(self) -> bool:
        return self._md is not None

    def cluster_id(self) -> str | None:
        """The cluster id (the log dirs' ``meta.properties`` id when standalone)."""
        if self._md is not None:
            return str(self._md.cluster_id())
        lm = self.broker.log_manager
        return lm.meta_properties.get("cluster.id") if lm is not None else None

    def brokers(self) -> list[BrokerEndpoint]:
        """Live brokers that advertise this listener, by id."""
        if self._md is None:
            server = self.broker.kafka_server
            adv = server.advertised() if server is not None else {}
            if self.listener not in adv:
                return []
            host, port = adv[self.listener]
            return [BrokerEndpoint(self.broker.broker_id, host, port, self.broker.rack)]
        out = []
        for bid, reg in sorted(self._md.live_brokers().items()):
            ep = reg.endpoint(self.listener)
            if ep is not None:
                out.append(BrokerEndpoint(bid, ep[0], ep[1], reg.rack))
        return out

    def live_ids(self) -> set[int]:
        """Ids of the live brokers (whether or not they advertise this listener)."""
        if self._md is None:
            return {self.broker.broker_id}
        return set(self._md.live_brokers())

    def controller_id(self) -> int:
        """The active controller's broker id (-1 when none; a standalone broker is its own)."""
        if self._md is None:
            return self.broker.broker_id
        ctl = self._md.controller()
        return ctl[0] if ctl else -1

    def topic_names(self) -> list[str]:
        """Every topic, sorted."""
        if self._md is None:
            return sorted(self.broker.topics())
        return sorted(self._md.topics())

    def topic(self, name: str) -> TopicView | None:
        """One topic, or None when it does not exist."""
        if self._md is None:
            if self._local_topics is None:  # one copy per request, not one per topic
                self._local_topics = self.broker.topics()
            info = self._local_topics.get(name)
            if info is None:
                return None
            me = self.broker.broker_id
            parts = {}
            for p in range(info.partitions):
                tp = TopicPartition(name, p)
                # the broker's own leadership state (become_follower / become_leader move it),
                # the same one Produce and Fetch check
                up = self.broker._log_or_none(tp) is not None
                leads, epoch = False, -1
                if up:
                    try:
                        leads, epoch = self.broker.leadership(tp)
                    except KafkaTiersError:  # offline: its files failed to load
                        up = False
                parts[p] = PartitionView(p, (me,), me if up and leads else -1, epoch,
                                         (me,) if up else (), () if up else (me,))
            return TopicView(name, parts, dict(info.config))
        asg = self._md.topic(name)
        if asg is None:
            return None
        live = self.live_ids()
        tps = [TopicPartition(name, p) for p in sorted(asg.partitions)]
        states = self._md.partition_states(tps)
        parts = {}
        for p, reps in sorted(asg.partitions.items()):
            st = states.get(TopicPartition(name, p))
            parts[p] = PartitionView(
                p, tuple(reps), st.leader if st else -1, st.leader_epoch if st else -1,
                tuple(st.isr) if st else (), tuple(r for r in reps if r not in live))
        return TopicView(name, parts, dict(asg.config))

    def partition(self, tp: TopicPartition) -> PartitionView | None:
        """One partition, or None when the topic or the partition does not exist."""
        t = self.topic(tp.topic)
        return None if t is None else t.partitions.get(tp.partition)


__all__ = ["BrokerEndpoint", "ClusterState", "PartitionView", "TopicView"]
