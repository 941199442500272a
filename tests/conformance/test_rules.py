"""The suite's own rule checks, on hand-made placements: they flag what breaks a rule and
accept what does not (including the uneven cases where only the looser bound applies)."""

from __future__ import annotations

from kafka_tiers.api import BrokerInfo, PlacementSpec
from kafka_tiers.conformance.placer.rules import (
    RULES,
    Topology,
    balance_bounds,
    check_broker_balance,
    check_level_balance,
    check_size,
    check_spread,
    check_validity,
)
from kafka_tiers.conformance.placer.shapes import Case, Shape, cases, shapes


def flat(*sizes: int, fenced: tuple[int, ...] = (), subset=None) -> Shape:
    brokers, bid = [], 0
    for r, size in enumerate(sizes):
        for _ in range(size):
            brokers.append(BrokerInfo(bid, f"r{r}", bid in fenced))
            bid += 1
    return Shape("t", "flat", tuple(brokers), subset)


def rules_of(violations) -> set[str]:
    return {v.rule for v in violations}


def test_size_rules() -> None:
    spec = PlacementSpec(2, 2)
    assert check_size(spec, [[0, 1], [1, 2]]) == []
    assert rules_of(check_size(spec, [[0, 1]])) == {"partition-count"}
    assert rules_of(check_size(spec, [[0, 1], [1]])) == {"replication-factor"}
    assert rules_of(check_size(spec, [[0, 1], ["a", 1]])) == {"replication-factor"}
    assert rules_of(check_size(spec, "nope")) == {"partition-count"}


def test_validity_rules() -> None:
    shape = flat(2, 2, fenced=(3,), subset=(0, 1, 3, 99))
    spec = PlacementSpec(1, 2)
    assert check_validity(shape, spec, [[0, 1]]) == []
    assert rules_of(check_validity(shape, spec, [[0, 0]])) == {"distinct-replicas"}
    assert rules_of(check_validity(shape, spec, [[0, 2]])) == {"allowed-brokers"}  # not in subset
    assert rules_of(check_validity(shape, spec, [[0, 7]])) == {"allowed-brokers"}  # unknown
    both = check_validity(shape, spec, [[3, 0]])
    assert rules_of(both) == {"unfenced-leader", "fenced-only-when-needed"}
    # RF 3 > 2 unfenced allowed brokers: one fenced follower is needed, so it is fine
    assert check_validity(shape, PlacementSpec(1, 3), [[0, 1, 3]]) == []


def test_rack_spread_is_capacity_aware() -> None:
    equal = flat(2, 2)
    spec = PlacementSpec(1, 2)
    assert check_spread(equal, spec, [[0, 2]], tree=False) == []
    assert rules_of(check_spread(equal, spec, [[0, 1]], tree=False)) == {"rack-span",
                                                                       "rack-even"}
    unequal = flat(1, 3)  # RF 3: the one-broker rack is full, so 1 + 2 is as even as it gets
    assert check_spread(unequal, PlacementSpec(1, 3), [[0, 1, 2]], tree=False) == []
    assert rules_of(check_spread(unequal, PlacementSpec(1, 3), [[1, 2, 3]], tree=False)) == {
        "rack-span", "rack-even"}
    # RF 4 on 2+2+1: 2/1/1 is even; 2/2/0 leaves the one-broker rack empty
    three = flat(2, 2, 1)
    assert check_spread(three, PlacementSpec(1, 4), [[0, 1, 2, 4]], tree=False) == []
    assert "rack-span" in rules_of(check_spread(three, PlacementSpec(1, 4), [[0, 1, 2, 3]],
                                                tree=False))


def test_balance_bounds() -> None:
    equal = flat(3, 3)
    assert balance_bounds(equal, 6, 2, tree=False) == (True, 1, 1)
    assert balance_bounds(equal, 4, 3, tree=False) == (True, 2, 1)    # P*RF = 12 divides by 6
    assert balance_bounds(equal, 5, 3, tree=False) == (True, 2, 3)    # neither divides
    assert balance_bounds(flat(1, 3), 4, 2, tree=False) == (False, 2, 2)


def test_broker_balance() -> None:
    shape = flat(2, 2)  # n = 4
    even = [[0, 2], [2, 1], [1, 3], [3, 0]]
    assert check_broker_balance(shape, 2, even, tree=False) == []
    skewed = [[0, 2], [0, 3], [0, 2], [0, 3]]
    assert rules_of(check_broker_balance(shape, 2, skewed, tree=False)) == {"leader-balance",
                                                                           "replica-balance"}
    # 3 partitions (P % n != 0, P*RF = 6 not divisible): the looser bound 2 applies
    assert check_broker_balance(shape, 2, [[0, 2], [2, 1], [1, 3]], tree=False) == []
    # unequal racks: balance is only asked within a rack
    unequal = flat(1, 3)
    lopsided = [[0, 1], [0, 2], [0, 3], [0, 1]]  # rack r0 has one broker: it is in every one
    assert rules_of(check_broker_balance(unequal, 2, lopsided, tree=False)) == set()


def tree_shape() -> Shape:
    paths = ["/dc0/a", "/dc0/a", "/dc0/b", "/dc0/b", "/dc1/a", "/dc1/a", "/dc1/b", "/dc1/b"]
    return Shape("t", "tree", tuple(BrokerInfo(i, p) for i, p in enumerate(paths)))


def test_topology_levels() -> None:
    topo = Topology(tree_shape().brokers, tree=True)
    assert topo.depth == 2 and topo.equal_sized()
    assert set(topo.domains(1)) == {("dc0",), ("dc1",)}
    lopsided = Topology([BrokerInfo(0, "/x/a"), BrokerInfo(1, "/x/b"), BrokerInfo(2, "/y/a")],
                        tree=True)
    assert lopsided.equal_levels() == 0 and not lopsided.equal_sized()


def test_level_spread_and_balance() -> None:
    shape = tree_shape()
    spec = PlacementSpec(1, 2)
    assert check_spread(shape, spec, [[0, 4]], tree=True) == []
    # both replicas in dc0 (different racks): fine as flat racks, wrong at the top level
    assert check_spread(shape, spec, [[0, 2]], tree=False) == []
    assert rules_of(check_spread(shape, spec, [[0, 2]], tree=True)) == {"level-span",
                                                                      "level-even"}
    balanced = [[0, 4], [6, 2], [5, 1], [3, 7]]
    assert check_level_balance(shape, 2, balanced) == []
    all_dc0_leaders = [[0, 4], [2, 6], [1, 5], [3, 7]]
    assert rules_of(check_level_balance(shape, 2, all_dc0_leaders)) == {"level-leader-balance"}


def test_generated_cases_are_possible_and_smallest_first() -> None:
    all_cases = cases(shapes(path_racks=False, with_unracked=True))
    assert len(all_cases) > 300
    keys = [c.size_key() for c in all_cases]
    assert keys == sorted(keys)
    for case in all_cases:
        assert isinstance(case, Case)
        assert 1 <= case.spec.replication_factor <= len(case.shape.allowed)
        assert case.shape.usable
        case.cluster()  # a valid ClusterView
    names = {c.shape.name for c in all_cases}
    assert {"single-broker", "no-racks-5", "large-8x8", "tree-depth3-2x2x2x1",
            "subset-3x3", "fenced-rack-3x2", "unequal-racks-1+3"} <= names


def test_every_rule_has_a_statement() -> None:
    assert all(text and not text.endswith(".") for text in RULES.values())
