"""Deliberately broken data paths: the ``local`` backend with one data-path rule broken each,
for the conformance suite to catch (``tests/remote/test_suite_catches_broken.py``)."""

from __future__ import annotations

import io
from typing import Any, BinaryIO

from kafka_tiers.api import RemoteLogSegmentMetadata
from kafka_tiers.objectstore.manifest import WrappedDataKey
from kafka_tiers.objectstore.transforms import SegmentTransform
from kafka_tiers.remote.local import LocalRemoteStorageManager


class PlaintextClaimingEncryption(LocalRemoteStorageManager):
    """Broken: with ``encryption.enabled`` its manifests carry a wrapped data key, but the
    chunks are stored in plain text (the transform of a new segment has no data key)."""

    def _new_transform(self, sid: str, log_path: str
                       ) -> tuple[SegmentTransform, WrappedDataKey | None]:
        transform, wrapped = super()._new_transform(sid, log_path)
        plain = SegmentTransform(sid, transform.compression, None, transform.level)
        return plain, wrapped


class WrongByteAfterChunkBoundary(LocalRemoteStorageManager):
    """Broken: a ranged read (not from position 0) that crosses a chunk boundary returns the
    first byte of the next chunk changed. Whole reads, and reads within one chunk, are
    right."""

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        stream = super().fetch_log_segment(metadata, start_position, end_position)
        chunk = self.data_settings.chunk_size
        if start_position == 0:
            return stream
        with stream:
            data = bytearray(stream.read())
        boundary = (start_position // chunk + 1) * chunk - start_position
        if boundary < len(data):
            data[boundary] ^= 0x01
        result: Any = io.BytesIO(bytes(data))
        return result


__all__ = ["PlaintextClaimingEncryption", "WrongByteAfterChunkBoundary"]
