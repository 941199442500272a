"""The lazy stream of a chunked fetch: the original bytes of a range of a segment's log, read
chunk by chunk as the caller consumes them.

A fetch hands its caller a :class:`ChunkedSegmentStream` at once; nothing is downloaded until
the first read. Each time the caller has consumed the chunks in hand, the next *window* (up to
``window`` chunks, the manager's ``fetch.chunk.download.threads``) is loaded at once through the
manager's loader (which answers from the chunk cache, joins downloads in flight and downloads
the rest in parallel, one ranged read per chunk), so a long range keeps that many ranged reads
in flight while a short one (one batch) costs one chunk.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

from kafka_tiers.api.errors import RemoteStorageError

#: Loads the original bytes of the listed chunks, in order (bytes or views of them).
WindowLoader = Callable[[Sequence[int]], list[bytes | memoryview]]


class ChunkedSegmentStream(io.RawIOBase):
    """The original bytes ``first..last`` (inclusive) of a chunked log.

    Args:
        chunks: the chunk numbers covering the range, in order.
        skip: bytes of the first chunk before ``first``.
        length: bytes in the range (``last - first + 1``).
        load: loads a window of chunks (their original bytes, in order).
        window: chunks loaded at once (>= 1).
        translate: turns a load's failure into the error raised to the reader.
        on_close: called once with the bytes the reader consumed when the stream is closed.

    Raises (from ``read``):
        RemoteStorageError: a chunk could not be loaded or failed its checks (the stream
            never returns damaged or short data: a chunk shorter than the chunk index says is
            an error).
    """

    def __init__(self, chunks: Sequence[int], skip: int, length: int, load: WindowLoader,
                 window: int, translate: Callable[[BaseException], BaseException],
                 on_close: Callable[[int], None] | None = None) -> None:
        self._chunks = list(chunks)
        self._next = 0
        self._skip = skip
        self._remaining = length
        self._load = load
        self._window = max(1, window)
        self._translate = translate
        self._on_close = on_close
        self._held: list[memoryview] = []
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        batch = self._chunks[self._next:self._next + self._window]
        if not batch:
            raise RemoteStorageError(f"chunked stream ran out of chunks {self._remaining} "
                                     "bytes early")
        try:
            loaded = self._load(batch)
        except Exception as exc:
            err = self._translate(exc)
            if err is exc:
                raise
            raise err from exc
        self._next += len(batch)
        views = [memoryview(b) for b in loaded]
        if self._skip:
            views[0] = views[0][self._skip:]
            self._skip = 0
        self._held = [v for v in views if len(v)]

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            raise ValueError("read from a closed stream")
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._remaining)
        if want == 0:
            return 0
        while not self._held:
            self._fill()
        head = self._held[0]
        n = min(want, len(head))
        view[:n] = head[:n]
        if n == len(head):
            self._held.pop(0)
        else:
            self._held[0] = head[n:]
        self._remaining -= n
        self.consumed += n
        return n

    def readall(self) -> bytes:
        parts = []
        while self._remaining:
            while not self._held:
                self._fill()
            head = self._held.pop(0)
            head = head[:self._remaining]
            parts.append(head)
            self._remaining -= len(head)
            self.consumed += len(head)
        return b"".join(parts)

    def close(self) -> None:
        if not self.closed:
            self._held = []
            callback, self._on_close = self._on_close, None
            if callback is not None:
                callback(self.consumed)
        super().close()


__all__ = ["ChunkedSegmentStream", "WindowLoader"]
