"""``rack-aware``: the default placer. Rack spread first, then broker balance, fenced brokers last.

Every partition spans ``min(#racks, RF)`` racks with per-rack replica counts differing by at most
one; leaders and replicas are balanced per broker over the topic (existing partitions included,
so partitions added later continue the balance); fenced brokers never lead and follow only when
fewer than RF unfenced brokers are available. See ``docs/placement-algorithms.md``.

Racks: when no available broker has a rack the cluster is one rack (rack-unaware behaviour,
still balanced). When only some have one, the placement is refused with
:class:`InvalidReplicaAssignmentError` naming the brokers without a rack, as Kafka does: guessing
a rack for them would silently break the rack guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kafka_tiers.api import (
    BrokerInfo,
    ClusterView,
    InvalidReplicaAssignmentError,
    PlacementSpec,
)
from kafka_tiers.placement.rack_tree import format_ids, place_on_tree
from kafka_tiers.placement.seeding import SeededPlacer, make_rng
from kafka_tiers.placement.validation import check_replication_factor


def flat_rack_paths(
    available: Sequence[BrokerInfo], *, placer: str | None = None
) -> dict[int, tuple[str, ...]]:
    """Broker id -> one-level path ``(rack,)``, or ``()`` for every broker when none has a rack.

    Raises:
        InvalidReplicaAssignmentError: some brokers have a rack and others do not (named).
    """
    missing = [b.broker_id for b in available if b.rack is None]
    if not missing:
        return {b.broker_id: (b.rack or "",) for b in available}
    if len(missing) == len(available):
        return {b.broker_id: () for b in available}
    who = f"placer {placer}: " if placer else ""
    raise InvalidReplicaAssignmentError(
        f"{who}some brokers have a rack and others do not; give every broker a rack or none. "
        f"Brokers without a rack: {format_ids(missing)}",
        placer=placer,
    )


class RackAwarePlacer(SeededPlacer):
    """The default replica placer (entry point ``rack-aware``).

    Config: ``seed`` (optional int) makes placement deterministic; without it each call is
    random.

    Guarantees (for the brokers available: registered, within ``broker_ids``, unfenced unless
    fewer than RF unfenced exist):

    * each partition spans ``min(#racks, RF)`` racks and its per-rack replica counts differ by
      at most one (as far as rack sizes allow);
    * over the topic, replicas and leaders per broker differ by at most one when racks are equal
      in size (and are as even as the rack rule allows otherwise), counting the topic's existing
      partitions below ``spec.start_partition`` when ``spec.topic`` is given;
    * leaders are unfenced; fenced brokers follow only when needed, judged cluster-wide.
    """

    RACK_AWARE: ClassVar[bool] = True
    NAME: ClassVar[str] = "rack-aware"

    def place(
        self,
        spec: PlacementSpec,
        cluster: ClusterView,
        broker_ids: Sequence[int] | None = None,
    ) -> list[list[int]]:
        """Place ``spec``; see the class docstring and :meth:`ReplicaPlacer.place`.

        Raises:
            InvalidReplicationFactorError: RF <= 0, RF > available brokers, none unfenced.
            InvalidReplicaAssignmentError: some available brokers have racks and others not.
        """
        available = check_replication_factor(spec, cluster, broker_ids)
        paths = flat_rack_paths(available, placer=self.NAME)
        if spec.num_partitions == 0:
            return []
        rng = make_rng(self.seed, self.NAME, spec.topic)
        return place_on_tree(spec, cluster, available, paths, rng)


__all__ = ["RackAwarePlacer", "flat_rack_paths"]
