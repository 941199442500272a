"""Bounds on the counts one request may carry: the keys (:data:`LIMIT_KEYS`, registered in
:data:`kafka_tiers.config.SECTIONS`) and the checks every entry point (the controller, the
broker's request handlers, the standalone broker, the placement service behind
``kafka-tiers place``, the admin channel) runs *before* it allocates anything for a request.
They live with placement because placing replicas is what most of them guard, and because
every layer that takes requests may import placement.

Every count a request carries (partitions to create, a replication factor, topics or
partitions listed) is checked against its key here; a refused request raises
:class:`LimitExceededError`, which carries the Kafka error code the transport answers with
(``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``, ``POLICY_VIOLATION``,
``INVALID_REQUEST``), so a refusal is never ``UNKNOWN``. A fetch is clamped rather than
refused, as Kafka does: ``fetch.max.bytes`` per response, ``request.timeout.ms`` of waiting.
The byte bounds are the cluster layer's keys (:mod:`kafka_tiers.cluster.config`): the frame
size (``socket.request.max.bytes``) is checked by the transport on the length prefix, before
the body is read, and ``fetch.max.bytes`` caps a fetch response; the record batch size
(``message.max.bytes``) is the log's key, checked at append. docs/operations.md lists every
bound.

Kafka has no key for most of these: Kafka bounds a request only by its frame size, and
KIP-578 (proposed, not shipped) named ``max.broker.partitions``, which is the name taken here
for the replicas one broker may hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka_tiers.api.errors import KafkaTiersError
from kafka_tiers.config import ConfigKey, Int

MAX_TOPIC_PARTITIONS = 100000
#: one request's new partitions: creating a replica costs a broker about 0.8 ms, and a
#: partition puts at most one replica on each broker, so 10,000 keep the slowest broker's
#: share of one CreateTopics near 8 s, well within ``request.timeout.ms`` (30 s), and the
#: controller (one request at a time) free for the next request soon after.
MAX_REQUEST_PARTITIONS = 10000
MAX_REQUEST_TOPICS = 10000
MAX_REPLICATION_FACTOR = 32
#: the scale goal of one broker (20,000 partitions under ``ulimit -n 1024``, see
#: benchmarks/partition_scale.py): beyond it start-up time and memory are unmeasured.
MAX_BROKER_PARTITIONS = 20000

LIMIT_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("max.topic.partitions", Int(min=1, bits=32), MAX_TOPIC_PARTITIONS,
              "Partitions one topic may have (CreateTopics, CreatePartitions, placement)."),
    ConfigKey("max.request.partitions", Int(min=1, bits=32), MAX_REQUEST_PARTITIONS,
              "Partitions one request may create, place or list."),
    ConfigKey("max.request.topics", Int(min=1, bits=32), MAX_REQUEST_TOPICS,
              "Topics one request may list (Metadata, DescribeLogDirs)."),
    ConfigKey("max.replication.factor", Int(min=1, max=32767), MAX_REPLICATION_FACTOR,
              "The largest replication factor a topic may ask for (the live brokers bound it "
              "too)."),
    ConfigKey("max.broker.partitions", Int(min=1, bits=32), MAX_BROKER_PARTITIONS,
              "Partition replicas one broker may hold (KIP-578's name); a creation that "
              "would exceed it on any broker is refused."),
)


class LimitExceededError(KafkaTiersError, ValueError):
    """A request asked for more than a configured bound allows; nothing was done.

    Attributes:
        key: the config key of the bound.
        limit: its value.
        value: what the request asked for.
        error_code: the name of the Kafka error code to answer with
            (``INVALID_PARTITIONS``, ...).
    """

    def __init__(self, message: str, *, key: str, limit: int, value: Any,
                 error_code: str) -> None:
        super().__init__(message)
        self.key = key
        self.limit = limit
        self.value = value
        self.error_code = error_code


def _limit(config: Mapping[str, Any], key: str, default: int) -> int:
    try:
        return int(config[key])
    except (KeyError, TypeError, ValueError):
        return default


def as_count(value: Any, what: str, *, minimum: int = 1,
             error_code: str = "INVALID_REQUEST") -> int:
    """``value`` (from a request) as an int >= ``minimum``: a JSON integer or a string of
    digits; bools, floats and any other text are refused, never converted.

    Raises:
        LimitExceededError: not an integer, or below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise LimitExceededError(f"{what} must be an integer, got {value!r}", key="",
                                     limit=minimum, value=value, error_code=error_code)
    if value < minimum:
        raise LimitExceededError(f"{what} must be at least {minimum}, got {value}", key="",
                                 limit=minimum, value=value, error_code=error_code)
    return value


def check_new_partitions(config: Mapping[str, Any], count: Any, *, existing: int = 0,
                         topic: str | None = None) -> int:
    """Check a request to create ``count`` partitions (of a topic having ``existing``).

    Returns:
        ``count`` as an int.

    Raises:
        LimitExceededError: ``INVALID_PARTITIONS`` when ``count`` is not an int >= 1, exceeds
            ``max.request.partitions``, or takes the topic above ``max.topic.partitions``.
    """
    name = f" of topic {topic}" if topic else ""
    n = as_count(count, f"the partition count{name}", error_code="INVALID_PARTITIONS")
    per_request = _limit(config, "max.request.partitions", MAX_REQUEST_PARTITIONS)
    if n > per_request:
        raise LimitExceededError(
            f"{n} partitions{name} in one request exceed max.request.partitions "
            f"{per_request}; create fewer per request or raise max.request.partitions",
            key="max.request.partitions", limit=per_request, value=n,
            error_code="INVALID_PARTITIONS")
    per_topic = _limit(config, "max.topic.partitions", MAX_TOPIC_PARTITIONS)
    if existing + n > per_topic:
        have = f" ({existing} existing + {n} new)" if existing else ""
        raise LimitExceededError(
            f"{existing + n} partitions{name}{have} exceed max.topic.partitions {per_topic}; "
            f"use fewer partitions or raise max.topic.partitions",
            key="max.topic.partitions", limit=per_topic, value=existing + n,
            error_code="INVALID_PARTITIONS")
    return n


def check_partition_index(config: Mapping[str, Any], partition: Any, what: str) -> int:
    """A partition number from a request: an int from 0 to ``max.topic.partitions - 1``.

    Raises:
        LimitExceededError: ``INVALID_PARTITIONS`` otherwise.
    """
    p = as_count(partition, what, minimum=0, error_code="INVALID_PARTITIONS")
    per_topic = _limit(config, "max.topic.partitions", MAX_TOPIC_PARTITIONS)
    if p >= per_topic:
        raise LimitExceededError(
            f"{what} {p} is not below max.topic.partitions {per_topic}",
            key="max.topic.partitions", limit=per_topic, value=p,
            error_code="INVALID_PARTITIONS")
    return p


def check_replication_factor(config: Mapping[str, Any], factor: Any) -> int:
    """Check a requested replication factor against ``max.replication.factor`` (the placement
    checks it against the live, unfenced or chosen brokers:
    ``InvalidReplicationFactorError``).

    Raises:
        LimitExceededError: ``INVALID_REPLICATION_FACTOR``.
    """
    rf = as_count(factor, "replication factor", error_code="INVALID_REPLICATION_FACTOR")
    cap = _limit(config, "max.replication.factor", MAX_REPLICATION_FACTOR)
    if rf > cap:
        raise LimitExceededError(
            f"replication factor {rf} exceeds max.replication.factor {cap}",
            key="max.replication.factor", limit=cap, value=rf,
            error_code="INVALID_REPLICATION_FACTOR")
    return rf


def check_request_entries(config: Mapping[str, Any], entries: Any, what: str, *,
                          topics: bool = False) -> list[Any]:
    """Check a list a request carries (partitions, moves, or topics with ``topics``)
    against ``max.request.partitions`` / ``max.request.topics``.

    Returns:
        ``entries`` (a list).

    Raises:
        LimitExceededError: ``INVALID_REQUEST`` when it is not a list or is too long.
    """
    if not isinstance(entries, list):
        raise LimitExceededError(f"{what} must be a list, got {type(entries).__name__}",
                                 key="", limit=0, value=None, error_code="INVALID_REQUEST")
    key, default = (("max.request.topics", MAX_REQUEST_TOPICS) if topics
                    else ("max.request.partitions", MAX_REQUEST_PARTITIONS))
    cap = _limit(config, key, default)
    if len(entries) > cap:
        raise LimitExceededError(
            f"{len(entries)} {what} in one request exceed {key} {cap}; send several "
            f"requests or raise {key}", key=key, limit=cap, value=len(entries),
            error_code="INVALID_REQUEST")
    return entries


def check_reassignment_entries(config: Mapping[str, Any], entries: Any) -> list[dict[str, Any]]:
    """Check an AlterPartitionReassignments request: at most ``max.request.partitions``
    entries, each ``{"topic": str, "partition": int, "replicas": [int, ...]}`` with a
    partition below ``max.topic.partitions``, 1 to ``max.replication.factor`` distinct
    replicas and, when given, one ``log_dirs`` item per replica.

    Returns:
        the entries as plain dicts (topic, partition, replicas, log_dirs when given).

    Raises:
        LimitExceededError: ``INVALID_REQUEST``, ``INVALID_PARTITIONS``,
            ``INVALID_REPLICATION_FACTOR`` or ``INVALID_REPLICA_ASSIGNMENT``, naming the entry.
    """
    out = []
    for i, e in enumerate(check_request_entries(config, entries, "partitions to reassign")):
        where = f"partitions[{i}]"
        if not isinstance(e, Mapping) or not isinstance(e.get("topic"), str):
            raise LimitExceededError(f"{where} must be an object with a topic", key="",
                                     limit=0, value=None, error_code="INVALID_REQUEST")
        partition = check_partition_index(config, e.get("partition"), f"{where}.partition")
        replicas = e.get("replicas")
        if not isinstance(replicas, list):
            raise LimitExceededError(f"{where}.replicas must be a list of broker ids", key="",
                                     limit=0, value=None, error_code="INVALID_REQUEST")
        check_replication_factor(config, len(replicas))
        ids = [as_count(b, f"{where}.replicas item", minimum=0,
                        error_code="INVALID_REPLICA_ASSIGNMENT") for b in replicas]
        if len(set(ids)) != len(ids):
            raise LimitExceededError(f"{where}.replicas {ids} names a broker twice", key="",
                                     limit=0, value=ids,
                                     error_code="INVALID_REPLICA_ASSIGNMENT")
        entry: dict[str, Any] = {"topic": e["topic"], "partition": partition, "replicas": ids}
        dirs = e.get("log_dirs")
        if dirs is not None:
            if (not isinstance(dirs, list) or len(dirs) != len(ids)
                    or not all(isinstance(d, str) for d in dirs)):
                raise LimitExceededError(f"{where}.log_dirs must list one dir per replica",
                                         key="", limit=0, value=None,
                                         error_code="INVALID_REQUEST")
            entry["log_dirs"] = dirs
        out.append(entry)
    return out


def check_broker_partitions(config: Mapping[str, Any], current: Mapping[int, int],
                            new_replicas: Iterable[Iterable[int]]) -> None:
    """Check that adding ``new_replicas`` (one replica list per new partition) keeps every
    broker at or below ``max.broker.partitions``; ``current`` counts the replicas each
    broker holds now.

    Raises:
        LimitExceededError: ``POLICY_VIOLATION`` naming the first broker over the bound.
    """
    cap = _limit(config, "max.broker.partitions", MAX_BROKER_PARTITIONS)
    added: dict[int, int] = {}
    for reps in new_replicas:
        for b in reps:
            added[b] = added.get(b, 0) + 1
    for b in sorted(added):
        total = current.get(b, 0) + added[b]
        if total > cap:
            raise LimitExceededError(
                f"broker {b} would hold {total} partition replicas ({current.get(b, 0)} now + "
                f"{added[b]} new), above max.broker.partitions {cap}; add brokers, delete "
                f"topics or raise max.broker.partitions",
                key="max.broker.partitions", limit=cap, value=total,
                error_code="POLICY_VIOLATION")


__all__ = [
    "LIMIT_KEYS",
    "MAX_BROKER_PARTITIONS",
    "MAX_REPLICATION_FACTOR",
    "MAX_REQUEST_PARTITIONS",
    "MAX_REQUEST_TOPICS",
    "MAX_TOPIC_PARTITIONS",
    "LimitExceededError",
    "as_count",
    "check_broker_partitions",
    "check_new_partitions",
    "check_partition_index",
    "check_reassignment_entries",
    "check_replication_factor",
    "check_request_entries",
]
