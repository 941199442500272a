"""``multi-level-rack``: racks are paths (``/dc1/rack2``) and rack awareness holds at every level.

Design document 001 (KIP-879 draft): the racks form a tree, every node keeps a ring over its
children and each replica walks from the root to a broker. At every level each partition spans
``min(#domains, RF)`` domains (for evenly shaped trees) and every domain holds its fair share of
the topic's replicas within one; leaders are balanced the same way. See
``docs/placement-algorithms.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kafka_tiers.api import ClusterView, PlacementSpec
from kafka_tiers.placement.rack_tree import RackTree, place_on_tree
from kafka_tiers.placement.seeding import SeededPlacer, make_rng
from kafka_tiers.placement.validation import check_replication_factor


class MultiLevelRackPlacer(SeededPlacer):
    """Multi-level rack-aware placer (entry point ``multi-level-rack``).

    Config: ``seed`` (optional int) makes placement deterministic; without it each call is
    random.

    Every available broker (registered, within ``broker_ids``) must have a rack path, all of the
    same depth; otherwise :class:`InvalidReplicaAssignmentError` names the brokers at fault.
    Guarantees, at every level of the tree (for the brokers used: unfenced unless fewer than RF
    unfenced exist): each partition spans ``min(#domains, RF)`` domains and its per-child replica
    counts differ by at most one wherever domain sizes allow; sibling domains' replica and leader
    loads (per broker) differ by at most one, so equal-sized domains hold their fair share within
    one; existing partitions of ``spec.topic`` below ``start_partition`` are counted.
    """

    RACK_AWARE: ClassVar[bool] = True
    MULTI_LEVEL: ClassVar[bool] = True
    NAME: ClassVar[str] = "multi-level-rack"

    def place(
        self,
        spec: PlacementSpec,
        cluster: ClusterView,
        broker_ids: Sequence[int] | None = None,
    ) -> list[list[int]]:
        """Place ``spec``; see the class docstring and :meth:`ReplicaPlacer.place`.

        Raises:
            InvalidReplicationFactorError: RF <= 0, RF > available brokers, none unfenced.
            InvalidReplicaAssignmentError: brokers without a rack, malformed rack paths, or
                paths of different depths (the brokers are named).
        """
        available = check_replication_factor(spec, cluster, broker_ids)
        tree = RackTree.from_brokers(available, placer=self.NAME)
        if spec.num_partitions == 0:
            return []
        rng = make_rng(self.seed, self.NAME, spec.topic)
        return place_on_tree(spec, cluster, available, tree.paths, rng)


__all__ = ["MultiLevelRackPlacer"]
