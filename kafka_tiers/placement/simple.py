"""``simple``: rack-unaware placement, Kafka's classic scheme (``AdminUtils``).

Brokers form one ring sorted by id. Partition ``p`` is led by broker ``(p + start) % n``; its
followers sit at ``1 + (shift + j) % (n - 1)`` places after the leader, where the shift grows by
one every full round of ``n`` partitions, so replica sets change between rounds. ``start`` and
the initial shift are random (seeded by ``seed``), or taken from the topic's partition 0 when it
already exists, so partitions added later (``spec.start_partition``) continue the same pattern.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kafka_tiers.api import ClusterView, PlacementSpec
from kafka_tiers.placement.seeding import SeededPlacer, make_rng
from kafka_tiers.placement.validation import check_replication_factor


def classic_replicas(
    ring: Sequence[int], partition: int, replication_factor: int, start: int, shift: int
) -> list[int]:
    """Kafka's rack-unaware replica list for one partition over ``ring``.

    Args:
        ring: the broker ids, in ring order (``n = len(ring) >= replication_factor``).
        partition: the absolute partition index.
        replication_factor: replicas to return (leader first).
        start: the ring index of partition 0's leader.
        shift: the follower shift of partition 0 (it grows by one every ``n`` partitions).
    """
    n = len(ring)
    first = (partition + start) % n
    out = [ring[first]]
    if replication_factor > 1:
        s = shift + partition // n
        for j in range(replication_factor - 1):
            out.append(ring[(first + 1 + (s + j) % (n - 1)) % n])
    return out


class SimplePlacer(SeededPlacer):
    """Rack-unaware placer (entry point ``simple``), also the core's fallback.

    Config: ``seed`` (optional int) makes placement deterministic; without it each call is
    random (unless the topic's partition 0 fixes the pattern).

    Leaders are unfenced brokers: the ring holds the unfenced available brokers; when fewer than
    RF are unfenced every partition holds them all plus fenced followers taken in turn. Leaders
    differ by at most one per broker over ``n`` consecutive partitions; racks are ignored.
    """

    NAME: ClassVar[str] = "simple"

    def place(
        self,
        spec: PlacementSpec,
        cluster: ClusterView,
        broker_ids: Sequence[int] | None = None,
    ) -> list[list[int]]:
        """Place ``spec``; see the class docstring and :meth:`ReplicaPlacer.place`.

        Raises:
            InvalidReplicationFactorError: RF <= 0, RF > available brokers, none unfenced.
        """
        available = check_replication_factor(spec, cluster, broker_ids)
        if spec.num_partitions == 0:
            return []
        ring = [b.broker_id for b in available if not b.fenced]
        spare = [b.broker_id for b in available if b.fenced]
        n = len(ring)
        rng = make_rng(self.seed, self.NAME, spec.topic)
        start = rng.randrange(n)
        shift = rng.randrange(n)
        if spec.topic is not None:
            first = cluster.topic_assignment(spec.topic).get(0)
            position = {b: i for i, b in enumerate(ring)}
            if first and first[0] in position:
                start = position[first[0]]
                if len(first) > 1 and first[1] in position and n > 1:
                    shift = (position[first[1]] - start) % n - 1
        rf = spec.replication_factor
        width = min(rf, n)
        extra = rf - width
        out: list[list[int]] = []
        for i in range(spec.num_partitions):
            p = spec.start_partition + i
            replicas = classic_replicas(ring, p, width, start, shift)
            if extra:
                replicas.extend(spare[(p + k) % len(spare)] for k in range(extra))
            out.append(replicas)
        return out


__all__ = ["SimplePlacer", "classic_replicas"]
