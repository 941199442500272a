"""Metadata (key 3), v0-v13: the brokers as advertised on the request's listener (with racks),
the cluster id, the controller, and each topic's partitions with leader, leader epoch,
replicas, ISR and offline replicas, topic ids (v10+), ``is_internal``.

Which topics (Kafka's rules)
    v0: an empty list means every topic; v1+: null means every topic, an empty list none.
    v10+ may name a topic by id instead (v12+ answers a topic asked by id with its name, and
    ``UNKNOWN_TOPIC_ID`` when no topic has it).
Unknown topics
    ``UNKNOWN_TOPIC_OR_PARTITION``, unless ``auto.create.topics.enable`` (off by default) and
    the request allows it (always before v4, ``allow_auto_topic_creation`` from v4): then the
    topic is created with ``num.partitions`` / ``default.replication.factor`` through the
    configured placer (a cluster: by the controller, as CreateTopics does; standalone: the
    broker) and answered ``LEADER_NOT_AVAILABLE``, as Kafka does, so the client asks again.
    Internal topics (``__consumer_offsets``) are never created here.
Errors
    more topics listed than ``max.request.topics``: every one ``INVALID_REQUEST`` (v13: the
    top-level error too), nothing looked up; an illegal name: ``INVALID_TOPIC_EXCEPTION``;
    a partition without a leader: ``LEADER_NOT_AVAILABLE``; a leader that does not advertise
    this listener: ``LISTENER_NOT_FOUND`` (v6+, as Kafka).
Authorization (Kafka's rules)
    Listing every topic leaves out, quietly, the topics the principal may not DESCRIBE; a
    topic named without DESCRIBE is answered ``TOPIC_AUTHORIZATION_FAILED`` whether or not
    it exists (asked by id: with the id, without the name). Auto-creating a topic needs
    CREATE on the cluster or on the topic (else ``TOPIC_AUTHORIZATION_FAILED``).
Authorized operations (v8+)
    when asked for: the topic's operations the principal may perform (every one without an
    authorizer); the cluster's (v8-10) likewise, none without DESCRIBE on the cluster.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka import errors as E
from kafka_tiers.kafka.cluster_state import ClusterState, TopicView
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.internal_topics import INTERNAL_TOPICS, is_internal
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import (
    TOPIC_AUTHORIZATION_FAILED,
    allowed_by_cluster_or_names,
    allowed_names,
    authorized_operations,
    cluster_operations,
)
from kafka_tiers.kafka.topic_ids import ZERO_UUID, topic_id, topic_name
from kafka_tiers.log.errors import InvalidTopicError
from kafka_tiers.log.names import validate_topic

log = logging.getLogger(__name__)

METADATA_KEY = 3
REPLICA_NOT_AVAILABLE = 9
LISTENER_NOT_FOUND = 72
UNKNOWN_TOPIC_ID = 100
#: "not requested" in an authorized-operations field (the codec writes ``Integer.MIN_VALUE``)
OPS_NOT_REQUESTED = None
#: how long a Metadata request waits for the controller to create an auto-created topic
AUTO_CREATE_TIMEOUT_S = 10.0


@handles(METADATA_KEY, 0, 13)
def metadata(ctx: RequestContext, request: Any) -> Any:
    """The Metadata answer (see the module docstring)."""
    v = ctx.version
    state = ClusterState(ctx.broker, ctx.listener)
    brokers = state.brokers()
    advertised = {b.node_id for b in brokers}
    cls = response_class(METADATA_KEY, v)
    topic_cls = cls.MetadataResponseTopic
    part_cls = topic_cls.MetadataResponsePartition
    wanted = request.topics
    everything = wanted is None or (v == 0 and not wanted)
    allow_create = bool(ctx.config["auto.create.topics.enable"]) and (
        v < 4 or bool(request.allow_auto_topic_creation))
    include_topic_ops = v >= 8 and bool(request.include_topic_authorized_operations)

    def topic_entry(error: int, name: str | None, tid: uuid.UUID | None = None,
                    partitions: list[Any] | None = None) -> Any:
        ops = OPS_NOT_REQUESTED
        if include_topic_ops and not error and name is not None:
            ops = authorized_operations(ctx, ResourceType.TOPIC, name)
        return topic_cls(error_code=error, name=name, topic_id=tid or ZERO_UUID,
                         is_internal=name is not None and is_internal(name),
                         partitions=partitions or [], authorized_operations=ops)

    def described(view: TopicView) -> Any:
        parts = []
        for p, pv in sorted(view.partitions.items()):
            error = E.NONE
            replicas, isr = list(pv.replicas), list(pv.isr)
            if pv.leader < 0:
                error = E.LEADER_NOT_AVAILABLE
            elif pv.leader not in advertised:
                error = LISTENER_NOT_FOUND if v >= 6 else E.LEADER_NOT_AVAILABLE
            elif v == 0 and pv.offline:  # Kafka: v0 lists only available replicas
                error = REPLICA_NOT_AVAILABLE
                replicas = [r for r in replicas if r not in pv.offline]
                isr = [r for r in isr if r not in pv.offline]
            parts.append(part_cls(
                error_code=error, partition_index=p,
                leader_id=pv.leader if error != LISTENER_NOT_FOUND else -1,
                leader_epoch=pv.leader_epoch, replica_nodes=replicas, isr_nodes=isr,
                offline_replicas=list(pv.offline)))
        tid = topic_id(ctx.broker, view.name) if v >= 10 else None
        return topic_entry(E.NONE, view.name, tid, parts)

    topics: list[Any] = []
    cap = int(ctx.config["max.request.topics"])
    if not everything and len(wanted) > cap:
        # refused before any lookup: each topic INVALID_REQUEST (v13: also the top level)
        log.warning("Metadata from %s lists %d topics, above max.request.topics %d; refused",
                    ctx.peer, len(wanted), cap)
        return ctx.response(**_fields(cls, brokers, state, [
            topic_entry(E.INVALID_REQUEST, e.name, e.topic_id if v >= 10 else None)
            for e in wanted], error=E.INVALID_REQUEST))
    if everything:  # the topics the principal may not describe are left out, quietly
        listed = state.topic_names()
        visible = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, listed,
                                log_if_denied=False)
        for listed_name in listed:
            view = state.topic(listed_name) if listed_name in visible else None
            if view is not None:  # deleted meanwhile: left out, as Kafka's cache would
                topics.append(described(view))
    else:
        # in request order: (name, the id it was asked by), or an unknown id's answer
        asked: list[tuple[str, uuid.UUID | None] | Any] = []
        seen: set[str] = set()
        for entry in wanted:
            name: str | None = entry.name
            by_id = None
            if v >= 10 and name is None:
                by_id = entry.topic_id
                name = topic_name(ctx.broker, by_id) if by_id is not None else None
                if name is None:
                    asked.append(topic_entry(UNKNOWN_TOPIC_ID, None, by_id))
                    continue
            if name is None or name in seen:
                continue
            seen.add(name)
            asked.append((name, by_id))
        names = [a[0] for a in asked if isinstance(a, tuple)]
        describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        creatable: set[str] | None = None  # asked once, when a topic would be auto-created
        for item in asked:
            if not isinstance(item, tuple):
                topics.append(item)
                continue
            name, by_id = item
            if name not in describable:  # its existence is not disclosed (by id: the id is)
                topics.append(topic_entry(TOPIC_AUTHORIZATION_FAILED,
                                          None if by_id is not None else name, by_id))
                continue
            try:
                validate_topic(name)
            except InvalidTopicError:
                topics.append(topic_entry(E.INVALID_TOPIC_EXCEPTION, name))
                continue
            view = state.topic(name)
            if view is not None:
                topics.append(described(view))
            elif allow_create and not is_internal(name):
                if creatable is None:
                    creatable = _creatable(ctx, [n for n in names if n in describable])
                if name in creatable:
                    topics.append(topic_entry(_auto_create(ctx, name), name))
                else:
                    topics.append(topic_entry(TOPIC_AUTHORIZATION_FAILED, name))
            else:
                topics.append(topic_entry(E.UNKNOWN_TOPIC_OR_PARTITION, name))
    fields = _fields(cls, brokers, state, topics)
    if 8 <= v <= 10 and bool(request.include_cluster_authorized_operations):
        fields["authorized_operations"] = cluster_operations(ctx)
    return ctx.response(**fields)


def _creatable(ctx: RequestContext, names: list[str]) -> set[str]:
    """The ``names`` the principal may auto-create: all with CREATE on the cluster, else
    those with CREATE on the topic."""
    return allowed_by_cluster_or_names(ctx, AclOperation.CREATE, AclOperation.CREATE,
                                       ResourceType.TOPIC, names)


def _fields(cls: Any, brokers: list[Any], state: ClusterState, topics: list[Any],
            error: int = E.NONE) -> dict[str, Any]:
    """The response's fields but the cluster's authorized operations."""
    return {
        "throttle_time_ms": 0,
        "brokers": [cls.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port,
                                               rack=b.rack) for b in brokers],
        "cluster_id": state.cluster_id(),
        "controller_id": state.controller_id(),
        "topics": topics,
        "authorized_operations": OPS_NOT_REQUESTED,
        "error_code": error,
    }


def _auto_create(ctx: RequestContext, name: str) -> int:
    """Create ``name`` with the broker's defaults through the placer; the error code the
    topic is answered with (``LEADER_NOT_AVAILABLE`` once created or created meanwhile by
    someone else; the creation's own error otherwise, e.g. ``INVALID_REPLICATION_FACTOR``
    with fewer live brokers than ``default.replication.factor``)."""
    broker = ctx.broker
    member = broker.member
    try:
        if member is None:
            broker.create_topic(name, int(ctx.config["num.partitions"]))
        else:
            _create_through_controller(member, name)
    except Exception as exc:
        code, message = E.error_of(exc)
        if code == E.TOPIC_ALREADY_EXISTS:
            return E.LEADER_NOT_AVAILABLE
        log.warning("auto-creating topic %s for %s failed: %s", name, ctx.peer, message)
        return code
    log.info("topic %s auto-created for %s (auto.create.topics.enable)", name, ctx.peer)
    return E.LEADER_NOT_AVAILABLE


def _create_through_controller(member: Any, name: str) -> None:
    """Ask the active controller to create ``name`` with the broker defaults (the same
    request as ``ClusterClient.create_topic``; the controller's placer places it).

    Raises:
        TransportError: no controller, or the controller's refusal.
    """
    from kafka_tiers.cluster.transport import ApiKey, ErrorCode, TransportError

    md = member.metadata
    ctl = md.controller() if md is not None else None
    reg = md.live_brokers().get(ctl[0]) if md is not None and ctl else None
    if reg is None or member.client is None:
        raise TransportError("no controller is elected yet", ErrorCode.NOT_CONTROLLER)
    member.client.send(f"{reg.host}:{reg.port}", ApiKey.CREATE_TOPICS,
                       {"topic": name, "partitions": None, "replication_factor": None,
                        "config": {}, "timeout_ms": int(AUTO_CREATE_TIMEOUT_S * 1000)},
                       timeout=AUTO_CREATE_TIMEOUT_S + 5)


__all__ = ["INTERNAL_TOPICS", "is_internal", "metadata"]
