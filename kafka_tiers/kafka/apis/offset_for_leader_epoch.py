"""OffsetForLeaderEpoch (key 23) v2-4, for clients (KIP-320): after a leader change a
consumer asks where the leader epoch of its last fetched record ends, and truncates (resets)
its position when the log diverged.

Per partition, from the leader's leader epoch cache (Kafka's ``LeaderEpochFileCache
.endOffsetFor``): the requested epoch's end offset is the log end offset when it is the latest
epoch, else the start offset of the next higher epoch, with the largest epoch known at or below
the requested one; ``(-1, -1)`` for an epoch above the latest or an empty cache. Errors:
``UNKNOWN_TOPIC_OR_PARTITION``, ``NOT_LEADER_OR_FOLLOWER`` (only the leader answers, as for a
consumer's fetch), ``FENCED_LEADER_EPOCH`` / ``UNKNOWN_LEADER_EPOCH`` when
``current_leader_epoch`` (>= 0) is below / above the leader's, ``KAFKA_STORAGE_ERROR`` when the
replica's log dir is offline; ``INVALID_REQUEST`` for every partition of a request listing more
than ``max.request.partitions``; ``TOPIC_AUTHORIZATION_FAILED`` without DESCRIBE on the topic
(CLUSTER_ACTION on the cluster, a follower's permission, allows every topic, as Kafka).
kafka-tiers followers use the replica manager's own request over the internal transport, not
this one.
"""

from __future__ import annotations

from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.errors import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    KAFKA_STORAGE_ERROR,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    error_of,
)
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import (
    TOPIC_AUTHORIZATION_FAILED,
    allowed_by_cluster_or_names,
)
from kafka_tiers.placement.limits import LimitExceededError, check_request_entries

OFFSET_FOR_LEADER_EPOCH_KEY = 23


@handles(OFFSET_FOR_LEADER_EPOCH_KEY, 2, 4)
def offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    """Answer each partition with the end offset of the requested leader epoch."""
    resp_cls = type(ctx.response())
    topic_cls = resp_cls.OffsetForLeaderTopicResult
    part_cls = topic_cls.EpochEndOffset
    topics = []
    try:
        check_request_entries(ctx.config, [p for t in request.topics for p in t.partitions],
                              "partitions of OffsetForLeaderEpoch")
        refused = False
    except LimitExceededError:
        refused = True
    names = [t.topic for t in request.topics]
    describable = allowed_by_cluster_or_names(ctx, AclOperation.CLUSTER_ACTION,
                                              AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    for t in request.topics:
        parts = []
        for p in t.partitions:
            tp, bad = topic_partition_or_error(t.topic, int(p.partition))
            if refused:
                code, epoch, end = INVALID_REQUEST, -1, -1
            elif t.topic not in describable:
                code, epoch, end = TOPIC_AUTHORIZATION_FAILED, -1, -1
            elif tp is None:
                assert bad is not None
                code, epoch, end = bad[0], -1, -1
            else:
                code, epoch, end = _end_offset(ctx, tp, int(p.current_leader_epoch),
                                               int(p.leader_epoch))
            parts.append(part_cls(version=ctx.version, error_code=code,
                                  partition=int(p.partition), leader_epoch=epoch,
                                  end_offset=end))
        topics.append(topic_cls(version=ctx.version, topic=t.topic, partitions=parts))
    return ctx.response(throttle_time_ms=0, topics=topics)


def _end_offset(ctx: RequestContext, tp: TopicPartition, current_epoch: int,
                epoch: int) -> tuple[int, int, int]:
    """``(error, epoch, end offset)`` of one partition."""
    broker = ctx.broker
    try:
        leads, leader_epoch = broker.leadership(tp)
    except Exception as exc:  # UnknownTopicError
        return error_of(exc)[0], -1, -1
    if not leads:
        return NOT_LEADER_OR_FOLLOWER, -1, -1
    if current_epoch >= 0 and current_epoch != leader_epoch:
        return (FENCED_LEADER_EPOCH if current_epoch < leader_epoch
                else UNKNOWN_LEADER_EPOCH), -1, -1
    lm = broker.log_manager
    lg = lm.get_log(tp) if lm is not None else None
    if lg is None:
        offline = lm is not None and tp in lm.offline_partitions
        return (KAFKA_STORAGE_ERROR if offline else UNKNOWN_TOPIC_OR_PARTITION), -1, -1
    found, end = lg.leader_epoch_cache.end_offset_for(epoch, lg.log_end_offset)
    return NONE, found, end


__all__ = ["OFFSET_FOR_LEADER_EPOCH_KEY", "offset_for_leader_epoch"]
