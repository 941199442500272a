"""Loading chunks through the cache: one download per chunk however many readers want it, and a
bounded pool of downloads running ahead of a sequential reader.

:class:`ChunkLoader` is the storage manager's only way to a chunk: :meth:`ChunkLoader.get` answers
from the cache, joins a download of the same key already in flight, or downloads on the
caller's thread; :meth:`ChunkLoader.prefetch` starts downloads on the pool and returns at once;
:meth:`ChunkLoader.get_many` downloads several chunks in parallel (parallel ranged reads of one
segment); :meth:`ChunkLoader.prefetch_spans` queues prefetches of contiguous chunks as spans,
each read with one ranged read and split into its chunks as they arrive;
:meth:`ChunkLoader.claim_for_stream` lets a read-ahead stream claim the chunks it will read
(readers wait for them), then :meth:`~ChunkLoader.hand_off` each to the pool to decode, or
:meth:`~ChunkLoader.release` those it will not read back to ordinary loads.

The rules it keeps:

- Single flight: while a load of a key runs, every other reader of the key waits for it; they
  all get its bytes, or all get its error.
- A failed load leaves nothing behind: the key is free again before its waiters see the
  error, nothing is cached, and the next reader loads again.
- Readers never queue behind prefetches: the pool takes a reader's downloads
  (:meth:`~ChunkLoader.get_many`) before any prefetch, and a reader that needs a chunk whose
  download is still waiting for a thread runs it itself.
- Prefetches are hints: at most ``max_pending`` wait for a thread (more are dropped and
  counted), a failed one is logged at debug level and forgotten, and none runs without a cache.
- :meth:`~ChunkLoader.close` never waits for a download: every reader still waiting gets a
  :class:`~kafka_tiers.api.errors.RetriableRemoteStorageError` at once, downloads still
  running finish on their own thread and keep nothing.
- A forgotten segment stays forgotten: :meth:`~ChunkLoader.discard_prefix` drops the cached
  chunks under a prefix, and a download of such a chunk that was already in flight answers
  its readers but is not kept (nor kept and then left behind: a put racing the discard is
  discarded again), so a deleted or rekeyed segment leaves no dead chunks in the cache.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass

from kafka_tiers.api.errors import RetriableRemoteStorageError
from kafka_tiers.objectstore.chunk_cache import ChunkCache

log = logging.getLogger(__name__)

Load = Callable[[], bytes]
#: Loads the items ``first..end-1`` of a span (contiguous chunks) with one read, yielding each
#: chunk's bytes in order as it arrives.
SpanLoad = Callable[[int, int], Iterator[bytes]]

#: prefetched chunks remembered until a reader uses them (for the prefetch-hit counter)
_PREFETCHED_MEMORY = 4096
#: a pool thread with nothing to do for this long ends (a new one starts on demand)
_IDLE_S = 5.0


@dataclass(frozen=True)
class LoaderStats:
    """What a :class:`ChunkLoader` has done since it was made.

    Attributes:
        downloads: loads that returned bytes (readers', parallel and prefetch loads).
        download_failures: loads that raised.
        prefetches: prefetch loads queued.
        prefetches_dropped: prefetches not queued because ``max_pending`` were waiting.
        prefetch_hits: chunks a reader got from a prefetch (from the cache, or by joining
            the prefetch's download in flight).
        in_flight: loads queued or running now.
    """

    downloads: int
    download_failures: int
    prefetches: int
    prefetches_dropped: int
    prefetch_hits: int
    in_flight: int


class _Flight:
    """One load of one key: its future, and whether a thread has taken it."""

    __slots__ = ("by_pool", "epoch", "future", "key", "load", "prefetch", "queued", "started")

    def __init__(self, key: str, load: Load, prefetch: bool, epoch: int = 0) -> None:
        self.key = key
        self.epoch = epoch  # the loader's discard count when the flight was made
        self.load = load
        self.future: Future[bytes] = Future()
        self.started = False  # a thread has taken it (it runs or ran)
        self.by_pool = False  # and that thread is a pool thread
        self.prefetch = prefetch
        self.queued = False  # waits in a pool queue, not yet taken


#: A chunk claimed by a streaming reader (:meth:`ChunkLoader.claim_for_stream`).
StreamClaim = _Flight


class _Span:
    """A prefetch of contiguous chunks with one read: their flights (``items[i]`` is the flight
    of item ``first + i``) and the span loader."""

    __slots__ = ("first", "flights", "load")

    def __init__(self, first: int, flights: list[_Flight], load: SpanLoad) -> None:
        self.first = first
        self.flights = flights
        self.load = load


class ChunkLoader:
    """Single-flight chunk loads through an optional cache (module docstring for the rules).

    Args:
        cache: where loaded chunks are kept (None: nothing is kept and prefetches do
            nothing, but concurrent loads of one key still share one download).
        threads: the download pool's size (prefetches and :meth:`get_many`), >= 1.
        max_pending: prefetches that may wait for a thread; more are dropped (a prefetch is
            only a hint).

    Thread-safe. The loader does not own the cache: :meth:`close` leaves it open.
    """

    def __init__(self, cache: ChunkCache | None, threads: int = 4, *,
                 max_pending: int = 256) -> None:
        self.cache = cache
        self.threads = max(1, threads)
        self.max_pending = max(0, max_pending)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._inflight: dict[str, _Flight] = {}
        self._readers_queue: deque[_Flight] = deque()
        self._prefetch_queue: deque[_Flight | _Span] = deque()
        self._workers = 0
        self._idle = 0
        self._queued_prefetches = 0
        self._closed = False
        self._prefetched: OrderedDict[str, None] = OrderedDict()
        # discard_prefix calls that flights in flight may predate: (sequence number, prefix)
        self._discard_seq = 0
        self._discards: list[tuple[int, str]] = []
        self._downloads = self._failures = 0
        self._prefetches = self._dropped = self._prefetch_hits = 0

    # -- counters -------------------------------------------------------------------------

    @property
    def downloads(self) -> int:
        """Loads that returned bytes so far."""
        with self._lock:
            return self._downloads

    def stats(self) -> LoaderStats:
        """The counters now."""
        with self._lock:
            return LoaderStats(self._downloads, self._failures, self._prefetches,
                               self._dropped, self._prefetch_hits, len(self._inflight))

    def cached(self, key: str) -> bytes | None:
        """The chunk under ``key`` if the cache holds it (counted as served from the cache,
        as :meth:`get` counts it), else None (also without a cache); never loads."""
        data = self.cache.get(key) if self.cache is not None else None
        if data is not None:
            with self._lock:
                if key in self._prefetched:
                    del self._prefetched[key]
                    self._prefetch_hits += 1
        return data

    # -- flights --------------------------------------------------------------------------

    def _claim(self, key: str, load: Load, prefetch: bool = False) -> tuple[_Flight, bool]:
        """The flight of ``key`` and whether the caller made it (called with the lock held)."""
        if self._closed:
            raise RetriableRemoteStorageError("the chunk loader is closed")
        flight = self._inflight.get(key)
        if flight is not None:
            return flight, False
        flight = _Flight(key, load, prefetch, self._discard_seq)
        self._inflight[key] = flight
        return flight, True

    def _take(self, flight: _Flight, *, pool: bool = False) -> bool:
        """Whether the caller (a pool thread when ``pool``) now runs ``flight``: nobody had
        taken it."""
        with self._lock:
            if flight.started or flight.future.done():
                return False
            flight.started = True
            flight.by_pool = pool
            if flight.queued:
                flight.queued = False
                if flight.prefetch:
                    self._queued_prefetches -= 1
            return True

    def _free(self, flight: _Flight, *, failed: bool = False) -> None:
        """Forget ``flight`` as the key's load (the next reader of the key loads again)."""
        with self._lock:
            if self._inflight.get(flight.key) is flight:
                del self._inflight[flight.key]
            if failed:
                self._failures += 1

    def _execute(self, flight: _Flight) -> None:
        """Run the load, then answer the waiters, keep the chunk, free the key. On failure
        the key is freed before the waiters see the error, so a retry loads again."""
        if self.cache is not None and self.cache.contains(flight.key):
            # a load of the key ended between the claimer's cache miss and its claim
            cached = self.cache.get(flight.key)
            if cached is not None:
                self._free(flight)
                _settle(flight.future, data=cached)
                return
        try:
            data = flight.load()
        except BaseException as exc:
            self._free(flight, failed=True)
            _settle(flight.future, error=exc)
            if flight.prefetch:
                log.debug("prefetch of %s failed: %s", flight.key, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._finish(flight, data)

    def _wait(self, flight: _Flight) -> bytes:
        """Run ``flight`` here if nobody has, then its bytes (or its error)."""
        if self._take(flight):
            self._execute(flight)
            return flight.future.result()
        result = flight.future.result()
        if flight.prefetch and flight.by_pool:  # joined a prefetch's download
            with self._lock:
                self._prefetch_hits += 1
        return result

    def _execute_span(self, span: _Span) -> None:
        """Run a span prefetch: take the flights nobody has taken (a reader may have run one
        itself meanwhile), load each contiguous run of them with one span read, and answer,
        cache and free each chunk as it arrives. A failed read fails (and frees) the chunks
        of its run not yet answered; a prefetch's failure is only logged."""
        taken = [self._take(flight, pool=True) for flight in span.flights]
        index = 0
        while index < len(span.flights):
            if not taken[index]:
                index += 1
                continue
            end = index
            while end < len(span.flights) and taken[end]:
                end += 1
            run = span.flights[index:end]
            done = 0
            try:
                for data in span.load(span.first + index, span.first + end):
                    if done >= len(run):
                        break
                    self._finish(run[done], data)
                    done += 1
                if done < len(run):
                    raise RetriableRemoteStorageError(
                        f"a span read returned {done} of {len(run)} chunks")
            except BaseException as exc:
                for flight in run[done:]:
                    self._free(flight, failed=True)
                    _settle(flight.future, error=exc)
                log.debug("prefetch of %s.. failed: %s", run[done].key, exc)
                if not isinstance(exc, Exception):
                    raise
            index = end

    def _discarded_since(self, flight: _Flight) -> str | None:
        """A prefix of ``flight``'s key discarded after the flight was made, or None (lock
        held)."""
        for seq, prefix in reversed(self._discards):
            if seq <= flight.epoch:
                return None
            if flight.key.startswith(prefix):
                return prefix
        return None

    def _finish(self, flight: _Flight, data: bytes) -> None:
        """Answer ``flight``'s waiters with ``data``, cache it (unless its key was discarded
        since the flight was made) and free the key."""
        _settle(flight.future, data=data)  # waiters go on while the cache writes
        if self.cache is not None and not self._closed:
            with self._lock:
                stale = self._discarded_since(flight)
            if stale is None:
                try:
                    self.cache.put(flight.key, data)
                except Exception as exc:  # a cache that fails must not fail the read
                    log.warning("chunk cache put of %s failed: %s", flight.key, exc)
                with self._lock:  # a discard that ran during the put: undo the put
                    stale = self._discarded_since(flight)
                if stale is not None:
                    self._discard_cached(stale)
        self._free(flight)
        with self._lock:
            self._downloads += 1
            if flight.prefetch and flight.by_pool:
                self._prefetched[flight.key] = None
                if len(self._prefetched) > _PREFETCHED_MEMORY:
                    self._prefetched.popitem(last=False)

    # -- the pool ------------------------------------------------------------------------

    def _enqueue(self, flight: _Flight) -> None:
        """Queue ``flight`` for the pool (lock held), starting a thread when none is idle."""
        flight.queued = True
        if flight.prefetch:
            self._queued_prefetches += 1
            self._prefetch_queue.append(flight)
        else:
            self._readers_queue.append(flight)
        self._wake_worker()

    def _wake_worker(self) -> None:
        """Wake an idle pool thread for newly queued work (lock held), starting one when
        none is idle and the pool has room."""
        waiting = len(self._readers_queue) + len(self._prefetch_queue)
        if waiting > self._idle and self._workers < self.threads:
            self._workers += 1
            try:
                threading.Thread(target=self._worker, name="kafka-tiers-chunk",
                                 daemon=True).start()
            except RuntimeError as exc:  # no thread: readers run their own loads
                self._workers -= 1
                log.warning("cannot start a chunk download thread: %s", exc)
        self._work.notify()

    def _worker(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._readers_queue \
                        and not self._prefetch_queue:
                    self._idle += 1
                    woken = self._work.wait(_IDLE_S)
                    self._idle -= 1
                    if not woken and not self._readers_queue and not self._prefetch_queue:
                        self._workers -= 1
                        return
                if self._closed:
                    self._workers -= 1
                    return
                queue: deque[_Flight] | deque[_Flight | _Span] = (
                    self._readers_queue or self._prefetch_queue)
                flight = queue.popleft()
            if isinstance(flight, _Span):
                with contextlib.suppress(BaseException):
                    self._execute_span(flight)
                continue
            if self._take(flight, pool=True):
                # the waiters have the load's error; the thread goes on with the next load
                with contextlib.suppress(BaseException):
                    self._execute(flight)

    # -- the interface -------------------------------------------------------------------

    def get(self, key: str, load: Load) -> bytes:
        """The chunk under ``key``: from the cache, from a load of it already in flight, or
        from ``load()`` run on this thread (then kept in the cache).

        Raises:
            RetriableRemoteStorageError: the loader is closed (also raised to readers
                waiting when it closes).
            Exception: whatever ``load`` raised (every reader waiting on that load gets it;
                nothing is cached, so the next call tries again).
        """
        if self._closed:
            raise RetriableRemoteStorageError("the chunk loader is closed")
        data = self.cached(key)
        if data is not None:
            return data
        with self._lock:
            flight, _ = self._claim(key, load)
        return self._wait(flight)

    def prefetch(self, key: str, load: Load) -> bool:
        """Queue a load of ``key`` on the pool unless there is no cache, it is cached or in
        flight, ``max_pending`` prefetches already wait, or the loader is closed; returns at
        once, whether it was queued. A failed prefetch is logged (debug) and forgotten."""
        if self.cache is None or self._closed or self.cache.contains(key):
            return False
        with self._lock:
            if self._closed or key in self._inflight:
                return False
            if self._queued_prefetches >= self.max_pending:
                self._dropped += 1
                return False
            flight, _ = self._claim(key, load, prefetch=True)
            self._prefetches += 1
            self._enqueue(flight)
            return True

    def absent(self, keys: Sequence[str]) -> int:
        """How many of ``keys`` are neither cached nor loading (all of them without a
        cache)."""
        if self.cache is None:
            return len(keys)
        uncached = [key for key in keys if not self.cache.contains(key)]
        with self._lock:
            return sum(1 for key in uncached if key not in self._inflight)

    def prefetch_spans(self, items: Sequence[tuple[str, Load]], load_span: SpanLoad,
                       span: int) -> int:
        """Queue loads of the contiguous chunks ``items`` (in order) on the pool as *spans*:
        the items neither cached nor in flight are claimed, and each run of up to ``span``
        consecutive claimed items is loaded with one ``load_span(first, end)`` (one ranged
        read instead of one per chunk), its chunks answered and cached as they arrive. A
        reader needing a claimed chunk before its span starts runs the chunk's own load.
        Like :meth:`prefetch`, only a hint: nothing is queued without a cache, when closed,
        or past ``max_pending`` waiting prefetches (counted in chunks; the rest are dropped);
        returns at once the number of chunks queued."""
        if self.cache is None or self._closed:
            return 0
        wanted = [not self.cache.contains(key) for key, _ in items]
        queued = 0
        with self._lock:
            if self._closed:
                return 0
            run: list[_Flight] = []
            run_first = 0

            def flush() -> None:
                if run:
                    self._enqueue_span(_Span(run_first, list(run), load_span))
                    run.clear()

            for index, (key, load) in enumerate(items):
                if not wanted[index] or key in self._inflight:
                    flush()
                    continue
                if self._queued_prefetches >= self.max_pending:
                    self._dropped += len(items) - index
                    break
                if not run:
                    run_first = index
                flight, _ = self._claim(key, load, prefetch=True)
                flight.queued = True
                self._queued_prefetches += 1
                self._prefetches += 1
                queued += 1
                run.append(flight)
                if len(run) >= max(1, span):
                    flush()
            flush()
        return queued

    def _enqueue_span(self, span: _Span) -> None:
        """Queue a span prefetch (lock held), starting a thread when none is idle."""
        self._prefetch_queue.append(span)
        self._wake_worker()

    def claim_for_stream(self, items: Sequence[tuple[str, Load]]) -> list[StreamClaim | None]:
        """Claim for a streaming reader (one read running through contiguous chunks) the
        ``items`` neither cached nor in flight: each claimed key is in flight at once and
        taken (readers of it wait for the stream, they never load it themselves until the
        stream hands it off). Returns, per item in order, its claim or None (cached, in
        flight, or the loader closed). Every claim must end in :meth:`hand_off` or
        :meth:`release`."""
        wanted = [self.cache is None or not self.cache.contains(key) for key, _ in items]
        claims: list[StreamClaim | None] = []
        with self._lock:
            for index, (key, load) in enumerate(items):
                if self._closed or not wanted[index] or key in self._inflight:
                    claims.append(None)
                    continue
                flight, _ = self._claim(key, load, prefetch=True)
                flight.started = flight.by_pool = True
                self._prefetches += 1
                claims.append(flight)
        return claims

    def hand_off(self, claim: StreamClaim, load: Load) -> None:
        """Finish a claim of :meth:`claim_for_stream` with ``load`` (e.g. decoding the bytes
        the stream read) on the pool, ahead of prefetches, or on the first reader that needs
        it before a pool thread takes it; so the stream reads on while chunks decode in
        parallel."""
        with self._lock:
            if claim.future.done() or self._inflight.get(claim.key) is not claim:
                return
            if self._closed:
                closed = True
            else:
                closed = False
                claim.load = load
                claim.started = claim.prefetch = False  # a reader's load: ahead of prefetches
                self._enqueue(claim)
        if closed:
            _settle(claim.future, error=RetriableRemoteStorageError(
                f"the chunk loader closed while {claim.key} was loading"))

    def release(self, claims: Iterable[StreamClaim]) -> None:
        """Hand claims the stream will not answer (it failed or was closed) to the pool as
        readers' loads, each with its own load (the fallback to chunk reads); when the loader
        is closed their waiters get :class:`RetriableRemoteStorageError`."""
        failed: list[_Flight] = []
        with self._lock:
            for flight in claims:
                if flight.future.done() or self._inflight.get(flight.key) is not flight:
                    continue
                if self._closed:
                    failed.append(flight)
                    continue
                flight.started = flight.by_pool = flight.prefetch = False
                self._enqueue(flight)
        for flight in failed:
            _settle(flight.future, error=RetriableRemoteStorageError(
                f"the chunk loader closed while {flight.key} was loading"))

    def get_many(self, items: Sequence[tuple[str, Load]]) -> list[bytes]:
        """The chunks of ``items``, in the order given: cached ones from the cache, the others
        downloaded in parallel (up to ``threads`` at once on the pool, and on this thread,
        which runs any download still waiting for a pool thread when it needs it).

        Raises:
            RetriableRemoteStorageError: the loader is closed.
            Exception: the error of the first item (in order) whose load failed; downloads
                of later items already started go on and are cached.
        """
        if len(items) <= 1:
            return [self.get(k, f) for k, f in items]
        if self._closed:
            raise RetriableRemoteStorageError("the chunk loader is closed")
        slots: list[bytes | _Flight] = []
        here = True  # the first load to run runs on this thread, at once
        for key, load in items:
            cached = self.cached(key)
            if cached is not None:
                slots.append(cached)
                continue
            with self._lock:
                flight, mine = self._claim(key, load)
                if mine and not here:
                    self._enqueue(flight)
                here = here and not mine
            slots.append(flight)
        return [slot if isinstance(slot, bytes) else self._wait(slot) for slot in slots]

    def discard_prefix(self, prefix: str) -> int:
        """Drop the cached chunks whose keys start with ``prefix`` (a deleted or rekeyed
        segment's), and keep none of them from downloads already in flight (module
        docstring); returns how many cached chunks were dropped. Idempotent."""
        with self._lock:
            self._discard_seq += 1
            oldest = min((f.epoch for f in self._inflight.values()), default=self._discard_seq)
            # a discard no flight in flight predates can no longer matter
            self._discards = [d for d in self._discards if d[0] > oldest]
            if self._inflight:
                self._discards.append((self._discard_seq, prefix))
        return self._discard_cached(prefix)

    def _discard_cached(self, prefix: str) -> int:
        if self.cache is None:
            return 0
        try:
            return self.cache.discard_prefix(prefix)
        except Exception as exc:  # as a failed put: the chunks are then only dead weight
            log.warning("chunk cache discard of %s failed: %s", prefix, exc)
            return 0

    def close(self) -> None:
        """Stop the pool without waiting for it: queued loads are dropped, every reader
        waiting (for any load) gets :class:`RetriableRemoteStorageError` at once, later calls
        raise it. Loads still running finish on their thread and keep nothing. Idempotent."""
        with self._lock:
            self._closed = True
            flights = list(self._inflight.values())
            self._inflight.clear()
            self._readers_queue.clear()
            self._prefetch_queue.clear()
            self._queued_prefetches = 0
            self._prefetched.clear()
            self._work.notify_all()
        for flight in flights:
            _settle(flight.future, error=RetriableRemoteStorageError(
                f"the chunk loader closed while {flight.key} was loading"))


def _settle(future: Future[bytes], *, data: bytes | None = None,
            error: BaseException | None = None) -> None:
    """Answer ``future`` unless it has been answered (close() fails every waiter first)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            assert data is not None
            future.set_result(data)
    except InvalidStateError:
        pass


__all__ = ["ChunkLoader", "Load", "LoaderStats", "SpanLoad", "StreamClaim"]
