"""Unit tests of the simple (rack-unaware, Kafka classic) placer."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_tiers.api import BrokerInfo, ClusterView, InvalidReplicationFactorError, PlacementSpec
from kafka_tiers.placement.simple import SimplePlacer, classic_replicas
from kafka_tiers.placement.validation import validate_placement
from tests.placement.checks import counts, flat_cluster, spread, with_topic


def placer(seed: int | None = 11) -> SimplePlacer:
    p = SimplePlacer()
    p.configure({} if seed is None else {"seed": str(seed)})
    return p


def test_not_rack_aware() -> None:
    assert SimplePlacer.RACK_AWARE is False and SimplePlacer.MULTI_LEVEL is False


def test_classic_scheme_by_hand() -> None:
    ring = [10, 11, 12, 13, 14]
    # start 0, shift 0: partition 0 -> leader 10, followers 1 and 2 places on.
    assert classic_replicas(ring, 0, 3, 0, 0) == [10, 11, 12]
    assert classic_replicas(ring, 1, 3, 0, 0) == [11, 12, 13]
    assert classic_replicas(ring, 4, 3, 0, 0) == [14, 10, 11]
    # Second round: the shift grows by one, so followers move one further.
    assert classic_replicas(ring, 5, 3, 0, 0) == [10, 12, 13]
    assert classic_replicas(ring, 10, 3, 0, 0) == [10, 13, 14]
    # Shift wraps within n - 1, never landing on the leader.
    assert classic_replicas(ring, 15, 3, 0, 0) == [10, 14, 11]
    assert classic_replicas(ring, 0, 3, 2, 1) == [12, 14, 10]


def test_leaders_rotate_and_shift_grows() -> None:
    cluster = flat_cluster(1, 6, no_racks=True)
    result = placer().place(PlacementSpec(18, 3), cluster)
    leaders = [r[0] for r in result]
    assert all((leaders[i + 1] - leaders[i]) % 6 == 1 for i in range(17))
    gaps = [(r[1] - r[0]) % 6 for r in result]
    assert gaps[0] == gaps[5] and gaps[6] == gaps[11]
    assert gaps[6] == gaps[0] % 5 + 1
    replicas, lead = counts(result)
    assert spread(replicas, range(6)) == 0 and spread(lead, range(6)) == 0


def test_seed_determinism_and_randomness() -> None:
    cluster = flat_cluster(1, 7, no_racks=True)
    spec = PlacementSpec(7, 3)
    assert placer(1).place(spec, cluster) == placer(1).place(spec, cluster)
    assert len({str(placer(None).place(spec, cluster)) for _ in range(30)}) > 1


@pytest.mark.parametrize("split", [1, 4, 7, 9])
def test_added_partitions_continue_the_pattern(split: int) -> None:
    cluster = flat_cluster(2, 4)
    whole = placer(None).place(PlacementSpec(20, 3, topic="t"), cluster)
    # An unseeded placer reads the pattern from partition 0 and continues it.
    more = placer(None).place(
        PlacementSpec(20 - split, 3, start_partition=split, topic="t"),
        with_topic(cluster, "t", whole[:split]),
    )
    assert whole[:split] + more == whole


def test_seeded_start_partition_matches_one_call() -> None:
    cluster = flat_cluster(1, 5, no_racks=True)
    whole = placer().place(PlacementSpec(12, 2), cluster)
    assert placer().place(PlacementSpec(5, 2, start_partition=7), cluster) == whole[7:]


def test_fenced() -> None:
    cluster = flat_cluster(1, 5, fenced=[1, 3], no_racks=True)
    result = placer().place(PlacementSpec(10, 3), cluster)
    validate_placement(result, PlacementSpec(10, 3), cluster)
    assert all(not {1, 3} & set(r) for r in result)
    result = placer().place(PlacementSpec(10, 4), cluster)
    validate_placement(result, PlacementSpec(10, 4), cluster)
    leaders = Counter(r[0] for r in result)
    assert sorted(leaders) == [0, 2, 4] and max(leaders.values()) - min(leaders.values()) <= 1
    assert Counter(b for r in result for b in r if b in (1, 3)) == {1: 5, 3: 5}
    assert all({0, 2, 4} <= set(r) for r in result)


def test_refusals() -> None:
    cluster = ClusterView([BrokerInfo(0, fenced=True), BrokerInfo(1, fenced=True)])
    with pytest.raises(InvalidReplicationFactorError, match="no unfenced broker among the 2"):
        placer().place(PlacementSpec(1, 1), cluster)
    with pytest.raises(InvalidReplicationFactorError, match="3 is larger than the 2"):
        placer().place(PlacementSpec(1, 3), cluster)
    with pytest.raises(InvalidReplicationFactorError) as info:
        placer().place(PlacementSpec(1, 0), cluster)
    assert info.value.replication_factor == 0 and info.value.available_brokers == 2


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 40), st.integers(0, 99))
def test_property_valid_and_leaders_even(n: int, rf: int, partitions: int, seed: int) -> None:
    cluster = flat_cluster(1, n, no_racks=True)
    spec = PlacementSpec(partitions, rf)
    if rf > n:
        with pytest.raises(InvalidReplicationFactorError):
            placer(seed).place(spec, cluster)
        return
    result = placer(seed).place(spec, cluster)
    validate_placement(result, spec, cluster)
    _, leaders = counts(result)
    assert spread(leaders, range(n)) <= 1
