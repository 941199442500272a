"""CRC-32C (Castagnoli), the checksum of record batch v2, computed natively by ``crc32c``."""

from __future__ import annotations

from crc32c import crc32c as _crc32c


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32C of ``data`` as an unsigned 32-bit int, continuing from ``value``."""
    return _crc32c(data, value)


__all__ = ["crc32c"]
