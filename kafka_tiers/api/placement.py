"""The replica placement interface (design document 001, KIP-879 draft)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kafka_tiers.api.cluster import ClusterView
from kafka_tiers.api.plugin import Plugin


@dataclass(frozen=True, slots=True)
class PlacementSpec:
    """What to place.

    Attributes:
        num_partitions: how many partitions to place (>= 0).
        replication_factor: replicas per partition. Not checked here: a placer refuses an
            impossible factor with :class:`InvalidReplicationFactorError`.
        start_partition: the index of the first partition placed. Partitions added to an
            existing topic start at its current partition count, so a placer can continue the
            pattern (and the balance) of the earlier ones.
        topic: the topic's name, when known (placers may use it to look up the topic's current
            assignment in the :class:`ClusterView`).

    Raises:
        ValueError: ``num_partitions`` or ``start_partition`` negative or not an int.
    """

    num_partitions: int
    replication_factor: int
    start_partition: int = 0
    topic: str | None = None

    def __post_init__(self) -> None:
        for name in ("num_partitions", "replication_factor", "start_partition"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if self.num_partitions < 0:
            raise ValueError(f"num_partitions must be >= 0, got {self.num_partitions}")
        if self.start_partition < 0:
            raise ValueError(f"start_partition must be >= 0, got {self.start_partition}")


class ReplicaPlacer(Plugin):
    """Decides which brokers host the replicas of new partitions.

    Selected in ``server.properties`` by ``broker.replica.placer=<entry point name or
    pkg.module:Class>``; keys prefixed ``placer.`` reach :meth:`configure` with the prefix
    stripped. The core validates every placement a placer returns before using it.

    Class attributes (declarations the conformance suite holds the placer to):
        RACK_AWARE: every partition spans ``min(#racks, RF)`` racks, replicas per rack within a
            partition differ by at most one, and replicas and leaders are balanced per rack.
        MULTI_LEVEL: racks are paths (``/dc/rack``) and the rack-aware rules hold at every level
            of the rack tree.
    """

    RACK_AWARE: ClassVar[bool] = False
    MULTI_LEVEL: ClassVar[bool] = False

    @abstractmethod
    def place(
        self,
        spec: PlacementSpec,
        cluster: ClusterView,
        broker_ids: Sequence[int] | None = None,
    ) -> list[list[int]] | None:
        """Place the replicas of ``spec.num_partitions`` partitions.

        Args:
            spec: how many partitions, the replication factor and the first partition index.
            cluster: the registered brokers (with racks and fencing) and current assignments.
            broker_ids: when given, only these brokers may be used; unknown ids are ignored.

        Returns:
            ``None`` to defer to the core's rack-unaware default (``simple``), or one replica
            list per partition, in partition order starting at ``spec.start_partition``: each
            exactly ``spec.replication_factor`` distinct broker ids, its first element the
            preferred leader, which must be unfenced. Fenced brokers may appear only as
            followers and only when there are not enough unfenced brokers.

        Raises:
            InvalidReplicationFactorError: the factor is <= 0 or larger than the brokers
                available, or no unfenced broker is available (the message names the numbers).
            InvalidReplicaAssignmentError: the placer cannot satisfy its own rules for this
                cluster (for example brokers without racks given to a rack-path placer).

        Must be deterministic for a given configuration (seed), spec and cluster, and must not
        modify ``cluster``. Calling it has no side effects: nothing is placed until the caller
        uses the result.
        """


__all__ = ["PlacementSpec", "ReplicaPlacer"]
