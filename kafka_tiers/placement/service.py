"""The placement service: the configured replica placer with the broker's configuration and
lifecycle hooks, used by the controller, the admin operations and the CLI to place topics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Self

from kafka_tiers.api.cluster import ClusterView, TopicPartition
from kafka_tiers.api.placement import ReplicaPlacer
from kafka_tiers.api.secret import Secret
from kafka_tiers.config import BrokerConfig
from kafka_tiers.plugins.hooks import Hooks


class PlacementService:
    """Configuration, hooks and the placer of one broker (or of the controller).

    Args:
        config: the validated broker configuration.
        hooks: the hook facade; by default one with every installed hook plugin but those
            named by ``hook.plugins.blocked``.
        placer: an already created placer, replacing the one ``broker.replica.placer`` names
            (for tests and tools).

    The placer is loaded on first use, through its entry point or import path, with the
    ``placer.*`` keys. Close the core (or use it as a context manager) to close its placer.
    """

    def __init__(self, config: BrokerConfig, *, hooks: Hooks | None = None,
                 placer: ReplicaPlacer | None = None) -> None:
        self.config = config
        self.hooks = (hooks if hooks is not None
                      else Hooks(blocked=config["hook.plugins.blocked"]))
        self._placer = placer
        self._owns_placer = placer is None

    @property
    def placer_name(self) -> str:
        """The configured ``broker.replica.placer``."""
        return str(self.config["broker.replica.placer"])

    def _placer_settings(self) -> dict[str, str]:
        """The ``placer.*`` keys, the prefix stripped, as plain strings: the loader wraps the
        keys the placer declares secret (``SECRET_KEYS``) before the placer sees them."""
        return {k: v.reveal() if isinstance(v, Secret) else v
                for k, v in self.config.prefixed("placer.").items()}

    @property
    def placer(self) -> ReplicaPlacer:
        """The configured placer, loaded and configured on first use.

        Raises:
            PluginError, ConfigError: the placer cannot be loaded or refuses its config.
        """
        if self._placer is None:
            from kafka_tiers.plugins import load_placer

            self._placer = load_placer(self.placer_name, self._placer_settings())
        return self._placer

    def create_replica_placement(
        self,
        cluster: ClusterView,
        num_partitions: int,
        replication_factor: int,
        *,
        force_simple: bool = False,
        broker_ids: Sequence[int] | None = None,
        start_partition: int = 0,
        topic: str | None = None,
    ) -> list[list[int]]:
        """Document 001's admin operation: a validated placement from the configured placer
        (``simple`` when ``force_simple``, or when the placer defers with ``None``).

        The counts are checked against their bounds before the placer runs: at most
        ``max.request.partitions`` partitions, ``start_partition + num_partitions`` at most
        ``max.topic.partitions``, a replication factor at most ``max.replication.factor``,
        at most ``max.request.partitions`` broker ids.

        Raises:
            LimitExceededError: a count above its bound (``INVALID_PARTITIONS``,
                ``INVALID_REPLICATION_FACTOR``, ``INVALID_REQUEST``); nothing was placed.
            InvalidReplicationFactorError: an impossible replication factor.
            InvalidReplicaAssignmentError: the placer returned an invalid placement.
            PluginError: the placer failed in an unexpected way.
        """
        from kafka_tiers.placement.admin import create_replica_placement
        from kafka_tiers.placement.limits import (
            as_count,
            check_new_partitions,
            check_replication_factor,
            check_request_entries,
        )

        start = as_count(start_partition, "start_partition", minimum=0,
                         error_code="INVALID_PARTITIONS")
        check_new_partitions(self.config, num_partitions, existing=start, topic=topic)
        check_replication_factor(self.config, replication_factor)
        if broker_ids is not None:
            check_request_entries(self.config, list(broker_ids), "broker ids")
        placer = None if force_simple else self.placer
        return create_replica_placement(
            cluster, num_partitions, replication_factor, placer=placer,
            force_simple=force_simple, broker_ids=broker_ids,
            start_partition=start_partition, topic=topic,
            seed=self._placer_settings().get("seed"))

    def plan_topic(self, cluster: ClusterView, topic: str, num_partitions: int,
                   replication_factor: int, *, broker_ids: Sequence[int] | None = None,
                   force_simple: bool = False) -> dict[TopicPartition, list[int]]:
        """Place a new topic, or ``num_partitions`` more partitions of an existing one
        (continuing after its highest partition), without recording anything.

        Raises:
            LimitExceededError, InvalidReplicationFactorError, InvalidReplicaAssignmentError,
            PluginError: as :meth:`create_replica_placement`.
        """
        existing = cluster.topic_assignment(topic)
        start = max(existing) + 1 if existing else 0
        placement = self.create_replica_placement(
            cluster, num_partitions, replication_factor, force_simple=force_simple,
            broker_ids=broker_ids, start_partition=start, topic=topic)
        return {TopicPartition(topic, start + i): reps for i, reps in enumerate(placement)}

    def topic_created(self, topic: str, assignment: Mapping[TopicPartition, Sequence[int]]
                      ) -> None:
        """Tell the hook plugins a topic's partitions were created with this assignment."""
        self.hooks.topic_created(topic, {tp.partition: list(r) for tp, r in assignment.items()})

    def close(self) -> None:
        """Close the placer the core loaded. Safe to call twice."""
        if self._placer is not None and self._owns_placer:
            self._placer.close()
            self._placer = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["PlacementService"]
