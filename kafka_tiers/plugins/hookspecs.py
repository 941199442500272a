"""Lifecycle hook specifications (pluggy, project name ``kafka_tiers``).

Hook plugins register under the entry-point group ``kafka_tiers`` and implement any of these
functions, decorated with :data:`kafka_tiers.api.hookimpl` (re-exported here as
:data:`hookimpl`: the same object). Every hook is documented in ``docs/hooks.md`` with its
exact signature; a test keeps the two in step. Notification hooks are called after the event has
happened and durably taken effect; their return values are ignored, and an exception in one is
logged with the plugin's name and never stops the broker. ``kafka_tiers_choose_log_dir`` is a
first-result hook: the first non-None answer wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pluggy

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.hooks import HOOK_PROJECT, hookimpl
from kafka_tiers.api.logdirs import LogDirInfo
from kafka_tiers.api.storage import RemoteLogSegmentMetadata

PROJECT = HOOK_PROJECT

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def kafka_tiers_broker_started(broker_id: int, config: Mapping[str, Any]) -> None:
    """The broker finished starting and serves requests.

    :param broker_id: the broker's ``broker.id``.
    :param config: the broker's validated configuration (read-only; secrets included, so a
        plugin must not log it whole).
    """


@hookspec
def kafka_tiers_broker_stopping(broker_id: int, clean: bool) -> None:
    """The broker is about to stop.

    :param broker_id: the broker's ``broker.id``.
    :param clean: True for a controlled shutdown, False when stopping after a fatal error.
    """


@hookspec
def kafka_tiers_broker_up(broker_id: int, rack: str | None) -> None:
    """The controller saw a broker register (come up).

    :param broker_id: the broker that registered.
    :param rack: its rack, or None.
    """


@hookspec
def kafka_tiers_broker_down(broker_id: int) -> None:
    """The controller saw a broker's registration end (went down or was fenced).

    :param broker_id: the broker that went away.
    """


@hookspec
def kafka_tiers_topic_created(topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
    """A topic was created (or partitions were added to it) and its assignment recorded.

    :param topic: the topic's name.
    :param assignment: partition number -> replica broker ids (first is the preferred leader),
        for the partitions created by this operation.
    """


@hookspec
def kafka_tiers_segment_rolled(
    topic_partition: TopicPartition, base_offset: int, next_offset: int
) -> None:
    """A local log segment was rolled: it is now inactive and may be tiered.

    :param topic_partition: the partition.
    :param base_offset: the rolled segment's base offset.
    :param next_offset: the offset after its last record (the new active segment's base offset).
    """


@hookspec
def kafka_tiers_segment_copied(
    topic_partition: TopicPartition, metadata: RemoteLogSegmentMetadata
) -> None:
    """A segment was copied to remote storage and committed (readers can see it).

    :param topic_partition: the partition.
    :param metadata: the segment as committed (state ``COPY_SEGMENT_FINISHED``).
    """


@hookspec
def kafka_tiers_segment_copy_failed(
    topic_partition: TopicPartition, metadata: RemoteLogSegmentMetadata, error: BaseException
) -> None:
    """A copy to remote storage failed; what it wrote was cleaned up and it will be retried.

    :param topic_partition: the partition.
    :param metadata: the metadata of the failed attempt (its segment id is never reused).
    :param error: the error, as the storage plugin's guard raised it (a
        ``kafka_tiers.api.RemoteStorageError``; ``error.retriable`` tells whether a retry may
        help).
    """


@hookspec
def kafka_tiers_remote_segment_deleted(
    topic_partition: TopicPartition, metadata: RemoteLogSegmentMetadata
) -> None:
    """A remote segment was deleted (remote retention or topic deletion).

    :param topic_partition: the partition.
    :param metadata: the deleted segment.
    """


@hookspec
def kafka_tiers_leader_elected(
    topic_partition: TopicPartition, leader: int, leader_epoch: int, isr: Sequence[int]
) -> None:
    """A new leader was elected and recorded.

    :param topic_partition: the partition.
    :param leader: the new leader's broker id (-1 when no replica could lead: offline).
    :param leader_epoch: the new leader epoch.
    :param isr: the in-sync replicas after the election.
    """


@hookspec
def kafka_tiers_isr_changed(
    topic_partition: TopicPartition, isr: Sequence[int], leader_epoch: int
) -> None:
    """The in-sync replica set of a partition changed and was recorded.

    :param topic_partition: the partition.
    :param isr: the new ISR.
    :param leader_epoch: the leader epoch under which it changed.
    """


@hookspec
def kafka_tiers_replica_moved(
    topic_partition: TopicPartition, source_dir: str, destination_dir: str
) -> None:
    """A replica finished moving between log directories of this broker.

    :param topic_partition: the partition.
    :param source_dir: the log directory it left.
    :param destination_dir: the log directory that now holds it.
    """


@hookspec
def kafka_tiers_log_dir_failed(
    log_dir: str, partitions: Sequence[TopicPartition], error: BaseException
) -> None:
    """A log directory went offline after an I/O error; its replicas are offline.

    :param log_dir: the directory's path.
    :param partitions: the replicas it held, now offline.
    :param error: the I/O error that took it offline.
    """


@hookspec(firstresult=True)
def kafka_tiers_choose_log_dir(
    topic_partition: TopicPartition, log_dirs: Sequence[LogDirInfo]
) -> str | None:
    """Choose the log directory for a new replica on this broker.

    :param topic_partition: the replica being created.
    :param log_dirs: every configured log directory, offline ones included (``online`` False).
    :return: the path of an online directory from ``log_dirs``, or None to let the next
        implementation decide. The built-in default, called last, picks the online directory
        with the fewest bytes used (ties: the fewest replicas, then the first listed).
    """


__all__ = ["PROJECT", "hookimpl", "hookspec"]
