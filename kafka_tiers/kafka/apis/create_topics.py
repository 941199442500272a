"""CreateTopics (key 19, v2-7): topics created through the configured placer.

Per topic, in request order (a name given twice is answered once, ``INVALID_REQUEST``):

- the name is checked (``INVALID_TOPIC_EXCEPTION``); ``num_partitions`` /
  ``replication_factor`` of -1 take the broker's ``num.partitions`` /
  ``default.replication.factor``; explicit ``assignments`` (with both counts -1, else
  ``INVALID_REQUEST``) are checked like any placement (``INVALID_REPLICA_ASSIGNMENT`` with the
  reason: partitions 0..n-1 once each, one replication factor, distinct live brokers);
- the configs are validated as the broker validates every topic config (``INVALID_CONFIG``
  naming the key; unknown keys refused); the counts against the bounds of
  :mod:`kafka_tiers.placement.limits` (``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``,
  ``POLICY_VIOLATION``); an existing topic is ``TOPIC_ALREADY_EXISTS``;
- a cluster places the topic on the controller (:meth:`Controller.create_topic`, through
  ``broker.replica.placer``) and writes it; a standalone broker creates it with replication
  factor 1 (any other is ``INVALID_REPLICATION_FACTOR``);
- ``validate_only``: every check and the placement run, nothing is created, and the answer is
  the one the creation would have had (topic id: zero);
- ``timeout_ms``: how long to wait for the creation and for every partition to have a leader;
  past it the answer is ``REQUEST_TIMED_OUT`` (the creation goes on, as in Kafka);
- v5+ answers carry the topic's partitions, replication factor and configs (as
  DescribeConfigs shows them), v7 its topic id.

Authorization (Kafka's): CREATE on the cluster, or on each topic (else
``TOPIC_AUTHORIZATION_FAILED``); the configs of the answer need DESCRIBE_CONFIGS on the topic
(else none, and ``topic_config_error_code`` ``TOPIC_AUTHORIZATION_FAILED``).

Any broker accepts the request; a cluster member that is not the controller forwards it
(:mod:`kafka_tiers.kafka.admin_routing`), after checking the client's permissions: topics it
may not create are answered there and not forwarded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafka_tiers.api import ConfigError
from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.cluster.transport import ApiError, ErrorCode
from kafka_tiers.kafka import codec
from kafka_tiers.kafka.admin_routing import (
    NotControllerError,
    admin_error,
    forward_entries,
    forward_to_controller,
    is_local,
    request_timeout_s,
)
from kafka_tiers.kafka.apis.configs import topic_entries
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.errors import (
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    NOT_CONTROLLER,
    REQUEST_TIMED_OUT,
    TOPIC_ALREADY_EXISTS,
    KafkaApiError,
)
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import (
    TOPIC_AUTHORIZATION_FAILED,
    allowed_by_cluster_or_names,
    allowed_names,
)
from kafka_tiers.kafka.topic_ids import ZERO_UUID, topic_id
from kafka_tiers.log.names import validate_topic
from kafka_tiers.placement.limits import LimitExceededError, as_count, check_request_entries


def wait_for_leaders(ctx: RequestContext, topic: str, partitions: int, deadline: float
                     ) -> None:
    """Return once every one of ``partitions`` partitions of ``topic`` has a leader in the
    cluster's state.

    Raises:
        KafkaApiError: ``REQUEST_TIMED_OUT`` at ``deadline`` (monotonic seconds).
    """
    while True:
        view = ClusterState(ctx.broker, ctx.listener).topic(topic)
        if view is not None and len(view.partitions) >= partitions and all(
                p.leader >= 0 for p in view.partitions.values()):
            return
        if time.monotonic() >= deadline:
            missing = [] if view is None else sorted(
                p for p, pv in view.partitions.items() if pv.leader < 0)
            raise KafkaApiError(REQUEST_TIMED_OUT, f"topic {topic} is created but partitions "
                                f"{missing[:10]} have no leader yet within the request's "
                                "timeout; they get one as their brokers come up")
        time.sleep(0.02)


def _configs(topic: str, entries: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in entries or ():
        if c.value is None:
            raise ConfigError(f"config {c.name} of topic {topic} has a null value; give a "
                              "value or leave the key out", key=c.name)
        if c.name in out:
            raise KafkaApiError(INVALID_REQUEST, f"config {c.name} of topic {topic} is given "
                                "more than once")
        out[c.name] = c.value
    return out


#: what a created (or checked) topic is answered with: partitions, replication factor, config
Created = tuple[int, int, dict[str, str]]


def _create_one(ctx: RequestContext, t: Any, validate_only: bool, deadline: float
                ) -> Created:
    """Create (or check) one topic; returns its partition count, replication factor and
    config."""
    name = t.name
    validate_topic(name)
    config = _configs(name, t.configs)
    assignment = {int(a.partition_index): [int(b) for b in a.broker_ids]
                  for a in t.assignments or ()}
    if t.assignments and len(assignment) != len(t.assignments):
        raise KafkaApiError(INVALID_REPLICA_ASSIGNMENT, f"the assignment of topic {name} "
                            "gives a partition more than once")
    if assignment and (t.num_partitions != -1 or t.replication_factor != -1):
        raise KafkaApiError(INVALID_REQUEST, f"topic {name}: give either assignments or "
                            f"num_partitions/replication_factor (got {t.num_partitions} and "
                            f"{t.replication_factor} with {len(assignment)} assignments), "
                            "not both")
    cfg = ctx.config
    parts = cfg["num.partitions"] if t.num_partitions == -1 else t.num_partitions
    member = ctx.broker.member
    if member is None:
        return _create_standalone(ctx, name, parts, t.replication_factor, config, assignment,
                                  validate_only)
    rf = cfg["default.replication.factor"] if t.replication_factor == -1 else \
        t.replication_factor
    if not assignment:
        as_count(parts, f"the partition count of topic {name}",
                 error_code="INVALID_PARTITIONS")
        as_count(rf, f"the replication factor of topic {name}",
                 error_code="INVALID_REPLICATION_FACTOR")
    ctl = member.controller
    if ctl is None:
        raise NotControllerError("the broker is starting")

    def create() -> dict[int, list[int]]:  # refuses an existing topic (TOPIC_ALREADY_EXISTS)
        return ctl.create_topic(name, parts, rf, config, assignment=assignment or None,
                                validate_only=validate_only)

    left = deadline - time.monotonic()
    try:
        plan = ctl.call(create, timeout=max(left, 0.001))
    except ApiError as exc:
        if exc.code != ErrorCode.REQUEST_TIMED_OUT:
            raise
        raise KafkaApiError(REQUEST_TIMED_OUT, f"topic {name} was not created within the "
                            "request's timeout_ms; the controller goes on creating it (check "
                            "with Metadata before creating it again)") from None
    created = len(plan)
    factor = len(next(iter(plan.values()))) if plan else 0
    if not validate_only:
        wait_for_leaders(ctx, name, created, deadline)
    return created, factor, config


def _create_standalone(ctx: RequestContext, name: str, parts: Any, rf: int,
                       config: Mapping[str, str], assignment: Mapping[int, list[int]],
                       validate_only: bool) -> Created:
    broker = ctx.broker
    me = broker.broker_id
    if assignment:
        if sorted(assignment) != list(range(len(assignment))):
            raise KafkaApiError(INVALID_REPLICA_ASSIGNMENT, f"the assignment of topic {name} "
                                f"must give partitions 0 to {len(assignment) - 1} once each; "
                                f"got {sorted(assignment)[:10]}")
        for p, reps in sorted(assignment.items()):
            if reps != [me]:
                raise KafkaApiError(INVALID_REPLICA_ASSIGNMENT, f"partition {p} of topic "
                                    f"{name}: replicas {reps}; this standalone broker "
                                    f"(id {me}) can only hold [{me}]")
        parts = len(assignment)
    elif rf not in (-1, 1):
        raise KafkaApiError(INVALID_REPLICATION_FACTOR, f"replication factor {rf} of topic "
                            f"{name}: a standalone broker holds one replica (use 1 or -1)")
    parts = as_count(parts, f"the partition count of topic {name}",
                     error_code="INVALID_PARTITIONS")
    if validate_only:
        if name in broker.topics():
            raise KafkaApiError(TOPIC_ALREADY_EXISTS, f"topic {name!r} exists already")
        broker.topic_configs.validate(name, config)
        broker.topic_configs.check_new_partitions(name, parts)
    else:
        broker.create_topic(name, parts, dict(config))
    return parts, 1, dict(config)


@handles(19, 2, 7)
def create_topics(ctx: RequestContext, request: Any) -> Any:
    """Create each topic of the request (see the module docstring)."""
    timeout_ms = int(request.timeout_ms)
    validate_only = bool(getattr(request, "validate_only", False))
    try:  # max.request.topics: every entry refused, nothing created
        check_request_entries(ctx.config, list(request.topics), "topics", topics=True)
    except LimitExceededError as exc:
        return _answer(ctx, [(t.name, INVALID_REQUEST, str(exc), None)
                             for t in _distinct(request.topics)])
    names = [t.name for t in request.topics]
    creatable = allowed_by_cluster_or_names(ctx, AclOperation.CREATE, AclOperation.CREATE,
                                            ResourceType.TOPIC, names)
    # the configs are in the answer from v5 on: only then does DESCRIBE_CONFIGS matter
    configs_shown = allowed_names(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                  names, log_if_denied=False) if ctx.version >= 5 \
        else set(names)
    denied: list[tuple[str, int, str | None, Created | None]] = [
        (t.name, TOPIC_AUTHORIZATION_FAILED, _denial(ctx, t.name), None)
        for t in _distinct(request.topics)
        if t.name not in creatable and names.count(t.name) == 1]
    if not is_local(ctx):
        timeout_s = request_timeout_s(ctx, timeout_ms)
        try:
            if not denied and configs_shown.issuperset(names):
                return forward_to_controller(ctx, request, timeout_s)
            kept = [t for t in request.topics if t.name in creatable
                    or names.count(t.name) > 1]
            forwarded = forward_entries(ctx, request, timeout_s, "topics", kept,
                                        "topics") if kept else []
        except NotControllerError as exc:
            return _answer(ctx, [*denied, *((t.name, NOT_CONTROLLER, str(exc), None)
                                            for t in _distinct(request.topics)
                                            if t.name in creatable
                                            or names.count(t.name) > 1)])
        for r in forwarded:  # the configs as this client may see them
            if r.name not in configs_shown and r.error_code == 0 and ctx.version >= 5:
                r.configs, r.topic_config_error_code = None, TOPIC_AUTHORIZATION_FAILED
        return _answer(ctx, denied, validate_only, configs_shown, forwarded)
    wait_s = timeout_ms / 1000.0 if timeout_ms > 0 else int(ctx.config["request.timeout.ms"]) \
        / 1000.0
    deadline = time.monotonic() + wait_s
    rows: list[tuple[str, int, str | None, Created | None]] = []
    for t in _distinct(request.topics):
        if names.count(t.name) > 1:
            rows.append((t.name, INVALID_REQUEST, f"topic {t.name} is given more than once "
                         "in the request", None))
            continue
        if t.name not in creatable:
            rows.append((t.name, TOPIC_AUTHORIZATION_FAILED, _denial(ctx, t.name), None))
            continue
        try:
            created = _create_one(ctx, t, validate_only, deadline)
        except Exception as exc:
            code, message = admin_error(exc)
            rows.append((t.name, code, message, None))
            continue
        rows.append((t.name, 0, None, created))
    return _answer(ctx, rows, validate_only, configs_shown)


def _denial(ctx: RequestContext, name: str) -> str:
    return (f"{ctx.principal} may not create topic {name!r} (CREATE on the cluster or on the "
            "topic is needed)")


def _distinct(topics: Any) -> list[Any]:
    seen: set[str] = set()
    out = []
    for t in topics:
        if t.name not in seen:
            seen.add(t.name)
            out.append(t)
    return out


def _answer(ctx: RequestContext,
            rows: list[tuple[str, int, str | None, Created | None]],
            validate_only: bool = False, configs_shown: set[str] | None = None,
            forwarded: list[Any] | None = None) -> Any:
    """The response: ``forwarded`` (the controller's answers, decoded), then ``rows``; a
    topic not in ``configs_shown`` (None: every topic) is answered without its configs."""
    Result = codec.RESPONSES[19].CreatableTopicResult
    Config = Result.CreatableTopicConfigs
    out = list(forwarded or [])
    for name, code, message, created in rows:
        fields: dict[str, Any] = {"name": name, "error_code": code, "error_message": message,
                                  "topic_id": ZERO_UUID, "num_partitions": -1,
                                  "replication_factor": -1, "configs": None}
        hidden = configs_shown is not None and name not in configs_shown
        if hidden and ctx.version >= 5 and code in (0, TOPIC_AUTHORIZATION_FAILED):
            fields["topic_config_error_code"] = TOPIC_AUTHORIZATION_FAILED
        if code == 0 and created is not None and ctx.version >= 5:
            fields["num_partitions"], fields["replication_factor"], config = created
            if not hidden:
                fields["configs"] = [Config(name=e.name, value=e.value,
                                            read_only=e.read_only, config_source=e.source,
                                            is_sensitive=e.sensitive)
                                     for e in topic_entries(ctx.config, config)]
            if not validate_only:
                fields["topic_id"] = topic_id(ctx.broker, name) or ZERO_UUID
        out.append(Result(**fields))
    return ctx.response(throttle_time_ms=0, topics=out)


__all__ = ["create_topics", "wait_for_leaders"]
