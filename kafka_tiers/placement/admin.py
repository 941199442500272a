"""Document 001's admin operation: create a replica placement from the configured placer."""

from __future__ import annotations

from collections.abc import Sequence

from kafka_tiers.api import (
    ClusterView,
    KafkaTiersError,
    PlacementSpec,
    PluginError,
    ReplicaPlacer,
)
from kafka_tiers.placement.seeding import SEED_KEY, parse_seed
from kafka_tiers.placement.simple import SimplePlacer
from kafka_tiers.placement.validation import validate_placement


def _placer_name(placer: ReplicaPlacer) -> str:
    return type(placer).__name__


def _fallback(placer: ReplicaPlacer | None, seed: int | None) -> SimplePlacer:
    simple = SimplePlacer()
    own = getattr(placer, "seed", None)
    if isinstance(own, int) and not isinstance(own, bool):
        simple.seed = own
    else:
        simple.seed = seed
    return simple


def create_replica_placement(
    cluster: ClusterView,
    num_partitions: int,
    replication_factor: int,
    *,
    placer: ReplicaPlacer | None,
    force_simple: bool = False,
    broker_ids: Sequence[int] | None = None,
    start_partition: int = 0,
    topic: str | None = None,
    seed: int | str | None = None,
) -> list[list[int]]:
    """Create a placement for ``num_partitions`` partitions at ``replication_factor``.

    Calls ``placer`` (an already configured instance). Uses :class:`SimplePlacer` instead when
    ``force_simple`` is set, when ``placer`` is None, or when the placer returns ``None`` (it
    defers to the default); that fallback takes the placer's own ``seed`` attribute when it is
    an int, else ``seed``. The result is always checked with :func:`validate_placement` before it
    is returned. Nothing is modified: the caller applies the placement.

    Args:
        cluster: the brokers and current assignments.
        num_partitions, replication_factor, start_partition, topic: the :class:`PlacementSpec`.
        placer: the configured replica placer (None: the ``simple`` default).
        force_simple: use the rack-unaware ``simple`` scheme (``--disable-rack-aware``).
        broker_ids: only these brokers may be used (RF is checked against this subset).
        seed: the ``placer.seed`` setting (int or its string form) for the ``simple`` fallback.

    Returns:
        One replica list per partition, leader first.

    Raises:
        ValueError: ``num_partitions`` or ``start_partition`` negative, or not ints.
        ConfigError: ``seed`` is not an integer (``key="seed"``).
        InvalidReplicationFactorError: the factor cannot be met (from the placer).
        InvalidReplicaAssignmentError: the placer refused the request or returned an invalid
            placement (the message names the placer and partition).
        PluginError: the placer raised something other than a :class:`KafkaTiersError`; the
            error names the placer class and chains the original exception.
    """
    spec = PlacementSpec(
        num_partitions=num_partitions,
        replication_factor=replication_factor,
        start_partition=start_partition,
        topic=topic,
    )
    ids = None if broker_ids is None else list(broker_ids)
    fallback_seed = parse_seed({} if seed is None else {SEED_KEY: str(seed)})
    chosen: ReplicaPlacer = (
        _fallback(placer, fallback_seed) if force_simple or placer is None else placer
    )
    name = _placer_name(chosen)
    result = _call(chosen, spec, cluster, ids)
    if result is None:
        if isinstance(chosen, SimplePlacer):
            raise PluginError(
                f"replica placer {name} returned None", plugin=name, cause="returned None"
            )
        chosen = _fallback(placer, fallback_seed)
        name = f"{_placer_name(chosen)} (default for {name})"
        result = _call(chosen, spec, cluster, ids)
    return validate_placement(result, spec, cluster, ids, placer_name=name)


def _call(
    placer: ReplicaPlacer,
    spec: PlacementSpec,
    cluster: ClusterView,
    broker_ids: list[int] | None,
) -> object:
    name = _placer_name(placer)
    try:
        return placer.place(spec, cluster, None if broker_ids is None else list(broker_ids))
    except KafkaTiersError:
        raise
    except Exception as exc:
        raise PluginError(
            f"replica placer {name} failed: {type(exc).__name__}: {exc}",
            plugin=name,
            cause=f"{type(exc).__name__}: {exc}",
        ) from exc


__all__ = ["create_replica_placement"]
