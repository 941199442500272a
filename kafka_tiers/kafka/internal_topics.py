"""Kafka's internal topics and what a client may not do to them: the one rule every handler of
:mod:`kafka_tiers.kafka.apis` asks before it changes a topic a client names.

Internal topics (Kafka's ``Topic.isInternal``): ``__consumer_offsets`` (the group
coordinator's committed offsets and group metadata), ``__transaction_state`` and
``__share_group_state`` (reserved: kafka-tiers has no transaction or share coordinator, but no
client may take the names either). Metadata marks them ``is_internal``; auto-creation never
creates them. ``__cluster_metadata`` (KRaft's metadata log name) is protected from deletion
as well.

Refused operations, each per partition or per topic, the rest of the request served:

======================  =============================  ===========================================
operation               answer                         why (Kafka)
======================  =============================  ===========================================
Produce                 ``INVALID_TOPIC_EXCEPTION``    ``ReplicaManager.appendToLocalLog``: "Cannot
                                                       append to internal topic"; only the
                                                       coordinator writes its records (a forged
                                                       commit or an undecodable batch would reach
                                                       every group of the partition)
DeleteRecords           ``INVALID_TOPIC_EXCEPTION``    ``ReplicaManager.deleteRecordsOnLocalLog``:
                                                       "Cannot delete records of internal topic"
DeleteTopics            ``INVALID_REQUEST``            the coordinators' state would be lost
CreatePartitions        ``INVALID_REQUEST``            stricter than Kafka (which lets an operator
                                                       grow ``__consumer_offsets`` and so move
                                                       groups to other partitions, losing their
                                                       offsets): groups are mapped to partitions
                                                       by ``offsets.topic.num.partitions``
======================  =============================  ===========================================

Allowed as in Kafka: Fetch and ListOffsets (a client may read ``__consumer_offsets``),
DescribeConfigs / AlterConfigs / IncrementalAlterConfigs (Kafka checks the values, not the
topic), reassignments, leader elections and log dir moves (the coordinator follows its
partitions' leaders). The coordinator writes through the replica manager, not through the
Produce handler, so it is never refused.
"""

from __future__ import annotations

import enum

from kafka_tiers.kafka.errors import INVALID_REQUEST, INVALID_TOPIC_EXCEPTION

#: the group coordinator's topic (committed offsets and group metadata)
OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka's internal topics (``Topic.isInternal``)
INTERNAL_TOPICS: frozenset[str] = frozenset(
    {OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})
#: topics no client may delete: the internal ones and KRaft's metadata log name
UNDELETABLE_TOPICS: frozenset[str] = INTERNAL_TOPICS | {"__cluster_metadata"}


class Operation(enum.Enum):
    """A client operation that changes a topic's records or partitions."""

    PRODUCE = "produce"
    DELETE_RECORDS = "delete records"
    DELETE_TOPIC = "delete topic"
    CREATE_PARTITIONS = "create partitions"


def is_internal(topic: str | None) -> bool:
    """Whether ``topic`` is one of Kafka's internal topics (Metadata's ``is_internal``)."""
    return topic in INTERNAL_TOPICS


def refusal(topic: str | None, operation: Operation) -> tuple[int, str] | None:
    """``(Kafka error code, message)`` when a client may not do ``operation`` on ``topic``,
    None when it may. Never raises; the same answer for every broker and every version."""
    if operation is Operation.DELETE_TOPIC:
        if topic in UNDELETABLE_TOPICS:
            return INVALID_REQUEST, (f"topic {topic} is internal to the brokers (consumer "
                                     "group offsets, ...) and cannot be deleted")
        return None
    if not is_internal(topic):
        return None
    if operation is Operation.PRODUCE:
        return INVALID_TOPIC_EXCEPTION, (f"Cannot append to internal topic {topic}: only the "
                                         "broker writes its records")
    if operation is Operation.DELETE_RECORDS:
        return INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic}"
    return INVALID_REQUEST, (f"topic {topic} is internal: its partition count is fixed "
                             "(offsets.topic.num.partitions) once created, since groups are "
                             "mapped to its partitions by that count")


__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "UNDELETABLE_TOPICS", "Operation",
           "is_internal", "refusal"]
