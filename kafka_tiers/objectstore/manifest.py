"""The manifest: the commit record of one segment copy, and its checksums.

A small JSON object, ``"format_version": 3``, holding the full segment metadata (state
``COPY_SEGMENT_FINISHED``, custom metadata base64), the object list (kind, name, size and
``"crc32c"``: the CRC-32C (Castagnoli, as Kafka's record batches use) of the content as 8
lower-case hex digits) and a commit sequence. Version 1 manifests, written by earlier releases,
are still read: they are identical but for a ``"sha256"`` (64 hex digits) per object instead of
``"crc32c"``; :meth:`ManifestObject.matches` checks content against either. A manifest with
another ``format_version`` raises :class:`~kafka_tiers.api.ManifestError`: a newer writer needs
a newer reader.

Format 3 (written by this release) adds where and how each object is stored: the manifest
carries ``"chunks"`` (the log's :class:`~kafka_tiers.objectstore.chunk_index.ChunkIndex`),
``"compression"`` (``"zstd"`` or null) and ``"encryption"`` (``{"key_id", "wrapped_key"}``
with the wrapped key in base64, or null). Each object keeps ``size`` and ``crc32c`` of its
ORIGINAL (decoded) bytes, so :meth:`ManifestObject.matches` checks plaintext as before, and adds
``stored_size`` and ``stored_crc32c`` (of the stored bytes); an index also carries either
``stored_offset`` (its place in the segment's ``.indexes`` object) or ``inline`` (its stored
bytes in base64, in the manifest itself). Format 2 manifests are read as before (their objects
are stored as they are, one object per kind).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import crc32c as _crc32c

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import ManifestError
from kafka_tiers.api.storage import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from kafka_tiers.objectstore.chunk_index import ChunkIndex
from kafka_tiers.objectstore.keys import ObjectKind
from kafka_tiers.objectstore.transforms import COMPRESSIONS

#: The manifest format this code writes (chunked, crc32c per object); it also reads formats 1
#: (sha256) and 2 (crc32c, objects stored as they are).
MANIFEST_FORMAT_VERSION = 3
#: Most bytes of a manifest read (16 MiB): checked before it is parsed. A copy's manifest is
#: far smaller (at most :data:`~kafka_tiers.objectstore.chunk_index.MAX_CHUNKS` chunk sizes
#: and 64 KiB of inline indexes).
MAX_MANIFEST_BYTES = 16 << 20


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
        stored_size: format 3: the bytes stored for it (after compression and encryption);
            None in formats 1 and 2 (stored as it is).
        stored_crc32c: format 3: the CRC-32C of the stored bytes (8 hex digits), or None.
        stored_offset: format 3 indexes: where its stored bytes start in the ``.indexes``
            object (None for the log and for inline indexes).
        inline: format 3 indexes: its stored bytes, held in the manifest itself (None when
            stored in an object).
    """

    kind: ObjectKind
    name: str
    size: int
    checksum_algorithm: str
    checksum: str
    stored_size: int | None = None
    stored_crc32c: str | None = None
    stored_offset: int | None = None
    inline: bytes | None = None

    def __post_init__(self) -> None:
        if self.checksum_algorithm not in CHECKSUM_ALGORITHMS:
            raise ValueError(f"unknown checksum algorithm {self.checksum_algorithm!r}")

    def stored_matches(self, stored: bytes) -> bool:
        """Whether ``stored`` has this object's stored size and stored CRC-32C (True when the
        manifest has no stored checksum: formats 1 and 2 check the content itself)."""
        if self.stored_crc32c is None:
            return True
        if self.stored_size is not None and len(stored) != self.stored_size:
            return False
        return f"{_crc32c.crc32c(stored):08x}" == self.stored_crc32c

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
        chunks: format 3: the log's chunk index (None: a format 1 or 2 manifest).
        compression: format 3: ``"zstd"`` or None.
        encryption: format 3: the segment's wrapped data key, or None (not encrypted).
    """

    metadata: RemoteLogSegmentMetadata
    objects: tuple[ManifestObject, ...]
    commit_sequence: int
    chunks: ChunkIndex | None = None
    compression: str | None = None
    encryption: WrappedDataKey | None = None

    @property
    def format_version(self) -> int:
        """3 when it carries a chunk index, else 2 (crc32c) or 1 (sha256)."""
        if self.chunks is not None:
            return MANIFEST_FORMAT_VERSION
        algorithms = {o.checksum_algorithm for o in self.objects} or {CRC32C}
        return 1 if algorithms == {SHA256} else 2

    def object(self, kind: ObjectKind) -> ManifestObject | None:
        """The listed object of this kind, or None."""
        for obj in self.objects:
            if obj.kind is kind:
                return obj
        return None

    def to_json(self) -> bytes:
        """The manifest as UTF-8 JSON: format 3 when it has a chunk index, else format 2
        (``"crc32c"`` per object) or format 1 when its objects carry SHA-256 checksums (a
        manifest read from format 1 or 2 is written back as it was read).

        Raises:
            ValueError: the objects mix checksum algorithms, or a format 3 manifest has
                objects without CRC-32C.
        """
        md = self.metadata
        algorithms = {o.checksum_algorithm for o in self.objects} or {CRC32C}
        if len(algorithms) != 1:
            raise ValueError("a manifest's objects must all use one checksum algorithm")
        (algorithm,) = algorithms
        version = _MANIFEST_VERSION_BY_ALGORITHM[algorithm]
        if self.chunks is not None:
            if algorithm != CRC32C:
                raise ValueError("a format 3 manifest's objects carry crc32c checksums")
            version = MANIFEST_FORMAT_VERSION
        doc: dict[str, Any] = {
            "format_version": version,
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
            "objects": [_object_json(o, algorithm, version) for o in self.objects],
            "commit_sequence": self.commit_sequence,
        }
        if version == MANIFEST_FORMAT_VERSION:
            assert self.chunks is not None
            doc["chunks"] = self.chunks.to_json()
            doc["compression"] = self.compression
            doc["encryption"] = None if self.encryption is None else {
                "key_id": self.encryption.key_id,
                "wrapped_key": base64.b64encode(self.encryption.wrapped_key).decode("ascii")}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, key: str | None = None) -> SegmentManifest:
        """Read a manifest of format 3 (chunked), 2 (``"crc32c"`` per object) or 1
        (``"sha256"``).

        Raises:
            ManifestError: more than :data:`MAX_MANIFEST_BYTES`, not JSON, a missing or
                malformed field, a format 3 chunk index that disagrees with the segment's
                own metadata (its original size is ``segment_size_in_bytes``) or with the
                log object's sizes, or a ``format_version`` other than 1 or
                :data:`MANIFEST_FORMAT_VERSION` (the error carries the version).
        """
        where = f"manifest {key}" if key else "manifest"
        if len(raw) > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{where} has {len(raw)} bytes, more than the "
                                f"{MAX_MANIFEST_BYTES} a manifest may have", key=key)
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ManifestError(f"{where} is not valid JSON: {str(exc)[:200]}", key=key) from None
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
            objects = tuple(_object_from_json(o, algorithm, version)
                            for o in doc["objects"])
            sequence = doc["commit_sequence"]
            if isinstance(sequence, bool) or not isinstance(sequence, int):
                raise ValueError("commit_sequence must be an int")
            chunks = compression = encryption = None
            if version == MANIFEST_FORMAT_VERSION:
                chunks = ChunkIndex.from_json(doc["chunks"])
                if chunks.original_size != metadata.segment_size_in_bytes:
                    raise ValueError(f"the chunk index holds {chunks.original_size} bytes, "
                                     "the segment's segment_size_in_bytes "
                                     f"{metadata.segment_size_in_bytes}")
                compression = doc["compression"]
                if compression is not None and compression not in COMPRESSIONS:
                    raise ValueError(f"unknown compression {compression!r}")
                enc = doc["encryption"]
                if enc is not None:
                    encryption = WrappedDataKey(
                        _str(enc["key_id"], "key_id"),
                        base64.b64decode(_str(enc["wrapped_key"], "wrapped_key"),
                                         validate=True))
                log_object = next((o for o in objects if o.kind is ObjectKind.LOG), None)
                if log_object is not None and (log_object.size != chunks.original_size
                                               or log_object.stored_size
                                               != chunks.stored_size):
                    raise ValueError("the log's sizes differ from its chunk index")
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
            raise ManifestError(f"{where} is malformed: {type(exc).__name__}: {exc}",
                                key=key, format_version=version) from None
        return cls(metadata, objects, sequence, chunks, compression, encryption)


_MANIFEST_ALGORITHM_BY_VERSION = {v: a for a, v in _MANIFEST_VERSION_BY_ALGORITHM.items()}
_MANIFEST_ALGORITHM_BY_VERSION[MANIFEST_FORMAT_VERSION] = CRC32C


@dataclass(frozen=True, slots=True)
class WrappedDataKey:
    """A segment's data key as its manifest holds it: wrapped with a key pair's public key.

    Attributes:
        key_id: the key pair id (:mod:`kafka_tiers.objectstore.encryption`).
        wrapped_key: the RSA-OAEP-wrapped data key.
    """

    key_id: str
    wrapped_key: bytes = field(repr=False)


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string")
    return value


def _object_json(o: ManifestObject, algorithm: str, version: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"kind": o.kind.value, "name": o.name, "size": o.size,
                           algorithm: o.checksum}
    if version == MANIFEST_FORMAT_VERSION:
        doc["stored_size"] = o.stored_size
        doc["stored_crc32c"] = o.stored_crc32c
        if o.stored_offset is not None:
            doc["stored_offset"] = o.stored_offset
        if o.inline is not None:
            doc["inline"] = base64.b64encode(o.inline).decode("ascii")
    return doc


def _object_from_json(o: Mapping[str, Any], algorithm: str, version: int) -> ManifestObject:
    kind = ObjectKind(o["kind"])
    size = o["size"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"size of {kind.value} must be an int >= 0")
    if version != MANIFEST_FORMAT_VERSION:
        return ManifestObject(kind, str(o["name"]), size, algorithm,
                              _checksum_field(o, algorithm))
    stored_size = o["stored_size"]
    if isinstance(stored_size, bool) or not isinstance(stored_size, int) or stored_size < 0:
        raise ValueError(f"stored_size of {kind.value} must be an int >= 0")
    stored_crc = _str(o["stored_crc32c"], "stored_crc32c")
    if not _CRC32C_HEX.fullmatch(stored_crc):
        raise ValueError(f"stored_crc32c must be 8 lower-case hex digits, not {stored_crc!r}")
    offset = o.get("stored_offset")
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int)
                               or offset < 0):
        raise ValueError(f"stored_offset of {kind.value} must be an int >= 0")
    raw_inline = o.get("inline")
    inline = None if raw_inline is None else base64.b64decode(_str(raw_inline, "inline"),
                                                              validate=True)
    if inline is not None and len(inline) != stored_size:
        raise ValueError(f"inline {kind.value} has {len(inline)} bytes, not {stored_size}")
    if kind is not ObjectKind.LOG and (offset is None) == (inline is None):
        raise ValueError(f"index {kind.value} needs exactly one of stored_offset and inline")
    return ManifestObject(kind, str(o["name"]), size, algorithm,
                          _checksum_field(o, algorithm), stored_size, stored_crc, offset,
                          inline)


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


__all__ = [
    "CHECKSUM_ALGORITHMS",
    "CRC32C",
    "MANIFEST_FORMAT_VERSION",
    "MAX_MANIFEST_BYTES",
    "SHA256",
    "ChecksumHasher",
    "ManifestObject",
    "SegmentManifest",
    "WrappedDataKey",
    "new_hasher",
    "next_commit_sequence",
]
