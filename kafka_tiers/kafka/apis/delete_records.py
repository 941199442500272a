"""DeleteRecords (key 21, v0-v2): the leader of each partition moves its log start offset up
to the offset given (``-1``: the high watermark).

Per partition (:meth:`kafka_tiers.broker.broker.Broker.delete_records`): local segments
wholly below the new log start offset are deleted and the log dir's log start offset
checkpoint is written; for a tiered topic the remote segments wholly below it are deleted
through the storage plugin by the leader's remote log manager (its task is triggered at once)
and no read below it is served (``OFFSET_OUT_OF_RANGE``, from either tier). Followers apply
the leader's log start offset from its fetch answers and report theirs in their fetches; as
Kafka's, the leader answers once every replica on a live broker reached the new log start
offset, or ``timeout_ms`` passed (``REQUEST_TIMED_OUT``; the deletion stands). ``low_watermark``
is then the lowest log start offset of those replicas; an offset at or below the current log
start offset changes nothing.

Errors: ``TOPIC_AUTHORIZATION_FAILED`` without DELETE on the topic (checked first, as Kafka),
``OFFSET_OUT_OF_RANGE`` (negative but -1, or above the high watermark),
``NOT_LEADER_OR_FOLLOWER`` (the client re-routes), ``UNKNOWN_TOPIC_OR_PARTITION``,
``KAFKA_STORAGE_ERROR`` (the replica's log dir is offline), ``INVALID_REQUEST`` for every
partition of a request naming more than ``max.request.partitions``, ``INVALID_TOPIC_EXCEPTION``
for an internal topic (``__consumer_offsets``: it would erase every group's committed offsets;
Kafka's "Cannot delete records of internal topic"), ``UNKNOWN_TOPIC_OR_PARTITION`` for an
empty topic name or a negative partition.
"""

from __future__ import annotations

import time
from typing import Any

from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka import errors as kerr
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.internal_topics import Operation, refusal
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import TOPIC_AUTHORIZATION_FAILED, allowed_names
from kafka_tiers.placement.limits import check_request_entries


@handles(21, 0, 2)
def delete_records(ctx: RequestContext, request: Any) -> Any:
    """Delete the records below the given offsets (see the module docstring)."""
    cls = response_class(21, ctx.version)
    topic_cls = cls.DeleteRecordsTopicResult
    part_cls = topic_cls.DeleteRecordsPartitionResult
    asked = [((t.name, int(p.partition_index)), int(p.offset))
             for t in request.topics for p in t.partitions]
    results: dict[tuple[str, int], tuple[int, int]] = {}
    try:
        check_request_entries(ctx.config, asked, "partitions to delete records of")
    except Exception:
        results = {key: (-1, kerr.INVALID_REQUEST) for key, _ in asked}
        asked = []
    timeout_s = max(int(request.timeout_ms), 0) / 1000.0
    deadline = time.monotonic() + timeout_s
    deletable = allowed_names(ctx, AclOperation.DELETE, ResourceType.TOPIC,
                              (topic for (topic, _), _ in asked))
    for key, offset in asked:  # one timeout for the whole request, as Kafka's
        if key[0] not in deletable:
            results[key] = (-1, TOPIC_AUTHORIZATION_FAILED)
            continue
        tp, refused = topic_partition_or_error(*key)
        refused = refused or refusal(key[0], Operation.DELETE_RECORDS)
        if tp is None or refused is not None:
            assert refused is not None
            results[key] = (-1, refused[0])
            continue
        try:
            left = max(deadline - time.monotonic(), 0.0)
            results[key] = (ctx.broker.delete_records(tp, offset, timeout=left), 0)
        except Exception as exc:
            code, _ = kerr.error_of(exc)
            results[key] = (-1, code)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (low, code) in results.items():
        by_topic.setdefault(topic, []).append(
            part_cls(partition_index=partition, low_watermark=low, error_code=code))
    return ctx.response(throttle_time_ms=0, topics=[
        topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()])


__all__ = ["delete_records"]
