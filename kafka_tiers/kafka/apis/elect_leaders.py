"""ElectLeaders (key 43, v0-v2; KIP-183, KIP-460): preferred and unclean leader elections.

- PREFERRED (0; v0 knows no other): the leadership moves to the first assigned replica when it
  is alive and in the ISR; ``ELECTION_NOT_NEEDED`` when it leads already,
  ``PREFERRED_LEADER_NOT_AVAILABLE`` otherwise.
- UNCLEAN (1): a partition without a leader gets a live ISR replica, or, only when no ISR
  replica is alive, the first live replica outside the ISR (records may be lost);
  ``ELECTION_NOT_NEEDED`` when it has a leader, ``ELIGIBLE_LEADERS_NOT_AVAILABLE`` when no
  replica is alive.
- ``topic_partitions`` null: every partition; as Kafka's controller answers that, partitions
  whose election was not needed are left out of the answer.
- Any broker serves it: the controller elects; another broker forwards the request to the
  controller over the internal transport and relays the answer. A standalone broker leads
  every partition it holds (``ELECTION_NOT_NEEDED``; an offline partition has no eligible
  leader).
- Authorization: ALTER on the cluster, checked on the broker the client asked before anything
  is forwarded (else ``CLUSTER_AUTHORIZATION_FAILED`` for the request and every partition
  named, as Kafka).
- Errors for the whole request (v1+ ``error_code``, and every partition): ``NOT_CONTROLLER``
  when no controller is known, ``REQUEST_TIMED_OUT``, ``INVALID_REQUEST`` (an unknown election
  type, more partitions than ``max.request.partitions``); a partition named twice is answered
  ``INVALID_REQUEST``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.cluster.transport import ApiKey, ErrorCode, TransportError
from kafka_tiers.kafka import errors as kerr
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import AnswerKey, RequestEntry, topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import CLUSTER_AUTHORIZATION_FAILED
from kafka_tiers.placement.limits import LimitExceededError, check_request_entries

PREFERRED = 0
UNCLEAN = 1
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83

Result = tuple[int, str | None]


def code_of(exc: BaseException) -> Result:
    """``(code, message)`` of an exception (a limit refusal carries its code by name)."""
    if isinstance(exc, LimitExceededError):
        try:
            return int(ErrorCode[exc.error_code]), str(exc)
        except KeyError:
            return kerr.INVALID_REQUEST, str(exc)
    return kerr.error_of(exc)


def controller_call(ctx: RequestContext, api: ApiKey, body: dict[str, Any], local: Any,
                    timeout_s: float) -> Any:
    """Run ``local(controller)`` when this broker is the active controller, else send ``body``
    as ``api`` to the controller over the internal transport and return the answer's body.

    Raises:
        TransportError: ``NOT_CONTROLLER`` (none known), a timeout, or the answer's error.
    """
    member = ctx.broker.member
    assert member is not None and member.metadata is not None
    ctl = member.controller
    if ctl is not None and ctl.active:
        return ctl.call(lambda: local(ctl), timeout=timeout_s)
    current = member.metadata.controller()
    reg = member.metadata.live_brokers().get(current[0]) if current else None
    if reg is None or member.client is None:
        raise TransportError("no controller is known yet; retry", ErrorCode.NOT_CONTROLLER)
    return member.client.send(f"{reg.host}:{reg.port}", api, body,
                              timeout=timeout_s + 5).body


def _requested(request: Any) -> tuple[list[TopicPartition] | None, dict[AnswerKey, Result]]:
    """The distinct partitions asked for (None: all) and the answers already known (a
    partition named twice, an empty topic name or a negative partition)."""
    if request.topic_partitions is None:
        return None, {}
    seen: list[TopicPartition] = []
    dup: dict[AnswerKey, Result] = {}
    for t in request.topic_partitions:
        for p in t.partitions:
            tp, refused = topic_partition_or_error(t.topic, int(p))
            if tp is None:
                assert refused is not None
                dup[RequestEntry(t.topic or "", int(p))] = refused
                continue
            if tp in dup:
                continue
            if tp in seen:
                seen.remove(tp)
                dup[tp] = (kerr.INVALID_REQUEST, f"{tp} is named twice in the request")
            else:
                seen.append(tp)
    return seen, dup


def _too_many(ctx: RequestContext, tps: list[AnswerKey]) -> Result | None:
    try:
        check_request_entries(ctx.config, tps, "partitions to elect")
    except Exception as exc:
        return code_of(exc)
    return None


def _standalone(state: ClusterState, tps: Iterable[TopicPartition] | None, kind: int
                ) -> dict[TopicPartition, Result]:
    out: dict[TopicPartition, Result] = {}
    if tps is None:
        tps = []
        for name in state.topic_names():
            topic = state.topic(name)
            tps += [TopicPartition(name, p) for p in sorted(topic.partitions)] if topic else []
    for tp in tps:
        part = state.partition(tp)
        if part is None:
            out[tp] = (kerr.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp}")
        elif part.leader >= 0:
            out[tp] = (kerr.ELECTION_NOT_NEEDED,
                       f"a standalone broker leads its partitions: {part.leader} leads {tp}")
        elif kind == PREFERRED:
            out[tp] = (PREFERRED_LEADER_NOT_AVAILABLE, f"{tp} is offline on this broker")
        else:
            out[tp] = (ELIGIBLE_LEADERS_NOT_AVAILABLE, f"{tp} is offline on this broker")
    return out


def _clustered(ctx: RequestContext, tps: list[TopicPartition] | None, kind: int,
               timeout_s: float) -> dict[TopicPartition, Result]:
    body: dict[str, Any] = {"election_type": kind}
    if tps is not None:
        body["partitions"] = [{"topic": tp.topic, "partition": tp.partition} for tp in tps]

    def local(ctl: Any) -> dict[str, Any]:
        done = ctl.elect_leaders(tps, unclean=kind == UNCLEAN)
        return {"elections": [{"topic": tp.topic, "partition": tp.partition, "error": code,
                               "message": msg} for tp, (code, msg) in done.items()]}

    answer = controller_call(ctx, ApiKey.ELECT_LEADERS, body, local, timeout_s)
    return {TopicPartition(e["topic"], int(e["partition"])): (int(e["error"]), e.get("message"))
            for e in answer["elections"]}


@handles(43, 0, 2)
def elect_leaders(ctx: RequestContext, request: Any) -> Any:
    """Elect leaders (see the module docstring); never raises for what Kafka names."""
    version = ctx.version
    kind = int(request.election_type) if version >= 1 else PREFERRED
    tps, known = _requested(request)
    state = ClusterState(ctx.broker, ctx.listener)
    top: Result = (0, None)
    results: dict[AnswerKey, Result] = {}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        top = (CLUSTER_AUTHORIZATION_FAILED, f"{ctx.principal} may not elect leaders (ALTER "
               "on the cluster is needed)")
    elif kind not in (PREFERRED, UNCLEAN):
        top = (kerr.INVALID_REQUEST, f"unknown election type {kind} (0: preferred, 1: unclean)")
    elif tps is not None and (bound := _too_many(ctx, [*tps, *known])) is not None:
        top = bound
    elif state.clustered:
        timeout_s = max(int(request.timeout_ms), 1000) / 1000.0
        try:
            results = {k: r for k, r in _clustered(ctx, tps, kind, timeout_s).items()}
        except Exception as exc:
            top = code_of(exc)
    else:
        results = {k: r for k, r in _standalone(state, tps, kind).items()}
    if top[0] != 0:  # every partition asked for gets the request's error
        results = {tp: top for tp in [*(tps or []), *known]}
        known = {}
    elif tps is None:
        results = {tp: r for tp, r in results.items() if r[0] != kerr.ELECTION_NOT_NEEDED}
    results.update(known)
    return _response(ctx, top, results)


def _response(ctx: RequestContext, top: Result, results: dict[AnswerKey, Result]) -> Any:
    cls = response_class(43, ctx.version)
    topic_cls = cls.ReplicaElectionResult
    part_cls = topic_cls.PartitionResult
    by_topic: dict[str, list[Any]] = {}
    for tp in sorted(results, key=lambda t: (t.topic, t.partition)):
        code, msg = results[tp]
        by_topic.setdefault(tp.topic, []).append(
            part_cls(partition_id=tp.partition, error_code=code, error_message=msg))
    fields: dict[str, Any] = {
        "throttle_time_ms": 0,
        "replica_election_results": [topic_cls(topic=t, partition_result=parts)
                                     for t, parts in by_topic.items()]}
    if ctx.version >= 1:
        fields["error_code"] = top[0]
    return ctx.response(**fields)


__all__ = ["code_of", "controller_call", "elect_leaders"]
