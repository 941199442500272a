"""DescribeConfigs (key 32, v1-4), AlterConfigs (33, v0-2) and IncrementalAlterConfigs (44,
v0-1): topic and broker configs.

Topic resources
    every topic-level key this broker implements (:data:`TOPIC_CONFIG_KEYS`): an override the
    topic sets is ``DYNAMIC_TOPIC_CONFIG``; otherwise the value the topic runs with comes from
    the broker's key (``log.retention.ms`` for ``retention.ms``, ...): ``STATIC_BROKER_CONFIG``
    when ``server.properties`` sets it, else ``DEFAULT_CONFIG``. Synonyms list the override,
    then the broker keys given, then the default. Alters replace (AlterConfigs) or edit
    (IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT, the last two for list-valued
    keys only) the topic's overrides; the result is validated as a new topic's config (unknown
    keys and bad values refused with ``INVALID_CONFIG`` naming the key; ``remote.storage.enable``
    is turned off only with ``remote.log.delete.on.disable=true``, KIP-950, and never turned
    on), stored (the controller's metadata store, or the standalone topics file) and
    applied at once to every replica's local log and to the remote tier's settings: no restart.
    ``validate_only`` checks and changes nothing. Alters run on the controller (forwarded by
    any other broker, :mod:`kafka_tiers.kafka.admin_routing`).
Broker resources
    the broker's declared keys (``server.properties``), all read-only; a secret key's value is
    never shown (``is_sensitive``, value null); plugin keys (``rsm.config.*``, ``placer.*``)
    are not listed (their secrecy is the plugin's to declare). A broker describes only itself
    (the resource name is its id; the empty name, the cluster-wide dynamic defaults, has none
    here). The broker config is static: every alter of a broker resource is refused with
    ``POLICY_VIOLATION`` naming ``server.properties``.
Authorization (Kafka's)
    describing needs DESCRIBE_CONFIGS, altering ALTER_CONFIGS, on the topic (else
    ``TOPIC_AUTHORIZATION_FAILED``) or, for a broker resource, on the cluster (else
    ``CLUSTER_AUTHORIZATION_FAILED``); each resource on its own. An alter is checked on the
    broker the client asked: denied resources are answered there and never forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api import ConfigError, Secret
from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.broker.topics import TOPIC_CONFIG_KEYS
from kafka_tiers.config import Bool, Choice, ConfigKey, Int, List, all_keys
from kafka_tiers.kafka import codec
from kafka_tiers.kafka.admin_routing import (
    NotControllerError,
    admin_error,
    forward_entries,
    forward_to_controller,
    is_local,
    request_timeout_s,
)
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.errors import (
    INVALID_REQUEST,
    NOT_CONTROLLER,
    POLICY_VIOLATION,
    UNKNOWN_TOPIC_OR_PARTITION,
    KafkaApiError,
)
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import (
    CLUSTER_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
)
from kafka_tiers.log.config import LOG_TOPIC_KEYS, LogConfig
from kafka_tiers.placement.limits import LimitExceededError, check_request_entries
from kafka_tiers.remote.config import BOOLEAN_TOPIC_KEYS
from kafka_tiers.remote.config import TOPIC_KEYS as TIERING_TOPIC_KEYS

#: Kafka's resource types
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
#: Kafka's config sources
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
#: Kafka's config types
BOOLEAN, STRING, INT, LONG, LIST, PASSWORD = 1, 2, 3, 5, 7, 9
#: IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

#: a topic key's broker-level keys, most specific first (Kafka's synonyms)
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "max.message.bytes": ("message.max.bytes",),
    "min.insync.replicas": ("min.insync.replicas",),
    **{k: (v,) if v else () for k, v in TIERING_TOPIC_KEYS.items()},
}
_TOPIC_DOCS = {"remote.storage.enable": "Tier this topic's closed segments to the remote "
               "storage (chosen when the topic is created; turned off only with "
               "remote.log.delete.on.disable=true; needs remote.log.storage.enable on the "
               "brokers).",
               "remote.log.copy.disable": "Copy nothing new of this tiered topic to the remote "
               "storage; its remote data stays readable (KIP-950).",
               "remote.log.delete.on.disable": "Delete the topic's remote data when "
               "remote.storage.enable is turned off (required to turn it off; KIP-950)."}


@dataclass(frozen=True)
class ConfigEntry:
    """One described config: Kafka's fields (``synonyms``: ``(name, value, source)``)."""

    name: str
    value: str | None
    source: int
    read_only: bool = False
    sensitive: bool = False
    config_type: int = STRING
    documentation: str | None = None
    synonyms: tuple[tuple[str, str | None, int], ...] = field(default=())


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, Secret):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _type_of(kind: Any, secret: bool = False) -> int:
    if secret:
        return PASSWORD
    if isinstance(kind, Bool):
        return BOOLEAN
    if isinstance(kind, Int):
        return INT if kind.limit <= 2 ** 31 - 1 else LONG
    if isinstance(kind, List):
        return LIST
    if isinstance(kind, Choice):
        return STRING
    return STRING


def _topic_type(key: str) -> int:
    if key in LOG_TOPIC_KEYS:
        return _type_of(LOG_TOPIC_KEYS[key][1])
    return BOOLEAN if key in BOOLEAN_TOPIC_KEYS else LONG


def list_keys() -> frozenset[str]:
    """The topic keys whose value is a list (APPEND and SUBTRACT apply to them only)."""
    return frozenset(k for k in TOPIC_CONFIG_KEYS if _topic_type(k) == LIST)


def topic_defaults(broker: Mapping[str, Any]) -> dict[str, str | None]:
    """The value every topic key takes when a topic does not set it (from the broker)."""
    log_config = LogConfig.from_broker(broker)
    out: dict[str, str | None] = {}
    for key in TOPIC_CONFIG_KEYS:
        if key in LOG_TOPIC_KEYS:
            out[key] = _text(getattr(log_config, LOG_TOPIC_KEYS[key][0]))
        elif key in BOOLEAN_TOPIC_KEYS:
            out[key] = "false"
        else:
            broker_key = TIERING_TOPIC_KEYS.get(key)
            out[key] = _text(broker.get(broker_key)) if broker_key else None
    return out


def topic_entries(broker: Any, config: Mapping[str, str],
                  keys: Sequence[str] | None = None) -> list[ConfigEntry]:
    """The described configs of a topic with overrides ``config`` (only ``keys`` when given;
    unknown names are left out, as Kafka does)."""
    defaults = topic_defaults(broker)
    originals = broker.originals if hasattr(broker, "originals") else {}
    declared = all_keys()
    out = []
    for key in sorted(TOPIC_CONFIG_KEYS if keys is None else set(keys) & TOPIC_CONFIG_KEYS):
        given = [(b, _text(originals[b])) for b in TOPIC_SYNONYMS.get(key, ()) if b in originals]
        synonyms: list[tuple[str, str | None, int]] = []
        value: str | None
        if key in config:
            value, source = config[key], DYNAMIC_TOPIC_CONFIG
            synonyms.append((key, value, DYNAMIC_TOPIC_CONFIG))
        else:
            value = defaults[key]
            source = STATIC_BROKER_CONFIG if given else DEFAULT_CONFIG
        synonyms += [(b, v, STATIC_BROKER_CONFIG) for b, v in given]
        first = TOPIC_SYNONYMS.get(key, ())
        if not given:
            synonyms.append((first[0] if first else key, defaults[key], DEFAULT_CONFIG))
        doc = _TOPIC_DOCS.get(key) or (declared[first[0]].doc if first and first[0] in declared
                                       else None)
        out.append(ConfigEntry(key, value, source, config_type=_topic_type(key),
                               documentation=doc, synonyms=tuple(synonyms)))
    return out


def broker_entries(broker: Any, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
    """The described declared keys of the broker config (all read-only; secrets hidden)."""
    originals = broker.originals
    wanted = None if keys is None else set(keys)
    out = []
    for name, key in sorted(all_keys().items()):
        if wanted is not None and name not in wanted:
            continue
        out.append(_broker_entry(broker, originals, name, key))
    return out


def _broker_entry(broker: Any, originals: Mapping[str, Any], name: str, key: ConfigKey
                  ) -> ConfigEntry:
    static = name in originals
    value = None if key.secret else _text(broker[name])
    source = STATIC_BROKER_CONFIG if static else DEFAULT_CONFIG
    synonyms: list[tuple[str, str | None, int]] = [(name, value, source)]
    if static:
        synonyms.append((name, None if key.secret else _text(key.default), DEFAULT_CONFIG))
    return ConfigEntry(name, value, source, read_only=True, sensitive=key.secret,
                       config_type=_type_of(key.type, key.secret), documentation=key.doc,
                       synonyms=tuple(synonyms))


# ---------------------------------------------------------------------- DescribeConfigs

@handles(32, 1, 4)
def describe_configs(ctx: RequestContext, request: Any) -> Any:
    """Each resource's configs, or its error (see the module docstring)."""
    R = codec.RESPONSES[32]
    Result = R.DescribeConfigsResult
    Entry = Result.DescribeConfigsResourceResult
    Synonym = Entry.DescribeConfigsSynonym
    synonyms_wanted = bool(getattr(request, "include_synonyms", False))
    docs_wanted = bool(getattr(request, "include_documentation", False))
    results = []
    try:  # max.request.topics bounds the resources: every one refused
        check_request_entries(ctx.config, list(request.resources), "config resources",
                              topics=True)
        too_many = None
    except LimitExceededError as exc:
        too_many = exc
    denied = _denied(ctx, request.resources, AclOperation.DESCRIBE_CONFIGS) \
        if too_many is None else {}
    for i, res in enumerate(request.resources):
        keys = res.configuration_keys
        if too_many is not None or i in denied:
            code, message = (INVALID_REQUEST, str(too_many)) if too_many is not None \
                else denied[i]
            results.append(Result(error_code=code, error_message=message,
                                  resource_type=res.resource_type,
                                  resource_name=res.resource_name, configs=[]))
            continue
        try:
            entries = _describe(ctx, res.resource_type, res.resource_name, keys)
        except Exception as exc:
            code, message = admin_error(exc)
            results.append(Result(error_code=code, error_message=message,
                                  resource_type=res.resource_type,
                                  resource_name=res.resource_name, configs=[]))
            continue
        results.append(Result(
            error_code=0, error_message=None, resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=[Entry(name=e.name, value=e.value, read_only=e.read_only,
                           config_source=e.source, is_default=e.source == DEFAULT_CONFIG,
                           is_sensitive=e.sensitive,
                           synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in
                                     e.synonyms] if synonyms_wanted else [],
                           config_type=e.config_type,
                           documentation=e.documentation if docs_wanted else None)
                     for e in entries]))
    return ctx.response(throttle_time_ms=0, results=results)


def _describe(ctx: RequestContext, rtype: int, name: str, keys: Sequence[str] | None
              ) -> list[ConfigEntry]:
    if rtype == TOPIC_RESOURCE:
        topic = ClusterState(ctx.broker, ctx.listener).topic(name)
        if topic is None:
            raise KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        return topic_entries(ctx.config, topic.config, keys)
    if rtype == BROKER_RESOURCE:
        me = str(ctx.broker.broker_id)
        if name == "":
            return []  # the cluster-wide dynamic broker defaults: none (the config is static)
        if name != me:
            raise KafkaApiError(INVALID_REQUEST, f"this is broker {me}: broker {name!r}'s "
                                "configs are described by that broker (send the request "
                                "to it)")
        return broker_entries(ctx.config, keys)
    raise KafkaApiError(INVALID_REQUEST, f"resource type {rtype} is not served (topics: 2, "
                        "brokers: 4)")


def _denied(ctx: RequestContext, resources: Sequence[Any], operation: AclOperation
            ) -> dict[int, tuple[int, str]]:
    """The answers of the resources (by index) the principal may not ``operation``: topics
    on the topic, brokers on the cluster (Kafka's rule); other types are not checked here
    (they are refused as not served)."""
    topics = [r.resource_name for r in resources if r.resource_type == TOPIC_RESOURCE]
    allowed = allowed_names(ctx, operation, ResourceType.TOPIC, topics)
    cluster = None
    out: dict[int, tuple[int, str]] = {}
    for i, r in enumerate(resources):
        if r.resource_type == TOPIC_RESOURCE and r.resource_name not in allowed:
            out[i] = (TOPIC_AUTHORIZATION_FAILED, f"{ctx.principal} may not {operation.name} "
                      f"of topic {r.resource_name!r} ({operation.name} on the topic is needed)")
        elif r.resource_type == BROKER_RESOURCE:
            if cluster is None:
                cluster = ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)
            if not cluster:
                out[i] = (CLUSTER_AUTHORIZATION_FAILED, f"{ctx.principal} may not "
                          f"{operation.name} of broker {r.resource_name!r} ({operation.name} "
                          "on the cluster is needed)")
    return out


# ---------------------------------------------------------------------- alters

def _refuse_broker_alter(ctx: RequestContext, name: str) -> None:
    raise KafkaApiError(POLICY_VIOLATION, f"broker {name or '(default)'} configs are static "
                        "here: edit server.properties and restart the broker (no broker key "
                        "is dynamic)")


def _alter_topic(ctx: RequestContext, topic: str,
                 compute: Callable[[dict[str, str]], dict[str, str]],
                 validate_only: bool) -> None:
    """Alter one topic's config through ``compute(current) -> new`` (on the controller, or
    the standalone broker)."""
    broker = ctx.broker
    policy = broker.topic_configs

    def update(current: dict[str, str]) -> dict[str, str]:
        return policy.validate_change(topic, current, compute(dict(current)))

    member = broker.member
    if member is None:
        info = broker.topic(topic)
        broker.alter_topic_config(topic, update(dict(info.config)),
                                  validate_only=validate_only)
        return
    ctl = member.controller
    if ctl is None:
        raise NotControllerError("the broker is starting")
    ctl.call(lambda: ctl.alter_topic_config(topic, update, validate_only=validate_only))


def _alter_all(ctx: RequestContext, request: Any, key: int,
               topic_compute: Callable[[Any], Callable[[dict[str, str]], dict[str, str]]]
               ) -> Any:
    validate_only = bool(request.validate_only)
    try:  # max.request.topics bounds the resources: every one refused, nothing changed
        check_request_entries(ctx.config, list(request.resources), "config resources",
                              topics=True)
    except LimitExceededError as exc:
        return _answer(ctx, key, [(r, INVALID_REQUEST, str(exc)) for r in request.resources])
    resources = list(request.resources)
    denied = _denied(ctx, resources, AclOperation.ALTER_CONFIGS)
    kept = [r for i, r in enumerate(resources) if i not in denied]
    held: list[tuple[Any, int, str | None]] = [(resources[i], *denied[i]) for i in denied]
    if not is_local(ctx) and any(r.resource_type == TOPIC_RESOURCE for r in kept):
        timeout_s = request_timeout_s(ctx, None)
        try:
            if not denied:
                return forward_to_controller(ctx, request, timeout_s)
            forwarded = forward_entries(ctx, request, timeout_s, "resources", kept,
                                        "responses")
        except NotControllerError as exc:
            return _answer(ctx, key, [*held, *((r, NOT_CONTROLLER, str(exc)) for r in kept)])
        return _answer(ctx, key, held, forwarded)
    rows: list[tuple[Any, int, str | None]] = []
    for i, res in enumerate(resources):
        if i in denied:
            rows.append((res, *denied[i]))
            continue
        try:
            if res.resource_type == TOPIC_RESOURCE:
                _alter_topic(ctx, res.resource_name, topic_compute(res), validate_only)
            elif res.resource_type == BROKER_RESOURCE:
                _refuse_broker_alter(ctx, res.resource_name)
            else:
                raise KafkaApiError(INVALID_REQUEST, f"resource type {res.resource_type} is "
                                    "not served (topics: 2, brokers: 4)")
            rows.append((res, 0, None))
        except Exception as exc:
            code, message = admin_error(exc)
            rows.append((res, code, message))
    return _answer(ctx, key, rows)


def _answer(ctx: RequestContext, key: int, rows: list[tuple[Any, int, str | None]],
            forwarded: list[Any] | None = None) -> Any:
    """The response: ``forwarded`` (the controller's answers, decoded), then ``rows``."""
    Resp = codec.RESPONSES[key].AlterConfigsResourceResponse
    return ctx.response(throttle_time_ms=0, responses=[*(forwarded or []), *(
        Resp(error_code=code, error_message=message, resource_type=res.resource_type,
             resource_name=res.resource_name) for res, code, message in rows)])


def _no_duplicates(names: Sequence[str], topic: str) -> None:
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise KafkaApiError(INVALID_REQUEST, f"config key(s) {twice} of topic {topic} are "
                            "given more than once; give each once")


@handles(33, 0, 2)
def alter_configs(ctx: RequestContext, request: Any) -> Any:
    """AlterConfigs: a topic's overrides become exactly the configs given (keys left out go
    back to their defaults)."""
    def compute(res: Any) -> Callable[[dict[str, str]], dict[str, str]]:
        def new(_current: dict[str, str]) -> dict[str, str]:
            _no_duplicates([c.name for c in res.configs], res.resource_name)
            out = {}
            for c in res.configs:
                if c.value is None:
                    raise ConfigError(f"{c.name} of topic {res.resource_name}: a null value "
                                      "(to remove an override, leave the key out)", key=c.name)
                out[c.name] = c.value
            return out
        return new
    return _alter_all(ctx, request, 33, compute)


@handles(44, 0, 1)
def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's overrides."""
    def compute(res: Any) -> Callable[[dict[str, str]], dict[str, str]]:
        def new(current: dict[str, str]) -> dict[str, str]:
            _no_duplicates([c.name for c in res.configs], res.resource_name)
            return apply_operations(ctx.config, res.resource_name, current,
                                    [(c.name, c.config_operation, c.value)
                                     for c in res.configs])
        return new
    return _alter_all(ctx, request, 44, compute)


def apply_operations(broker: Mapping[str, Any], topic: str, current: Mapping[str, str],
                     ops: Sequence[tuple[str, int, str | None]]) -> dict[str, str]:
    """``current`` overrides of ``topic`` after IncrementalAlterConfigs ``ops`` (``(key,
    operation, value)``); APPEND and SUBTRACT edit a list-valued key's comma-separated items
    (starting from its default when the topic does not set it).

    Raises:
        ConfigError: an unknown key, a null SET value, APPEND/SUBTRACT on a key that is not a
            list, or an unknown operation (one line naming the key).
    """
    out = dict(current)
    lists = list_keys()
    for name, op, value in ops:
        if name not in TOPIC_CONFIG_KEYS:
            raise ConfigError(f"unknown topic config key {name} for topic {topic} (known: "
                              f"{', '.join(sorted(TOPIC_CONFIG_KEYS))})", key=name)
        if op == SET:
            if value is None:
                raise ConfigError(f"SET {name} of topic {topic} without a value (DELETE "
                                  "removes an override)", key=name)
            out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name not in lists:
                raise ConfigError(f"{_OP_NAMES[op]} applies to list-valued keys only; {name} "
                                  f"of topic {topic} is not a list (use SET)", key=name)
            base = out.get(name, topic_defaults(broker).get(name)) or ""
            items = [i.strip() for i in base.split(",") if i.strip()]
            given = [i.strip() for i in (value or "").split(",") if i.strip()]
            if op == APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            out[name] = ",".join(items)
        else:
            raise ConfigError(f"unknown config operation {op} for {name} of topic {topic} "
                              "(0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)", key=name)
    return out


__all__ = ["BROKER_RESOURCE", "DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG", "STATIC_BROKER_CONFIG",
           "TOPIC_RESOURCE", "TOPIC_SYNONYMS", "ConfigEntry", "alter_configs",
           "apply_operations", "broker_entries", "describe_configs",
           "incremental_alter_configs", "list_keys", "topic_defaults", "topic_entries"]
