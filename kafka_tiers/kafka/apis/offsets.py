"""Committed offsets, answered by the group coordinator
(:mod:`kafka_tiers.kafka.groups.coordinator`):

- OffsetCommit (8) v2-v9: stored in the group's ``__consumer_offsets`` partition with
  ``acks=all`` before the answer; generation and member checked as Kafka does
  (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS; generation -1 on an empty
  group: a commit without group management); metadata longer than
  ``offset.metadata.max.bytes``: OFFSET_METADATA_TOO_LARGE; v2-v4's ``retention_time_ms`` is
  ignored (``offsets.retention.minutes`` applies, as Kafka 2.1+ does for empty groups).
- OffsetFetch (9) v1-v9 (v8+: several groups; ``topics`` null: every committed partition).
  An unknown partition or group answers offset -1 and no error.
- OffsetDelete (47) v0: an empty group's offsets, or those of topics a consumer group does
  not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC for the others).

Authorization (Kafka's ``KafkaApis``): OffsetCommit needs READ on the group (else every
partition ``GROUP_AUTHORIZATION_FAILED``) and READ on each topic; OffsetFetch DESCRIBE on each
group (that group ``GROUP_AUTHORIZATION_FAILED``) and DESCRIBE on each topic asked (its
partitions: offset -1, ``TOPIC_AUTHORIZATION_FAILED``; all topics asked: the others are left
out); OffsetDelete DELETE on the group (top-level ``GROUP_AUTHORIZATION_FAILED``) and READ on
each topic. A topic denied is answered ``TOPIC_AUTHORIZATION_FAILED`` per partition and never
reaches the coordinator.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka.apis.groups import may_read_group, text
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.groups.coordinator import CommitEntry, coordinator_of
from kafka_tiers.kafka.groups.errors import NONE, GroupError
from kafka_tiers.kafka.groups.records import OffsetValue
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
)

OFFSET_COMMIT_KEY = 8
OFFSET_FETCH_KEY = 9
OFFSET_DELETE_KEY = 47


@handles(OFFSET_COMMIT_KEY, 2, 9)
def offset_commit(ctx: RequestContext, request: Any) -> Any:
    """OffsetCommit (see the module docstring)."""
    v = ctx.version
    topics_in = [(text(t.name), t.partitions or []) for t in request.topics or []]
    errors: dict[tuple[str, int], int] = {}
    if not may_read_group(ctx, text(request.group_id)):
        errors = {(name, int(p.partition_index)): GROUP_AUTHORIZATION_FAILED
                  for name, parts in topics_in for p in parts}
    else:
        readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                 (name for name, _ in topics_in))
        entries = [CommitEntry(name, int(p.partition_index), int(p.committed_offset),
                               int(p.committed_leader_epoch) if v >= 6 else -1,
                               p.committed_metadata)
                   for name, parts in topics_in if name in readable for p in parts]
        errors = {(name, int(p.partition_index)): TOPIC_AUTHORIZATION_FAILED
                  for name, parts in topics_in if name not in readable for p in parts}
        if entries:  # nothing to store: the coordinator is not asked (Kafka's answer)
            errors.update(coordinator_of(ctx).commit(
                group_id=text(request.group_id),
                generation=int(request.generation_id_or_member_epoch),
                member_id=text(request.member_id),
                group_instance_id=request.group_instance_id if v >= 7 else None,
                entries=entries))
    cls = response_class(OFFSET_COMMIT_KEY, v)
    tcls = cls.OffsetCommitResponseTopic
    pcls = tcls.OffsetCommitResponsePartition
    topics = [tcls(name=name, partitions=[
        pcls(partition_index=p.partition_index,
             error_code=errors.get((name, int(p.partition_index)), NONE))
        for p in parts]) for name, parts in topics_in]
    fields: dict[str, Any] = {"topics": topics}
    if v >= 3:
        fields["throttle_time_ms"] = 0
    return cls(**fields)


#: one partition's answer: (partition, committed value or None, error code)
_Found = tuple[int, OffsetValue | None, int]


def _fetch_group(ctx: RequestContext, group_id: str, topics: Any
                 ) -> tuple[int, list[tuple[str, list[_Found]]]]:
    """One group's committed offsets: (error, [(topic, [(partition, value, error)])]), the
    topics the principal may not describe answered (asked by name) or left out (all)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return GROUP_AUTHORIZATION_FAILED, []
    wanted = None
    denied: list[tuple[str, list[_Found]]] = []
    if topics is not None:
        asked = [(text(t.name), [int(p) for p in t.partition_indexes or []]) for t in topics]
        describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (name for name, _ in asked))
        wanted = [(name, p) for name, parts in asked if name in describable for p in parts]
        denied = [(name, [(p, None, TOPIC_AUTHORIZATION_FAILED) for p in parts])
                  for name, parts in asked if name not in describable]
    try:
        found = coordinator_of(ctx).fetch_offsets(group_id, wanted)
    except GroupError as exc:
        return exc.kafka_error_code, []
    if topics is None:
        describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (t for t, _, _ in found))
        found = [f for f in found if f[0] in describable]
    by_topic: dict[str, list[_Found]] = defaultdict(list)
    for t, n, value in found:
        by_topic[t].append((n, value, NONE))
    return NONE, [*by_topic.items(), *denied]


@handles(OFFSET_FETCH_KEY, 1, 9)
def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    """OffsetFetch (see the module docstring)."""
    v = ctx.version
    cls = response_class(OFFSET_FETCH_KEY, v)
    if v >= 8:
        gcls = cls.OffsetFetchResponseGroup
        tcls = gcls.OffsetFetchResponseTopics
        pcls = tcls.OffsetFetchResponsePartitions
        groups = []
        for g in request.groups or []:
            error, found = _fetch_group(ctx, text(g.group_id), g.topics)
            groups.append(gcls(group_id=text(g.group_id), error_code=error, topics=[
                tcls(name=t, partitions=[_partition(pcls, n, val, code)
                                         for n, val, code in parts])
                for t, parts in found]))
        return cls(throttle_time_ms=0, groups=groups)
    error, found = _fetch_group(ctx, text(request.group_id), request.topics)
    tcls = cls.OffsetFetchResponseTopic
    pcls = tcls.OffsetFetchResponsePartition
    if error and v < 2:  # no top-level error field: each partition carries it
        found = [(text(t.name), [(int(p), None, error) for p in t.partition_indexes or []])
                 for t in (request.topics or [])]
    topics = [tcls(name=t, partitions=[_partition(pcls, n, val, code)
                                       for n, val, code in parts])
              for t, parts in found]
    fields: dict[str, Any] = {"topics": topics}
    if v >= 2:
        fields["error_code"] = error
    if v >= 3:
        fields["throttle_time_ms"] = 0
    return cls(**fields)


def _partition(pcls: Any, n: int, value: OffsetValue | None, error: int = NONE) -> Any:
    if value is None:
        return pcls(partition_index=n, committed_offset=-1, committed_leader_epoch=-1,
                    metadata="", error_code=error)
    return pcls(partition_index=n, committed_offset=value.offset,
                committed_leader_epoch=value.leader_epoch, metadata=value.metadata,
                error_code=error)


@handles(OFFSET_DELETE_KEY, 0, 0)
def offset_delete(ctx: RequestContext, request: Any) -> Any:
    """OffsetDelete (see the module docstring)."""
    cls = response_class(OFFSET_DELETE_KEY, 0)
    tcls = cls.OffsetDeleteResponseTopic
    pcls = tcls.OffsetDeleteResponsePartition
    topics_in = [(text(t.name), t.partitions or []) for t in request.topics or []]
    group_id = text(request.group_id)
    errors: dict[tuple[str, int], int] = {}
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, group_id):
        top = GROUP_AUTHORIZATION_FAILED
    else:
        readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                 (name for name, _ in topics_in))
        wanted = [(name, int(p.partition_index)) for name, parts in topics_in
                  if name in readable for p in parts]
        try:
            errors = coordinator_of(ctx).delete_offsets(group_id, wanted)
            top = NONE
        except GroupError as exc:
            top = exc.kafka_error_code
        errors.update({(name, int(p.partition_index)): TOPIC_AUTHORIZATION_FAILED
                       for name, parts in topics_in if name not in readable for p in parts})
    topics = [] if top else [
        tcls(name=name, partitions=[
            pcls(partition_index=p.partition_index,
                 error_code=errors.get((name, int(p.partition_index)), NONE))
            for p in parts]) for name, parts in topics_in]
    return cls(error_code=top, throttle_time_ms=0, topics=topics)
