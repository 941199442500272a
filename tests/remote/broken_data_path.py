"""Deliberately broken data paths: the ``local`` backend with one data-path rule broken each,
for the conformance suite to catch (``tests/remote/test_suite_catches_broken.py``)."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO

from kafka_tiers.api import RemoteLogSegmentMetadata
from kafka_tiers.objectstore.chunk_cache import CacheStats, MemoryChunkCache
from kafka_tiers.objectstore.chunk_loader import ChunkLoader
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


class _EveryReaderDownloads(ChunkLoader):
    """A loader with a cache but no single flight: a reader that misses the cache downloads,
    however many readers of the same chunk are downloading it at that moment."""

    def get(self, key: str, load: Callable[[], bytes]) -> bytes:
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            return cached
        data = load()
        if self.cache is not None:
            self.cache.put(key, data)
        return data

    def get_many(self, items: Sequence[tuple[str, Callable[[], bytes]]]) -> list[bytes]:
        return [self.get(key, load) for key, load in items]


class NoSingleFlight(LocalRemoteStorageManager):
    """Broken: concurrent readers of one chunk each download it (the chunk cache is filled
    after the downloads, so only later readers hit it)."""

    def configure(self, config: Mapping[str, str]) -> None:
        super().configure(config)
        loader = self.chunk_loader
        self._loader = _EveryReaderDownloads(loader.cache, loader.threads)


class _OversizedCache(MemoryChunkCache):
    """A memory cache holding 100 times the bytes it reports as its bound."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes * 100)
        self.reported = max_bytes

    def stats(self) -> CacheStats:
        stats = super().stats()
        return CacheStats(stats.hits, stats.misses, stats.evictions, stats.entries,
                          stats.bytes, self.reported)


class CacheOverItsSize(LocalRemoteStorageManager):
    """Broken: its chunk cache (a memory one, whatever ``fetch.chunk.cache.class`` says) keeps
    far more than ``fetch.chunk.cache.size`` while reporting that size as its bound."""

    def configure(self, config: Mapping[str, str]) -> None:
        super().configure(config)
        loader = self.chunk_loader
        self._loader = ChunkLoader(_OversizedCache(self.data_settings.cache.size),
                                   loader.threads)


__all__ = ["CacheOverItsSize", "NoSingleFlight", "PlaintextClaimingEncryption",
           "WrongByteAfterChunkBoundary"]
