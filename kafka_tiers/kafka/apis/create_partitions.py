"""CreatePartitions (key 37, v0-3): a topic continued through the placer.

Per topic (a topic named twice is answered once, ``INVALID_REQUEST``):

- ``count`` is the new total: not above the current count is ``INVALID_PARTITIONS``; the
  bounds of :mod:`kafka_tiers.placement.limits` apply (``max.topic.partitions``, ...); an
  unknown topic is ``UNKNOWN_TOPIC_OR_PARTITION``;
- without ``assignments`` a cluster places the new partitions with the configured placer,
  ``start_partition`` = the current count (so a placer continues the topic's pattern and
  balance), with the topic's replication factor; explicit ``assignments`` (one per new
  partition) are checked like any placement (``INVALID_REPLICA_ASSIGNMENT`` with the reason);
  a standalone broker adds partitions it holds itself;
- the new partitions get leaders before the answer (within ``timeout_ms``, else
  ``REQUEST_TIMED_OUT``, the creation going on), so clients see them on their next Metadata;
- ``validate_only``: every check and the placement run, nothing changes;
- an internal topic (``__consumer_offsets``) is ``INVALID_REQUEST``: its partition count is
  fixed (:mod:`kafka_tiers.kafka.internal_topics`; stricter than Kafka).

Authorization (Kafka's): ALTER on each topic, else ``TOPIC_AUTHORIZATION_FAILED`` (checked
after the duplicates, before the topic is looked up).

Any broker accepts the request; a cluster member that is not the controller forwards it
(:mod:`kafka_tiers.kafka.admin_routing`) after checking the client's permissions: topics it
may not alter are answered there and not forwarded.
"""

from __future__ import annotations

import time
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
from kafka_tiers.kafka.apis.create_topics import wait_for_leaders
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.errors import (
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REQUEST,
    NOT_CONTROLLER,
    KafkaApiError,
)
from kafka_tiers.kafka.internal_topics import Operation, refusal
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import TOPIC_AUTHORIZATION_FAILED, allowed_names
from kafka_tiers.placement.limits import LimitExceededError, check_request_entries


@handles(37, 0, 3)
def create_partitions(ctx: RequestContext, request: Any) -> Any:
    """Grow each topic of the request (see the module docstring)."""
    timeout_ms = int(request.timeout_ms)
    try:  # max.request.topics: every entry refused, nothing changed
        check_request_entries(ctx.config, list(request.topics), "topics", topics=True)
    except LimitExceededError as exc:
        return _answer(ctx, [(t.name, INVALID_REQUEST, str(exc)) for t in request.topics])
    names = [t.name for t in request.topics]
    alterable = allowed_names(ctx, AclOperation.ALTER, ResourceType.TOPIC,
                              (n for n in names if names.count(n) == 1))
    denied: list[tuple[str, int, str | None]] = [
        (t.name, TOPIC_AUTHORIZATION_FAILED, _denial(ctx, t.name))
        for t in request.topics if names.count(t.name) == 1 and t.name not in alterable]
    if not is_local(ctx):
        timeout_s = request_timeout_s(ctx, timeout_ms)
        kept = [t for t in request.topics if t.name in alterable or names.count(t.name) > 1]
        try:
            if not denied:
                return forward_to_controller(ctx, request, timeout_s)
            forwarded = forward_entries(ctx, request, timeout_s, "topics", kept,
                                        "results") if kept else []
        except NotControllerError as exc:
            return _answer(ctx, [*denied, *((t.name, NOT_CONTROLLER, str(exc)) for t in kept)])
        return _answer(ctx, denied, forwarded)
    validate_only = bool(request.validate_only)
    wait_s = timeout_ms / 1000.0 if timeout_ms > 0 else \
        int(ctx.config["request.timeout.ms"]) / 1000.0
    deadline = time.monotonic() + wait_s
    rows: list[tuple[str, int, str | None]] = []
    seen: set[str] = set()
    for t in request.topics:
        if t.name in seen:
            continue
        seen.add(t.name)
        if names.count(t.name) > 1:
            rows.append((t.name, INVALID_REQUEST, f"topic {t.name} is named more than once in "
                         "the request"))
            continue
        if t.name not in alterable:
            rows.append((t.name, TOPIC_AUTHORIZATION_FAILED, _denial(ctx, t.name)))
            continue
        try:
            _grow(ctx, t, validate_only, deadline)
        except Exception as exc:
            rows.append((t.name, *admin_error(exc)))
            continue
        rows.append((t.name, 0, None))
    return _answer(ctx, rows)


def _grow(ctx: RequestContext, t: Any, validate_only: bool, deadline: float) -> None:
    name, count = t.name, int(t.count)
    refused = refusal(name, Operation.CREATE_PARTITIONS)
    if refused is not None:
        raise KafkaApiError(*refused)
    given = None if t.assignments is None else [[int(b) for b in a.broker_ids]
                                                  for a in t.assignments]
    member = ctx.broker.member
    if member is None:
        me = ctx.broker.broker_id
        for i, reps in enumerate(given or ()):
            if reps != [me]:
                raise KafkaApiError(INVALID_REPLICA_ASSIGNMENT, f"new partition {i} of topic "
                                    f"{name}: replicas {reps}; this standalone broker (id "
                                    f"{me}) can only hold [{me}]")
        current = ctx.broker.topic(name).partitions
        if given is not None and len(given) != count - current:
            raise KafkaApiError(INVALID_REPLICA_ASSIGNMENT, f"topic {name}: {len(given)} "
                                f"assignments for {count - current} new partitions")
        ctx.broker.add_partitions(name, count, validate_only=validate_only)
        return
    ctl = member.controller
    if ctl is None:
        raise NotControllerError("the broker is starting")

    def grow() -> int:
        ctl.add_partitions(name, count, assignment=given, validate_only=validate_only)
        return count

    total = ctl.call(grow, timeout=max(deadline - time.monotonic(), 0.001))
    if not validate_only:
        wait_for_leaders(ctx, name, total, deadline)


def _denial(ctx: RequestContext, name: str) -> str:
    return (f"{ctx.principal} may not add partitions to topic {name!r} (ALTER on the topic "
            "is needed)")


def _answer(ctx: RequestContext, rows: list[tuple[str, int, str | None]],
            forwarded: list[Any] | None = None) -> Any:
    """The response: ``forwarded`` (the controller's answers, decoded), then ``rows``."""
    Result = codec.RESPONSES[37].CreatePartitionsTopicResult
    return ctx.response(throttle_time_ms=0, results=[*(forwarded or []), *(
        Result(name=name, error_code=code, error_message=message)
        for name, code, message in rows)])


__all__ = ["create_partitions"]
