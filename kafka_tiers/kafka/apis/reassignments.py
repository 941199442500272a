"""AlterPartitionReassignments (key 45, v0-v1) and ListPartitionReassignments (key 46, v0)
(KIP-455): the reassignment the cluster already does, requested and listed with Kafka's
messages.

Alter
    Each partition is checked on its own and answered on its own (Kafka's behaviour):
    ``UNKNOWN_TOPIC_OR_PARTITION``; ``INVALID_REPLICA_ASSIGNMENT`` with the reason (an empty
    list, a broker named twice, a broker that is not registered, a negative id);
    ``INVALID_REPLICATION_FACTOR`` (more than ``max.replication.factor``, or v1's
    ``allow_replication_factor_change`` false and another count than the partition has). The
    accepted ones are written to the metadata store's reassignment requests, where the
    controller drives them (new replicas created and caught up, the leadership moved into the
    target, the replicas left out removed). Each request records the partition's replicas
    before the first pending reassignment (``original``), so a later one replaces the target
    but keeps them, as Kafka does.

    ``replicas`` null cancels: the partition goes back to its original replicas (replicas
    being added are removed); ``NO_REASSIGNMENT_IN_PROGRESS`` when none is pending.
List
    The pending reassignments (all, or those of the partitions asked for): ``replicas`` is
    the partition's replica set while it moves (the target and the replicas being removed),
    ``adding_replicas`` the target's replicas that were not original, ``removing_replicas``
    the original ones the target leaves out.

A standalone broker is a one-broker cluster: a reassignment to itself is done at once, any
other broker is ``INVALID_REPLICA_ASSIGNMENT``; nothing is ever pending.

Authorization (Kafka's): Alter needs ALTER on the cluster, List DESCRIBE on the cluster; else
``CLUSTER_AUTHORIZATION_FAILED`` for the request (and every partition of an alter).

Any broker serves both (the metadata store is shared; the controller picks the requests up
from it). More partitions than ``max.request.partitions`` refuse the whole request
(``INVALID_REQUEST``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.kafka import errors as kerr
from kafka_tiers.kafka.apis.elect_leaders import Result, code_of
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import AnswerKey, RequestEntry, topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import CLUSTER_AUTHORIZATION_FAILED
from kafka_tiers.placement.limits import check_replication_factor, check_request_entries


def _check_target(config: Mapping[str, Any], tp: TopicPartition, replicas: list[int],
                  registered: set[int], current: tuple[int, ...] | None,
                  allow_rf_change: bool) -> Result | None:
    """The error of one requested target, or None when it is acceptable."""
    if current is None:
        return kerr.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp}"
    if not replicas:
        return (kerr.INVALID_REPLICA_ASSIGNMENT,
                f"{tp}: the replica list is empty (null cancels a reassignment)")
    if len(set(replicas)) != len(replicas):
        return (kerr.INVALID_REPLICA_ASSIGNMENT,
                f"{tp}: replicas {replicas} name a broker twice")
    if min(replicas) < 0:
        return (kerr.INVALID_REPLICA_ASSIGNMENT,
                f"{tp}: replicas {replicas} hold a negative broker id")
    try:
        check_replication_factor(config, len(replicas))
    except Exception as exc:
        return code_of(exc)
    if not allow_rf_change and len(replicas) != len(current):
        return (kerr.INVALID_REPLICATION_FACTOR,
                f"{tp}: {len(replicas)} replicas {replicas} change the replication factor "
                f"{len(current)}, and the request does not allow it")
    unknown = sorted(set(replicas) - registered)
    if unknown:
        return (kerr.INVALID_REPLICA_ASSIGNMENT,
                f"{tp}: replicas {replicas} name broker(s) {unknown} that are not registered "
                f"(registered: {sorted(registered)})")
    return None


@handles(45, 0, 1)
def alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    """Request or cancel reassignments (see the module docstring)."""
    allow_rf = bool(getattr(request, "allow_replication_factor_change", True)) \
        if ctx.version >= 1 else True
    asked: list[tuple[TopicPartition, list[int] | None]] = []
    results: dict[AnswerKey, Result] = {}
    for t in request.topics:
        for p in t.partitions:
            tp, refused = topic_partition_or_error(t.name, int(p.partition_index))
            if tp is None:
                assert refused is not None
                results[RequestEntry(t.name or "", int(p.partition_index))] = refused
            else:
                asked.append((tp, None if p.replicas is None else [int(b) for b in p.replicas]))
    top: Result = (0, None)
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        top = (CLUSTER_AUTHORIZATION_FAILED, f"{ctx.principal} may not reassign partitions "
               "(ALTER on the cluster is needed)")
        results = {key: top for key in [*(tp for tp, _ in asked), *results]}
        return _alter_response(ctx, top, results)
    try:
        check_request_entries(ctx.config, [*asked, *results], "partitions to reassign")
        state = ClusterState(ctx.broker, ctx.listener)
        member = ctx.broker.member
        if member is None or member.metadata is None:
            results.update((k, r) for k, r in _alter_standalone(ctx, state, asked,
                                                                   allow_rf).items())
        else:
            results.update((k, r) for k, r in _alter_clustered(ctx, member.metadata, asked,
                                                                  allow_rf).items())
    except Exception as exc:
        top = code_of(exc)
        results = {key: top for key in [*(tp for tp, _ in asked), *results]}
    return _alter_response(ctx, top, results)


def _alter_standalone(ctx: RequestContext, state: ClusterState,
                      asked: list[tuple[TopicPartition, list[int] | None]], allow_rf: bool
                      ) -> dict[TopicPartition, Result]:
    out: dict[TopicPartition, Result] = {}
    me = {ctx.broker.broker_id}
    for tp, replicas in asked:
        part = state.partition(tp)
        if replicas is None:
            out[tp] = ((kerr.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp}")
                       if part is None else
                       (kerr.NO_REASSIGNMENT_IN_PROGRESS,
                        f"no reassignment of {tp} is in progress"))
            continue
        err = _check_target(ctx.config, tp, replicas, me,
                            None if part is None else part.replicas, allow_rf)
        out[tp] = err or (0, None)  # the only target a standalone broker accepts is itself
    return out


def _alter_clustered(ctx: RequestContext, md: Any,
                     asked: list[tuple[TopicPartition, list[int] | None]], allow_rf: bool
                     ) -> dict[TopicPartition, Result]:
    out: dict[TopicPartition, Result] = {}
    registered = set(md.live_brokers())
    pending = {(e["topic"], int(e["partition"])): e for e in md.reassignments()[0]}
    assignments: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    for tp, replicas in asked:
        if tp.topic not in assignments:
            assignments[tp.topic] = md.topic(tp.topic)
        asg = assignments[tp.topic]
        current = asg.partitions.get(tp.partition) if asg is not None else None
        before = pending.get((tp.topic, tp.partition))
        original = (tuple(int(b) for b in before["original"])
                    if before is not None and before.get("original") is not None
                    else tuple(current) if current is not None else None)
        if replicas is None:
            if current is None:
                out[tp] = (kerr.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp}")
            elif before is None or before.get("cancel"):
                out[tp] = (kerr.NO_REASSIGNMENT_IN_PROGRESS,
                           f"no reassignment of {tp} is in progress")
            else:
                assert original is not None
                entries.append({"topic": tp.topic, "partition": tp.partition,
                                "replicas": list(original), "original": list(original),
                                "cancel": True})
                out[tp] = (0, None)
            continue
        err = _check_target(ctx.config, tp, replicas, registered, original, allow_rf)
        if err is not None:
            out[tp] = err
            continue
        assert original is not None
        entries.append({"topic": tp.topic, "partition": tp.partition, "replicas": replicas,
                        "original": list(original)})
        out[tp] = (0, None)
    if entries:
        md.request_reassignment(entries)
    return out


def _alter_response(ctx: RequestContext, top: Result, results: dict[AnswerKey, Result]
                    ) -> Any:
    cls = response_class(45, ctx.version)
    topic_cls = cls.ReassignableTopicResponse
    part_cls = topic_cls.ReassignablePartitionResponse
    by_topic: dict[str, list[Any]] = {}
    for tp, (code, msg) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            part_cls(partition_index=tp.partition, error_code=code, error_message=msg))
    fields: dict[str, Any] = {
        "throttle_time_ms": 0, "error_code": top[0], "error_message": top[1],
        "responses": [topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()]}
    if ctx.version >= 1:
        fields["allow_replication_factor_change"] = True
    return ctx.response(**fields)


def ongoing(md: Any) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
    """The pending reassignments: ``{partition: (replicas, adding, removing)}`` (cancels,
    which revert at once in Kafka, are not listed)."""
    out: dict[TopicPartition, tuple[list[int], list[int], list[int]]] = {}
    assignments: dict[str, Any] = {}
    for e in md.reassignments()[0]:
        if e.get("cancel"):
            continue
        tp = TopicPartition(e["topic"], int(e["partition"]))
        if tp.topic not in assignments:
            assignments[tp.topic] = md.topic(tp.topic)
        asg = assignments[tp.topic]
        current = list(asg.partitions.get(tp.partition, ())) if asg is not None else []
        if not current:
            continue
        target = [int(b) for b in e["replicas"]]
        original = [int(b) for b in e.get("original") or current]
        removing = [b for b in original if b not in target]
        adding = [b for b in target if b not in original]
        out[tp] = (target + removing, adding, removing)
    return out


@handles(46, 0, 0)
def list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    """The pending reassignments (see the module docstring)."""
    member = ctx.broker.member
    cls = response_class(46, ctx.version)
    topic_cls = cls.OngoingTopicReassignment
    part_cls = topic_cls.OngoingPartitionReassignment
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return ctx.response(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                            error_message=f"{ctx.principal} may not list reassignments "
                            "(DESCRIBE on the cluster is needed)", topics=[])
    try:
        found = ongoing(member.metadata) if member is not None and member.metadata else {}
    except Exception as exc:
        code, msg = code_of(exc)
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=msg, topics=[])
    if request.topics is not None:
        wanted = {topic_partition_or_error(t.name, int(p))[0] for t in request.topics
                  for p in t.partition_indexes}
        found = {tp: v for tp, v in found.items() if tp in wanted}
    by_topic: dict[str, list[Any]] = {}
    for tp in sorted(found, key=lambda t: (t.topic, t.partition)):
        replicas, adding, removing = found[tp]
        by_topic.setdefault(tp.topic, []).append(
            part_cls(partition_index=tp.partition, replicas=replicas,
                     adding_replicas=adding, removing_replicas=removing))
    return ctx.response(throttle_time_ms=0, error_code=0, error_message=None,
                        topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()])


__all__ = ["alter_partition_reassignments", "list_partition_reassignments", "ongoing"]
