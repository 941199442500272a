"""Read-ahead streams of sequential readers: one ranged read per segment, not one per chunk.

When a reader goes through a segment sequentially (each fetch starts where the previous one
stopped), the storage manager opens a :class:`ReadAheadStream` on the segment: ONE ranged read
of its stored log from the next chunk the reader needs to the segment's end, consumed chunk by
chunk on its own thread. Each chunk's stored bytes are handed to the chunk loader as they
arrive, decoded there on the pool (chunks decode in parallel while the stream reads on; the
readers waiting for a chunk get it, the cache keeps it), so the reader's next fetches find
their chunks cached or arriving instead of making ranged reads of their own. Object stores
that serve a ranged read in time proportional to the whole object (moto), and every store's
per-request latency, make this much faster than one read per chunk or per span.

The rules it keeps:

- Backpressure: the stream claims (in the chunk loader) and reads only chunks up to ``ahead``
  past the last chunk a reader has asked for; past that its thread waits (the rest of the
  ranged read stays unread in the connection), so it holds at most those claimed chunks'
  stored bytes (waiting to decode) and never fills the cache faster than the reader drains
  it.
- Single flight: a chunk the stream has claimed is never loaded by a reader (readers wait for
  the stream); chunks cached or loading when the stream reaches them are read through and
  dropped.
- Fallback: when the read fails, or the stream is closed, its claimed chunks still unread go
  to the loader's pool as ordinary chunk loads (one ranged read each), so no reader waits on a
  dead stream and a failed stream costs no reader an error it would not have had otherwise.
- Bounds: :class:`ReadAheadStreams` keeps at most ``max_open`` streams (the least recently
  used is closed first); a stream no reader has advanced for ``idle_s`` seconds closes itself,
  and a stream ends at the segment's last chunk. A segment's stream is closed when the segment
  is deleted, and all are closed with the manager.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

from kafka_tiers.objectstore.chunk_loader import ChunkLoader, Load, StreamClaim

log = logging.getLogger(__name__)

#: Read-ahead streams open at once per manager (the least recently used is closed first).
MAX_OPEN_STREAMS = 16
#: A stream no reader has advanced for this long closes (its connection with it).
IDLE_S = 5.0

#: The loader items (key, load) of the chunks ``first..end-1``.
ItemsOf = Callable[[int, int], Sequence[tuple[str, Load]]]
#: The stored bytes of the chunks ``first..end-1`` with one ranged read, chunk by chunk.
OpenSpan = Callable[[int, int], Iterator[bytes]]
#: The original bytes of a chunk from its stored bytes (checked; raises when damaged).
Decode = Callable[[int, bytes], bytes]


class ReadAheadStream:
    """One ranged read of a segment's chunks ``first..count-1``, handed to ``loader`` chunk by
    chunk at most ``ahead`` chunks past the readers (module docstring for the rules).

    Args:
        loader: the chunk loader the chunks are claimed in and answered to.
        items_of: the loader items of a run of chunks.
        open_span: opens the ranged read (called on the stream's thread at its first chunk).
        decode: a chunk's original bytes from its stored bytes; run on the loader's pool (or
            by the first reader needing the chunk), so chunks decode in parallel while the
            stream reads on.
        first: the first chunk read.
        count: the segment's chunk count (the read ends at the last chunk).
        ahead: chunks claimed and read past the last chunk a reader asked for (>= 1).
        idle_s: seconds without :meth:`advance` after which the stream closes.
        on_end: called once with the stream when it ends (closed, failed or done).

    Thread-safe; the thread starts at once and is a daemon.
    """

    def __init__(self, loader: ChunkLoader, items_of: ItemsOf, open_span: OpenSpan,
                 decode: Decode, first: int, count: int, ahead: int, idle_s: float,
                 on_end: Callable[[ReadAheadStream], None] | None = None) -> None:
        self._loader = loader
        self._items_of = items_of
        self._open_span = open_span
        self._decode = decode
        self.first = first
        self._count = count
        self._ahead = max(1, ahead)
        self._idle_s = idle_s
        self._on_end = on_end
        self._cond = threading.Condition()
        self._next = first  # the next chunk the thread reads
        self._claimed_to = first  # chunks below were claimed (or found cached / in flight)
        self._claims: dict[int, StreamClaim | None] = {}
        self._closed = False
        self._last_use = time.monotonic()
        self.chunks_read = 0  # chunks read from the store (for tests and stats)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kafka-tiers-read-ahead",
                                        daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether the stream has ended (closed, failed or at the segment's end)."""
        with self._cond:
            return self._closed

    @property
    def next_chunk(self) -> int:
        """The next chunk the stream reads."""
        with self._cond:
            return self._next

    def serves(self, first_needed: int) -> bool:
        """Whether a read needing chunks from ``first_needed`` on should go through this
        stream: it is open and the read does not start past what the stream will read
        within its read-ahead (a reader far ahead reads its own chunks)."""
        with self._cond:
            return not self._closed and first_needed <= self._claimed_to + self._ahead

    def advance(self, last_needed: int) -> bool:
        """A reader needs the chunks up to ``last_needed``: claim every chunk up to
        ``last_needed + ahead`` not claimed yet (before the reader loads them, so it waits
        for the stream), let the thread read on. Returns False when the stream has ended
        (the reader loads its chunks as usual)."""
        with self._cond:
            if self._closed:
                return False
            target = min(self._count - 1, last_needed + self._ahead)
            if target >= self._claimed_to:
                claims = self._loader.claim_for_stream(
                    self._items_of(self._claimed_to, target + 1))
                for index, claim in enumerate(claims):
                    self._claims[self._claimed_to + index] = claim
                self._claimed_to = target + 1
            self._last_use = time.monotonic()
            self._cond.notify_all()
            return True

    def close(self) -> None:
        """End the stream: the thread stops after the chunk it is reading (if any), closes the
        ranged read and hands the chunks it claimed and did not read to the loader's pool.
        Idempotent; does not wait for the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (tests)."""
        self._thread.join(timeout)

    def _wait_for_work(self) -> int | None:
        """The next chunk to read once a reader has let the stream read it, or None when the
        stream is closed or idle for ``idle_s``."""
        with self._cond:
            while not self._closed and self._next >= self._claimed_to:
                idle = time.monotonic() - self._last_use
                if idle >= self._idle_s:
                    self._closed = True
                    break
                self._cond.wait(self._idle_s - idle)
            return None if self._closed else self._next

    def _run(self) -> None:
        chunks: Iterator[bytes] | None = None
        try:
            while True:
                number = self._wait_for_work()
                if number is None:
                    break
                if chunks is None:
                    chunks = self._open_span(number, self._count)
                data = next(chunks)
                self.chunks_read += 1
                with self._cond:
                    claim = self._claims.pop(number, None)
                    self._next = number + 1
                    done = self._next >= self._count
                if claim is not None:
                    self._loader.hand_off(claim, functools.partial(self._decode, number, data))
                if done:
                    break
        except BaseException as exc:  # the readers fall back to chunk reads
            self.error = exc
            log.debug("read-ahead stream from chunk %d failed: %s", self.first, exc)
        finally:
            with self._cond:
                self._closed = True
                left = [claim for claim in self._claims.values() if claim is not None]
                self._claims.clear()
            if chunks is not None:
                with contextlib.suppress(Exception):
                    chunks.close()  # type: ignore[attr-defined]
            self._loader.release(left)
            if self._on_end is not None:
                with contextlib.suppress(Exception):
                    self._on_end(self)


class ReadAheadStreams:
    """The read-ahead streams of one manager, one per segment (by log key), at most
    ``max_open`` (least recently used closed first). Thread-safe."""

    def __init__(self, max_open: int = MAX_OPEN_STREAMS, idle_s: float = IDLE_S) -> None:
        self.max_open = max(1, max_open)
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._streams: OrderedDict[str, ReadAheadStream] = OrderedDict()
        self.opened = 0  # streams opened so far

    def __len__(self) -> int:
        with self._lock:
            return len(self._streams)

    def get(self, key: str) -> ReadAheadStream | None:
        """The open stream of ``key`` (marked most recently used), or None."""
        with self._lock:
            stream = self._streams.get(key)
            if stream is None:
                return None
            if stream.closed:
                del self._streams[key]
                return None
            self._streams.move_to_end(key)
            return stream

    def open(self, key: str, first_needed: int,
             make: Callable[[Callable[[ReadAheadStream], None]], ReadAheadStream]
             ) -> ReadAheadStream:
        """``key``'s open stream if it serves a read from chunk ``first_needed`` (another
        reader opened it meanwhile), else a new one made with ``make(on_end)`` (replacing an
        older one); the least recently used streams past ``max_open`` are closed."""
        evicted: list[ReadAheadStream] = []

        def on_end(stream: ReadAheadStream) -> None:
            with self._lock:
                if self._streams.get(key) is stream:
                    del self._streams[key]

        with self._lock:
            old = self._streams.pop(key, None)
            if old is not None and old.serves(first_needed):
                self._streams[key] = old
                return old
            if old is not None:
                evicted.append(old)
            while len(self._streams) >= self.max_open:
                evicted.append(self._streams.popitem(last=False)[1])
            stream = make(on_end)
            self._streams[key] = stream
            self.opened += 1
        for other in evicted:
            other.close()
        return stream

    def close_key(self, key: str) -> None:
        """Close ``key``'s stream, if open (the segment is deleted)."""
        with self._lock:
            stream = self._streams.pop(key, None)
        if stream is not None:
            stream.close()

    def close(self) -> None:
        """Close every stream. Idempotent."""
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for stream in streams:
            stream.close()


__all__ = ["IDLE_S", "MAX_OPEN_STREAMS", "ReadAheadStream", "ReadAheadStreams"]
