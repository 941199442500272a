"""The shape of every request body the broker serves, checked before its handler runs.

Every API key a :class:`~kafka_tiers.cluster.member.ClusterMember` registers has a schema
here (:data:`REQUEST_SCHEMAS`): the JSON type of each field its handler reads, which fields
are required, and the bound of every list (the ``max.request.*`` keys of
:mod:`kafka_tiers.placement.limits`, or :data:`CONTROLLER_REQUEST_MAX_PARTITIONS` for the
controller's requests). :meth:`HandlerTable.handle
<kafka_tiers.cluster.transport.HandlerTable.handle>` runs the schema first: a malformed field
is answered ``INVALID_REQUEST`` naming the field, what was expected and what came, with one
WARN line, and the handler never sees it. Counts the handlers check themselves with their
own Kafka error code (``partitions`` -> ``INVALID_PARTITIONS``, ...) are :data:`ANY` here.

Integers are JSON integers (``true`` and ``1.5`` are refused, not converted); timeouts are
Kafka's int32 milliseconds from 0 to 2147483647 (a negative timeout is refused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.cluster.transport import ApiError, ApiKey, ErrorCode
from kafka_tiers.placement.limits import (
    MAX_BROKER_PARTITIONS,
    MAX_REQUEST_PARTITIONS,
    MAX_REQUEST_TOPICS,
)

#: the largest magnitude of an integer field (Kafka's int64).
_INT64 = 1 << 63
#: the largest int32 (Kafka's timeouts, epochs, partition numbers and broker ids).
INT32_MAX = (1 << 31) - 1
#: the largest timeout (Kafka's int32 milliseconds).
MAX_TIMEOUT_MS = INT32_MAX

#: the most partitions one LeaderAndIsr or StopReplica request carries: the controller sends a
#: broker's share in requests of at most this many (one after another), and a broker refuses a
#: longer list. A protocol constant, not a config key, so brokers configured differently from
#: the controller never refuse its requests; 10,000 replicas to create take a broker about 8 s.
CONTROLLER_REQUEST_MAX_PARTITIONS = 10000

_BOUND_DEFAULTS = {"max.request.partitions": MAX_REQUEST_PARTITIONS,
                   "max.request.topics": MAX_REQUEST_TOPICS,
                   "max.broker.partitions": MAX_BROKER_PARTITIONS}


class MalformedRequestError(ApiError):
    """A request field has the wrong JSON type, is missing, or is out of its range;
    answered ``INVALID_REQUEST`` (nothing was done)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.INVALID_REQUEST, nothing_done=True)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


class Spec:
    """A field's expected shape. ``check`` raises :class:`MalformedRequestError`."""

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Scalar(Spec):
    """A JSON scalar of one type: ``int`` (not a bool, within ``lo``..``hi``), ``str`` or
    ``bool``."""

    type: type
    lo: int = -_INT64
    hi: int = _INT64 - 1

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise MalformedRequestError(f"{path} must be an integer, got {_kind(value)}")
            if not self.lo <= value <= self.hi:
                raise MalformedRequestError(
                    f"{path} must be from {self.lo} to {self.hi}, got {value}")
        elif not isinstance(value, self.type):
            name = {str: "a string", bool: "a boolean"}.get(self.type, self.type.__name__)
            raise MalformedRequestError(f"{path} must be {name}, got {_kind(value)}")


class AnyValue(Spec):
    """Any value: the handler checks it with its own error code."""

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        return None


class ConfigValue(Spec):
    """A config value: a string, a number or a boolean (never a list or an object)."""

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        if not isinstance(value, str | int | float | bool):
            raise MalformedRequestError(
                f"{path} must be a string, a number or a boolean, got {_kind(value)}")


@dataclass(frozen=True)
class Nullable(Spec):
    """``inner`` or null."""

    inner: Spec

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        if value is not None:
            self.inner.check(value, path, limits)


def _bound(limits: Mapping[str, Any], key: str | int) -> int:
    if isinstance(key, int):
        return key
    try:
        return int(limits[key])
    except (KeyError, TypeError, ValueError):
        return _BOUND_DEFAULTS[key]


@dataclass(frozen=True)
class ListOf(Spec):
    """A list of ``item``, at most as long as the config key ``bound`` allows (or ``bound``
    items when it is an int)."""

    item: Spec
    bound: str | int = "max.request.partitions"

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        if not isinstance(value, list):
            raise MalformedRequestError(f"{path} must be a list, got {_kind(value)}")
        cap = _bound(limits, self.bound)
        if len(value) > cap:
            raise MalformedRequestError(
                f"{len(value)} items in {path} exceed {self.bound} {cap}; send several "
                f"requests or raise {self.bound}")
        for i, v in enumerate(value):
            self.item.check(v, f"{path}[{i}]", limits)


@dataclass(frozen=True)
class MapOf(Spec):
    """A JSON object of any keys to ``value``, at most ``bound`` entries."""

    value: Spec
    bound: str = "max.request.partitions"

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        if not isinstance(value, dict):
            raise MalformedRequestError(f"{path} must be an object, got {_kind(value)}")
        cap = _bound(limits, self.bound)
        if len(value) > cap:
            raise MalformedRequestError(
                f"{len(value)} entries in {path} exceed {self.bound} {cap}")
        for k, v in value.items():
            self.value.check(v, f"{path}[{k[:50]!r}]", limits)


@dataclass(frozen=True)
class Obj(Spec):
    """A JSON object with ``required`` and ``optional`` fields (others are ignored)."""

    required: Mapping[str, Spec] = field(default_factory=dict)
    optional: Mapping[str, Spec] = field(default_factory=dict)

    def check(self, value: Any, path: str, limits: Mapping[str, Any]) -> None:
        if not isinstance(value, dict):
            raise MalformedRequestError(f"{path} must be an object, got {_kind(value)}")
        for name, spec in self.required.items():
            if name not in value:
                raise MalformedRequestError(f"{path}.{name} is missing")
            spec.check(value[name], f"{path}.{name}", limits)
        for name, spec in self.optional.items():
            if name in value:
                spec.check(value[name], f"{path}.{name}", limits)


INT = Scalar(int)
STR = Scalar(str)
BOOL = Scalar(bool)
#: checked by the handler itself, with its own error code (a count: ``as_count``)
ANY = AnyValue()
INDEX = Scalar(int, 0, INT32_MAX)
BROKER_ID = Scalar(int, -1, INT32_MAX)
EPOCH = Scalar(int, -1, INT32_MAX)
INT64 = Scalar(int)
TIMEOUT_MS = Nullable(Scalar(int, 0, MAX_TIMEOUT_MS))
#: a topic config: names to scalar values
CONFIG = Nullable(MapOf(ConfigValue(), bound="max.request.topics"))
BROKER_IDS = ListOf(BROKER_ID)
TOPICS = ListOf(STR, bound="max.request.topics")

_TP = {"topic": STR, "partition": INDEX}
_CONTROLLER = {"controller_id": BROKER_ID, "controller_epoch": Scalar(int, 0, INT32_MAX),
               "brokers": MapOf(STR), "fenced": BROKER_IDS}

#: the body schema of every api key the cluster broker serves.
REQUEST_SCHEMAS: dict[int, Obj] = {
    ApiKey.PRODUCE: Obj(_TP, {"acks": INT, "timeout_ms": TIMEOUT_MS}),
    # a fetch's max_bytes and max_wait_ms are clamped (fetch.max.bytes, request.timeout.ms)
    ApiKey.FETCH: Obj(
        {"partitions": ListOf(Obj({**_TP, "offset": INT64},
                                  {"current_leader_epoch": Nullable(EPOCH)}))},
        {"replica_id": BROKER_ID, "max_bytes": Scalar(int, 0),
         "max_wait_ms": Scalar(int, 0)}),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Obj(
        {"partitions": ListOf(Obj({**_TP, "leader_epoch": EPOCH},
                                  {"current_leader_epoch": Nullable(EPOCH)}))}),
    # the controller's requests: at most CONTROLLER_REQUEST_MAX_PARTITIONS entries each
    ApiKey.LEADER_AND_ISR: Obj({}, {**_CONTROLLER, "partitions": ListOf(Obj(
        {**_TP, "leader": BROKER_ID, "leader_epoch": EPOCH,
         "isr": BROKER_IDS, "replicas": BROKER_IDS},
        {"version": Scalar(int, -1), "log_dir": Nullable(STR), "is_new": BOOL,
         "config": CONFIG, "topic_config": CONFIG}), bound=CONTROLLER_REQUEST_MAX_PARTITIONS)}),
    ApiKey.STOP_REPLICA: Obj({}, {
        **_CONTROLLER, "delete": BOOL,
        "partitions": ListOf(Obj(_TP, {"delete": BOOL}), bound=CONTROLLER_REQUEST_MAX_PARTITIONS)}),
    ApiKey.METADATA: Obj({}, {"topics": Nullable(TOPICS), "local": BOOL}),
    ApiKey.CREATE_TOPICS: Obj(
        {"topic": STR},
        {"partitions": ANY, "replication_factor": ANY, "config": CONFIG,
         "broker_ids": Nullable(BROKER_IDS), "force_simple": BOOL,
         "assignment": Nullable(MapOf(ListOf(ANY))), "timeout_ms": TIMEOUT_MS}),
    ApiKey.DELETE_TOPICS: Obj({"topic": STR}, {"timeout_ms": TIMEOUT_MS}),
    # the new total (as Kafka's CreatePartitions), never a number to add
    ApiKey.CREATE_PARTITIONS: Obj(
        {"topic": STR, "total": ANY},
        {"broker_ids": Nullable(BROKER_IDS), "force_simple": BOOL,
         "assignment": Nullable(ListOf(ListOf(ANY))), "timeout_ms": TIMEOUT_MS}),
    ApiKey.CREATE_REPLICA_PLACEMENT: Obj(
        {}, {"num_partitions": ANY, "replication_factor": ANY, "start_partition": ANY,
             "force_simple": BOOL, "broker_ids": Nullable(BROKER_IDS),
             "topic": Nullable(STR)}),
    ApiKey.ELECT_LEADERS: Obj({}, {"partitions": Nullable(ListOf(Obj(_TP)))}),
    ApiKey.CONTROLLED_SHUTDOWN: Obj({"broker_id": INDEX}),
    # each entry is checked by check_reassignment_entries (with its own error codes)
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Obj({"partitions": ListOf(ANY)}),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Obj(),
    ApiKey.DESCRIBE_LOG_DIRS: Obj({}, {
        "log_dirs": Nullable(ListOf(STR, bound="max.request.topics")),
        "topics": Nullable(TOPICS)}),
    ApiKey.ALTER_REPLICA_LOG_DIRS: Obj({"moves": ListOf(Obj({**_TP, "log_dir": STR}))}),
}


def request_validator(api_key: int, limits: Mapping[str, Any]
                      ) -> Callable[[Mapping[str, Any]], None]:
    """The body check of ``api_key`` bound to the broker's limit keys.

    Raises:
        KeyError: the api key has no schema (every served api must have one).
    """
    schema = REQUEST_SCHEMAS[int(api_key)]

    def validate(body: Mapping[str, Any]) -> None:
        schema.check(body, "body", limits)

    return validate


__all__ = [
    "ANY",
    "CONTROLLER_REQUEST_MAX_PARTITIONS",
    "MAX_TIMEOUT_MS",
    "REQUEST_SCHEMAS",
    "AnyValue",
    "ConfigValue",
    "ListOf",
    "MalformedRequestError",
    "MapOf",
    "Nullable",
    "Obj",
    "Scalar",
    "Spec",
    "request_validator",
]
