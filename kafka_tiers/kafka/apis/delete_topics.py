"""DeleteTopics (key 20, v1-6): topics deleted with their remote data.

Topics are named (v1-5: ``topic_names``; v6: ``topics`` by name or by topic id). Per topic:

- an unknown name is ``UNKNOWN_TOPIC_OR_PARTITION``, an unknown id ``UNKNOWN_TOPIC_ID``; a
  topic named twice is answered once, ``INVALID_REQUEST``;
- Kafka's internal topics (:data:`INTERNAL_TOPICS`: the consumer groups' offsets, ...) are
  protected: ``INVALID_REQUEST``;
- a tiered topic's remote data is deleted first (every remote segment of every partition,
  through the storage plugin; document 004), then its replicas and its metadata: a standalone
  broker as :meth:`Broker.delete_topic`, a cluster as :meth:`Controller.delete_topic`. When
  the remote tier refuses, the answer is ``KAFKA_STORAGE_ERROR`` and the topic stays (repeat
  the deletion);
- ``timeout_ms`` bounds the wait for the deletion (``REQUEST_TIMED_OUT`` past it; the
  deletion goes on).

Authorization (Kafka's): DELETE on each topic (else ``TOPIC_AUTHORIZATION_FAILED``, whether or
not it exists); a topic named by id also needs DESCRIBE, else its name is not returned
(``TOPIC_AUTHORIZATION_FAILED`` with the id only). Checked on the broker the client asked,
before anything is forwarded.

Any broker accepts the request; a cluster member that is not the controller forwards it
(:mod:`kafka_tiers.kafka.admin_routing`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka import codec
from kafka_tiers.kafka.admin_routing import (
    NotControllerError,
    admin_error,
    forward_entries,
    forward_to_controller,
    is_local,
    request_timeout_s,
)
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.errors import (
    INVALID_REQUEST,
    NOT_CONTROLLER,
    UNKNOWN_TOPIC_OR_PARTITION,
    KafkaApiError,
)
from kafka_tiers.kafka.internal_topics import UNDELETABLE_TOPICS, Operation, refusal
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import TOPIC_AUTHORIZATION_FAILED, allowed_names
from kafka_tiers.kafka.topic_ids import ZERO_UUID, topic_id, topic_name
from kafka_tiers.placement.limits import LimitExceededError, check_request_entries

UNKNOWN_TOPIC_ID = 100
#: topics no client may delete (Kafka's internal topics; :mod:`..internal_topics`)
INTERNAL_TOPICS = UNDELETABLE_TOPICS


def _wanted(ctx: RequestContext, request: Any) -> list[tuple[str | None, uuid.UUID]]:
    """``(name or None, id)`` per entry of the request."""
    if ctx.version >= 6:
        return [(t.name or None, t.topic_id or ZERO_UUID) for t in request.topics]
    return [(name, ZERO_UUID) for name in request.topic_names]


@handles(20, 1, 6)
def delete_topics(ctx: RequestContext, request: Any) -> Any:
    """Delete each topic of the request (see the module docstring)."""
    timeout_ms = int(request.timeout_ms)
    wanted = _wanted(ctx, request)
    try:  # max.request.topics: every entry refused, nothing deleted
        check_request_entries(ctx.config, wanted, "topics", topics=True)
    except LimitExceededError as exc:
        return _answer(ctx, [(n, i, INVALID_REQUEST, str(exc)) for n, i in wanted])
    resolved: list[tuple[str | None, uuid.UUID, str | None]] = []
    for name, tid in wanted:
        if name is None and tid.int != 0:
            name_of_id = topic_name(ctx.broker, tid)
            resolved.append((None, tid, name_of_id))
        else:
            resolved.append((name, tid, name))
    denied = _denied(ctx, resolved)
    if not is_local(ctx):
        timeout_s = request_timeout_s(ctx, timeout_ms)
        try:
            if not denied:
                return forward_to_controller(ctx, request, timeout_s)
            kept = [e for i, e in enumerate(_entries(ctx, request)) if i not in denied]
            forwarded = forward_entries(ctx, request, timeout_s, _field(ctx), kept,
                                        "responses") if kept else []
        except NotControllerError as exc:
            return _answer(ctx, [denied.get(i, (n, t, NOT_CONTROLLER, str(exc)))
                                 for i, (n, t) in enumerate(wanted)])
        return _answer(ctx, list(denied.values()), forwarded)
    wait_s = timeout_ms / 1000.0 if timeout_ms > 0 else \
        int(ctx.config["request.timeout.ms"]) / 1000.0
    deadline = time.monotonic() + wait_s
    rows: list[tuple[str | None, uuid.UUID, int, str | None]] = []
    targets = [t for _, _, t in resolved if t is not None]
    done: set[str] = set()
    for i, (asked, tid, name) in enumerate(resolved):
        if i in denied:
            rows.append(denied[i])
            continue
        if name is None:
            rows.append((asked, tid, UNKNOWN_TOPIC_ID if asked is None else
                         UNKNOWN_TOPIC_OR_PARTITION,
                         f"no topic has the id {tid}" if asked is None else
                         "no topic name given"))
            continue
        if name in done:
            continue
        done.add(name)
        if targets.count(name) > 1:
            rows.append((name, tid, INVALID_REQUEST, f"topic {name} is named more than once "
                         "in the request"))
            continue
        try:
            known = tid if tid.int != 0 else topic_id(ctx.broker, name) or ZERO_UUID
            _delete_one(ctx, name, deadline)
        except Exception as exc:
            code, message = admin_error(exc)
            rows.append((name, tid, code, message))
            continue
        rows.append((name, known, 0, None))
    return _answer(ctx, rows)


def _field(ctx: RequestContext) -> str:
    """The request's field of topics at this version."""
    return "topics" if ctx.version >= 6 else "topic_names"


def _entries(ctx: RequestContext, request: Any) -> list[Any]:
    return list(getattr(request, _field(ctx)))


def _denied(ctx: RequestContext, resolved: list[tuple[str | None, uuid.UUID, str | None]]
            ) -> dict[int, tuple[str | None, uuid.UUID, int, str | None]]:
    """The answers of the entries (by index) the principal may not delete (Kafka's order:
    an id whose topic it may not describe hides the name; then DELETE on the topic)."""
    names = [n for _, _, n in resolved if n is not None]
    deletable = allowed_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
    by_id = [n for asked, _, n in resolved if asked is None and n is not None]
    describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_id)
    out: dict[int, tuple[str | None, uuid.UUID, int, str | None]] = {}
    for i, (asked, tid, name) in enumerate(resolved):
        if name is None:
            continue
        if asked is None and name not in describable:
            out[i] = (None, tid, TOPIC_AUTHORIZATION_FAILED,
                      f"{ctx.principal} may not describe the topic of id {tid}")
        elif name not in deletable:
            out[i] = (asked, tid, TOPIC_AUTHORIZATION_FAILED,
                      f"{ctx.principal} may not delete topic {name!r} (DELETE on the topic "
                      "is needed)")
    return out


def _delete_one(ctx: RequestContext, name: str, deadline: float) -> None:
    refused = refusal(name, Operation.DELETE_TOPIC)
    if refused is not None:
        raise KafkaApiError(*refused)
    member = ctx.broker.member
    if member is None:
        ctx.broker.delete_topic(name)
        return
    ctl = member.controller
    if ctl is None:
        raise NotControllerError("the broker is starting")
    if ctx.broker.metadata is not None and ctx.broker.metadata.topic(name) is None:
        raise KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
    ctl.call(lambda: ctl.delete_topic(name), timeout=max(deadline - time.monotonic(), 0.001))


def _answer(ctx: RequestContext, rows: list[tuple[str | None, uuid.UUID, int, str | None]],
            forwarded: list[Any] | None = None) -> Any:
    """The response: ``forwarded`` (the controller's answers, decoded), then ``rows``."""
    Result = codec.RESPONSES[20].DeletableTopicResult
    return ctx.response(throttle_time_ms=0, responses=[*(forwarded or []), *(
        Result(name=name if name is not None or ctx.version >= 6 else "", topic_id=tid,
               error_code=code, error_message=message)
        for name, tid, code, message in rows)])


__all__ = ["INTERNAL_TOPICS", "delete_topics"]
