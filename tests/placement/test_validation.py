"""Tests of placement validation and the shared replication-factor check."""

from __future__ import annotations

import pytest

from kafka_tiers.api import (
    BrokerInfo,
    ClusterView,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementSpec,
)
from kafka_tiers.placement.validation import check_replication_factor, validate_placement

CLUSTER = ClusterView([BrokerInfo(0, "a"), BrokerInfo(1, "b"), BrokerInfo(2, "a", fenced=True),
                       BrokerInfo(3, "b")])


def test_valid_placement_returned_as_lists() -> None:
    spec = PlacementSpec(2, 2, start_partition=3)
    out = validate_placement(((0, 1), [3, 0]), spec, CLUSTER, placer_name="p")
    assert out == [[0, 1], [3, 0]]
    assert all(type(r) is list for r in out)


@pytest.mark.parametrize(
    ("result", "spec", "ids", "match", "partition"),
    [
        (None, PlacementSpec(1, 2), None, "expected a list of replica lists, got NoneType", None),
        ([[0, 1]], PlacementSpec(2, 2), None, "expected 2 partitions, got 1", None),
        ([[0, 1], [0]], PlacementSpec(2, 2, start_partition=5), None,
         "partition 6: expected 2 replicas, got 1", 6),
        ([[0, 0]], PlacementSpec(1, 2), None, r"duplicate brokers \[0\]", 0),
        ([[0, "1"]], PlacementSpec(1, 2), None, "not an int", 0),
        ([[0, True]], PlacementSpec(1, 2), None, "not an int", 0),
        ([5], PlacementSpec(1, 1), None, "expected a list of broker ids", 0),
        ([[0, 9]], PlacementSpec(1, 2), None, "unknown broker 9", 0),
        ([[0, 3]], PlacementSpec(1, 2), [0, 1], "broker 3 is outside the allowed", 0),
        ([[2, 0]], PlacementSpec(1, 2), None, "leader 2 is fenced", 0),
        ([[0, 2]], PlacementSpec(1, 2), None, r"fenced followers \[2\] although 3 unfenced", 0),
    ],
)
def test_invalid(result, spec, ids, match, partition) -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=match) as info:
        validate_placement(result, spec, CLUSTER, ids, placer_name="my-placer")
    assert str(info.value).startswith("placer my-placer: ")
    assert info.value.placer == "my-placer"
    assert info.value.partition == partition


def test_fenced_followers_allowed_when_needed() -> None:
    spec = PlacementSpec(1, 3)
    assert validate_placement([[0, 1, 2]], spec, CLUSTER, [0, 1, 2]) == [[0, 1, 2]]
    with pytest.raises(InvalidReplicaAssignmentError, match="fenced followers"):
        validate_placement([[0, 1, 2]], spec, CLUSTER)


def test_fenced_followers_only_for_the_shortfall() -> None:
    cluster = ClusterView([BrokerInfo(0), BrokerInfo(1), BrokerInfo(2, fenced=True),
                           BrokerInfo(3, fenced=True)])
    spec = PlacementSpec(1, 3)
    assert validate_placement([[1, 3, 0]], spec, cluster) == [[1, 3, 0]]
    with pytest.raises(InvalidReplicaAssignmentError, match=r"2 fenced followers .* where 1 would"):
        validate_placement([[0, 2, 3]], spec, cluster)


def test_check_replication_factor() -> None:
    assert [b.broker_id for b in check_replication_factor(PlacementSpec(1, 4), CLUSTER)] == [
        0, 1, 2, 3]
    got = check_replication_factor(PlacementSpec(1, 2), CLUSTER, [2, 3, 42])
    assert [b.broker_id for b in got] == [2, 3]
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 1 registered "
                                                             "brokers in broker_ids"):
        check_replication_factor(PlacementSpec(1, 2), CLUSTER, [0, 42])
    with pytest.raises(InvalidReplicationFactorError, match="no unfenced broker among the 1"):
        check_replication_factor(PlacementSpec(1, 1), CLUSTER, [2])
    with pytest.raises(InvalidReplicationFactorError, match="at least 1, got 0"):
        check_replication_factor(PlacementSpec(1, 0), CLUSTER)
