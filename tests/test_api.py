"""The public surface: value types, ClusterView, and isolation from the core."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kafka_tiers.api as api
from kafka_tiers.api import (
    BrokerInfo,
    ClusterView,
    InvalidClusterError,
    KafkaTiersError,
    PlacementSpec,
    TopicPartition,
)


def test_api_imports_nothing_from_the_core() -> None:
    code = ("import sys, kafka_tiers.api; "
            "print([m for m in sys.modules if m.startswith('kafka_tiers') "
            "and m != 'kafka_tiers' and not m.startswith('kafka_tiers.api')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_public_names_are_exported_and_documented() -> None:
    assert api.SPI_VERSION.count(".") == 2
    for name in api.__all__:
        obj = getattr(api, name)
        if isinstance(obj, type):
            assert obj.__doc__, f"{name} has no docstring"
            if issubclass(obj, Exception):
                assert issubclass(obj, KafkaTiersError), name


def test_topic_partition_order_and_validation() -> None:
    tps = sorted([TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)])
    assert [str(t) for t in tps] == ["a-2", "a-10", "b-0"]
    with pytest.raises(ValueError):
        TopicPartition("a", -1)
    with pytest.raises(ValueError):
        TopicPartition("", 0)
    with pytest.raises(ValueError):
        TopicPartition("a", True)


def test_broker_info_is_immutable_and_validated() -> None:
    b = BrokerInfo(1, "/dc1/r1", attributes={"disk": "ssd"})
    with pytest.raises(TypeError):
        b.attributes["disk"] = "hdd"  # type: ignore[index]
    assert hash(b) == hash(BrokerInfo(1, "/dc1/r1"))
    for bad in (-1, "1", True):
        with pytest.raises(InvalidClusterError):
            BrokerInfo(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidClusterError):
        BrokerInfo(1, rack="  ")


def test_cluster_view_counts_and_racks() -> None:
    view = ClusterView(
        [BrokerInfo(3, "r2"), BrokerInfo(1, "r1"), BrokerInfo(2, "r1", fenced=True),
         BrokerInfo(4)],
        {TopicPartition("t", 0): [1, 3], TopicPartition("t", 1): [3, 9],
         TopicPartition("u", 0): [1]},
    )
    assert view.broker_ids == (1, 2, 3, 4)
    assert [b.broker_id for b in view.usable_brokers] == [1, 3, 4]
    assert dict(view.racks) == {"r1": (1, 2), "r2": (3,)}
    assert view.rack_of(4) is None and view.has_racks
    assert view.replica_counts() == {1: 2, 2: 0, 3: 2, 4: 0, 9: 1}
    assert view.leader_counts() == {1: 2, 2: 0, 3: 1, 4: 0}
    assert view.topic_assignment("t") == {0: (1, 3), 1: (3, 9)}
    more = view.with_assignments({TopicPartition("t", 2): [4, 1]})
    assert len(more.assignments) == 4 and len(view.assignments) == 3
    with pytest.raises(TypeError):
        view.assignments[TopicPartition("x", 0)] = (1,)  # type: ignore[index]


def test_cluster_view_rejects_inconsistent_input() -> None:
    with pytest.raises(InvalidClusterError, match="duplicate broker id 1"):
        ClusterView([BrokerInfo(1), BrokerInfo(1)])
    with pytest.raises(InvalidClusterError):
        ClusterView([BrokerInfo(1)], {TopicPartition("t", 0): ["1"]})  # type: ignore[list-item]
    with pytest.raises(InvalidClusterError):
        ClusterView([1])  # type: ignore[list-item]


def test_placement_spec_validation() -> None:
    assert PlacementSpec(3, 0).replication_factor == 0  # placers refuse it, not the spec
    for kwargs in ({"num_partitions": -1, "replication_factor": 1},
                   {"num_partitions": 1, "replication_factor": 1, "start_partition": -2},
                   {"num_partitions": 1.5, "replication_factor": 1}):
        with pytest.raises(ValueError):
            PlacementSpec(**kwargs)  # type: ignore[arg-type]
