"""A request's (topic, partition) as a :class:`~kafka_tiers.api.TopicPartition`, or the
per-partition error Kafka answers: the one rule every handler of
:mod:`kafka_tiers.kafka.apis` applies to the partitions a client names.

A client may send any int32 as a partition index and any string (even empty, or null where
the schema allows it) as a topic name. No topic can hold a negative partition or have an empty
name, so Kafka answers such an entry as it answers any partition it does not know:
``UNKNOWN_TOPIC_OR_PARTITION`` for that entry alone, the rest of the request served and the
connection kept. :class:`~kafka_tiers.api.TopicPartition` refuses those values with a
``ValueError``; a handler must never let that escape (it would close the connection and log a
traceback), so it builds its partitions through :func:`request_partition` or
:func:`topic_partition_or_error` instead of calling ``TopicPartition`` on request values.
"""

from __future__ import annotations

from typing import NamedTuple

from kafka_tiers.api import TopicPartition
from kafka_tiers.kafka.errors import UNKNOWN_TOPIC_OR_PARTITION, KafkaApiError


class RequestEntry(NamedTuple):
    """A request's (topic, partition) exactly as sent, valid or not: the key of an answer
    to an entry :func:`request_partition` refused (it has ``topic`` and ``partition`` as a
    :class:`TopicPartition` has, for the code that builds responses)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


#: what a handler keys its per-partition answers by
AnswerKey = TopicPartition | RequestEntry


class PartitionRefused(KafkaApiError):
    """A request entry naming a partition no topic can hold (``kafka_error_code`` is
    ``UNKNOWN_TOPIC_OR_PARTITION``; :func:`kafka_tiers.kafka.errors.error_of` maps it)."""


def request_partition(topic: str | None, partition: int) -> TopicPartition:
    """The partition a request entry names.

    Args:
        topic: the topic name as decoded (may be empty or None).
        partition: the partition index as decoded (any int32).

    Raises:
        PartitionRefused: the name is empty or null, or the index is negative.
    """
    if not topic:
        raise PartitionRefused(UNKNOWN_TOPIC_OR_PARTITION,
                               f"no topic is named {topic or ''!r}: name an existing topic")
    if partition < 0:
        raise PartitionRefused(UNKNOWN_TOPIC_OR_PARTITION,
                               f"partition {partition} of topic {topic!r} does not exist: "
                               "partition indexes start at 0")
    return TopicPartition(topic, int(partition))


def topic_partition_or_error(topic: str | None, partition: int
                             ) -> tuple[TopicPartition | None, tuple[int, str] | None]:
    """``(partition, None)``, or ``(None, (error code, message))`` for an entry
    :func:`request_partition` refuses. Never raises."""
    try:
        return request_partition(topic, partition), None
    except PartitionRefused as exc:
        return None, (exc.kafka_error_code, str(exc))


__all__ = ["AnswerKey", "PartitionRefused", "RequestEntry", "request_partition",
           "topic_partition_or_error"]
