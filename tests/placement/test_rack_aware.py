"""Unit and property tests of the rack-aware placer."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_tiers.api import (
    BrokerInfo,
    ClusterView,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementSpec,
    TopicPartition,
)
from kafka_tiers.placement.rack_aware import RackAwarePlacer
from kafka_tiers.placement.validation import validate_placement
from tests.placement.checks import (
    check_domain_rules,
    counts,
    flat_cluster,
    pool,
    spread,
    with_topic,
)


def placer(seed: int | None = 7) -> RackAwarePlacer:
    p = RackAwarePlacer()
    p.configure({} if seed is None else {"seed": str(seed)})
    return p


def test_declares_rack_awareness() -> None:
    assert RackAwarePlacer.RACK_AWARE is True
    assert RackAwarePlacer.MULTI_LEVEL is False


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("partitions", [4, 8, 12, 16, 100])
def test_four_brokers_two_racks_leaders_balanced(seed: int, partitions: int) -> None:
    # Kafka's striped placer can give leader counts differing by 4 here.
    cluster = flat_cluster(2, 2)
    result = placer(seed).place(PlacementSpec(partitions, 2), cluster)
    replicas, leaders = counts(result)
    assert spread(leaders, range(4)) <= 1
    assert spread(replicas, range(4)) <= 1
    check_domain_rules(result, cluster, range(4), None)


def test_four_brokers_two_racks_rf3() -> None:
    cluster = flat_cluster(2, 2)
    result = placer().place(PlacementSpec(40, 3), cluster)
    replicas, leaders = counts(result)
    assert spread(leaders, range(4)) == 0
    assert spread(replicas, range(4)) == 0
    check_domain_rules(result, cluster, range(4), None)


def test_deterministic_for_a_seed() -> None:
    cluster = flat_cluster(3, 4)
    spec = PlacementSpec(30, 3, topic="t")
    assert placer(3).place(spec, cluster) == placer(3).place(spec, cluster)
    others = {str(placer(s).place(spec, cluster)) for s in range(10)}
    assert len(others) > 1


def test_unseeded_is_random() -> None:
    cluster = flat_cluster(3, 4)
    spec = PlacementSpec(6, 3)
    results = {str(placer(None).place(spec, cluster)) for _ in range(20)}
    assert len(results) > 1


def test_different_topics_start_differently() -> None:
    cluster = flat_cluster(4, 5)
    a = placer(1).place(PlacementSpec(1, 3, topic="a"), cluster)
    starts = {placer(1).place(PlacementSpec(1, 3, topic=t), cluster)[0][0] for t in "abcdefgh"}
    assert a[0][0] in starts and len(starts) > 1


def test_two_calls_equal_one_call() -> None:
    cluster = flat_cluster(3, 3)
    whole = placer().place(PlacementSpec(20, 3, topic="t"), cluster)
    first = placer().place(PlacementSpec(7, 3, topic="t"), cluster)
    assert first == whole[:7]
    second = placer().place(
        PlacementSpec(13, 3, start_partition=7, topic="t"), with_topic(cluster, "t", first)
    )
    assert first + second == whole


@pytest.mark.parametrize("seed", range(10))
def test_two_calls_balanced_even_unseeded_and_uneven_split(seed: int) -> None:
    cluster = flat_cluster(2, 3)
    first = placer(None).place(PlacementSpec(5, 2, topic="t"), cluster)
    after = with_topic(cluster, "t", first)
    second = placer(seed).place(PlacementSpec(7, 2, start_partition=5, topic="t"), after)
    replicas, leaders = counts(first + second)
    assert spread(replicas, range(6)) == 0
    assert spread(leaders, range(6)) == 0


def test_other_topics_break_ties_only() -> None:
    cluster = flat_cluster(2, 4)
    busy = {TopicPartition("other", i): [0, 1] for i in range(10)}
    loaded = cluster.with_assignments(busy)
    result = placer().place(PlacementSpec(2, 2, topic="t"), loaded)
    used = {b for reps in result for b in reps}
    assert not used & {0, 1}
    many = placer().place(PlacementSpec(16, 2, topic="t"), loaded)
    replicas, leaders = counts(many)
    assert spread(replicas, range(8)) == 0 and spread(leaders, range(8)) == 0


def test_replaced_partitions_do_not_count() -> None:
    cluster = flat_cluster(2, 2)
    old = {TopicPartition("t", i): [0, 1] for i in range(4)}
    result = placer().place(PlacementSpec(4, 2, topic="t"), cluster.with_assignments(old))
    replicas, leaders = counts(result)
    assert spread(replicas, range(4)) == 0 and spread(leaders, range(4)) == 0


def test_no_racks_is_one_rack() -> None:
    cluster = flat_cluster(1, 5, no_racks=True)
    result = placer().place(PlacementSpec(10, 3), cluster)
    replicas, leaders = counts(result)
    assert spread(replicas, range(5)) == 0 and spread(leaders, range(5)) == 0


def test_mixed_racks_refused_naming_brokers() -> None:
    cluster = ClusterView([BrokerInfo(0, "a"), BrokerInfo(1, None), BrokerInfo(2, "b"),
                           BrokerInfo(3, None)])
    with pytest.raises(InvalidReplicaAssignmentError, match="without a rack: 1, 3"):
        placer().place(PlacementSpec(1, 2), cluster)
    # Only the allowed brokers matter.
    assert placer().place(PlacementSpec(2, 2), cluster, [0, 2])


@pytest.mark.parametrize(
    ("rf", "ids", "match"),
    [
        (0, None, "at least 1"),
        (-1, None, "at least 1"),
        (5, None, "replication factor 5 is larger than the 4 registered brokers"),
        (3, [0, 1], "replication factor 3 is larger than the 2 registered brokers in broker_ids"),
    ],
)
def test_impossible_factor(rf: int, ids: list[int] | None, match: str) -> None:
    with pytest.raises(InvalidReplicationFactorError, match=match):
        placer().place(PlacementSpec(1, rf), flat_cluster(2, 2), ids)


def test_all_fenced_refused() -> None:
    cluster = flat_cluster(2, 2, fenced=[0, 1, 2, 3])
    with pytest.raises(InvalidReplicationFactorError, match="no unfenced broker"):
        placer().place(PlacementSpec(1, 1), cluster)


def test_fenced_never_lead_and_follow_only_when_needed() -> None:
    cluster = flat_cluster(2, 3, fenced=[0, 1, 2, 4])  # unfenced: 3, 5
    result = placer().place(PlacementSpec(10, 3), cluster)
    validate_placement(result, PlacementSpec(10, 3), cluster)
    for reps in result:
        assert set(reps[:1]) <= {3, 5}
        assert {3, 5} <= set(reps)
    leaders = Counter(r[0] for r in result)
    assert leaders[3] == leaders[5] == 5
    two = placer().place(PlacementSpec(10, 2), cluster)
    assert all(set(r) == {3, 5} for r in two)


def test_fenced_followers_cover_other_racks() -> None:
    # Only broker 0 (rack r0) is unfenced: the two fenced followers go to r1 and r2.
    cluster = flat_cluster(3, 3, fenced=[1, 2, 3, 4, 5, 6, 7, 8])
    result = placer().place(PlacementSpec(12, 3), cluster)
    validate_placement(result, PlacementSpec(12, 3), cluster)
    for reps in result:
        assert reps[0] == 0
        assert sorted(cluster.rack_of(b) for b in reps) == ["r0", "r1", "r2"]
    replicas, _ = counts(result)
    assert spread(replicas, [1, 2, 4, 5, 7, 8]) == 0  # fenced followers dealt evenly


def test_fenced_rack_judged_cluster_wide() -> None:
    # Rack r0 has only fenced brokers: with enough unfenced elsewhere they are not used,
    # even though the partition then spans one rack fewer.
    cluster = ClusterView([BrokerInfo(0, "r0", fenced=True), BrokerInfo(1, "r1"),
                           BrokerInfo(2, "r1"), BrokerInfo(3, "r2"), BrokerInfo(4, "r2")])
    result = placer().place(PlacementSpec(8, 3), cluster)
    assert all(0 not in reps for reps in result)


def test_broker_subset() -> None:
    cluster = flat_cluster(3, 4)
    ids = [0, 1, 2, 3, 4, 5, 99]
    result = placer().place(PlacementSpec(12, 3), cluster, ids)
    assert {b for r in result for b in r} == set(range(6))
    check_domain_rules(result, cluster, range(6), None)


def test_unequal_racks_follow_rack_rule_then_balance() -> None:
    # Rack a: 4 brokers, rack b: 2 brokers. RF 2: every partition has one replica in each rack,
    # so b's brokers carry twice as many as a's; within each rack the load is even.
    cluster = ClusterView([BrokerInfo(i, "a") for i in range(4)] +
                          [BrokerInfo(i, "b") for i in range(4, 6)])
    result = placer().place(PlacementSpec(8, 2), cluster)
    replicas, leaders = counts(result)
    assert [replicas[i] for i in range(6)] == [2, 2, 2, 2, 4, 4]
    assert spread(leaders, range(6)) <= 1
    check_domain_rules(result, cluster, range(6), None)


def test_rf_above_racks_spreads_evenly_with_capacity() -> None:
    # Racks of 3 and 1: RF 4 needs 3 replicas in the big rack (the small one has 1 broker).
    cluster = ClusterView([BrokerInfo(0, "a"), BrokerInfo(1, "a"), BrokerInfo(2, "a"),
                           BrokerInfo(3, "b")])
    result = placer().place(PlacementSpec(4, 4), cluster)
    assert all(sorted(r) == [0, 1, 2, 3] for r in result)
    assert spread(Counter(r[0] for r in result), range(4)) == 0


def test_zero_partitions() -> None:
    assert placer().place(PlacementSpec(0, 2), flat_cluster(2, 2)) == []


def test_cluster_not_modified() -> None:
    cluster = with_topic(flat_cluster(2, 2), "t", [[0, 1]])
    before = dict(cluster.assignments)
    placer().place(PlacementSpec(3, 2, start_partition=1, topic="t"), cluster)
    assert dict(cluster.assignments) == before


@st.composite
def flat_cases(draw):
    racks = draw(st.integers(1, 6))
    per_rack = draw(st.integers(1, 5))
    n = racks * per_rack
    rf = draw(st.integers(1, min(n, 7)))
    partitions = draw(st.integers(0, 3 * n + 2))
    split = draw(st.integers(0, partitions))
    seed = draw(st.integers(0, 1000))
    return racks, per_rack, rf, partitions, split, seed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_cases())
def test_property_equal_racks(case) -> None:
    racks, per_rack, rf, partitions, split, seed = case
    cluster = flat_cluster(racks, per_rack)
    n = racks * per_rack
    spec = PlacementSpec(partitions, rf, topic="t")
    result = placer(seed).place(spec, cluster)
    validate_placement(result, spec, cluster, placer_name="rack-aware")
    check_domain_rules(result, cluster, range(n), None)
    replicas, leaders = counts(result)
    # Equal racks: balanced per broker for every partition count, divisible or not.
    assert spread(leaders, range(n)) <= 1
    assert spread(replicas, range(n)) <= 1
    # Placing in two calls is exactly as balanced (and with the same seed, identical).
    first = placer(seed).place(PlacementSpec(split, rf, topic="t"), cluster)
    second = placer(seed).place(
        PlacementSpec(partitions - split, rf, start_partition=split, topic="t"),
        with_topic(cluster, "t", first),
    )
    assert first + second == result


@st.composite
def messy_cases(draw):
    n = draw(st.integers(1, 14))
    rack_count = draw(st.integers(1, 4))
    racks = [draw(st.integers(0, rack_count - 1)) for _ in range(n)]
    fenced = [draw(st.booleans()) for _ in range(n)]
    if all(fenced):
        fenced[draw(st.integers(0, n - 1))] = False
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(0, 20))
    subset = draw(st.none() | st.lists(st.integers(0, n + 2), min_size=1, unique=True))
    seed = draw(st.integers(0, 50))
    return n, racks, fenced, rf, partitions, subset, seed


@settings(max_examples=300, deadline=None)
@given(messy_cases())
def test_property_any_cluster(case) -> None:
    n, racks, fenced, rf, partitions, subset, seed = case
    cluster = ClusterView(BrokerInfo(i, f"r{racks[i]}", fenced=fenced[i]) for i in range(n))
    spec = PlacementSpec(partitions, rf)
    allowed = [b for b in cluster.brokers if subset is None or b.broker_id in subset]
    if rf > len(allowed) or all(b.fenced for b in allowed):
        with pytest.raises(InvalidReplicationFactorError):
            placer(seed).place(spec, cluster, subset)
        return
    result = placer(seed).place(spec, cluster, subset)
    validate_placement(result, spec, cluster, subset, placer_name="rack-aware")
    used = pool(cluster, spec, subset)
    unfenced = [b for b in used if not cluster.broker(b).fenced]
    if len(unfenced) >= rf:
        # Spread over the racks of the brokers used, as even as rack sizes allow.
        racks_used = Counter(cluster.rack_of(b) for b in used)
        for reps in result:
            per = Counter(cluster.rack_of(b) for b in reps)
            assert len(per) == min(len(racks_used), rf), (reps, dict(per))
            # As even as capacity allows: a rack two below another is full.
            for r in racks_used:
                if per[r] + 1 < max(per.values()):
                    assert per[r] == racks_used[r], (reps, dict(per))
        replicas, leaders = counts(result)
        assert spread(leaders, unfenced) <= 1
        for rack in racks_used:  # even within each rack, whatever the rack sizes
            assert spread(replicas, [b for b in used if cluster.rack_of(b) == rack]) <= 1
    else:
        for reps in result:
            assert set(unfenced) <= set(reps)
