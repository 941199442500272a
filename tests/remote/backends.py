"""Storage plugins for the tests: a correct in-memory plugin of the direct level, and
deliberately broken backends the conformance suite must fail (each breaks one rule)."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Mapping, Sequence
from typing import BinaryIO, ClassVar

from kafka_tiers.api import (
    ByteRange,
    IndexType,
    InvalidRangeError,
    LogSegmentData,
    MultipartObjectStore,
    ObjectInfo,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    StorageCapability,
    TopicPartition,
)
from kafka_tiers.objectstore import (
    INDEX_KINDS,
    ManifestObject,
    ObjectKind,
    ObjectStoreRemoteStorageManager,
    SegmentManifest,
    next_commit_sequence,
)
from kafka_tiers.remote.local import LocalRemoteStorageManager


class MemoryStorage(RemoteStorageManager):
    """A correct plugin of the direct level: dicts in memory, shared per ``name`` config."""

    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({StorageCapability.CONCURRENT_ACCESS})
    _SPACES: ClassVar[dict[str, dict[str, tuple[RemoteLogSegmentMetadata, dict[str, bytes]]]]]
    _SPACES = {}
    _LOCK = threading.Lock()

    def configure(self, config: Mapping[str, str]) -> None:
        with self._LOCK:
            self._segments = self._SPACES.setdefault(config.get("name", "default"), {})

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        try:
            blobs = {"log": data.log_segment.read_bytes()}
            for index_type in IndexType:
                path = data.index_file(index_type)
                if index_type is IndexType.LEADER_EPOCH:
                    blobs[index_type.name] = data.leader_epoch_index
                elif path is not None:
                    blobs[index_type.name] = path.read_bytes()
        except OSError as exc:
            raise RemoteStorageError(f"cannot read {exc.filename}") from None
        stored = metadata.with_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        with self._LOCK:
            self._segments[metadata.segment_id] = (stored, blobs)
        return None

    def _get(self, metadata: RemoteLogSegmentMetadata) -> dict[str, bytes]:
        with self._LOCK:
            found = self._segments.get(metadata.segment_id)
        if found is None:
            raise RemoteResourceNotFoundError(f"no segment {metadata.segment_id}")
        return found[1]

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise InvalidRangeError("bad range")
        log = self._get(metadata)["log"]
        if start_position > max(len(log) - 1, 0) or (start_position and not log):
            raise InvalidRangeError("start beyond the end")
        end = len(log) - 1 if end_position is None else min(end_position, len(log) - 1)
        return io.BytesIO(log[start_position:end + 1])

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        blobs = self._get(metadata)
        if index_type.name not in blobs:
            raise RemoteResourceNotFoundError(f"no {index_type.name} index")
        return io.BytesIO(blobs[index_type.name])

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        with self._LOCK:
            self._segments.pop(metadata.segment_id, None)

    def list_remote_segments(self, topic_partition: TopicPartition,
                             min_base_offset: int = 0) -> list[RemoteLogSegmentMetadata]:
        with self._LOCK:
            items = [md for md, _ in self._segments.values()
                     if md.topic_partition == topic_partition
                     and md.start_offset >= min_base_offset]
        newest: dict[int, RemoteLogSegmentMetadata] = {}
        for md in items:  # dicts keep insertion order: later copies win
            newest[md.start_offset] = md
        return [newest[k] for k in sorted(newest)]

    def delete_topic_partition(self, topic_partition: TopicPartition) -> None:
        with self._LOCK:
            for sid in [s for s, (md, _) in self._segments.items()
                        if md.topic_partition == topic_partition]:
                del self._segments[sid]


class NonOverwritingRetry(LocalRemoteStorageManager):
    """Broken: a retried copy with the same id keeps the first attempt's data."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        try:
            manifest = self.read_manifest(metadata)
        except RemoteResourceNotFoundError:
            return super().copy_log_segment_data(metadata, data)
        return manifest.metadata.custom_metadata


class EndExclusiveFetch(LocalRemoteStorageManager):
    """Broken: treats the end position as exclusive (returns one byte too few)."""

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        stream = super().fetch_log_segment(metadata, start_position, end_position)
        if end_position is None or end_position <= start_position:
            return stream
        with stream:
            data = stream.read()
        return io.BytesIO(data[: end_position - start_position])  # type: ignore[return-value]


class EmptyInsteadOfNotFound(LocalRemoteStorageManager):
    """Broken: a missing index gives an empty stream instead of raising not-found."""

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        try:
            return super().fetch_index(metadata, index_type)
        except RemoteResourceNotFoundError:
            return io.BytesIO(b"")  # type: ignore[return-value]


class ManifestFirst(LocalRemoteStorageManager):
    """Broken: commits the manifest before the data and never cleans up, so a copy that fails
    midway is listed and half readable."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        store = self.object_store
        sources: dict[ObjectKind, bytes | None] = {
            ObjectKind.LOG: None, ObjectKind.LEADER_EPOCH: data.leader_epoch_index}
        paths = {ObjectKind.LOG: data.log_segment}
        for index_type, kind in INDEX_KINDS.items():
            path = data.index_file(index_type)
            if path is not None:
                paths[kind] = path
                sources[kind] = None
        objects = []
        for kind in sources:
            size = len(sources[kind] or b"") if kind not in paths else (
                paths[kind].stat().st_size if paths[kind].exists() else 0)
            key = self._key(metadata.remote_log_segment_id, metadata.start_offset, kind)
            objects.append(ManifestObject(kind, key.rpartition("/")[2], size, "crc32c",
                                          "00000000"))  # never checked: this backend is broken
        final = metadata.with_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        raw = SegmentManifest(final, tuple(objects), next_commit_sequence()).to_json()
        mkey = self._key(metadata.remote_log_segment_id, metadata.start_offset,
                         ObjectKind.MANIFEST)
        store.put(mkey, io.BytesIO(raw), len(raw))
        try:
            for kind, content in sources.items():
                key = self._key(metadata.remote_log_segment_id, metadata.start_offset, kind)
                if content is not None:
                    store.put(key, io.BytesIO(content), len(content))
                else:
                    with open(paths[kind], "rb") as fh:
                        store.put(key, fh, None)  # type: ignore[arg-type]
        except Exception as exc:
            raise RemoteStorageError(f"copy failed: {exc}") from None
        return None


class MemoryMultipartStore(MultipartObjectStore):
    """An in-memory multi-part store (parts of ``part_size`` bytes), with call records."""

    def __init__(self, part_size: int = 64) -> None:
        self.part_size = part_size
        self.objects: dict[str, bytes] = {}
        self.mtimes: dict[str, int] = {}
        self.uploads: dict[str, dict[int, bytes]] = {}
        self.calls: list[str] = []
        self._next = 0

    def put_object(self, key: str, data: bytes) -> None:
        self.calls.append("put_object")
        self.objects[key] = data
        self.mtimes[key] = int(time.time() * 1000)

    def create_multipart_upload(self, key: str) -> str:
        self.calls.append("create")
        self._next += 1
        upload_id = f"u{self._next}"
        self.uploads[upload_id] = {}
        return upload_id

    def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        self.calls.append(f"part{part_number}")
        self.uploads[upload_id][part_number] = data
        return f"{upload_id}-{part_number}"

    def complete_multipart_upload(self, key: str, upload_id: str, parts: Sequence[str]) -> None:
        self.calls.append("complete")
        chunks = self.uploads.pop(upload_id)
        self.objects[key] = b"".join(chunks[int(tag.rpartition("-")[2])] for tag in parts)
        self.mtimes[key] = int(time.time() * 1000)

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        self.calls.append("abort")
        self.uploads.pop(upload_id, None)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        if key not in self.objects:
            raise RemoteResourceNotFoundError(key)
        data = self.objects[key]
        if byte_range is not None:
            data = data[byte_range.first:byte_range.last + 1]
        return io.BytesIO(data)

    def delete_many(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.objects.pop(key, None)

    def list(self, prefix: str) -> list[ObjectInfo]:
        return [ObjectInfo(k, len(v), self.mtimes[k]) for k, v in self.objects.items()
                if k.startswith(prefix)]


class MemoryMultipartStorage(ObjectStoreRemoteStorageManager):
    """An object-store plugin on :class:`MemoryMultipartStore` (one store per ``name``)."""

    CAPABILITIES = ObjectStoreRemoteStorageManager.CAPABILITIES | {
        StorageCapability.MULTIPART_UPLOAD}
    STORES: ClassVar[dict[str, MemoryMultipartStore]] = {}

    def create_object_store(self, config: Mapping[str, str]) -> MemoryMultipartStore:
        name = config.get("name", "default")
        return self.STORES.setdefault(name, MemoryMultipartStore(int(config.get("part", "64"))))


__all__ = [
    "EmptyInsteadOfNotFound",
    "EndExclusiveFetch",
    "ManifestFirst",
    "MemoryMultipartStorage",
    "MemoryMultipartStore",
    "MemoryStorage",
    "NonOverwritingRetry",
]
