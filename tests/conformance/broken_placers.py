"""Deliberately broken placers: each breaks one rule, to show the suite can fail and names the
rule. Each wraps a working placer and corrupts its answer in one way."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import ClassVar

from kafka_tiers.api import ClusterView, InvalidReplicationFactorError, PlacementSpec
from kafka_tiers.placement.rack_aware import RackAwarePlacer
from kafka_tiers.placement.simple import SimplePlacer


class Duplicates(RackAwarePlacer):
    """Repeats the leader in the last partition's replica list (distinct-replicas)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        out = super().place(spec, cluster, broker_ids)
        if out and spec.replication_factor >= 2:
            out[-1][1] = out[-1][0]
        return out


class WrongReplicationFactor(RackAwarePlacer):
    """Drops the last replica whenever RF >= 2 (replication-factor)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        out = super().place(spec, cluster, broker_ids)
        if out and spec.replication_factor >= 2:
            out = [r[:-1] for r in out]
        return out


class FencedLeader(RackAwarePlacer):
    """Makes a fenced replica the leader when one is in the partition (unfenced-leader)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        out = super().place(spec, cluster, broker_ids) or []
        for reps in out:
            fenced = [b for b in reps if cluster.broker(b).fenced]
            if fenced:
                reps.remove(fenced[0])
                reps.insert(0, fenced[0])
        return out


class IgnoresSubset(RackAwarePlacer):
    """Places on every registered broker, whatever ``broker_ids`` says (allowed-brokers)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        return super().place(spec, cluster, None)


class NonDeterministic(RackAwarePlacer):
    """Shuffles the partitions with an unseeded random generator (deterministic-seed)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        out = super().place(spec, cluster, broker_ids) or []
        random.SystemRandom().shuffle(out)
        return out


class HiddenState(RackAwarePlacer):
    """Rotates the partitions by how many calls it has answered (no-hidden-state)."""

    def __init__(self) -> None:
        super().__init__()
        self._calls = itertools.count()

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        out = super().place(spec, cluster, broker_ids) or []
        k = next(self._calls) % max(1, len(out))
        return out[k:] + out[:k]


class WrongError(RackAwarePlacer):
    """Raises ValueError instead of InvalidReplicationFactorError (refuses-* rules)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        try:
            return super().place(spec, cluster, broker_ids)
        except InvalidReplicationFactorError as exc:
            raise ValueError(str(exc)) from None


class RackUnawareClaimsRackAware(SimplePlacer):
    """The rack-unaware classic scheme declaring RACK_AWARE (rack-span, rack-even)."""

    RACK_AWARE: ClassVar[bool] = True


class LeaderSkew(RackAwarePlacer):
    """Leads every partition by its lowest-id unfenced replica (leader-balance)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        out = super().place(spec, cluster, broker_ids) or []
        for reps in out:
            lead = min(b for b in reps if not cluster.broker(b).fenced)
            reps.remove(lead)
            reps.insert(0, lead)
        return out


class FlatClaimsMultiLevel(RackAwarePlacer):
    """A one-level rack-aware placer declaring MULTI_LEVEL (level rules)."""

    MULTI_LEVEL: ClassVar[bool] = True


__all__ = [
    "Duplicates",
    "FencedLeader",
    "FlatClaimsMultiLevel",
    "HiddenState",
    "IgnoresSubset",
    "LeaderSkew",
    "NonDeterministic",
    "RackUnawareClaimsRackAware",
    "WrongError",
    "WrongReplicationFactor",
]
