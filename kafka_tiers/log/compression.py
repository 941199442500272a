"""The record batch compression codecs, byte-compatible with Kafka's.

Attribute bits 0-2 of a batch name the codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. Only the
records section (after the 61-byte header) is compressed.

* gzip: a gzip stream (``zlib``), as Java's ``GZIPOutputStream`` writes it.
* snappy: written in the xerial ``SnappyOutputStream`` framing Kafka uses (magic
  ``\\x82SNAPPY\\0``, version and compat ints, then length-prefixed 32 KiB raw blocks); raw snappy
  is read too.
* lz4: an LZ4 frame with independent 64 KiB blocks, as Kafka's ``KafkaLZ4BlockOutputStream``.
* zstd: a zstd frame (level 3, Kafka's default).
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from kafka_tiers.log.errors import CorruptRecordError


class CompressionType(IntEnum):
    """A batch's codec, numbered as Kafka's ``CompressionType`` ids."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, value: str | int | CompressionType) -> CompressionType:
        """A codec from its id or its Kafka name (``"none"``, ``"gzip"``, ...).

        Raises:
            ValueError: an unknown codec.
        """
        if isinstance(value, CompressionType):
            return value
        if isinstance(value, int):
            return cls(value)
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression {value!r}: expected none, gzip, snappy, lz4 or zstd"
            ) from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT = struct.Struct(">i")

_zstd_compressor = zstandard.ZstdCompressor(level=3)
_zstd_decompressor = zstandard.ZstdDecompressor()


def _snappy_encode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        out += _INT.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos = 16
    parts: list[bytes] = []
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("snappy stream ends inside a block length")
        (size,) = _INT.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError(f"snappy block of {size} bytes overruns the stream")
        parts.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + size])))
        pos += size
    return b"".join(parts)


def _gzip_decode(data: bytes | bytearray | memoryview) -> bytes:
    out = bytearray()
    view = memoryview(data)
    while len(view):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += d.decompress(view)
        if not d.eof:
            raise CorruptRecordError("gzip stream is truncated")
        view = memoryview(d.unused_data)
        if len(view) and bytes(view[:2]) != b"\x1f\x8b":
            break  # trailing garbage after the member, as GZIPInputStream ignores it
    return bytes(out)


def _zstd_decode(data: bytes | bytearray | memoryview) -> bytes:
    obj = _zstd_decompressor.decompressobj()
    out = obj.decompress(bytes(data))
    if not obj.eof:
        raise CorruptRecordError("zstd frame is truncated")
    return out


def compress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Compress a batch's records section with ``codec`` (``NONE`` returns the bytes)."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == CompressionType.SNAPPY:
        return _snappy_encode(data)
    if codec == CompressionType.LZ4:
        return lz4.frame.compress(
            data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
            content_checksum=False, store_size=False,
        )
    if codec == CompressionType.ZSTD:
        return _zstd_compressor.compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a batch's records section.

    Raises:
        CorruptRecordError: an unknown codec id, or bytes the codec cannot decode.
    """
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return _gzip_decode(data)
        if codec == CompressionType.SNAPPY:
            return _snappy_decode(data)
        if codec == CompressionType.LZ4:
            return lz4.frame.decompress(data)
        if codec == CompressionType.ZSTD:
            return _zstd_decode(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # each codec library raises its own error types
        name = CompressionType(codec).name.lower()
        raise CorruptRecordError(f"cannot decompress {name} records: {exc}") from None
    raise CorruptRecordError(f"unknown compression codec id {codec}")


__all__ = ["CompressionType", "compress", "decompress"]
