"""The object-store level: implement four small operations, inherit the whole storage contract.

An object-store backend (a directory tree, S3, Azure Blob, HDFS, a database) implements
:class:`ObjectStore`:

- ``put(key, data, length)``: store a stream under a key (atomically: readers see the old
  object, no object, or the whole new one);
- ``get(key, byte_range)``: open a stream of an object, or of an inclusive byte range of it;
- ``delete_many(keys)``: delete a batch of keys, missing ones ignored;
- ``list(prefix)``: every object whose key starts with a prefix (paginating internally).

Stores with multi-part uploads subclass :class:`MultipartObjectStore` instead and implement the
part operations; its ``put`` does the splitting, keeps up to ``upload_concurrency`` parts in
flight (holding at most one part more in memory), grows the part size to fit ``max_parts``,
and aborts a failed upload once its parts in flight have ended. A store translates its own
exceptions with :meth:`ObjectStore.translate_error`.

:class:`ObjectStoreRemoteStorageManager` then implements :class:`RemoteStorageManager` on top:

Key layout
    ``<prefix>/<topic>-<partition>/<20-digit start offset>-<segment id>.<kind>`` where kind is
    ``log``, ``index``, ``timeindex``, ``snapshot``, ``txnindex``,
    ``leader-epoch-checkpoint`` or ``manifest`` (``<prefix>/`` is absent when the prefix is
    empty). Topic names must be legal Kafka topic names (``[A-Za-z0-9._-]``, at most 249).

Commit protocol
    A copy first deletes any manifest of the same segment id (so an earlier attempt stops being
    visible), writes the data and index objects, and writes the manifest last, once every one of
    them is stored. A segment exists for readers only once its manifest does. A store whose
    ``put`` is thread-safe may declare :attr:`ObjectStore.max_concurrent_puts` above 1: once
    the log is stored, the index objects are then written all at once (they are small: a remote
    store spends their time waiting for round trips), the manifest still after all of them. The
    log goes first so that a failure of its (long) upload, an outage, leaves nothing committed
    that the cleanup would then be unable to delete. When any step fails, everything the
    attempt wrote is deleted once nothing of it is in flight (best effort; what cannot be
    deleted is unreferenced garbage that
    :meth:`ObjectStoreRemoteStorageManager.collect_orphans` removes later). A delete removes the
    manifest first, then the data.

Manifest
    A small JSON object, ``"format_version": 2``, holding the full segment metadata (state
    ``COPY_SEGMENT_FINISHED``, custom metadata base64), the object list (kind, name, size and
    ``"crc32c"``: the CRC-32C (Castagnoli, as Kafka's record batches use) of the content as 8
    lower-case hex digits) and a commit sequence. Version 1 manifests, written by earlier
    releases, are still read: they are identical but for a ``"sha256"`` (64 hex digits) per
    object instead of ``"crc32c"``; :meth:`ManifestObject.matches` checks content against
    either. A manifest with another ``format_version`` raises
    :class:`~kafka_tiers.api.ManifestError`: a newer writer needs a newer reader.

Listing
    From the manifests only. When several manifests share a start offset (a copy retried with a
    new segment id), the one with the highest commit sequence (nanoseconds since the epoch,
    strictly increasing within a process) is listed; the others stay readable by their own
    metadata until deleted, and are garbage for ``collect_orphans`` once older than its age.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import io
import json
import logging
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from enum import Enum
from typing import Any, BinaryIO, ClassVar, Protocol

import crc32c as _crc32c

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import (
    InvalidRangeError,
    KafkaTiersError,
    ManifestError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
)
from kafka_tiers.api.storage import (
    MAX_POSITION,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    StorageCapability,
)

log = logging.getLogger(__name__)

#: The manifest format this code writes (crc32c per object); it also reads format 1 (sha256).
MANIFEST_FORMAT_VERSION = 2

_COPY_CHUNK = 1 << 20


# --------------------------------------------------------------------------------------------
# Value types


@dataclass(frozen=True, slots=True)
class ByteRange:
    """An inclusive range of byte positions ``first..last`` inside an object.

    Raises:
        ValueError: ``first`` negative or ``last < first``.
    """

    first: int
    last: int

    def __post_init__(self) -> None:
        if self.first < 0 or self.last < self.first:
            raise ValueError(f"invalid byte range {self.first}..{self.last}")

    @property
    def size(self) -> int:
        """How many bytes the range covers."""
        return self.last - self.first + 1

    def __str__(self) -> str:
        return f"bytes={self.first}-{self.last}"


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object found by :meth:`ObjectStore.list`.

    Attributes:
        key: the object's full key.
        size: its size in bytes.
        last_modified_ms: when it was last written (epoch milliseconds).
    """

    key: str
    size: int
    last_modified_ms: int


class ObjectKind(Enum):
    """The objects of one segment; the value is the key suffix after the dot."""

    LOG = "log"
    OFFSET_INDEX = "index"
    TIME_INDEX = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION_INDEX = "txnindex"
    LEADER_EPOCH = "leader-epoch-checkpoint"
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


# --------------------------------------------------------------------------------------------
# Key layout

_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_KEY_PART = re.compile(r"[A-Za-z0-9._=+,@~-]+")
_SEGMENT_NAME = re.compile(
    r"(?P<offset>\d{20})-(?P<id>[A-Za-z0-9_][A-Za-z0-9_-]{0,63})\.(?P<kind>[a-z-]+)")


def validate_key(key: str) -> str:
    """Check that ``key`` is a safe relative object key: ``/``-separated non-empty parts of
    ``A-Z a-z 0-9 . _ - = + , @ ~``, none of them ``.`` or ``..``, no leading or trailing
    ``/``. Backends mapping keys to paths may rely on this, and must still check resolved paths.

    Returns:
        The key unchanged.

    Raises:
        RemoteStorageError: the key is unsafe (the message shows it).
    """
    if not isinstance(key, str) or not key:
        raise RemoteStorageError(f"invalid object key {key!r}: empty")
    for part in key.split("/"):
        if part in ("", ".", "..") or not _KEY_PART.fullmatch(part):
            raise RemoteStorageError(f"invalid object key {key!r}: bad part {part!r}",
                                     resource=key)
    return key


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


# --------------------------------------------------------------------------------------------
# Manifest


CRC32C = "crc32c"
"""The checksum algorithm of format 2 manifests (CRC-32C, 8 lower-case hex digits)."""
SHA256 = "sha256"
"""The checksum algorithm of format 1 manifests (SHA-256, 64 lower-case hex digits)."""
CHECKSUM_ALGORITHMS = (CRC32C, SHA256)
_MANIFEST_VERSION_BY_ALGORITHM = {CRC32C: 2, SHA256: 1}
_CRC32C_HEX = re.compile(r"[0-9a-f]{8}")


class ChecksumHasher(Protocol):
    """An incremental checksum: ``update`` with the content in order, then ``hexdigest``."""

    def update(self, data: Any, /) -> None: ...

    def hexdigest(self) -> str: ...


class _Crc32cHasher:
    """CRC-32C with a hashlib-like interface (accepts bytes, bytearrays and memoryviews)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = 0

    def update(self, data: Any, /) -> None:
        self._value = _crc32c.crc32c(data, self._value)

    def hexdigest(self) -> str:
        return f"{self._value:08x}"


def new_hasher(algorithm: str = CRC32C) -> ChecksumHasher:
    """A fresh incremental hasher of a manifest checksum algorithm (``"crc32c"`` or
    ``"sha256"``).

    Raises:
        ValueError: an unknown algorithm.
    """
    if algorithm == CRC32C:
        return _Crc32cHasher()
    if algorithm == SHA256:
        return hashlib.sha256()
    raise ValueError(f"unknown checksum algorithm {algorithm!r}")


@dataclass(frozen=True, slots=True)
class ManifestObject:
    """One object a manifest lists.

    Attributes:
        kind: which object of the segment.
        name: its key's last part (the file name next to the manifest).
        size: its size in bytes.
        checksum_algorithm: ``"crc32c"`` (format 2, written by this release) or ``"sha256"``
            (read from format 1 manifests).
        checksum: the checksum of its content in lower-case hex.
    """

    kind: ObjectKind
    name: str
    size: int
    checksum_algorithm: str
    checksum: str

    def __post_init__(self) -> None:
        if self.checksum_algorithm not in CHECKSUM_ALGORITHMS:
            raise ValueError(f"unknown checksum algorithm {self.checksum_algorithm!r}")

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` has this object's size and checksum."""
        if len(data) != self.size:
            return False
        hasher = new_hasher(self.checksum_algorithm)
        hasher.update(data)
        return hasher.hexdigest() == self.checksum


@dataclass(frozen=True, slots=True)
class SegmentManifest:
    """The commit record of one segment copy.

    Attributes:
        metadata: the full segment metadata as listed (state ``COPY_SEGMENT_FINISHED``).
        objects: the data and index objects of the segment.
        commit_sequence: orders copies sharing a start offset; larger is newer.
    """

    metadata: RemoteLogSegmentMetadata
    objects: tuple[ManifestObject, ...]
    commit_sequence: int

    def object(self, kind: ObjectKind) -> ManifestObject | None:
        """The listed object of this kind, or None."""
        for obj in self.objects:
            if obj.kind is kind:
                return obj
        return None

    def to_json(self) -> bytes:
        """The manifest as UTF-8 JSON: format 2 (``"crc32c"`` per object), or format 1 when
        its objects carry SHA-256 checksums (a manifest read from format 1 is written back as
        it was read).

        Raises:
            ValueError: the objects mix checksum algorithms.
        """
        md = self.metadata
        algorithms = {o.checksum_algorithm for o in self.objects} or {CRC32C}
        if len(algorithms) != 1:
            raise ValueError("a manifest's objects must all use one checksum algorithm")
        (algorithm,) = algorithms
        doc = {
            "format_version": _MANIFEST_VERSION_BY_ALGORITHM[algorithm],
            "segment": {
                "topic": md.topic_partition.topic,
                "partition": md.topic_partition.partition,
                "id": md.segment_id,
                "start_offset": md.start_offset,
                "end_offset": md.end_offset,
                "max_timestamp_ms": md.max_timestamp_ms,
                "broker_id": md.broker_id,
                "event_timestamp_ms": md.event_timestamp_ms,
                "segment_size_in_bytes": md.segment_size_in_bytes,
                "segment_leader_epochs": {str(k): v for k, v in
                                          md.segment_leader_epochs.items()},
                "custom_metadata": (base64.b64encode(md.custom_metadata).decode("ascii")
                                    if md.custom_metadata is not None else None),
                "state": md.state.value,
            },
            "objects": [{"kind": o.kind.value, "name": o.name, "size": o.size,
                         algorithm: o.checksum} for o in self.objects],
            "commit_sequence": self.commit_sequence,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, key: str | None = None) -> SegmentManifest:
        """Read a manifest of format 2 (``"crc32c"`` per object) or 1 (``"sha256"``).

        Raises:
            ManifestError: not JSON, a missing or malformed field, or a ``format_version``
                other than 1 or :data:`MANIFEST_FORMAT_VERSION` (the error carries the
                version).
        """
        where = f"manifest {key}" if key else "manifest"
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ManifestError(f"{where} is not valid JSON: {exc}", key=key) from None
        if not isinstance(doc, dict) or "format_version" not in doc:
            raise ManifestError(f"{where} has no format_version", key=key)
        version = doc["format_version"]
        algorithm = None if isinstance(version, bool) else next(
            (a for v, a in _MANIFEST_ALGORITHM_BY_VERSION.items() if v == version), None)
        if algorithm is None:
            raise ManifestError(
                f"{where} has format_version {version!r}; this kafka-tiers reads formats "
                f"1 to {MANIFEST_FORMAT_VERSION} only (a newer writer needs a newer "
                "kafka-tiers)", key=key, format_version=version)
        try:
            seg = doc["segment"]
            custom = seg["custom_metadata"]
            metadata = RemoteLogSegmentMetadata(
                RemoteLogSegmentId(TopicPartition(seg["topic"], seg["partition"]), seg["id"]),
                start_offset=seg["start_offset"],
                end_offset=seg["end_offset"],
                max_timestamp_ms=seg["max_timestamp_ms"],
                broker_id=seg["broker_id"],
                event_timestamp_ms=seg["event_timestamp_ms"],
                segment_size_in_bytes=seg["segment_size_in_bytes"],
                segment_leader_epochs={int(k): v for k, v in
                                       seg["segment_leader_epochs"].items()},
                custom_metadata=(base64.b64decode(custom, validate=True)
                                 if custom is not None else None),
                state=RemoteLogSegmentState(seg["state"]),
            )
            objects = tuple(
                ManifestObject(ObjectKind(o["kind"]), str(o["name"]), int(o["size"]),
                               algorithm, _checksum_field(o, algorithm))
                for o in doc["objects"])
            sequence = doc["commit_sequence"]
            if isinstance(sequence, bool) or not isinstance(sequence, int):
                raise ValueError("commit_sequence must be an int")
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
            raise ManifestError(f"{where} is malformed: {type(exc).__name__}: {exc}",
                                key=key, format_version=version) from None
        return cls(metadata, objects, sequence)


_MANIFEST_ALGORITHM_BY_VERSION = {v: a for a, v in _MANIFEST_VERSION_BY_ALGORITHM.items()}


def _checksum_field(obj: Mapping[str, Any], algorithm: str) -> str:
    value = str(obj[algorithm])
    if algorithm == CRC32C and not _CRC32C_HEX.fullmatch(value):
        raise ValueError(f"crc32c must be 8 lower-case hex digits, not {value!r}")
    return value


_sequence_lock = threading.Lock()
_last_sequence = 0


def next_commit_sequence() -> int:
    """Nanoseconds since the epoch, strictly increasing within this process."""
    global _last_sequence
    with _sequence_lock:
        _last_sequence = max(time.time_ns(), _last_sequence + 1)
        return _last_sequence


# --------------------------------------------------------------------------------------------
# The backend interface


class ObjectStore(ABC):
    """A flat key -> bytes store: the small interface an object-store backend implements.

    Keys are checked with :func:`validate_key` by the caller before they reach the store.
    Every method may raise the backend's own exceptions; :meth:`translate_error` turns them
    into kafka-tiers errors (the defaults map ``FileNotFoundError`` to not-found, timeouts
    and connection errors to retriable).

    Class attributes:
        max_delete_batch: the most keys one :meth:`delete_many` call receives (S3: 1000).
        max_concurrent_puts: how many :meth:`put` calls of one segment copy may run at once
            (the small index objects, on separate threads, once the log is stored); 1 (the
            default): one after the other. Declare more only when ``put`` is thread-safe.
            Wrappers (see :meth:`ObjectStoreRemoteStorageManager.wrap_object_store`) keep
            the default unless they declare it themselves.
    """

    max_delete_batch: ClassVar[int] = 1000
    max_concurrent_puts: ClassVar[int] = 1

    @abstractmethod
    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        """Store everything ``data`` yields under ``key``, replacing any object there.

        Must be atomic: readers see the previous object, no object, or the whole new one,
        never part of it. Must not close ``data``.

        Args:
            key: the object key.
            data: a binary stream, read to its end.
            length: the number of bytes ``data`` will yield when known (for a Content-Length),
                or None.

        Returns:
            The number of bytes stored.
        """

    @abstractmethod
    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        """Open an object, whole or the inclusive ``byte_range`` of it.

        The caller guarantees that ``byte_range`` lies within the object and closes the
        returned stream.

        Raises:
            RemoteResourceNotFoundError (or a backend error :meth:`translate_error` maps to
            it): there is no object under ``key``.
        """

    @abstractmethod
    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete these keys (at most :attr:`max_delete_batch`); missing keys are ignored."""

    @abstractmethod
    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (a string prefix: ``"a/b"`` matches
        ``"a/bc"``), in any order; paginate internally."""

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        """Map a backend exception to a kafka-tiers error, or None for the default mapping.

        Override to recognise your client's errors (an HTTP 404 is
        :class:`RemoteResourceNotFoundError`, a 503 or throttling is
        :class:`RetriableRemoteStorageError`). Never put credentials in the message.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional, with a do-nothing default
        """Release connections and handles. Safe to call more than once."""


class MultipartObjectStore(ObjectStore):
    """An object store with multi-part uploads (S3 multipart, Azure block lists).

    Implement the five part operations; :meth:`put` does the rest: objects of up to one part
    go up with :meth:`put_object`, larger ones in a multi-part upload with up to
    :attr:`upload_concurrency` parts in flight at once, completed with the part tags in
    part-number order. When anything fails (a part, reading ``data``, completing, an
    interrupt) the parts not yet started are dropped, the parts in flight are waited for, and
    :meth:`abort_failed_upload` is called, so that no partial object and no dangling upload
    remain; then the original error is raised.

    Memory: :meth:`put` holds at most ``upload_concurrency + 1`` parts (two when sequential).

    Thread-safety: :meth:`put` may run on several threads at once (see
    :attr:`ObjectStore.max_concurrent_puts`) when the part operations allow it. With
    :attr:`upload_concurrency` above 1, :meth:`upload_part` runs on a pool of threads (one pool
    per upload, named after :attr:`upload_thread_name`, shut down before :meth:`put` returns
    or raises), several calls at once for one upload, so it must be thread-safe; every other
    operation runs on the thread calling :meth:`put`. With 1 (the default) everything runs
    on the calling thread, one part after the other, and no thread is started.

    Attributes:
        part_size: bytes per part (S3 requires at least 5 MiB for all parts but the last); see
            :meth:`part_size_for`.
        upload_concurrency: parts of one upload in flight at once (1: sequential).
        max_parts: the service's limit on parts per object (S3 10,000, Azure 50,000), or None
            for no limit.
        part_size_setting: the name of the user's setting behind :attr:`part_size` (say
            ``"s3.multipart.upload.part.size"``), named by the error of an upload that needs
            more than :attr:`max_parts` parts; None: ``part_size``.
        upload_thread_name: the name prefix of the upload threads.
    """

    part_size: int = 8 * 1024 * 1024
    upload_concurrency: int = 1
    max_parts: int | None = None
    part_size_setting: str | None = None
    upload_thread_name: str = "kafka-tiers-upload"

    @abstractmethod
    def put_object(self, key: str, data: bytes) -> None:
        """Store a small object in one request."""

    @abstractmethod
    def create_multipart_upload(self, key: str) -> str:
        """Start a multi-part upload; returns its upload id."""

    @abstractmethod
    def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        """Upload part ``part_number`` (1-based); returns the part's tag (ETag, block id), an
        opaque string handed back to :meth:`complete_multipart_upload`. Must be thread-safe
        when :attr:`upload_concurrency` is above 1."""

    @abstractmethod
    def complete_multipart_upload(self, key: str, upload_id: str, parts: Sequence[str]) -> None:
        """Make the object from these part tags, in part-number order (atomically)."""

    @abstractmethod
    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        """Drop an unfinished upload and its parts."""

    def abort_failed_upload(self, key: str, upload_id: str) -> None:
        """Called by :meth:`put` when an upload failed, once none of its parts is in flight.

        The default calls :meth:`abort_multipart_upload` and, when that fails too, logs a
        warning (the original failure is what :meth:`put` raises). Override to do more, such
        as remembering the upload to abort it later. Should not raise; whatever it raises is
        logged, and :meth:`put` still raises the original failure.
        """
        try:
            self.abort_multipart_upload(key, upload_id)
        except Exception as exc:  # the original failure matters; the upload expires anyway
            log.warning("could not abort the multi-part upload %s of %s: %s", upload_id, key,
                        _describe(self, exc, key))

    def part_size_for(self, length: int | None) -> int:
        """The part size for an object of ``length`` bytes (None: unknown): :attr:`part_size`,
        grown when the object would need more than :attr:`max_parts` parts.

        Raises:
            RemoteStorageError: :attr:`part_size` is not above 0.
        """
        size = self.part_size
        if size <= 0:
            raise RemoteStorageError(f"part_size must be > 0, got {size}")
        limit = self.max_parts
        if limit is None or length is None or length <= size * limit:
            return size
        return -(-length // limit)

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        """Store the stream: one :meth:`put_object` for up to one part (of
        :meth:`part_size_for` ``length`` bytes), else a multi-part upload (see the class
        docstring). When ``length`` is known and larger than one part, the first part goes on
        the wire as soon as it is read; otherwise a second part is read to decide.

        Returns:
            The number of bytes stored.

        Raises:
            RemoteStorageError: ``part_size`` or ``upload_concurrency`` is invalid, or an
                object of unknown length needs more than :attr:`max_parts` parts (not
                retriable: raise the part size).
            Exception: whatever the part operations or ``data`` raise (the upload aborted).
        """
        size = self.part_size_for(length)
        concurrency = self.upload_concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise RemoteStorageError(f"upload_concurrency must be an int >= 1, got "
                                     f"{concurrency!r}", retriable=False)
        first = read_exact(data, size)
        ahead: list[bytes] = [first]
        more = len(first) == size and length is not None and length > size
        if len(first) == size and not more:
            second = read_exact(data, size)  # is there more than one part?
            if second:
                ahead.append(second)
                more = True
        if not more:
            self.put_object(key, first)
            return len(first)
        del first  # ahead holds the parts read so far; the upload takes them from it
        upload_id = self.create_multipart_upload(key)
        try:
            total, tags = self._upload_parts(key, upload_id, data, size, ahead, concurrency)
            self.complete_multipart_upload(key, upload_id, tags)
        except BaseException:
            try:
                self.abort_failed_upload(key, upload_id)
            except Exception as exc:  # the hook should not raise: the original failure wins
                log.warning("abort_failed_upload failed for the upload %s of %s: %s",
                            upload_id, key, _describe(self, exc, key))
            raise
        return total

    def _upload_parts(self, key: str, upload_id: str, data: BinaryIO, size: int,
                      ahead: list[bytes], concurrency: int) -> tuple[int, list[str]]:
        """Upload ``ahead`` and then the rest of ``data`` in parts of ``size`` bytes, with up
        to ``concurrency`` in flight; returns the byte count and the tags in part order.
        Returns or raises only once no part is in flight."""
        limit = self.max_parts
        pool = (ThreadPoolExecutor(concurrency, thread_name_prefix=self.upload_thread_name)
                if concurrency > 1 else None)
        in_flight: dict[Future[str], int] = {}
        tags: dict[int, str] = {}
        total = 0
        number = 0
        try:
            chunk: bytes | None = ahead.pop(0)
            while chunk:
                number += 1
                if limit is not None and number > limit:
                    setting = self.part_size_setting or "part_size"
                    raise RemoteStorageError(
                        f"{key} needs more than {limit} parts of {size} bytes: raise "
                        f"{setting}", resource=key, retriable=False)
                total += len(chunk)
                if pool is None:
                    tags[number] = self.upload_part(key, upload_id, number, chunk)
                else:
                    _collect_parts(in_flight, tags, block=False)  # a failure stops us early
                    while len(in_flight) >= concurrency:
                        _collect_parts(in_flight, tags, block=True)
                    in_flight[pool.submit(self.upload_part, key, upload_id, number,
                                          chunk)] = number
                chunk = None  # the part in flight holds the only reference to its bytes
                chunk = ahead.pop(0) if ahead else read_exact(data, size)
            while in_flight:
                _collect_parts(in_flight, tags, block=True)
        finally:
            for future in in_flight:
                future.cancel()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)  # the parts in flight end here
        return total, [tags[n] for n in sorted(tags)]


def _collect_parts(in_flight: dict[Future[str], int], tags: dict[int, str],
                   block: bool) -> None:
    """Move the finished parts' tags from ``in_flight`` to ``tags`` (waiting for one to finish
    when ``block``); re-raise the failure of the lowest-numbered failed part."""
    if block:
        wait(in_flight, return_when=FIRST_COMPLETED)
    done = sorted((n, f) for f, n in in_flight.items() if f.done())
    for number, future in done:
        del in_flight[future]
        tags[number] = future.result()  # raises the part's failure


def _describe(store: ObjectStore, exc: BaseException, key: str | None) -> str:
    """An exception for a log line: the store's translation (which keeps credentials out), or
    the default one."""
    try:
        mapped = store.translate_error(exc, key)
    except Exception:
        mapped = None
    return str(mapped or default_translate(exc, key))


def read_exact(stream: BinaryIO, size: int) -> bytes:
    """Read ``size`` bytes from ``stream``, fewer only at its end (``read`` may return less
    than asked; this keeps reading). For splitting an upload into parts of a fixed size."""
    parts: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


# --------------------------------------------------------------------------------------------
# Streams


class _LocalReadError(Exception):
    """Reading the broker's local segment file failed (not the remote tier's fault)."""

    def __init__(self, path: str, cause: OSError) -> None:
        super().__init__(f"cannot read local file {path}: {cause.strerror or cause}")
        self.cause = cause


class _CopyCancelled(Exception):
    """Raised into the put of one object of a copy when another object of it failed."""


class _HashingReader(io.RawIOBase):
    """Reads at most ``limit`` bytes of a local source, hashing and counting them in the same
    pass: the bytes are read straight into the caller's buffer (no intermediate copy) and
    hashed there. When ``cancel`` is set, the next read raises :class:`_CopyCancelled`, which
    fails the put reading it (so a failed copy stops its other uploads early)."""

    def __init__(self, source: Any, name: str, limit: int | None,
                 cancel: threading.Event | None = None) -> None:
        self._source = source
        self._name = name
        self._remaining = limit
        self._cancel = cancel
        self.digest = new_hasher(CRC32C)
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._cancel is not None and self._cancel.is_set():
            raise _CopyCancelled(f"reading {self._name} stopped: another object of the copy "
                                 "failed")
        view = memoryview(buffer).cast("B")
        want = len(view) if self._remaining is None else min(len(view), self._remaining)
        if want == 0:
            return 0
        target = view[:want]
        try:
            n = self._source.readinto(target) or 0
        except OSError as exc:
            raise _LocalReadError(self._name, exc) from None
        if n:
            self.digest.update(target[:n])
        self.count += n
        if self._remaining is not None:
            self._remaining -= n
        return n


class _ManagedStream(io.RawIOBase):
    """A stream handed to the caller: reads from a store stream, translating its errors, and
    closes it when closed."""

    def __init__(self, inner: BinaryIO, translate: Callable[[BaseException], BaseException],
                 expected: int) -> None:
        self._inner: BinaryIO | None = inner
        self._translate = translate
        self._remaining = expected

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._inner is None:
            raise ValueError("read from a closed stream")
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._remaining)
        if want == 0:
            return 0
        try:
            chunk = self._inner.read(want)
        except Exception as exc:
            raise self._translate(exc) from exc
        n = len(chunk)
        view[:n] = chunk
        self._remaining -= n
        if n == 0 and self._remaining > 0:
            raise RemoteStorageError(f"object ended {self._remaining} bytes early")
        return n

    def close(self) -> None:
        inner, self._inner = self._inner, None
        try:
            if inner is not None:
                inner.close()
        finally:
            super().close()


def _managed(inner: BinaryIO, translate: Callable[[BaseException], BaseException],
             expected: int) -> BinaryIO:
    return io.BufferedReader(_ManagedStream(inner, translate, expected),
                             buffer_size=_COPY_CHUNK)  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# The storage manager built on a store


def default_translate(exc: BaseException, key: str | None) -> RemoteStorageError:
    """The default mapping of a foreign exception: ``FileNotFoundError`` -> not found,
    timeouts and connection errors -> retriable, anything else -> :class:`RemoteStorageError`.
    The message names the exception type and the key, never credentials."""
    where = f" ({key})" if key else ""
    text = f"{type(exc).__name__}: {exc}{where}"
    if isinstance(exc, FileNotFoundError):
        return RemoteResourceNotFoundError(f"not found{where}", resource=key)
    if isinstance(exc, TimeoutError | ConnectionError | InterruptedError):
        return RetriableRemoteStorageError(text, resource=key)
    return RemoteStorageError(text, resource=key, retriable=False)


@dataclass(frozen=True, slots=True)
class _Source:
    kind: ObjectKind
    path: str | None
    content: bytes | None


class ObjectStoreRemoteStorageManager(RemoteStorageManager):
    """The whole :class:`RemoteStorageManager` contract on top of an :class:`ObjectStore`.

    Subclass it, implement :meth:`create_object_store`, register the subclass as an entry point
    in ``kafka_tiers.remote_storage``. See the module docstring for the key layout, the
    commit protocol, the manifest and listing rules.

    Config keys (besides the store's own, which :meth:`create_object_store` reads):
        ``key.prefix``: prepended to every key (default empty).
    """

    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({
        StorageCapability.FAULT_INJECTION, StorageCapability.ORPHAN_COLLECTION,
        StorageCapability.LARGE_SEGMENTS,
    })

    _store: ObjectStore | None = None
    _prefix: str = ""

    def __init__(self) -> None:
        self._store = None
        self._prefix = ""

    # -- lifecycle ---------------------------------------------------------------------------

    @abstractmethod
    def create_object_store(self, config: Mapping[str, str]) -> ObjectStore:
        """Build the object store from the plugin's config (all keys, ``key.prefix``
        included). Raise :class:`~kafka_tiers.api.ConfigError` for a bad value."""

    def configure(self, config: Mapping[str, str]) -> None:
        """Read ``key.prefix`` and build the store with :meth:`create_object_store`.

        Raises:
            ConfigError: a bad value (from the store or an unsafe prefix).
        """
        from kafka_tiers.api.errors import ConfigError

        try:
            self._prefix = normalize_prefix(config.get("key.prefix", ""))
        except RemoteStorageError as exc:
            raise ConfigError(str(exc), key="key.prefix",
                              expected="/-separated parts of A-Z a-z 0-9 . _ - = + , @ ~"
                              ) from None
        self._store = self.create_object_store(config)

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    @property
    def object_store(self) -> ObjectStore:
        """The store in use.

        Raises:
            RemoteStorageError: :meth:`configure` has not been called (or after close).
        """
        if self._store is None:
            raise RemoteStorageError(f"{type(self).__name__} is not configured (or closed)")
        return self._store

    @property
    def key_prefix(self) -> str:
        """The configured ``key.prefix`` without surrounding slashes."""
        return self._prefix

    def wrap_object_store(self, wrapper: Callable[[ObjectStore], ObjectStore]) -> None:
        """Replace the store with ``wrapper(store)``: for instrumentation and fault injection
        (the conformance suite wraps stores to fail after N bytes and to count open
        streams)."""
        self._store = wrapper(self.object_store)

    # -- plumbing ----------------------------------------------------------------------------

    def _translate(self, exc: BaseException, key: str | None,
                   segment_id: str | None) -> RemoteStorageError:
        if isinstance(exc, RemoteStorageError):
            err = exc
        elif isinstance(exc, KafkaTiersError):
            err = RemoteStorageError(f"{type(exc).__name__}: {exc}", resource=key)
        else:
            err = self.object_store.translate_error(exc, key) or default_translate(exc, key)
        if err.segment_id is None:
            err.segment_id = segment_id
        return err

    def _call(self, fn: Callable[..., Any], *args: Any, key: str | None = None,
              segment_id: str | None = None) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise self._translate(exc, key, segment_id) from exc

    def _key(self, segment_id: RemoteLogSegmentId, start_offset: int, kind: ObjectKind) -> str:
        return validate_key(segment_key(self._prefix, segment_id, start_offset, kind))

    def _all_keys(self, md: RemoteLogSegmentMetadata) -> dict[ObjectKind, str]:
        return {k: self._key(md.remote_log_segment_id, md.start_offset, k) for k in ObjectKind}

    def _delete(self, keys: Sequence[str], segment_id: str | None = None) -> None:
        store = self.object_store
        batch = max(1, int(store.max_delete_batch))
        for i in range(0, len(keys), batch):
            chunk = list(keys[i:i + batch])
            self._call(store.delete_many, chunk, key=chunk[0], segment_id=segment_id)

    def _read_all(self, key: str, segment_id: str | None) -> bytes:
        stream = self._call(self.object_store.get, key, None, key=key, segment_id=segment_id)
        try:
            return self._call(stream.read, key=key, segment_id=segment_id)
        finally:
            stream.close()

    def _put_source(self, key: str, source: _Source, segment_id: str,
                    cancel: threading.Event | None = None) -> tuple[int, str]:
        if source.content is not None:
            data = source.content
            self._call(self.object_store.put, key, io.BytesIO(data), len(data), key=key,
                       segment_id=segment_id)
            hasher = new_hasher(CRC32C)
            hasher.update(data)
            return len(data), hasher.hexdigest()
        assert source.path is not None
        try:
            # unbuffered: the hashing reader reads straight into its caller's buffer
            fh = open(source.path, "rb", buffering=0)  # noqa: SIM115 - closed in the finally
            length = _file_size(fh)  # type: ignore[arg-type]
        except OSError as exc:
            raise RemoteStorageError(
                f"cannot read local file {source.path}: {exc.strerror or exc}",
                segment_id=segment_id, retriable=False) from None
        try:
            reader = _HashingReader(fh, source.path, length, cancel)
            buffered = io.BufferedReader(reader, buffer_size=_COPY_CHUNK)
            try:
                stored = self._call(self.object_store.put, key, buffered, length, key=key,
                                    segment_id=segment_id)
            except RemoteStorageError as exc:
                cause = exc.__cause__
                if isinstance(cause, _LocalReadError):
                    raise RemoteStorageError(str(cause), segment_id=segment_id,
                                             retriable=False) from None
                raise
            if reader.count != length or (isinstance(stored, int) and stored != length):
                raise RemoteStorageError(
                    f"stored {stored} of {length} bytes of {source.path} under {key}",
                    segment_id=segment_id, resource=key)
            return length, reader.digest.hexdigest()
        finally:
            fh.close()

    def read_manifest(self, metadata: RemoteLogSegmentMetadata) -> SegmentManifest:
        """The manifest of a segment.

        Raises:
            RemoteResourceNotFoundError: the segment has no manifest (never copied, failed
                copy, deleted).
            ManifestError: the manifest is unreadable or of an unknown format version.
        """
        key = self._key(metadata.remote_log_segment_id, metadata.start_offset,
                        ObjectKind.MANIFEST)
        try:
            raw = self._read_all(key, metadata.segment_id)
        except RemoteResourceNotFoundError:
            raise RemoteResourceNotFoundError(
                f"segment {metadata.remote_log_segment_id} (start offset "
                f"{metadata.start_offset}) is not in the remote tier",
                segment_id=metadata.segment_id, resource="segment") from None
        manifest = SegmentManifest.from_json(raw, key)
        if manifest.metadata.remote_log_segment_id != metadata.remote_log_segment_id:
            raise ManifestError(f"manifest {key} describes segment "
                                f"{manifest.metadata.remote_log_segment_id}", key=key,
                                segment_id=metadata.segment_id)
        return manifest

    def custom_metadata_for(self, manifest_objects: Sequence[ManifestObject]) -> bytes | None:
        """The custom metadata bytes a copy returns (and stores in the manifest): by default a
        compact JSON ``{"v":1,"objects":N,"bytes":TOTAL}``, well under Kafka's 128-byte
        default limit. Override to return something else, or None."""
        total = sum(o.size for o in manifest_objects)
        return json.dumps({"v": 1, "objects": len(manifest_objects), "bytes": total},
                          separators=(",", ":")).encode("ascii")

    # -- the contract ------------------------------------------------------------------------

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> bytes | None:
        sid = metadata.segment_id
        keys = self._all_keys(metadata)
        sources = [
            _Source(ObjectKind.LOG, str(data.log_segment), None),
            _Source(ObjectKind.OFFSET_INDEX, str(data.offset_index), None),
            _Source(ObjectKind.TIME_INDEX, str(data.time_index), None),
            _Source(ObjectKind.PRODUCER_SNAPSHOT, str(data.producer_snapshot_index), None),
            _Source(ObjectKind.LEADER_EPOCH, None, data.leader_epoch_index),
        ]
        if data.transaction_index is not None:
            sources.append(_Source(ObjectKind.TRANSACTION_INDEX, str(data.transaction_index),
                                   None))
        try:
            # An earlier attempt with this id stops being visible before anything changes.
            self._delete([keys[ObjectKind.MANIFEST]], sid)
            stale = ([keys[ObjectKind.TRANSACTION_INDEX]] if data.transaction_index is None
                     else [])
            workers = _concurrent_puts(self.object_store)
            if workers <= 1:
                if stale:
                    self._delete(stale, sid)
                stored = [self._put_source(keys[s.kind], s, sid) for s in sources]
            else:
                stored = self._put_concurrently(keys, sources, stale, sid, workers)
            objects: list[ManifestObject] = []
            for source, (size, digest) in zip(sources, stored, strict=True):
                key = keys[source.kind]
                objects.append(ManifestObject(source.kind, key.rpartition("/")[2], size,
                                              CRC32C, digest))
            custom = self.custom_metadata_for(objects)
            final = metadata.with_custom_metadata(custom).with_state(
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
            manifest = SegmentManifest(final, tuple(objects), next_commit_sequence())
            raw = manifest.to_json()
            mkey = keys[ObjectKind.MANIFEST]
            self._call(self.object_store.put, mkey, io.BytesIO(raw), len(raw), key=mkey,
                       segment_id=sid)
        except BaseException as exc:
            self._cleanup_failed_copy(keys, sid)
            if isinstance(exc, RemoteStorageError):
                raise
            if isinstance(exc, Exception):
                raise self._translate(exc, None, sid) from exc
            raise
        log.debug("copied segment %s (%d objects)", metadata.remote_log_segment_id,
                  len(objects))
        return custom

    def _put_concurrently(self, keys: Mapping[ObjectKind, str], sources: Sequence[_Source],
                          stale: Sequence[str], sid: str, workers: int
                          ) -> list[tuple[int, str]]:
        """Store ``sources``: the first (the log) on this thread while ``stale`` is deleted on
        a pool, then, once it is stored, the others with up to ``workers`` puts at once.
        Returns (size, crc32c hex) per source, in order. Returns or raises only once every put
        has ended; the first failure cancels the others (their sources stop being read, no
        further put starts) and is raised."""
        cancel = threading.Event()
        lock = threading.Lock()
        failures: list[BaseException] = []

        def guarded(fn: Callable[..., Any], *args: Any) -> Any:
            try:
                return fn(*args)
            except BaseException as exc:
                with lock:  # the first failure is the cause; the others follow from it
                    if not cancel.is_set():
                        failures.append(exc)
                        cancel.set()
                raise

        first, rest = sources[0], sources[1:]
        pool = ThreadPoolExecutor(max(1, min(workers, len(rest))),
                                  thread_name_prefix="kafka-tiers-copy")
        side: list[Future[tuple[int, str]]] = []
        try:
            if stale:
                pool.submit(guarded, self._delete, stale, sid)
            with contextlib.suppress(BaseException):  # recorded in failures, raised below
                head = guarded(self._put_source, keys[first.kind], first, sid, cancel)
            with lock:
                if not cancel.is_set():
                    side = [pool.submit(guarded, self._put_source, keys[s.kind], s, sid,
                                        cancel) for s in rest]
        finally:
            pool.shutdown(wait=True)  # nothing of this copy is in flight after this line
        if failures:
            raise failures[0]
        return [head] + [f.result() for f in side]

    def _cleanup_failed_copy(self, keys: Mapping[ObjectKind, str], sid: str) -> None:
        ordered = [keys[ObjectKind.MANIFEST]] + [k for kind, k in keys.items()
                                                 if kind is not ObjectKind.MANIFEST]
        try:
            self._delete(ordered[:1], sid)
            self._delete(ordered[1:], sid)
        except Exception:  # the objects become garbage for collect_orphans
            log.warning("could not clean up the failed copy of segment %s; its objects are "
                        "left for orphan collection", sid, exc_info=True)

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        check_range(start_position, end_position, segment_id=metadata.segment_id)
        manifest = self.read_manifest(metadata)
        obj = manifest.object(ObjectKind.LOG)
        if obj is None:
            raise ManifestError(f"manifest of {metadata.remote_log_segment_id} lists no log",
                                segment_id=metadata.segment_id)
        size = obj.size
        if size == 0 and start_position == 0:
            return io.BytesIO(b"")  # type: ignore[return-value]
        if start_position > size - 1:
            raise InvalidRangeError(
                f"start position {start_position} is beyond the last byte of segment "
                f"{metadata.remote_log_segment_id} (size {size})",
                start=start_position, end=end_position, size=size,
                segment_id=metadata.segment_id)
        last = size - 1 if end_position is None else min(end_position, size - 1)
        key = self._key(metadata.remote_log_segment_id, metadata.start_offset, ObjectKind.LOG)
        return self._open(key, ByteRange(start_position, last), size, metadata.segment_id)

    def _open(self, key: str, byte_range: ByteRange | None, size: int,
              segment_id: str) -> BinaryIO:
        whole = byte_range is None or (byte_range.first == 0 and byte_range.last == size - 1)
        stream = self._call(self.object_store.get, key, None if whole else byte_range,
                            key=key, segment_id=segment_id)
        expected = size if byte_range is None else byte_range.size
        return _managed(stream, lambda exc: self._translate(exc, key, segment_id), expected)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        if not isinstance(index_type, IndexType):
            raise RemoteStorageError(f"unknown index type {index_type!r}",
                                     segment_id=metadata.segment_id)
        manifest = self.read_manifest(metadata)
        kind = INDEX_KINDS[index_type]
        obj = manifest.object(kind)
        if obj is None:
            raise RemoteResourceNotFoundError(
                f"segment {metadata.remote_log_segment_id} has no {index_type.name} index",
                segment_id=metadata.segment_id, resource=f"index {index_type.name}")
        if obj.size == 0:
            return io.BytesIO(b"")  # type: ignore[return-value]
        key = self._key(metadata.remote_log_segment_id, metadata.start_offset, kind)
        return self._open(key, None, obj.size, metadata.segment_id)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        keys = self._all_keys(metadata)
        sid = metadata.segment_id
        self._delete([keys[ObjectKind.MANIFEST]], sid)
        self._delete([k for kind, k in keys.items() if kind is not ObjectKind.MANIFEST], sid)

    def _manifests(self, prefix: str, min_base_offset: int = 0
                   ) -> list[tuple[ParsedKey, SegmentManifest, ObjectInfo]]:
        found = []
        for info in self._call(lambda: list(self.object_store.list(prefix)), key=prefix):
            parsed = parse_segment_key(info.key)
            if (parsed is None or parsed.kind is not ObjectKind.MANIFEST
                    or parsed.start_offset < min_base_offset):
                continue
            try:
                raw = self._read_all(info.key, parsed.segment_id)
            except RemoteResourceNotFoundError:
                continue  # deleted since the listing
            found.append((parsed, SegmentManifest.from_json(raw, info.key), info))
        return found

    @staticmethod
    def _newest(manifests: Iterable[tuple[ParsedKey, SegmentManifest, ObjectInfo]]
                ) -> dict[tuple[str, int], tuple[ParsedKey, SegmentManifest, ObjectInfo]]:
        best: dict[tuple[str, int], tuple[ParsedKey, SegmentManifest, ObjectInfo]] = {}
        for entry in manifests:
            parsed, manifest, _ = entry
            slot = (parsed.partition_dir, parsed.start_offset)
            current = best.get(slot)
            if current is None or (manifest.commit_sequence, parsed.segment_id) > (
                    current[1].commit_sequence, current[0].segment_id):
                best[slot] = entry
        return best

    def list_remote_segments(
        self, topic_partition: TopicPartition, min_base_offset: int = 0
    ) -> list[RemoteLogSegmentMetadata]:
        prefix = partition_prefix(self._prefix, topic_partition)
        newest = self._newest(self._manifests(prefix, min_base_offset))
        result = []
        for _, manifest, info in newest.values():
            if manifest.metadata.topic_partition != topic_partition:
                raise ManifestError(f"manifest {info.key} describes "
                                    f"{manifest.metadata.topic_partition}", key=info.key)
            result.append(manifest.metadata)
        result.sort(key=lambda m: (m.start_offset, m.segment_id))
        return result

    def delete_topic_partition(self, topic_partition: TopicPartition) -> None:
        prefix = partition_prefix(self._prefix, topic_partition)
        keys = sorted(info.key for info in
                      self._call(lambda: list(self.object_store.list(prefix)), key=prefix))
        manifests = [k for k in keys if k.endswith("." + ObjectKind.MANIFEST.value)]
        self._delete(manifests)
        self._delete([k for k in keys if k not in set(manifests)])

    def collect_orphans(self, min_age_ms: int, topic_partition: TopicPartition | None = None,
                        *, now_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete the garbage of the remote tier and return its keys, sorted.

        Garbage is every object of the segment layout that no manifest references (left by a
        copy that failed and could not clean up, or by a crash), and every segment superseded
        by a newer copy of the same start offset (manifest first). Only garbage last modified
        at least ``min_age_ms`` ago is touched: the broker passes the remote retention time,
        so a copy in progress is never collected. Objects that do not follow the layout are
        never touched.

        Args:
            min_age_ms: the minimum age of what is deleted.
            topic_partition: only this partition (default: everything under ``key.prefix``).
            now_ms: the current time (default: the clock).
            dry_run: list without deleting.

        Raises:
            RemoteStorageError: listing or deleting failed (repeat the call).
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        cutoff = now - min_age_ms
        if topic_partition is not None:
            prefix = partition_prefix(self._prefix, topic_partition)
        else:
            prefix = f"{self._prefix}/" if self._prefix else ""
        infos = self._call(lambda: list(self.object_store.list(prefix)), key=prefix or None)
        groups: dict[tuple[str, int, str], list[tuple[ParsedKey, ObjectInfo]]] = {}
        for info in infos:
            parsed = parse_segment_key(info.key)
            if parsed is not None:
                slot = (parsed.partition_dir, parsed.start_offset, parsed.segment_id)
                groups.setdefault(slot, []).append((parsed, info))
        manifests = []
        for members in groups.values():
            for parsed, info in members:
                if parsed.kind is ObjectKind.MANIFEST:
                    try:
                        raw = self._read_all(info.key, parsed.segment_id)
                    except RemoteResourceNotFoundError:
                        continue
                    manifests.append((parsed, SegmentManifest.from_json(raw, info.key), info))
        newest = {(p.partition_dir, p.start_offset, p.segment_id)
                  for p, _, _ in self._newest(manifests).values()}
        committed = {(p.partition_dir, p.start_offset, p.segment_id) for p, _, _ in manifests}
        first: list[str] = []
        rest: list[str] = []
        for slot, members in groups.items():
            if slot in newest:
                continue
            if slot in committed:  # superseded: all of it, once its manifest is old enough
                mtime = max(i.last_modified_ms for p, i in members
                            if p.kind is ObjectKind.MANIFEST)
                if mtime <= cutoff:
                    first += [i.key for p, i in members if p.kind is ObjectKind.MANIFEST]
                    rest += [i.key for p, i in members if p.kind is not ObjectKind.MANIFEST]
            else:
                rest += [i.key for _, i in members if i.last_modified_ms <= cutoff]
        if not dry_run:
            self._delete(sorted(first))
            self._delete(sorted(rest))
        if first or rest:
            log.info("collected %d orphaned objects under %r", len(first) + len(rest),
                     prefix)
        return sorted(first + rest)


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


def _file_size(fh: BinaryIO) -> int:
    return os.fstat(fh.fileno()).st_size


def _concurrent_puts(store: ObjectStore) -> int:
    """The store's :attr:`ObjectStore.max_concurrent_puts` (1 when it is not a positive
    int)."""
    value = getattr(store, "max_concurrent_puts", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return 1
    return value


__all__ = [
    "CHECKSUM_ALGORITHMS",
    "CRC32C",
    "INDEX_KINDS",
    "MANIFEST_FORMAT_VERSION",
    "SHA256",
    "ByteRange",
    "ChecksumHasher",
    "ManifestObject",
    "MultipartObjectStore",
    "ObjectInfo",
    "ObjectKind",
    "ObjectStore",
    "ObjectStoreRemoteStorageManager",
    "ParsedKey",
    "SegmentManifest",
    "check_range",
    "default_translate",
    "new_hasher",
    "next_commit_sequence",
    "normalize_prefix",
    "parse_segment_key",
    "partition_prefix",
    "read_exact",
    "segment_key",
    "validate_key",
]
