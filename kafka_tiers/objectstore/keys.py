"""The key layout of the remote tier.

``<prefix>/<topic>-<partition>/<20-digit start offset>-<segment id>.<kind>`` where kind is
``log``, ``index``, ``timeindex``, ``snapshot``, ``txnindex``, ``leader-epoch-checkpoint``,
``indexes`` (format 3: the five indexes in one object) or ``manifest`` (``<prefix>/`` is
absent when the prefix is empty). Topic names must be legal
Kafka topic names (``[A-Za-z0-9._-]``, at most 249).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import RemoteStorageError
from kafka_tiers.api.objectstore import validate_key
from kafka_tiers.api.storage import MAX_POSITION, IndexType, RemoteLogSegmentId


class ObjectKind(Enum):
    """The objects of one segment; the value is the key suffix after the dot."""

    LOG = "log"
    OFFSET_INDEX = "index"
    TIME_INDEX = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION_INDEX = "txnindex"
    LEADER_EPOCH = "leader-epoch-checkpoint"
    #: format 3: the encoded indexes of a segment, one after the other, when they are too
    #: large to be stored inline in the manifest
    INDEXES = "indexes"
    MANIFEST = "manifest"


#: The object kind holding each index type.
INDEX_KINDS: Mapping[IndexType, ObjectKind] = {
    IndexType.OFFSET: ObjectKind.OFFSET_INDEX,
    IndexType.TIMESTAMP: ObjectKind.TIME_INDEX,
    IndexType.PRODUCER_SNAPSHOT: ObjectKind.PRODUCER_SNAPSHOT,
    IndexType.TRANSACTION: ObjectKind.TRANSACTION_INDEX,
    IndexType.LEADER_EPOCH: ObjectKind.LEADER_EPOCH,
}

_KINDS_BY_SUFFIX = {k.value: k for k in ObjectKind}


_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_SEGMENT_NAME = re.compile(
    r"(?P<offset>\d{20})-(?P<id>[A-Za-z0-9_][A-Za-z0-9_-]{0,63})\.(?P<kind>[a-z-]+)")


def normalize_prefix(prefix: str) -> str:
    """A key prefix without surrounding slashes, checked like a key ("" stays "").

    Raises:
        RemoteStorageError: the prefix has unsafe parts.
    """
    prefix = (prefix or "").strip().strip("/")
    if prefix:
        validate_key(prefix)
    return prefix


def partition_prefix(prefix: str, topic_partition: TopicPartition) -> str:
    """``<prefix>/<topic>-<partition>/`` (with the trailing slash, so partition 1 never
    matches partition 10).

    Raises:
        RemoteStorageError: the topic is not a legal Kafka topic name.
    """
    topic = topic_partition.topic
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise RemoteStorageError(
            f"topic {topic!r} cannot be stored: topic names must be 1-249 characters of "
            "A-Z a-z 0-9 . _ -")
    head = f"{prefix}/" if prefix else ""
    return f"{head}{topic}-{topic_partition.partition}/"


def segment_key(prefix: str, segment_id: RemoteLogSegmentId, start_offset: int,
                kind: ObjectKind) -> str:
    """The key of one object of a segment:
    ``<prefix>/<topic>-<partition>/<20-digit start offset>-<segment id>.<kind>``."""
    if start_offset < 0 or start_offset > MAX_POSITION:
        raise RemoteStorageError(f"start offset {start_offset} out of range")
    return (f"{partition_prefix(prefix, segment_id.topic_partition)}"
            f"{start_offset:020d}-{segment_id.id}.{kind.value}")


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """A key of the segment layout, taken apart.

    Attributes:
        partition_dir: everything up to and including the ``<topic>-<partition>/``.
        start_offset: the segment's start offset.
        segment_id: the copy attempt's id.
        kind: which object of the segment.
    """

    partition_dir: str
    start_offset: int
    segment_id: str
    kind: ObjectKind


def parse_segment_key(key: str) -> ParsedKey | None:
    """Take a key of the segment layout apart; None for a key of any other shape."""
    head, _, name = key.rpartition("/")
    match = _SEGMENT_NAME.fullmatch(name)
    if not match or not head:
        return None
    kind = _KINDS_BY_SUFFIX.get(match["kind"])
    if kind is None:
        return None
    return ParsedKey(head + "/", int(match["offset"]), match["id"], kind)



__all__ = [
    "INDEX_KINDS",
    "ObjectKind",
    "ParsedKey",
    "normalize_prefix",
    "parse_segment_key",
    "partition_prefix",
    "segment_key",
    "validate_key",
]
