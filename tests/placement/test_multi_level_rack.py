"""Unit and property tests of the multi-level rack placer and the rack tree."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_tiers.api import (
    BrokerInfo,
    ClusterView,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementSpec,
)
from kafka_tiers.placement.multi_level_rack import MultiLevelRackPlacer
from kafka_tiers.placement.rack_tree import RackTree, parse_rack_path
from kafka_tiers.placement.validation import validate_placement
from tests.placement.checks import (
    check_domain_rules,
    counts,
    domain_of,
    spread,
    tree_cluster,
    with_topic,
)


def placer(seed: int | None = 5) -> MultiLevelRackPlacer:
    p = MultiLevelRackPlacer()
    p.configure({} if seed is None else {"seed": str(seed)})
    return p


def test_declarations() -> None:
    assert MultiLevelRackPlacer.RACK_AWARE is True
    assert MultiLevelRackPlacer.MULTI_LEVEL is True


@pytest.mark.parametrize(
    ("rack", "parts"),
    [("/dc1", ("dc1",)), ("/dc1/rack2", ("dc1", "rack2")), ("/a/b/c/d", ("a", "b", "c", "d"))],
)
def test_parse_rack_path(rack: str, parts: tuple[str, ...]) -> None:
    assert parse_rack_path(rack) == parts


@pytest.mark.parametrize(
    ("rack", "match"),
    [
        ("dc1/rack2", "must start with '/'"),
        ("/", "names the root"),
        ("/dc1/", "must not end with '/'"),
        ("/dc1//r1", "empty component"),
        ("/dc 1/r1", "whitespace"),
    ],
)
def test_parse_rack_path_refuses(rack: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_rack_path(rack)


def test_tree_refuses_missing_malformed_and_mixed_depths() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="without a rack: 1"):
        RackTree.from_brokers([BrokerInfo(0, "/a/b"), BrokerInfo(1)])
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 1: rack path 'x'"):
        RackTree.from_brokers([BrokerInfo(0, "/a/b"), BrokerInfo(1, "x")])
    with pytest.raises(InvalidReplicaAssignmentError,
                       match=r"depth 1: brokers 1; depth 2: brokers 0"):
        RackTree.from_brokers([BrokerInfo(0, "/a/b"), BrokerInfo(1, "/a")])


def test_tree_domains() -> None:
    tree = RackTree.from_brokers(tree_cluster((2, 2, 2)).brokers)
    assert tree.depth == 2
    assert tree.domain(0, 1) == "/d0" and tree.domain(0, 2) == "/d0/r0"
    assert tree.domains(1) == {"/d0": (0, 1, 4, 5), "/d1": (2, 3, 6, 7)}
    assert len(tree.domains(2)) == 4
    with pytest.raises(ValueError):
        tree.domain(0, 3)


def test_placer_refuses_bad_racks_naming_brokers() -> None:
    cluster = ClusterView([BrokerInfo(0, "/d1/r1"), BrokerInfo(1, "/d1/r2"),
                           BrokerInfo(2, "rack3"), BrokerInfo(3, None)])
    with pytest.raises(InvalidReplicaAssignmentError, match=r"rack.*without a rack: 3") as info:
        placer().place(PlacementSpec(1, 2), cluster)
    assert info.value.placer == "multi-level-rack"
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 2"):
        placer().place(PlacementSpec(1, 2), cluster, [0, 1, 2])
    assert placer().place(PlacementSpec(2, 2), cluster, [0, 1]) in ([[0, 1]] * 2,
                                                                    [[0, 1], [1, 0]],
                                                                    [[1, 0], [0, 1]],
                                                                    [[1, 0]] * 2)


def test_impossible_factor() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 8"):
        placer().place(PlacementSpec(1, 9), tree_cluster((2, 2, 2)))


def test_document_example_three_dcs_two_racks() -> None:
    cluster = tree_cluster((3, 2, 2))  # 3 DCs x 2 racks x 2 brokers
    result = placer().place(PlacementSpec(12, 3), cluster)
    for reps in result:
        assert len({domain_of(cluster, b, 1) for b in reps}) == 3
    replicas, leaders = counts(result)
    assert spread(replicas, range(12)) == 0 and spread(leaders, range(12)) == 0


def test_rf_above_top_level_spreads_lower_levels() -> None:
    cluster = tree_cluster((2, 3, 2))  # 2 DCs x 3 racks x 2 brokers
    result = placer().place(PlacementSpec(24, 5), cluster)
    check_domain_rules(result, cluster, range(12), 1)
    check_domain_rules(result, cluster, range(12), 2)
    for reps in result:
        assert len({domain_of(cluster, b, 2) for b in reps}) == 5


def test_two_calls_equal_one_call() -> None:
    cluster = tree_cluster((3, 2, 3))
    whole = placer().place(PlacementSpec(25, 3, topic="t"), cluster)
    first = placer().place(PlacementSpec(11, 3, topic="t"), cluster)
    second = placer().place(PlacementSpec(14, 3, start_partition=11, topic="t"),
                            with_topic(cluster, "t", first))
    assert first + second == whole


def test_fenced_brokers() -> None:
    cluster = tree_cluster((2, 2, 2), fenced=[0, 1, 2])
    result = placer().place(PlacementSpec(10, 2), cluster)
    validate_placement(result, PlacementSpec(10, 2), cluster)
    assert all(not ({0, 1, 2} & set(r)) for r in result)
    few = tree_cluster((2, 2, 1), fenced=[0, 1, 2])  # one unfenced broker: 3
    result = placer().place(PlacementSpec(4, 3), few)
    assert all(r[0] == 3 for r in result)
    validate_placement(result, PlacementSpec(4, 3), few)


def fair_share_ok(result, cluster, brokers, level) -> None:
    domains = Counter(domain_of(cluster, b, level) for b in brokers)
    got = Counter(domain_of(cluster, b, level) for reps in result for b in reps)
    total = sum(len(r) for r in result)
    for d, size in domains.items():
        fair = total * size / len(brokers)
        assert math.floor(fair) <= got[d] <= math.ceil(fair), (level, d, got[d], fair)


@st.composite
def tree_cases(draw):
    depth = draw(st.integers(1, 3))
    shape = (*(draw(st.integers(1, 4)) for _ in range(depth)), draw(st.integers(1, 3)))
    n = math.prod(shape)
    rf = draw(st.integers(1, min(n, 6)))
    partitions = draw(st.integers(0, 2 * n + 3))
    split = draw(st.integers(0, partitions))
    return shape, rf, partitions, split, draw(st.integers(0, 1000))


@settings(max_examples=250, deadline=None)
@given(tree_cases())
def test_property_even_trees(case) -> None:
    shape, rf, partitions, split, seed = case
    cluster = tree_cluster(shape)
    n = len(cluster)
    spec = PlacementSpec(partitions, rf, topic="t")
    result = placer(seed).place(spec, cluster)
    validate_placement(result, spec, cluster, placer_name="multi-level-rack")
    for level in range(1, len(shape)):
        check_domain_rules(result, cluster, range(n), level)
        fair_share_ok(result, cluster, range(n), level)
    replicas, leaders = counts(result)
    assert spread(replicas, range(n)) <= 1
    assert spread(leaders, range(n)) <= 1
    first = placer(seed).place(PlacementSpec(split, rf, topic="t"), cluster)
    second = placer(seed).place(
        PlacementSpec(partitions - split, rf, start_partition=split, topic="t"),
        with_topic(cluster, "t", first),
    )
    assert first + second == result


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=14),
    st.integers(1, 6),
    st.integers(0, 30),
    st.integers(0, 100),
)
def test_property_uneven_trees(racks, rf, partitions, seed) -> None:
    cluster = ClusterView(BrokerInfo(i, f"/d{d}/r{r}") for i, (d, r) in enumerate(racks))
    n = len(racks)
    spec = PlacementSpec(partitions, rf)
    if rf > n:
        with pytest.raises(InvalidReplicationFactorError):
            placer(seed).place(spec, cluster)
        return
    result = placer(seed).place(spec, cluster)
    validate_placement(result, spec, cluster)
    dcs = Counter(domain_of(cluster, b, 1) for b in range(n))
    for reps in result:
        per = Counter(domain_of(cluster, b, 1) for b in reps)
        assert len(per) == min(len(dcs), rf)
        for d in dcs:  # a data centre two below another is full
            if per[d] + 1 < max(per.values()):
                assert per[d] == dcs[d]
    _, leaders = counts(result)
    assert spread(leaders, range(n)) <= 1
