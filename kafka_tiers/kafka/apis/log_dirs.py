"""DescribeLogDirs (key 35, v0-v4) and AlterReplicaLogDirs (key 34, v0-v2): the JBOD requests
of KIP-113 as Kafka ships them, answered by the broker hosting the replicas (admin clients
send them to each broker).

DescribeLogDirs
    Every log dir of this broker: ``error_code`` ``KAFKA_STORAGE_ERROR`` for an offline dir
    (no partitions; sizes -1), else its replicas, each with its size in bytes, its offset lag
    and ``is_future_key`` (the ``-future`` log of a move in progress). The offset lag is
    Kafka's: for a replica, how far its log end is below its high watermark (never
    negative); for a future log, how far it is behind the replica it copies. v4 adds the file
    system's ``total_bytes`` and ``usable_bytes``. ``topics`` null: every replica; a list
    keeps only the partitions named (more topics than ``max.request.topics``: no dir is
    described, and v3+ answers ``INVALID_REQUEST``).
AlterReplicaLogDirs
    Moves each named replica to the named log dir of this broker through the log manager's
    mover (a ``-future`` copy, throttled by ``intra.broker.throttled.rate``, swapped in
    crash-safely once caught up). Per partition: ``NONE`` (moving, or already there),
    ``LOG_DIR_NOT_FOUND`` (not an absolute path naming a log dir of this broker),
    ``KAFKA_STORAGE_ERROR`` (the replica's or the destination's dir is offline),
    ``REPLICA_NOT_AVAILABLE`` (no replica here yet: the dir is remembered and used when it is
    created, as Kafka does).
Authorization (Kafka's)
    DescribeLogDirs needs DESCRIBE on the cluster (else no dir, and v3+
    ``CLUSTER_AUTHORIZATION_FAILED``); AlterReplicaLogDirs ALTER on the cluster (else every
    partition ``CLUSTER_AUTHORIZATION_FAILED``, nothing moves).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.kafka import errors as kerr
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import CLUSTER_AUTHORIZATION_FAILED
from kafka_tiers.log.describe import LogDirDescription, ReplicaDescription
from kafka_tiers.placement.limits import check_request_entries

REPLICA_NOT_AVAILABLE = 9
_CODES = {"NONE": 0, "LOG_DIR_NOT_FOUND": kerr.LOG_DIR_NOT_FOUND,
          "KAFKA_STORAGE_ERROR": kerr.KAFKA_STORAGE_ERROR,
          "REPLICA_NOT_AVAILABLE": REPLICA_NOT_AVAILABLE}


def _offset_lag(lm: Any, tp: TopicPartition, replica: ReplicaDescription) -> int:
    lg = lm.get_log(tp)
    if lg is None:
        return 0
    try:
        if replica.is_temporary:
            return max(lg.log_end_offset - replica.log_end_offset, 0)
        return max(lg.high_watermark - replica.log_end_offset, 0)
    except Exception:  # closed by a move's swap meanwhile: no lag to tell
        return 0


@handles(35, 0, 4)
def describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    """This broker's log dirs and replicas (see the module docstring)."""
    version = ctx.version
    cls = response_class(35, version)
    dir_cls = cls.DescribeLogDirsResult
    topic_cls = dir_cls.DescribeLogDirsTopic
    part_cls = topic_cls.DescribeLogDirsPartition
    lm = ctx.broker.log_manager
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        denied: dict[str, Any] = {"throttle_time_ms": 0, "results": []}
        if version >= 3:
            denied["error_code"] = CLUSTER_AUTHORIZATION_FAILED
        return ctx.response(**denied)
    wanted: set[TopicPartition] | None = None
    if request.topics is not None:
        try:
            check_request_entries(ctx.config, list(request.topics), "topics", topics=True)
        except Exception:  # refused whole: no dir described (v3+ says why)
            out: dict[str, Any] = {"throttle_time_ms": 0, "results": []}
            if version >= 3:
                out["error_code"] = kerr.INVALID_REQUEST
            return ctx.response(**out)
        wanted = {tp for t in request.topics for p in t.partitions  # a bad entry: no replica
                  if (tp := topic_partition_or_error(t.topic, int(p))[0]) is not None}
    rows: list[LogDirDescription] = lm.describe_log_dirs() if lm is not None else []
    results = []
    for row in rows:
        by_topic: dict[str, list[Any]] = {}
        for rep in row.partitions if row.error is None else ():
            tp = rep.topic_partition
            if wanted is not None and tp not in wanted:
                continue
            by_topic.setdefault(tp.topic, []).append(part_cls(
                partition_index=tp.partition, partition_size=rep.size,
                offset_lag=_offset_lag(lm, tp, rep), is_future_key=rep.is_temporary))
        fields: dict[str, Any] = {
            "error_code": 0 if row.error is None else _CODES.get(row.error,
                                                                 kerr.KAFKA_STORAGE_ERROR),
            "log_dir": row.path,
            "topics": [topic_cls(name=t, partitions=ps) for t, ps in sorted(by_topic.items())]}
        if version >= 4:
            live = row.error is None
            fields["total_bytes"] = row.total_bytes if live else -1
            fields["usable_bytes"] = row.usable_bytes if live else -1
        results.append(dir_cls(**fields))
    answer: dict[str, Any] = {"throttle_time_ms": 0, "results": results}
    if version >= 3:
        answer["error_code"] = 0
    return ctx.response(**answer)


@handles(34, 0, 2)
def alter_replica_log_dirs(ctx: RequestContext, request: Any) -> Any:
    """Move replicas between this broker's log dirs (see the module docstring)."""
    cls = response_class(34, ctx.version)
    topic_cls = cls.AlterReplicaLogDirTopicResult
    part_cls = topic_cls.AlterReplicaLogDirPartitionResult
    lm = ctx.broker.log_manager
    asked = [((t.name, int(p)), d.path) for d in request.dirs
             for t in d.topics for p in t.partitions]
    results: dict[tuple[str, int], int] = {}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        results = {key: CLUSTER_AUTHORIZATION_FAILED for key, _ in asked}
        asked = []
    try:
        check_request_entries(ctx.config, asked, "replicas to move")
    except Exception:
        results = {key: kerr.INVALID_REQUEST for key, _ in asked}
        asked = []
    for key, path in asked:
        tp, refused = topic_partition_or_error(*key)
        results[key] = _move(lm, tp, path) if tp is not None else refused[0] if refused else 0
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(
            part_cls(partition_index=partition, error_code=code))
    return ctx.response(throttle_time_ms=0, results=[
        topic_cls(topic_name=t, partitions=ps) for t, ps in by_topic.items()])


def _move(lm: Any, tp: TopicPartition, path: str) -> int:
    """One move's Kafka error code."""
    if lm is None:
        return kerr.KAFKA_STORAGE_ERROR
    if (not isinstance(path, str) or not os.path.isabs(path) or "\0" in path
            or ".." in Path(path).parts or lm.resolve_log_dir(path) is None):
        return kerr.LOG_DIR_NOT_FOUND
    outcome = lm.alter_replica_log_dirs({tp: path})[tp]
    return _CODES.get(outcome, kerr.UNKNOWN_SERVER_ERROR)


__all__ = ["alter_replica_log_dirs", "describe_log_dirs"]
