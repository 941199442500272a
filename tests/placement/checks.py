"""Helpers for the placement tests: cluster builders and rule checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kafka_tiers.api import BrokerInfo, ClusterView, PlacementSpec, TopicPartition


def flat_cluster(
    racks: int, per_rack: int, *, fenced: Sequence[int] = (), no_racks: bool = False
) -> ClusterView:
    """``racks * per_rack`` brokers, ids 0.., broker ``i`` in rack ``r{i % racks}``."""
    return ClusterView(
        BrokerInfo(i, None if no_racks else f"r{i % racks}", fenced=i in fenced)
        for i in range(racks * per_rack)
    )


def tree_cluster(shape: Sequence[int], *, fenced: Sequence[int] = ()) -> ClusterView:
    """An evenly shaped rack tree: ``shape[:-1]`` fan-outs, ``shape[-1]`` brokers per rack.

    ``(3, 2, 4)`` is 3 data centres of 2 racks of 4 brokers: racks ``/d0/r0`` ... ``/d2/r1``.
    Broker ids are interleaved so ids do not follow the tree.
    """
    paths: list[str] = [""]
    for level, fan in enumerate(shape[:-1]):
        letter = ("d", "r", "s")[level] if level < 3 else f"l{level}_"
        paths = [f"{p}/{letter}{i}" for p in paths for i in range(fan)]
    per = shape[-1]
    total = len(paths) * per
    return ClusterView(
        BrokerInfo(i, paths[i % len(paths)], fenced=i in fenced) for i in range(total)
    )


def with_topic(
    cluster: ClusterView, topic: str, placement: list[list[int]], start: int = 0
) -> ClusterView:
    """``cluster`` with ``placement`` recorded as partitions ``start..`` of ``topic``."""
    return cluster.with_assignments(
        {TopicPartition(topic, start + i): reps for i, reps in enumerate(placement)}
    )


def spread(counts: Counter[int] | dict[int, int], keys: Sequence[int]) -> int:
    """max - min of ``counts`` over ``keys`` (missing keys count 0)."""
    values = [counts.get(k, 0) for k in keys]
    return max(values) - min(values)


def pool(cluster: ClusterView, spec: PlacementSpec, broker_ids=None) -> list[int]:
    """The brokers a placement should use: unfenced available ones when there are >= RF."""
    allowed = [b for b in cluster.brokers if broker_ids is None or b.broker_id in broker_ids]
    unfenced = [b.broker_id for b in allowed if not b.fenced]
    if len(unfenced) >= spec.replication_factor:
        return unfenced
    return [b.broker_id for b in allowed]


def domain_of(cluster: ClusterView, broker: int, level: int | None) -> str:
    """The broker's rack (``level=None``) or its rack path cut to ``level`` components."""
    rack = cluster.rack_of(broker) or ""
    if level is None:
        return rack
    return "/".join(rack.split("/")[: level + 1])


def check_domain_rules(
    result: list[list[int]], cluster: ClusterView, brokers: Sequence[int], level: int | None
) -> None:
    """Each partition spans min(#domains, RF) domains, per-domain counts differ by <= 1."""
    domains = {domain_of(cluster, b, level) for b in brokers}
    for i, reps in enumerate(result):
        per = Counter(domain_of(cluster, b, level) for b in reps)
        assert len(per) == min(len(domains), len(reps)), (i, reps, dict(per))
        values = list(per.values()) + ([0] if len(per) < len(domains) else [])
        assert max(values) - min(values) <= 1, (i, reps, dict(per))


def counts(result: list[list[int]]) -> tuple[Counter[int], Counter[int]]:
    """(replicas per broker, leaders per broker)."""
    replicas: Counter[int] = Counter(b for reps in result for b in reps)
    leaders: Counter[int] = Counter(reps[0] for reps in result)
    return replicas, leaders


__all__ = [
    "check_domain_rules",
    "counts",
    "domain_of",
    "flat_cluster",
    "pool",
    "spread",
    "tree_cluster",
    "with_topic",
]
