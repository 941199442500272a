"""The per-chunk transforms of a segment's stored data: zstd compression, then AES-256-GCM
encryption.

Each chunk of the log (:mod:`kafka_tiers.objectstore.chunk_index`) and each index is
transformed on its own, so any one can be read back alone:

1. compression (when the segment's transform has it): one zstd frame with its content size
   and content checksum (so a damaged frame is detected even without encryption);
2. encryption (when the segment has a data key): ``nonce (12 random bytes) || ciphertext ||
   tag (16 bytes)`` with AES-256-GCM from the ``cryptography`` package. The associated data
   binds the chunk to the segment's whole identity and layout (:func:`segment_context`: the
   topic, partition, start offset and segment id, the log's chunk size, original size and
   chunk count, and the compression) and to its place (the object and the chunk number). A
   chunk or a whole segment moved to another place, segment, topic, partition or start
   offset, a chunk list truncated, or an edited layout field of the manifest fails the tag
   just like a changed byte.

Decoding checks everything it can and raises :class:`CorruptChunkError` naming the chunk, never
returning damaged bytes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import zstandard
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kafka_tiers.api.errors import RemoteStorageError
from kafka_tiers.log.records import ATTRIBUTES_OFFSET, HEADER_SIZE

#: The compression codec names a manifest may carry.
ZSTD = "zstd"
COMPRESSIONS = (ZSTD,)
#: zstd's level used for chunks. Level 1, by measurement (benchmarks/tiering.py): on record
#: batches it compresses about 5x as fast as level 3 (zstd's own default) for the same ratio
#: (hex-text records 0.523 vs 0.524 of their size, JSON-like ones 0.199 vs 0.202).
DEFAULT_ZSTD_LEVEL = 1
#: Bytes a GCM-encrypted chunk adds: the nonce and the tag.
NONCE_BYTES = 12
TAG_BYTES = 16
ENCRYPTION_OVERHEAD = NONCE_BYTES + TAG_BYTES
#: The associated-data version tag: changes if the binding ever changes (1: the segment id
#: and label only, never released).
_AAD_TAG = b"kafka-tiers/chunk/2"


class CorruptChunkError(RemoteStorageError):
    """A stored chunk (or index) fails its check: the GCM tag, the zstd frame or its size.

    Attributes:
        label: which chunk (``log/17``, ``index/offset``).
    """

    def __init__(self, message: str, *, label: str, segment_id: str | None = None) -> None:
        super().__init__(message, segment_id=segment_id, retriable=False)
        self.label = label


def batches_compressed(head: bytes | memoryview) -> bool:
    """Whether the first record batch of a log (its first bytes) is compressed by its producer
    (the codec bits of its attributes), as Aiven's heuristic checks: such a segment gains
    little from compressing it again. False when ``head`` is too short to hold a batch
    header."""
    if len(head) < HEADER_SIZE:
        return False
    attributes = int.from_bytes(head[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big")
    return attributes & 0x07 != 0


def segment_context(topic: str, partition: int, start_offset: int, segment_id: str,
                    chunk_size: int, original_size: int, compression: str | None) -> bytes:
    """The identity and layout of a segment that every chunk's and index's associated data
    binds: the topic, partition, start offset and segment id, and the log's chunk size,
    original size, chunk count and compression (what changes how its bytes are read). An
    unambiguous encoding (a JSON array), so no two contexts share bytes."""
    count = -(-original_size // chunk_size) if chunk_size > 0 else 0
    return json.dumps([topic, partition, start_offset, segment_id, chunk_size, original_size,
                       count, compression or "none"], ensure_ascii=True,
                      separators=(",", ":")).encode("ascii")


@dataclass(frozen=True)
class SegmentTransform:
    """How one segment's chunks are stored.

    Attributes:
        segment_id: the segment id (error messages).
        compression: :data:`ZSTD` or None.
        data_key: the segment's AES-256 data key, or None (not encrypted).
        level: the zstd level used when encoding.
        context: :func:`segment_context` of the segment, bound into every chunk's and
            index's associated data (with the chunk's label); required with a data key.
    """

    segment_id: str
    compression: str | None = None
    data_key: bytes | None = field(default=None, repr=False)
    level: int = DEFAULT_ZSTD_LEVEL
    context: bytes = b""

    def __post_init__(self) -> None:
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise ValueError(f"unknown compression {self.compression!r}")
        if self.data_key is not None and len(self.data_key) != 32:
            raise ValueError("a data key has 32 bytes")
        if self.data_key is not None and not self.context:
            raise ValueError("an encrypted segment's transform needs its segment context")

    @property
    def identity(self) -> bool:
        """Whether chunks are stored as they are (no compression, no encryption)."""
        return self.compression is None and self.data_key is None

    def _aad(self, label: str) -> bytes:
        return b"\n".join((_AAD_TAG, self.context, label.encode("ascii")))

    def encode(self, label: str, data: bytes | memoryview) -> bytes:
        """The stored form of one chunk.

        Args:
            label: the chunk's place, unique within the segment (``log/<n>``,
                ``index/<kind>``); bound into the encryption.
            data: the original bytes.
        """
        out: bytes | memoryview = data
        if self.compression == ZSTD:
            out = zstandard.ZstdCompressor(level=self.level, write_checksum=True,
                                           write_content_size=True).compress(out)
        if self.data_key is not None:
            nonce = os.urandom(NONCE_BYTES)
            out = nonce + AESGCM(self.data_key).encrypt(nonce, bytes(out), self._aad(label))
        return bytes(out)

    def _decrypt(self, label: str, stored: bytes | memoryview, where: str) -> bytes:
        """``stored`` decrypted and its tag checked (``data_key`` is set); ``where`` names the
        chunk in errors.

        Raises:
            CorruptChunkError: too short to be encrypted, or the tag does not match.
        """
        assert self.data_key is not None
        view = memoryview(stored)
        if len(view) < ENCRYPTION_OVERHEAD:
            raise CorruptChunkError(f"{where} is {len(view)} bytes: too short to be "
                                    "encrypted", label=label, segment_id=self.segment_id)
        try:
            return AESGCM(self.data_key).decrypt(bytes(view[:NONCE_BYTES]),
                                                 bytes(view[NONCE_BYTES:]), self._aad(label))
        except InvalidTag:
            raise CorruptChunkError(f"{where} fails its authentication tag: it was "
                                    "changed or moved", label=label,
                                    segment_id=self.segment_id) from None

    def _check_frame(self, label: str, frame: bytes | memoryview, original_size: int,
                     where: str) -> None:
        """Check, before anything is allocated, that ``frame``'s header declares
        ``original_size`` bytes: a frame declaring more (a decompression bomb) is refused
        without decoding it.

        Raises:
            CorruptChunkError: not a zstd frame header, or another declared size.
        """
        try:
            declared = zstandard.frame_content_size(bytes(frame[:18]))
        except zstandard.ZstdError as exc:
            raise CorruptChunkError(f"{where} is not a valid zstd frame: {exc}",
                                    label=label, segment_id=self.segment_id) from None
        if declared != original_size:
            raise CorruptChunkError(
                f"{where} is a zstd frame of {declared} bytes (-1: undeclared), not the "
                f"{original_size} its chunk index lists", label=label,
                segment_id=self.segment_id)

    def decode(self, label: str, stored: bytes | memoryview, original_size: int) -> bytes:
        """The original bytes of one chunk.

        Args:
            label: the label it was encoded with.
            stored: its stored bytes.
            original_size: how many bytes it must decode to (from the chunk index).

        Raises:
            CorruptChunkError: the tag does not match (changed, moved or wrong key), the zstd
                frame is damaged, or the size differs.
        """
        data: bytes | memoryview = stored
        where = f"chunk {label} of segment {self.segment_id}"
        if self.data_key is not None:
            data = self._decrypt(label, stored, where)
        if self.compression == ZSTD:
            self._check_frame(label, data, original_size, where)
            try:
                data = zstandard.ZstdDecompressor().decompress(
                    bytes(data), max_output_size=max(original_size, 1))
            except zstandard.ZstdError as exc:
                raise CorruptChunkError(f"{where} is not a valid zstd frame: {exc}",
                                        label=label, segment_id=self.segment_id) from None
        if len(data) != original_size:
            raise CorruptChunkError(f"{where} decodes to {len(data)} bytes, not "
                                    f"{original_size}", label=label,
                                    segment_id=self.segment_id)
        return bytes(data)

    def open_chunk(self, label: str, stored: bytes | memoryview,
                   original_size: int) -> ChunkDecoder:
        """A decoder of one chunk's original bytes read front to back (a read needing only a
        prefix gets it without decompressing the rest first). An encrypted and compressed
        chunk has its tag checked over the whole chunk here (every byte is authenticated)
        and its zstd frame decompressed as it is read; any other chunk is decoded whole here
        (without a tag only the whole frame's checks vouch for a part).

        Raises:
            CorruptChunkError: as :meth:`decode` (the frame's end is checked by
                :meth:`ChunkDecoder.rest`).
        """
        if self.data_key is None or self.compression != ZSTD:
            return ChunkDecoder(self.decode(label, stored, original_size), None, label, self)
        where = f"chunk {label} of segment {self.segment_id}"
        frame = self._decrypt(label, stored, where)
        self._check_frame(label, frame, original_size, where)
        reader = zstandard.ZstdDecompressor().stream_reader(frame, read_size=64 << 10)
        return ChunkDecoder(reader, original_size, label, self)


class ChunkDecoder:
    """One chunk's original bytes, read front to back (:meth:`SegmentTransform.open_chunk`):
    :meth:`read` the first bytes, then :meth:`rest` for all the others (checked). Not
    thread-safe: one reader at a time."""

    def __init__(self, source: bytes | Any, size: int | None, label: str,
                 transform: SegmentTransform) -> None:
        self._whole: bytes | None = source if size is None else None
        self._reader: Any = None if size is None else source
        self._size = len(source) if size is None else size
        self._label = label
        self._transform = transform
        self._done = 0

    def _error(self, what: str) -> CorruptChunkError:
        t = self._transform
        return CorruptChunkError(f"chunk {self._label} of segment {t.segment_id} {what}",
                                 label=self._label, segment_id=t.segment_id)

    def read(self, n: int) -> bytes:
        """The next ``n`` original bytes (fewer only at the chunk's end).

        Raises:
            CorruptChunkError: the frame is damaged or ends early."""
        n = max(0, min(n, self._size - self._done))
        if self._whole is not None:
            data = self._whole[self._done:self._done + n]
        else:
            out = bytearray()
            try:
                while len(out) < n:
                    part = self._reader.read(n - len(out))
                    if not part:
                        break
                    out += part
            except zstandard.ZstdError as exc:
                raise self._error(f"is not a valid zstd frame: {exc}") from None
            if len(out) != n:
                raise self._error(f"decodes to {self._done + len(out)} bytes, not "
                                  f"{self._size}")
            data = bytes(out)
        self._done += n
        return data

    def rest(self) -> bytes:
        """Every original byte not read yet; the frame must end exactly at the chunk's size.

        Raises:
            CorruptChunkError: the frame is damaged, shorter or longer."""
        data = self.read(self._size - self._done)
        if self._reader is not None:
            try:
                extra = self._reader.read(1)
            except zstandard.ZstdError as exc:
                raise self._error(f"is not a valid zstd frame: {exc}") from None
            if extra:
                raise self._error(f"decodes to more than {self._size} bytes")
        return data


def log_label(chunk: int) -> str:
    """The label of the log's chunk number ``chunk``."""
    return f"log/{chunk}"


def index_label(kind: str) -> str:
    """The label of an index object (its kind's key suffix: ``index``, ``timeindex``...)."""
    return f"index/{kind}"


__all__ = ["COMPRESSIONS", "DEFAULT_ZSTD_LEVEL", "ENCRYPTION_OVERHEAD", "NONCE_BYTES",
           "TAG_BYTES", "ZSTD", "ChunkDecoder", "CorruptChunkError", "SegmentTransform",
           "batches_compressed",
           "index_label", "log_label", "segment_context"]
