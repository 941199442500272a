"""The streams of a segment copy and fetch: the hashing reader of a local file being uploaded
(as it is, or chunk by chunk through a segment's transform) and the managed stream handed to a
fetch's caller."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from kafka_tiers.api.errors import RemoteStorageError
from kafka_tiers.objectstore.manifest import CRC32C, new_hasher

#: The buffer size of a copy's reads and of the streams handed to a fetch's caller.
COPY_CHUNK = 1 << 20


class LocalReadError(Exception):
    """Reading the broker's local segment file failed (not the remote tier's fault)."""

    def __init__(self, path: str, cause: OSError) -> None:
        super().__init__(f"cannot read local file {path}: {cause.strerror or cause}")
        self.cause = cause


class CopyCancelled(Exception):
    """Raised into the put of one object of a copy when another object of it failed."""


class HashingReader(io.RawIOBase):
    """Reads at most ``limit`` bytes of a local source, hashing and counting them in the same
    pass: the bytes are read straight into the caller's buffer (no intermediate copy) and
    hashed there. When ``cancel`` is set, the next read raises :class:`CopyCancelled`, which
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
            raise CopyCancelled(f"reading {self._name} stopped: another object of the copy "
                                 "failed")
        view = memoryview(buffer).cast("B")
        want = len(view) if self._remaining is None else min(len(view), self._remaining)
        if want == 0:
            return 0
        target = view[:want]
        try:
            n = self._source.readinto(target) or 0
        except OSError as exc:
            raise LocalReadError(self._name, exc) from None
        if n:
            self.digest.update(target[:n])
        self.count += n
        if self._remaining is not None:
            self._remaining -= n
        return n


class EncodingReader(io.RawIOBase):
    """Reads a local log file ``chunk_size`` bytes at a time, encodes each chunk with
    ``encode(chunk number, original bytes)`` and yields the stored bytes, one chunk after the
    other: what a chunked copy uploads. In the same pass it computes the CRC-32C of the original
    bytes (:attr:`digest`) and of the stored ones (:attr:`stored_digest`), and records each
    chunk's stored size (:attr:`stored_sizes`). When ``cancel`` is set, the next read raises
    :class:`CopyCancelled`.

    Args:
        source: the open file (read with ``readinto``).
        name: its path (for error messages).
        length: its size in bytes (what is read, at most).
        chunk_size: original bytes per chunk.
        encode: the chunk transform.
        cancel: set to stop the copy.
    """

    def __init__(self, source: Any, name: str, length: int, chunk_size: int,
                 encode: Callable[[int, memoryview], bytes],
                 cancel: threading.Event | None = None) -> None:
        self._source = source
        self._name = name
        self._remaining = length
        self._chunk_size = chunk_size
        self._encode = encode
        self._cancel = cancel
        self._chunk = bytearray(chunk_size)
        self._out = memoryview(b"")
        self._number = 0
        self.digest = new_hasher(CRC32C)
        self.stored_digest = new_hasher(CRC32C)
        self.stored_sizes: list[int] = []
        self.count = 0

    def readable(self) -> bool:
        return True

    def _next_chunk(self) -> bool:
        want = min(self._chunk_size, self._remaining)
        if want == 0:
            return False
        view = memoryview(self._chunk)[:want]
        got = 0
        while got < want:
            try:
                n = self._source.readinto(view[got:]) or 0
            except OSError as exc:
                raise LocalReadError(self._name, exc) from None
            if n == 0:
                raise LocalReadError(self._name, OSError(
                    f"the file ended {want - got} bytes early (it shrank during the copy)"))
            got += n
        self.digest.update(view)
        self.count += want
        self._remaining -= want
        stored = self._encode(self._number, view)
        self._number += 1
        self.stored_digest.update(stored)
        self.stored_sizes.append(len(stored))
        self._out = memoryview(stored)
        return True

    def readinto(self, buffer: Any) -> int:
        if self._cancel is not None and self._cancel.is_set():
            raise CopyCancelled(f"reading {self._name} stopped: another object of the copy "
                                 "failed")
        view = memoryview(buffer).cast("B")
        while not self._out:
            if not self._next_chunk():
                return 0
        n = min(len(view), len(self._out))
        view[:n] = self._out[:n]
        self._out = self._out[n:]
        return n


class ManagedStream(io.RawIOBase):
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


def managed(inner: BinaryIO, translate: Callable[[BaseException], BaseException],
            expected: int) -> BinaryIO:
    """``inner`` as a buffered :class:`ManagedStream` of ``expected`` bytes."""
    return io.BufferedReader(ManagedStream(inner, translate, expected),
                             buffer_size=COPY_CHUNK)


__all__ = [
    "COPY_CHUNK",
    "CopyCancelled",
    "EncodingReader",
    "HashingReader",
    "LocalReadError",
    "ManagedStream",
    "managed",
]
