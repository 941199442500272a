"""Topics are created through whatever placer the brokers name: every installed one, a
third-party import path, and one that defers (the core falls back to ``simple``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kafka_tiers.api import ReplicaPlacer
from kafka_tiers.api.cluster import ClusterView
from kafka_tiers.api.placement import PlacementSpec
from kafka_tiers.plugins import PLACER_GROUP, installed_names

RACKS = ["/dc1/r1", "/dc1/r2", "/dc2/r1", "/dc2/r2"]


class DeferringPlacer(ReplicaPlacer):
    """Always defers to the core's default."""

    calls = 0

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        DeferringPlacer.calls += 1
        return None


class BrokenPlacer(ReplicaPlacer):
    """Returns a placement with a duplicate replica: the core must refuse it."""

    def place(self, spec: PlacementSpec, cluster: ClusterView,
              broker_ids: Sequence[int] | None = None) -> list[list[int]] | None:
        first = cluster.broker_ids[0]
        return [[first] * spec.replication_factor for _ in range(spec.num_partitions)]


@pytest.mark.parametrize("placer", installed_names(PLACER_GROUP))
def test_every_installed_placer_creates_valid_topics(make_cluster, placer: str) -> None:
    c = make_cluster(4, racks=RACKS, overrides={"broker.replica.placer": placer})
    cl = c.client()
    asg = cl.create_topic("p", 8, 3)
    assert sorted(asg) == list(range(8))
    for reps in asg.values():
        assert len(set(reps)) == 3 and set(reps) <= {1, 2, 3, 4}
    more = cl.add_partitions("p", 12)  # start_partition continues the topic
    assert sorted(more) == [8, 9, 10, 11]
    assert [d["leader"] for d in cl.describe_topic("p")] == \
        [({**asg, **more})[p][0] for p in range(12)]
    if placer != "simple":  # rack-aware placers spread every partition over both DCs
        for reps in asg.values():
            assert len({RACKS[b - 1].split("/")[1] for b in reps}) == 2


def test_a_deferring_placer_falls_back_to_simple_and_a_broken_one_is_refused(make_cluster
                                                                           ) -> None:
    from kafka_tiers.cluster.transport import ErrorCode, TransportError

    c = make_cluster(3, overrides={
        "broker.replica.placer": "tests.cluster.test_cluster_placers:DeferringPlacer"})
    cl = c.client()
    before = DeferringPlacer.calls
    asg = cl.create_topic("d", 3, 2)
    assert DeferringPlacer.calls > before
    assert all(len(set(r)) == 2 for r in asg.values())
    c2 = make_cluster(3, name="broken", overrides={
        "broker.replica.placer": "tests.cluster.test_cluster_placers:BrokenPlacer"})
    with pytest.raises(TransportError) as err:
        c2.client().create_topic("b", 2, 2, timeout=5)
    assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "b" not in [t["topic"] for t in c2.client().metadata()["topics"]]
