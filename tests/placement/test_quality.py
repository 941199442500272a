"""Tests of the placement quality figures."""

from __future__ import annotations

import json

from kafka_tiers.api import BrokerInfo, ClusterView
from kafka_tiers.placement.quality import Balance, domain_levels, placement_quality
from tests.placement.checks import flat_cluster, tree_cluster


def test_balance_figures() -> None:
    b = Balance.of({1: 3, 2: 1, 3: 2})
    assert (b.minimum, b.maximum, b.spread) == (1, 3, 2)
    assert b.max_fair_share_deviation == 1.0
    weighted = Balance.of({"a": 6, "b": 2}, {"a": 3, "b": 1})
    assert weighted.max_fair_share_deviation == 0.0
    assert Balance.of({}).spread == 0


def test_flat_racks() -> None:
    cluster = flat_cluster(2, 2)  # racks r0: 0, 2; r1: 1, 3
    placement = [[0, 1], [0, 2], [1, 3]]
    q = placement_quality(placement, cluster)
    assert q.partitions == 3 and q.replication_factor == 2 and q.brokers == 4
    assert q.broker_replicas.counts == {0: 2, 1: 2, 2: 1, 3: 1}
    assert q.broker_leaders.counts == {0: 2, 1: 1, 2: 0, 3: 0}
    assert q.broker_leaders.spread == 2
    (rack,) = q.levels
    assert rack.name == "rack" and rack.domains == 2 and rack.expected_spread == 2
    assert rack.replicas.counts == {"r0": 3, "r1": 3}
    assert (rack.min_spread, rack.max_spread, rack.partitions_below_spread) == (1, 2, 2)
    assert rack.partitions_uneven == 2
    doc = json.loads(json.dumps(q.to_dict(with_counts=True)))
    assert doc["levels"][0]["replicas"]["counts"] == {"r0": 3, "r1": 3}
    assert ("broker", "leaders", "0", "2", "2") in q.rows()


def test_tree_levels() -> None:
    cluster = tree_cluster((2, 2, 1))  # /d0/r0: 0, /d0/r1: 1, /d1/r0: 2, /d1/r1: 3
    levels = domain_levels([0, 1, 2, 3], cluster)
    assert [name for name, _ in levels] == ["level 1", "level 2"]
    q = placement_quality([[0, 1], [2, 3]], cluster)
    top, bottom = q.levels
    assert top.partitions_below_spread == 2 and top.min_spread == 1
    assert bottom.partitions_below_spread == 0
    assert top.replicas.counts == {"/d0": 2, "/d1": 2}


def test_fenced_and_subset_and_no_racks() -> None:
    cluster = ClusterView([BrokerInfo(0), BrokerInfo(1, fenced=True), BrokerInfo(2)])
    q = placement_quality([[0, 1]], cluster)
    assert q.broker_replicas.counts == {0: 1, 1: 1, 2: 0}
    assert q.levels == ()
    q = placement_quality([[0]], cluster, broker_ids=[0])
    assert q.broker_replicas.counts == {0: 1}
    mixed = ClusterView([BrokerInfo(0, "a"), BrokerInfo(1)])
    assert placement_quality([[0, 1]], mixed).levels[0].replicas.counts == {"a": 1,
                                                                            "<no rack>": 1}
    assert placement_quality([], cluster).partitions == 0
