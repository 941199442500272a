"""The remote (tiered) storage interface (design document 004, KIP-405 as shipped).

A :class:`RemoteStorageManager` keeps copies of rolled log segments and their indexes in a
remote tier (a directory tree, an object store, HDFS). The broker's remote log manager copies
a segment once it is rolled, reads old offsets back through :meth:`fetch_log_segment` and
deletes segments after the remote retention time. The remote tier is self-describing:
:meth:`RemoteStorageManager.list_remote_segments` finds every segment without the broker that
wrote it.

Plugin authors choose one of two levels: implement :class:`RemoteStorageManager` directly, or
implement the small object-store interface of :mod:`kafka_tiers.api.objectstore` (put, ranged
get, batched delete, list by prefix), register it in ``kafka_tiers.object_store``, and the core
builds the storage manager around it.
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum, StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, ClassVar

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import InvalidRangeError
from kafka_tiers.api.plugin import Plugin

#: The largest position a fetch accepts: positions are signed 64-bit as in Kafka.
MAX_POSITION = 2**63 - 1

_SEGMENT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")


class IndexType(Enum):
    """The auxiliary files of a segment, fetched with
    :meth:`RemoteStorageManager.fetch_index`."""

    OFFSET = "offset"
    TIMESTAMP = "timestamp"
    PRODUCER_SNAPSHOT = "producer_snapshot"
    TRANSACTION = "transaction"
    LEADER_EPOCH = "leader_epoch"


class RemoteLogSegmentState(Enum):
    """Where a remote segment is in its life (Kafka's states)."""

    COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
    COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
    DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
    DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"


class StorageCapability(StrEnum):
    """Optional behaviours a storage plugin may declare in
    :attr:`RemoteStorageManager.CAPABILITIES`; the conformance suite runs the checks that need
    one only when it is declared (and shows the skipped ones with the reason).

    Named after behaviours, never after vendors.
    """

    #: Large objects are uploaded in several parts (and a failed upload is aborted).
    MULTIPART_UPLOAD = "multipart_upload"
    #: Calls from several threads at once on one instance are safe.
    CONCURRENT_ACCESS = "concurrent_access"
    #: Segments of tens of MiB are copied and fetched within the suite's time.
    LARGE_SEGMENTS = "large_segments"
    #: The plugin can list and delete objects that no manifest references
    #: (``collect_orphans``).
    ORPHAN_COLLECTION = "orphan_collection"
    #: The plugin is built on the object-store level, so the suite can wrap its object store
    #: to inject faults and count open streams.
    FAULT_INJECTION = "fault_injection"
    #: The plugin stores segments as chunks it can compress (zstd) and encrypt (AES-256-GCM
    #: with wrapped data keys) and reads them back through a chunk cache (the object-store
    #: level's data path).
    DATA_TRANSFORMS = "data_transforms"


def _new_segment_id() -> str:
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):  # as Kafka: ids never start with '-'
            return text


@dataclass(frozen=True, order=True, slots=True)
class RemoteLogSegmentId:
    """The identity of one copy attempt of one segment.

    The caller must use a fresh id for every copy attempt, retries included (Kafka's rule);
    :meth:`generate` makes one. Ids are url-safe base64 uuids (22 characters) like Kafka's;
    any string of 1-64 characters from ``A-Z a-z 0-9 _ -`` not starting with ``-`` is accepted,
    so an id is always safe inside an object key.

    Raises:
        ValueError: a malformed id or a topic partition that is not a TopicPartition.
    """

    topic_partition: TopicPartition
    id: str

    def __post_init__(self) -> None:
        if not isinstance(self.topic_partition, TopicPartition):
            raise ValueError(f"topic_partition must be a TopicPartition, "
                             f"got {self.topic_partition!r}")
        if not isinstance(self.id, str) or not _SEGMENT_ID.fullmatch(self.id):
            raise ValueError(f"segment id must be 1-64 characters of A-Z a-z 0-9 _ - not "
                             f"starting with '-', got {self.id!r}")

    @classmethod
    def generate(cls, topic_partition: TopicPartition) -> RemoteLogSegmentId:
        """A new id with a random uuid, for one copy attempt."""
        return cls(topic_partition, _new_segment_id())

    def __str__(self) -> str:
        return f"{self.topic_partition}/{self.id}"


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """What the broker knows about one remote segment.

    Attributes:
        remote_log_segment_id: the segment's topic partition and copy-attempt id.
        start_offset: the first offset in the segment (inclusive).
        end_offset: the last offset in the segment (inclusive, >= ``start_offset``).
        max_timestamp_ms: the largest record timestamp in the segment.
        broker_id: the broker that copied the segment.
        event_timestamp_ms: when this metadata was made (epoch milliseconds).
        segment_size_in_bytes: the size of the segment's log file.
        segment_leader_epochs: leader epoch -> the first offset written in that epoch, for the
            epochs the segment holds (at least one).
        custom_metadata: the bytes the plugin returned from ``copy_log_segment_data``, if any.
        state: where the segment is in its life.

    Raises:
        ValueError: a field is malformed (negative offsets, ``end_offset < start_offset``, no
            leader epochs, custom metadata that is not bytes).
    """

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: Mapping[int, int] = field(compare=True, hash=False)
    custom_metadata: bytes | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def __post_init__(self) -> None:
        if not isinstance(self.remote_log_segment_id, RemoteLogSegmentId):
            raise ValueError("remote_log_segment_id must be a RemoteLogSegmentId")
        _check_int("start_offset", self.start_offset, 0)
        _check_int("end_offset", self.end_offset, self.start_offset)
        _check_int("max_timestamp_ms", self.max_timestamp_ms, -1)
        _check_int("broker_id", self.broker_id, 0)
        _check_int("event_timestamp_ms", self.event_timestamp_ms, 0)
        _check_int("segment_size_in_bytes", self.segment_size_in_bytes, 0)
        epochs = dict(self.segment_leader_epochs)
        if not epochs:
            raise ValueError("segment_leader_epochs must hold at least one epoch")
        for epoch, offset in epochs.items():
            _check_int("leader epoch", epoch, 0)
            _check_int(f"start offset of leader epoch {epoch}", offset, 0)
        object.__setattr__(self, "segment_leader_epochs",
                           MappingProxyType(dict(sorted(epochs.items()))))
        if self.custom_metadata is not None and not isinstance(self.custom_metadata, bytes):
            raise ValueError(f"custom_metadata must be bytes or None, "
                             f"got {type(self.custom_metadata).__name__}")
        if not isinstance(self.state, RemoteLogSegmentState):
            raise ValueError(f"state must be a RemoteLogSegmentState, got {self.state!r}")

    @property
    def topic_partition(self) -> TopicPartition:
        """The segment's topic partition."""
        return self.remote_log_segment_id.topic_partition

    @property
    def segment_id(self) -> str:
        """The copy attempt's id (``remote_log_segment_id.id``)."""
        return self.remote_log_segment_id.id

    def with_custom_metadata(self, custom_metadata: bytes | None) -> RemoteLogSegmentMetadata:
        """A copy carrying these custom metadata bytes."""
        return replace(self, custom_metadata=custom_metadata)

    def with_state(self, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadata:
        """A copy in this state."""
        return replace(self, state=state)


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """The local files of a rolled segment, handed to ``copy_log_segment_data``.

    Attributes:
        log_segment: the ``.log`` file.
        offset_index: the ``.index`` file.
        time_index: the ``.timeindex`` file.
        transaction_index: the ``.txnindex`` file, or None when the segment has none (then a
            fetch of :attr:`IndexType.TRANSACTION` raises not-found).
        producer_snapshot_index: the ``.snapshot`` file.
        leader_epoch_index: the leader-epoch checkpoint content for the segment, as bytes.
    """

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes

    def __post_init__(self) -> None:
        for name in ("log_segment", "offset_index", "time_index", "producer_snapshot_index",
                     "transaction_index"):
            value = getattr(self, name)
            if value is None and name == "transaction_index":
                continue
            if not isinstance(value, str | os.PathLike):
                raise ValueError(f"{name} must be a path, got {value!r}")
            object.__setattr__(self, name, Path(value))
        if not isinstance(self.leader_epoch_index, bytes | bytearray | memoryview):
            raise ValueError("leader_epoch_index must be bytes")
        object.__setattr__(self, "leader_epoch_index", bytes(self.leader_epoch_index))

    def index_file(self, index_type: IndexType) -> Path | None:
        """The local file of an index type (None for LEADER_EPOCH, which is bytes, and for a
        missing transaction index)."""
        return {
            IndexType.OFFSET: self.offset_index,
            IndexType.TIMESTAMP: self.time_index,
            IndexType.PRODUCER_SNAPSHOT: self.producer_snapshot_index,
            IndexType.TRANSACTION: self.transaction_index,
            IndexType.LEADER_EPOCH: None,
        }[index_type]


class RemoteStorageManager(Plugin):
    """Copies segments to a remote tier, reads them back, lists and deletes them.

    Selected by entry-point name in group ``kafka_tiers.remote_storage`` (or an import path)
    through ``remote.storage.manager.class``; the keys under ``rsm.config.`` reach
    :meth:`configure` with the prefix stripped. The core calls a storage plugin only through its
    wrapper (which names the plugin in errors and validates results), never directly.

    Thread safety: the core may call one instance from several threads when the plugin declares
    :attr:`StorageCapability.CONCURRENT_ACCESS`; otherwise it serialises calls.

    Errors: every method raises :class:`~kafka_tiers.api.RemoteStorageError` (or a subclass) on
    failure: :class:`~kafka_tiers.api.RetriableRemoteStorageError` when a retry may help,
    :class:`~kafka_tiers.api.RemoteResourceNotFoundError` for a missing segment or index,
    :class:`~kafka_tiers.api.InvalidRangeError` for an invalid fetch range.

    Class attributes:
        CAPABILITIES: the optional behaviours the plugin supports (:class:`StorageCapability`
            values); the conformance suite checks exactly these.
    """

    CAPABILITIES: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> bytes | None:
        """Copy a rolled segment and its indexes to the remote tier.

        The caller must give a fresh ``metadata.remote_log_segment_id`` on every attempt,
        retries included. The copy is idempotent: when content already exists for this id (an
        earlier attempt), it is overwritten, never an error. Once this returns, the segment is
        listed by :meth:`list_remote_segments` and readable; if it raises, nothing of the
        attempt is listed or readable (a partial copy is cleaned up or left as unreferenced
        garbage).

        Returns:
            Custom metadata bytes to store in the segment's metadata, or None.

        Raises:
            RemoteStorageError: the copy failed (retriable or not).
        """

    @abstractmethod
    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        """Open the segment's log data from ``start_position`` to ``end_position``.

        Positions are byte positions in the log file, both inclusive, 64-bit. ``end_position``
        None means to the end; an end past the last byte is clipped to it. For an empty
        segment, ``start_position == 0`` gives an empty stream.

        Returns:
            A binary readable stream that the caller must close (use ``with``).

        Raises:
            InvalidRangeError: ``start_position`` negative, beyond the last byte of the
                segment, or ``end_position < start_position``.
            RemoteResourceNotFoundError: the segment is not in the remote tier.
            RemoteStorageError: any other failure.
        """

    @abstractmethod
    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        """Open one index of the segment, whole.

        Returns:
            A binary readable stream that the caller must close.

        Raises:
            RemoteResourceNotFoundError: the segment is not in the remote tier, or it has no
                such index (a segment copied without a transaction index); never returns None.
            RemoteStorageError: any other failure.
        """

    @abstractmethod
    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete the segment and its indexes.

        Idempotent: deleting a segment that is already (or was never) there succeeds. Once
        this returns the segment is neither listed nor readable.

        Raises:
            RemoteStorageError: the deletion failed; repeat it.
        """

    @abstractmethod
    def list_remote_segments(
        self, topic_partition: TopicPartition, min_base_offset: int = 0
    ) -> list[RemoteLogSegmentMetadata]:
        """The segments of a partition whose start offset is >= ``min_base_offset``, sorted by
        start offset, in state ``COPY_SEGMENT_FINISHED`` with their custom metadata.

        When several completed copies share a start offset (a copy retried with a new id), only
        the newest is listed; the older ones remain readable by their own metadata until they
        are deleted or collected as garbage.

        Raises:
            RemoteStorageError: the listing failed.
        """

    @abstractmethod
    def delete_topic_partition(self, topic_partition: TopicPartition) -> None:
        """Delete every segment of the partition, and any garbage under it. Idempotent.

        Raises:
            RemoteStorageError: the deletion failed; repeat it.
        """


def check_range(start_position: int, end_position: int | None,
                segment_id: str | None = None) -> None:
    """Check a fetch range that does not depend on the segment's size.

    Raises:
        InvalidRangeError: a position that is not an int, a negative start, an end before the
            start, or a position beyond 2**63-1.
    """
    for name, value in (("start_position", start_position), ("end_position", end_position)):
        if value is None and name == "end_position":
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRangeError(f"{name} must be an int, got {value!r}",
                                    start=None, end=None, segment_id=segment_id)
    if start_position < 0:
        raise InvalidRangeError(f"start position {start_position} is negative",
                                start=start_position, end=end_position, segment_id=segment_id)
    if end_position is not None and end_position < start_position:
        raise InvalidRangeError(
            f"end position {end_position} is before start position {start_position}",
            start=start_position, end=end_position, segment_id=segment_id)
    if start_position > MAX_POSITION or (end_position or 0) > MAX_POSITION:
        raise InvalidRangeError("positions are limited to 64 bits", start=start_position,
                                end=end_position, segment_id=segment_id)


__all__ = [
    "MAX_POSITION",
    "IndexType",
    "LogSegmentData",
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentState",
    "RemoteStorageManager",
    "StorageCapability",
    "check_range",
]
