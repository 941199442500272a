"""Tests of the create-replica-placement admin operation (document 001)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kafka_tiers.api import (
    ClusterView,
    ConfigError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementSpec,
    PluginError,
    ReplicaPlacer,
)
from kafka_tiers.placement.admin import create_replica_placement
from kafka_tiers.placement.multi_level_rack import MultiLevelRackPlacer
from kafka_tiers.placement.rack_aware import RackAwarePlacer
from kafka_tiers.placement.simple import SimplePlacer
from tests.placement.checks import flat_cluster, tree_cluster


class Deferring(ReplicaPlacer):
    seed = 3

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> None:
        return None


class Crashing(ReplicaPlacer):
    def place(self, spec, cluster, broker_ids=None):
        raise KeyError("boom")


class Broken(ReplicaPlacer):
    def place(self, spec, cluster, broker_ids=None):
        return [[0, 0]] * spec.num_partitions


class Refusing(ReplicaPlacer):
    def place(self, spec, cluster, broker_ids=None):
        raise InvalidReplicaAssignmentError("no", placer="refusing")


def seeded(cls, seed=9):
    p = cls()
    p.configure({"seed": str(seed)})
    return p


def test_uses_the_configured_placer() -> None:
    cluster = tree_cluster((2, 2, 2))
    placer = seeded(MultiLevelRackPlacer)
    got = create_replica_placement(cluster, 6, 2, placer=placer, topic="t")
    assert got == placer.place(PlacementSpec(6, 2, topic="t"), cluster)


def test_force_simple_uses_same_seed() -> None:
    cluster = flat_cluster(2, 3)
    got = create_replica_placement(cluster, 6, 3, placer=seeded(RackAwarePlacer, 4),
                                   force_simple=True)
    assert got == seeded(SimplePlacer, 4).place(PlacementSpec(6, 3), cluster)


def test_no_placer_or_forced_uses_seed_argument() -> None:
    cluster = flat_cluster(2, 3)
    want = seeded(SimplePlacer, 8).place(PlacementSpec(6, 2, topic="t"), cluster)
    assert create_replica_placement(cluster, 6, 2, placer=None, seed="8", topic="t") == want
    assert create_replica_placement(cluster, 6, 2, placer=Crashing(), force_simple=True,
                                    seed=8, topic="t") == want
    with pytest.raises(ConfigError) as info:
        create_replica_placement(cluster, 6, 2, placer=None, seed="x")
    assert info.value.key == "seed"


def test_none_defers_to_simple() -> None:
    cluster = flat_cluster(2, 3)
    got = create_replica_placement(cluster, 5, 2, placer=Deferring(), start_partition=2)
    assert got == seeded(SimplePlacer, 3).place(PlacementSpec(5, 2, start_partition=2), cluster)


def test_broker_subset_and_factor_checked_against_it() -> None:
    cluster = flat_cluster(2, 3)
    got = create_replica_placement(cluster, 4, 2, placer=seeded(RackAwarePlacer),
                                   broker_ids=[0, 1, 2, 3])
    assert {b for r in got for b in r} <= {0, 1, 2, 3}
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 2"):
        create_replica_placement(cluster, 4, 3, placer=seeded(RackAwarePlacer),
                                 broker_ids=[0, 1])


def test_foreign_exception_becomes_plugin_error() -> None:
    with pytest.raises(PluginError, match="Crashing failed: KeyError") as info:
        create_replica_placement(flat_cluster(1, 3), 1, 1, placer=Crashing())
    assert info.value.plugin == "Crashing"
    assert isinstance(info.value.__cause__, KeyError)


def test_invalid_result_names_placer() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="placer Broken: partition 0"):
        create_replica_placement(flat_cluster(1, 3), 2, 2, placer=Broken())


def test_kafka_tiers_errors_pass_through() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="no"):
        create_replica_placement(flat_cluster(1, 3), 2, 2, placer=Refusing())


def test_bad_spec() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        create_replica_placement(flat_cluster(1, 3), -1, 2, placer=SimplePlacer())
