"""Tests of placer configuration and registration."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from kafka_tiers.api import ConfigError, PlacementSpec, ReplicaPlacer
from kafka_tiers.placement.multi_level_rack import MultiLevelRackPlacer
from kafka_tiers.placement.rack_aware import RackAwarePlacer
from kafka_tiers.placement.seeding import make_rng, parse_seed
from kafka_tiers.placement.simple import SimplePlacer
from tests.placement.checks import flat_cluster

PLACERS = [SimplePlacer, RackAwarePlacer, MultiLevelRackPlacer]


def test_entry_points_resolve() -> None:
    eps = {ep.name: ep for ep in entry_points(group="kafka_tiers.replica_placer")}
    assert eps["simple"].load() is SimplePlacer
    assert eps["rack-aware"].load() is RackAwarePlacer
    assert eps["multi-level-rack"].load() is MultiLevelRackPlacer


@pytest.mark.parametrize("cls", PLACERS)
def test_seed_config(cls) -> None:
    p = cls()
    assert isinstance(p, ReplicaPlacer)
    p.configure({"seed": " 7 "})
    assert p.seed == 7
    p.configure({})
    assert p.seed is None
    for bad in ("x", "1.5", ""):
        with pytest.raises(ConfigError, match="'seed' must be an integer") as info:
            p.configure({"seed": bad})
        assert info.value.key == "seed"
    with pytest.raises(ConfigError, match="unknown replica placer setting 'sead'") as info:
        p.configure({"sead": "7"})
    assert info.value.key == "sead"
    with cls() as q:
        assert q.seed is None


def test_parse_seed_and_rng() -> None:
    assert parse_seed({"seed": "-3"}) == -3
    assert parse_seed({"x": "1"}, known=frozenset({"x"})) is None
    assert make_rng(1, "a").random() == make_rng(1, "a").random()
    assert make_rng(1, "a").random() != make_rng(1, "b").random()


@pytest.mark.parametrize("cls", [RackAwarePlacer, SimplePlacer])
def test_same_seed_same_result_across_instances(cls) -> None:
    a, b = cls(), cls()
    a.configure({"seed": "42"})
    b.configure({"seed": "42"})
    spec = PlacementSpec(9, 2, topic="t")
    assert a.place(spec, flat_cluster(3, 3)) == b.place(spec, flat_cluster(3, 3))
