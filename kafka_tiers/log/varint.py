"""Zigzag variable-length integers as Kafka's ``ByteUtils`` writes them (varint and varlong).

Kafka encodes every record field length and delta as a zigzag varint: ``(n << 1) ^ (n >> 63)``
in base-128 groups, least significant first, high bit set on all but the last byte.
"""

from __future__ import annotations

from kafka_tiers.log.errors import CorruptRecordError

#: encoded single-byte varints for -64..63, the common case.
_SMALL = {n: bytes(((n << 1) ^ (n >> 63),)) for n in range(-64, 64)}


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit integer."""
    small = _SMALL.get(value)
    if small is not None:
        return small
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varint out of 64-bit range: {value}")
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zigzag encoding of ``value`` to ``out``."""
    out += encode_varint(value)


def size_of_varint(value: int) -> int:
    """How many bytes :func:`encode_varint` writes for ``value``."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode one zigzag varint at ``pos``; returns ``(value, position after it)``.

    Raises:
        CorruptRecordError: the buffer ends inside the varint or it is longer than 10 bytes.
    """
    try:
        b = buf[pos]
        pos += 1
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos
        result = b & 0x7F
        shift = 7
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
            if shift > 63:
                raise CorruptRecordError("varint longer than 10 bytes", position=pos)
    except IndexError:
        raise CorruptRecordError("buffer ends inside a varint", position=pos) from None


__all__ = ["decode_varint", "encode_varint", "size_of_varint", "write_varint"]
