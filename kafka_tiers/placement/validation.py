"""Checks shared by the placers and the core: the replication factor and a returned placement.

The core validates every placement a placer returns before using it, so a third-party bug becomes
a clear :class:`InvalidReplicaAssignmentError` naming the placer and the partition, never a bad
assignment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_tiers.api import (
    BrokerInfo,
    ClusterView,
    InvalidClusterError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementSpec,
    TopicPartition,
)


def allowed_brokers(cluster: ClusterView, broker_ids: Sequence[int] | None) -> list[BrokerInfo]:
    """The registered brokers a placement may use, sorted by id: every registered broker, or
    those of ``broker_ids`` that are registered (unknown ids are ignored, as the
    :class:`~kafka_tiers.api.ReplicaPlacer` contract says)."""
    if broker_ids is None:
        return list(cluster.brokers)
    wanted = set(broker_ids)
    return [b for b in cluster.brokers if b.broker_id in wanted]


def check_assignments(assignments: Mapping[TopicPartition, Sequence[int]],
                      broker_ids: Sequence[int]) -> None:
    """Refuse current assignments that no cluster can have: a partition without replicas, a
    broker listed twice in one partition, or a broker that is not one of ``broker_ids`` (the
    brokers a cluster description lists). A :class:`ClusterView` itself allows assignments
    naming departed brokers (a live cluster has them); a cluster description given to
    ``place`` must not, or its placement would balance against brokers that do not exist.

    Raises:
        InvalidClusterError: the first problem, naming the topic, the partition and the
            broker.
    """
    known = set(broker_ids)
    for tp, replicas in assignments.items():
        reps = list(replicas)
        where = f"partition {tp.partition} of topic {tp.topic!r}"
        if not reps:
            raise InvalidClusterError(f"{where} has no replicas")
        seen: set[int] = set()
        for broker in reps:
            if broker in seen:
                raise InvalidClusterError(
                    f"{where} lists broker {broker} twice (replicas {reps}): each replica of a "
                    "partition is on a different broker")
            seen.add(broker)
            if broker not in known:
                raise InvalidClusterError(
                    f"{where} names broker {broker}, which is not among the brokers "
                    f"{sorted(known)} (replicas {reps}): add the broker or fix the replicas")


def check_replication_factor(
    spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int] | None = None
) -> list[BrokerInfo]:
    """Refuse an impossible replication factor; return the brokers available for placement.

    Fenced brokers count as registered: ``RF <= len(available)`` is allowed even when some of
    them are fenced, but at least one available broker must be unfenced (to lead).

    Returns:
        The available brokers (registered, within ``broker_ids`` when given), sorted by id.

    Raises:
        InvalidReplicationFactorError: ``RF <= 0``, ``RF`` larger than the available brokers,
            or no unfenced broker among them; the message names the numbers.
    """
    available = allowed_brokers(cluster, broker_ids)
    rf = spec.replication_factor
    scope = "registered brokers" if broker_ids is None else "registered brokers in broker_ids"
    if rf <= 0:
        raise InvalidReplicationFactorError(
            f"replication factor must be at least 1, got {rf}",
            replication_factor=rf,
            available_brokers=len(available),
        )
    if rf > len(available):
        raise InvalidReplicationFactorError(
            f"replication factor {rf} is larger than the {len(available)} {scope}",
            replication_factor=rf,
            available_brokers=len(available),
        )
    if not any(not b.fenced for b in available):
        raise InvalidReplicationFactorError(
            f"no unfenced broker among the {len(available)} {scope} to lead "
            f"(replication factor {rf})",
            replication_factor=rf,
            available_brokers=len(available),
        )
    return available


def validate_placement(
    result: object,
    spec: PlacementSpec,
    cluster: ClusterView,
    broker_ids: Sequence[int] | None = None,
    placer_name: str | None = None,
) -> list[list[int]]:
    """Check a placement returned by a placer against ``spec`` and ``cluster``.

    The rules: exactly ``spec.num_partitions`` replica lists; each exactly
    ``spec.replication_factor`` distinct int broker ids; every id registered and, when
    ``broker_ids`` is given, in that subset; the first (the leader) unfenced; fenced followers only
    when fewer unfenced brokers are available than the replication factor, and then no more than
    the shortfall (``RF - #unfenced available``).

    Args:
        result: what the placer returned (``None`` is refused here; deferring is the caller's).
        spec, cluster, broker_ids: what the placer was asked.
        placer_name: named in every error message (and in the error's ``placer`` attribute).

    Returns:
        The placement as fresh ``list[list[int]]``.

    Raises:
        InvalidReplicaAssignmentError: the first rule broken, naming the placer and the absolute
            partition index (``spec.start_partition + i``) in message and attributes.
    """
    who = f"placer {placer_name}" if placer_name else "placement"

    def fail(message: str, index: int | None = None) -> InvalidReplicaAssignmentError:
        if index is None:
            return InvalidReplicaAssignmentError(f"{who}: {message}", placer=placer_name)
        partition = spec.start_partition + index
        return InvalidReplicaAssignmentError(
            f"{who}: partition {partition}: {message}", partition=partition, placer=placer_name
        )

    if isinstance(result, str | bytes) or not isinstance(result, Sequence):
        raise fail(f"expected a list of replica lists, got {type(result).__name__}")
    if len(result) != spec.num_partitions:
        raise fail(f"expected {spec.num_partitions} partitions, got {len(result)}")
    allowed = {b.broker_id for b in allowed_brokers(cluster, broker_ids)}
    unfenced_available = sum(1 for b in cluster.brokers if b.broker_id in allowed and not b.fenced)
    fenced_allowed = unfenced_available < spec.replication_factor
    out: list[list[int]] = []
    for i, replicas in enumerate(result):
        if isinstance(replicas, str | bytes) or not isinstance(replicas, Sequence):
            raise fail(f"expected a list of broker ids, got {type(replicas).__name__}", i)
        reps = list(replicas)
        for r in reps:
            if isinstance(r, bool) or not isinstance(r, int):
                raise fail(f"replica {r!r} is not an int broker id (replicas {reps!r})", i)
        if len(reps) != spec.replication_factor:
            raise fail(
                f"expected {spec.replication_factor} replicas, got {len(reps)} ({reps})", i
            )
        if len(set(reps)) != len(reps):
            dupes = sorted({r for r in reps if reps.count(r) > 1})
            raise fail(f"duplicate brokers {dupes} in replicas {reps}", i)
        for r in reps:
            if r not in cluster:
                raise fail(f"unknown broker {r} in replicas {reps}", i)
            if r not in allowed:
                raise fail(f"broker {r} is outside the allowed brokers (replicas {reps})", i)
        if cluster.broker(reps[0]).fenced:
            raise fail(f"leader {reps[0]} is fenced (replicas {reps})", i)
        fenced = [r for r in reps[1:] if cluster.broker(r).fenced]
        if fenced and not fenced_allowed:
            raise fail(
                f"fenced followers {fenced} although {unfenced_available} unfenced brokers "
                f"were available for replication factor {spec.replication_factor}",
                i,
            )
        if fenced and len(fenced) > spec.replication_factor - unfenced_available:
            raise fail(
                f"{len(fenced)} fenced followers {fenced} where "
                f"{spec.replication_factor - unfenced_available} would do: every one of the "
                f"{unfenced_available} unfenced brokers must be used first",
                i,
            )
        out.append(reps)
    return out


__all__ = ["allowed_brokers", "check_assignments", "check_replication_factor",
           "validate_placement"]
