"""The manifest: the commit record of one segment copy, and its checksums.

A small JSON object, ``"format_version": 2``, holding the full segment metadata (state
``COPY_SEGMENT_FINISHED``, custom metadata base64), the object list (kind, name, size and
``"crc32c"``: the CRC-32C (Castagnoli, as Kafka's record batches use) of the content as 8
lower-case hex digits) and a commit sequence. Version 1 manifests, written by earlier releases,
are still read: they are identical but for a ``"sha256"`` (64 hex digits) per object instead of
``"crc32c"``; :meth:`ManifestObject.matches` checks content against either. A manifest with
another ``format_version`` raises :class:`~kafka_tiers.api.ManifestError`: a newer writer needs
a newer reader.
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
from dataclasses import dataclass
from typing import Any, Protocol

import crc32c as _crc32c

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import ManifestError
from kafka_tiers.api.storage import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from kafka_tiers.objectstore.keys import ObjectKind

#: The manifest format this code writes (crc32c per object); it also reads format 1 (sha256).
MANIFEST_FORMAT_VERSION = 2


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


__all__ = [
    "CHECKSUM_ALGORITHMS",
    "CRC32C",
    "MANIFEST_FORMAT_VERSION",
    "SHA256",
    "ChecksumHasher",
    "ManifestObject",
    "SegmentManifest",
    "new_hasher",
    "next_commit_sequence",
]
