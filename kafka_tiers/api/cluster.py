"""What a plugin can see of the cluster: partitions, brokers and the current assignments."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from kafka_tiers.api.errors import InvalidClusterError


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """One partition of one topic. Ordered by topic, then partition number.

    Raises:
        ValueError: ``partition`` is negative or not an int, or ``topic`` is empty.
    """

    topic: str
    partition: int

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not self.topic:
            raise ValueError(f"topic must be a non-empty string, got {self.topic!r}")
        if isinstance(self.partition, bool) or not isinstance(self.partition, int):
            raise ValueError(f"partition must be an int, got {self.partition!r}")
        if self.partition < 0:
            raise ValueError(f"partition must be >= 0, got {self.partition}")

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What a placer may consider about one broker.

    Attributes:
        broker_id: the broker's id (>= 0).
        rack: the broker's ``broker.rack`` (a name, or a path like ``/dc1/rack2`` for multi-level
            racks), or None when the broker has none.
        fenced: True when the broker is registered but fenced (not caught up with metadata, or
            shutting down); fenced brokers may only be followers, and only when needed.
        attributes: free-form string facts a custom placer may use (disk type, zone, load).
    """

    broker_id: int
    rack: str | None = None
    fenced: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.broker_id, bool) or not isinstance(self.broker_id, int):
            raise InvalidClusterError(f"broker id must be an int, got {self.broker_id!r}")
        if self.broker_id < 0:
            raise InvalidClusterError(f"broker id must be >= 0, got {self.broker_id}")
        if self.rack is not None and (not isinstance(self.rack, str) or not self.rack.strip()):
            raise InvalidClusterError(
                f"broker {self.broker_id}: rack must be a non-empty string or None, "
                f"got {self.rack!r}"
            )
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))


class ClusterView:
    """An immutable view of the cluster for placement: the brokers and the current assignments.

    Args:
        brokers: every registered broker, fenced ones included. Ids must be unique.
        assignments: the current replica lists by partition (``replicas[0]`` is the preferred
            leader); may name brokers that are no longer registered.

    Raises:
        InvalidClusterError: duplicate broker ids, or an assignment that is not a list of ints.
    """

    def __init__(
        self,
        brokers: Iterable[BrokerInfo],
        assignments: Mapping[TopicPartition, Sequence[int]] | None = None,
    ) -> None:
        by_id: dict[int, BrokerInfo] = {}
        for broker in brokers:
            if not isinstance(broker, BrokerInfo):
                raise InvalidClusterError(f"expected BrokerInfo, got {type(broker).__name__}")
            if broker.broker_id in by_id:
                raise InvalidClusterError(f"duplicate broker id {broker.broker_id}")
            by_id[broker.broker_id] = broker
        self._by_id = by_id
        self._brokers = tuple(by_id[b] for b in sorted(by_id))
        clean: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, replicas in (assignments or {}).items():
            if not isinstance(tp, TopicPartition):
                raise InvalidClusterError(f"assignment key must be a TopicPartition, got {tp!r}")
            reps = tuple(replicas)
            if any(isinstance(r, bool) or not isinstance(r, int) for r in reps):
                raise InvalidClusterError(f"{tp}: replicas must be broker ids, got {list(reps)}")
            clean[tp] = reps
        self._assignments = MappingProxyType(clean)

    @property
    def brokers(self) -> tuple[BrokerInfo, ...]:
        """Every registered broker, fenced included, sorted by id."""
        return self._brokers

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """The ids of every registered broker, sorted."""
        return tuple(b.broker_id for b in self._brokers)

    @cached_property
    def usable_brokers(self) -> tuple[BrokerInfo, ...]:
        """The unfenced brokers, sorted by id: the ones that may lead."""
        return tuple(b for b in self._brokers if not b.fenced)

    def broker(self, broker_id: int) -> BrokerInfo:
        """The broker with this id. Raises ``KeyError`` when there is none."""
        return self._by_id[broker_id]

    def __contains__(self, broker_id: object) -> bool:
        return broker_id in self._by_id

    def __len__(self) -> int:
        return len(self._brokers)

    def rack_of(self, broker_id: int) -> str | None:
        """The rack of a broker, or None when it has none. Raises ``KeyError`` if unknown."""
        return self._by_id[broker_id].rack

    @cached_property
    def racks(self) -> Mapping[str, tuple[int, ...]]:
        """Rack name -> ids of its brokers (sorted), for brokers that have a rack."""
        out: dict[str, list[int]] = {}
        for b in self._brokers:
            if b.rack is not None:
                out.setdefault(b.rack, []).append(b.broker_id)
        return MappingProxyType({r: tuple(ids) for r, ids in sorted(out.items())})

    @property
    def has_racks(self) -> bool:
        """True when at least one broker has a rack."""
        return bool(self.racks)

    @property
    def assignments(self) -> Mapping[TopicPartition, tuple[int, ...]]:
        """The current ``TopicPartition -> replicas`` assignments (read-only)."""
        return self._assignments

    def topic_assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        """The current assignment of one topic: partition number -> replicas."""
        return {tp.partition: r for tp, r in self._assignments.items() if tp.topic == topic}

    def replica_counts(self) -> dict[int, int]:
        """Replicas hosted per broker over every assignment; every registered broker appears,
        brokers no longer registered appear only when they still hold replicas."""
        counts = {b.broker_id: 0 for b in self._brokers}
        for replicas in self._assignments.values():
            for r in replicas:
                counts[r] = counts.get(r, 0) + 1
        return counts

    def leader_counts(self) -> dict[int, int]:
        """Preferred leaders (first replicas) per broker, as :meth:`replica_counts`."""
        counts = {b.broker_id: 0 for b in self._brokers}
        for replicas in self._assignments.values():
            if replicas:
                counts[replicas[0]] = counts.get(replicas[0], 0) + 1
        return counts

    def with_assignments(
        self, assignments: Mapping[TopicPartition, Sequence[int]]
    ) -> ClusterView:
        """A new view with these assignments added (replacing the same partitions)."""
        merged: dict[TopicPartition, Sequence[int]] = dict(self._assignments)
        merged.update(assignments)
        return ClusterView(self._brokers, merged)

    def __repr__(self) -> str:
        return (
            f"ClusterView(brokers={len(self._brokers)}, racks={len(self.racks)}, "
            f"assignments={len(self._assignments)})"
        )


__all__ = ["BrokerInfo", "ClusterView", "TopicPartition"]
