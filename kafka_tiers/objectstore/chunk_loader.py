"""Loading chunks through the cache: one download per chunk however many readers want it, and a
bounded pool of downloads running ahead of a sequential reader.

:class:`ChunkLoader` is the storage manager's only way to a chunk: :meth:`ChunkLoader.get` answers
from the cache, joins a download of the same key already in flight, or downloads on the
caller's thread; :meth:`ChunkLoader.prefetch` starts downloads on the pool and returns at once;
:meth:`ChunkLoader.get_many` downloads several chunks in parallel (parallel ranged reads of one
segment).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from kafka_tiers.api.errors import RetriableRemoteStorageError
from kafka_tiers.objectstore.chunk_cache import ChunkCache

log = logging.getLogger(__name__)

Load = Callable[[], bytes]


class ChunkLoader:
    """Single-flight chunk loads through an optional cache.

    Args:
        cache: where loaded chunks are kept (None: nothing is kept, but concurrent loads of
            one key still share one download).
        threads: the download pool's size (prefetches and :meth:`get_many`).
        max_pending: prefetches that may wait for a thread; more are dropped (a prefetch is
            only a hint).

    Thread-safe.
    """

    def __init__(self, cache: ChunkCache | None, threads: int = 4, *,
                 max_pending: int = 256) -> None:
        self.cache = cache
        self.threads = max(1, threads)
        self.max_pending = max_pending
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[bytes]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        self.downloads = 0

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads,
                                                thread_name_prefix="kafka-tiers-chunk")
            return self._pool

    def _claim(self, key: str) -> tuple[Future[bytes], bool]:
        """The future of ``key``'s load and whether the caller must run it."""
        with self._lock:
            future = self._inflight.get(key)
            if future is not None:
                return future, False
            future = Future()
            self._inflight[key] = future
            return future, True

    def _run(self, key: str, load: Load, future: Future[bytes]) -> None:
        try:
            data = load()
        except BaseException as exc:
            with self._lock:
                self._inflight.pop(key, None)
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        if self.cache is not None:
            self.cache.put(key, data)
        with self._lock:
            self._inflight.pop(key, None)
            self.downloads += 1
        future.set_result(data)

    def get(self, key: str, load: Load) -> bytes:
        """The chunk under ``key``: from the cache, from a load of it already in flight, or
        from ``load()`` run on this thread (then kept in the cache).

        Raises:
            Exception: whatever ``load`` raised (every reader waiting on that load gets it;
                nothing is cached, so the next call tries again).
        """
        if self.cache is not None:
            data = self.cache.get(key)
            if data is not None:
                return data
        future, mine = self._claim(key)
        if mine:
            self._run(key, load, future)
        return future.result()

    def prefetch(self, key: str, load: Load) -> None:
        """Start loading ``key`` on the pool unless it is cached or in flight; returns at once.
        A failed prefetch is logged (debug) and forgotten."""
        if self._closed or (self.cache is not None and self._peek(key)):
            return
        with self._lock:
            if key in self._inflight or len(self._inflight) >= self.max_pending:
                return
        future, mine = self._claim(key)
        if not mine:
            return
        try:
            self._executor().submit(self._quiet, key, load, future)
        except RuntimeError:  # shut down
            with self._lock:
                self._inflight.pop(key, None)
            future.cancel()

    def _quiet(self, key: str, load: Load, future: Future[bytes]) -> None:
        self._run(key, load, future)
        if future.exception() is not None:
            log.debug("prefetch of %s failed: %s", key, future.exception())

    def _peek(self, key: str) -> bool:
        peek = getattr(self.cache, "contains", None)
        return bool(peek(key)) if callable(peek) else False

    def get_many(self, items: Sequence[tuple[str, Load]]) -> list[bytes]:
        """The chunks of ``items`` in order, the missing ones downloaded in parallel on the
        pool (the first on this thread).

        Raises:
            Exception: the first failure (in order), once every download started has ended.
        """
        if len(items) <= 1:
            return [self.get(k, f) for k, f in items]
        futures: list[Future[bytes]] = []
        for key, load in items[1:]:
            cached = self.cache.get(key) if self.cache is not None else None
            if cached is not None:
                done: Future[bytes] = Future()
                done.set_result(cached)
                futures.append(done)
                continue
            future, mine = self._claim(key)
            if mine:
                self._executor().submit(self._run, key, load, future)
            futures.append(future)
        first = self.get(*items[0])
        return [first] + [f.result() for f in futures]

    def close(self) -> None:
        """Stop the pool (downloads in flight finish; queued prefetches are dropped)."""
        self._closed = True
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:  # loads dropped from the queue never ran: fail their waiters
            stranded = [f for f in self._inflight.values() if not f.done()]
            self._inflight.clear()
        for future in stranded:
            future.set_exception(RetriableRemoteStorageError("the chunk loader is closed"))


__all__ = ["ChunkLoader", "Load"]
