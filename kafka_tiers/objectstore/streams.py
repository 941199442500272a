"""The streams of a segment copy and fetch: the hashing reader of a local file being uploaded
(as it is, or chunk by chunk through a segment's transform) and the managed stream handed to a
fetch's caller."""

from __future__ import annotations

import io
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
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

    With ``workers`` > 1 the chunks are encoded ahead of the upload, in order: while the put
    reads chunk *i*, chunks *i+1..i+workers* are read and encoded on a pool of ``workers``
    threads (zstd and AES-GCM release the GIL while they work), so the encoding overlaps the
    upload and itself runs on several cores. At most ``workers + 1`` chunks (their original
    and stored bytes) are held at once: the one being uploaded and those being encoded.
    :meth:`close` drops the chunks not yet encoded and waits for those being encoded (nothing
    of the copy runs after it returns); a cancelled or failed read stops the pool the same
    way.

    Args:
        source: the open file (read with ``readinto``).
        name: its path (for error messages).
        length: its size in bytes (what is read, at most).
        chunk_size: original bytes per chunk.
        encode: the chunk transform (must be safe to call from several threads at once).
        cancel: set to stop the copy.
        workers: chunks encoded at once ahead of the upload (1: each chunk is encoded when
            the put needs it, on the put's thread).
    """

    def __init__(self, source: Any, name: str, length: int, chunk_size: int,
                 encode: Callable[[int, memoryview], bytes],
                 cancel: threading.Event | None = None, workers: int = 1) -> None:
        self._source = source
        self._name = name
        self._remaining = length
        self._chunk_size = chunk_size
        self._encode = encode
        self._cancel = cancel
        self._workers = max(1, workers)
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: deque[Future[bytes]] = deque()
        self._out = memoryview(b"")
        self._number = 0
        self.digest = new_hasher(CRC32C)
        self.stored_digest = new_hasher(CRC32C)
        self.stored_sizes: list[int] = []
        self.count = 0

    def readable(self) -> bool:
        return True

    def _read_chunk(self) -> bytearray | None:
        """The next chunk's original bytes (hashed and counted), or None at the end."""
        want = min(self._chunk_size, self._remaining)
        if want == 0:
            return None
        chunk = bytearray(want)
        view = memoryview(chunk)
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
        return chunk

    def _fill_ahead(self) -> None:
        """Read and submit chunks until ``workers`` are being encoded or the file ends."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._workers,
                                            thread_name_prefix="kafka-tiers-encode")
        while len(self._ahead) < self._workers:
            chunk = self._read_chunk()
            if chunk is None:
                return
            self._ahead.append(self._pool.submit(self._encode, self._number,
                                                 memoryview(chunk)))
            self._number += 1

    def _next_chunk(self) -> bool:
        if self._workers > 1:
            self._fill_ahead()
            if not self._ahead:
                return False
            stored = self._ahead.popleft().result()
            self._fill_ahead()  # keep the pool busy while this chunk is uploaded
        else:
            chunk = self._read_chunk()
            if chunk is None:
                return False
            stored = self._encode(self._number, memoryview(chunk))
            self._number += 1
        self.stored_digest.update(stored)
        self.stored_sizes.append(len(stored))
        self._out = memoryview(stored)
        return True

    def readinto(self, buffer: Any) -> int:
        if self._cancel is not None and self._cancel.is_set():
            self._stop()
            raise CopyCancelled(f"reading {self._name} stopped: another object of the copy "
                                 "failed")
        view = memoryview(buffer).cast("B")
        while not self._out:
            try:
                more = self._next_chunk()
            except BaseException:
                self._stop()
                raise
            if not more:
                return 0
        n = min(len(view), len(self._out))
        view[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _stop(self) -> None:
        """Drop the chunks waiting to be encoded and wait for those being encoded."""
        pool, self._pool = self._pool, None
        for future in self._ahead:
            future.cancel()
        self._ahead.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        self._stop()
        super().close()


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


class LazyManagedStream(io.RawIOBase):
    """A :class:`ManagedStream` of ``expected`` bytes whose store stream is opened by the first
    read (``open_inner()``), not when it is made: a stream handed to a caller costs nothing
    until it is read. ``on_close`` is called once, with the bytes read, when it is closed."""

    def __init__(self, open_inner: Callable[[], BinaryIO],
                 translate: Callable[[BaseException], BaseException], expected: int,
                 on_close: Callable[[int], None] | None = None) -> None:
        self._open_inner: Callable[[], BinaryIO] | None = open_inner
        self._translate = translate
        self._expected = expected
        self._stream: ManagedStream | None = None
        self._on_close = on_close
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            raise ValueError("read from a closed stream")
        if self._stream is None:
            if self.consumed >= self._expected:
                return 0
            opener, self._open_inner = self._open_inner, None
            assert opener is not None
            self._stream = ManagedStream(opener(), self._translate, self._expected)
        n = self._stream.readinto(buffer)
        self.consumed += n
        return n

    def close(self) -> None:
        if not self.closed:
            stream, self._stream = self._stream, None
            callback, self._on_close = self._on_close, None
            try:
                if stream is not None:
                    stream.close()
            finally:
                if callback is not None:
                    callback(self.consumed)
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
    "LazyManagedStream",
    "LocalReadError",
    "ManagedStream",
    "managed",
]
