"""The dedicated thread pool of remote reads (Kafka's ``RemoteLogReader`` pool).

Remote reads never run on the caller's thread: a slow or hung remote tier then costs a reader
thread, never a produce or a local fetch. :meth:`RemoteReaderPool.run` waits at most the
timeout (``remote.fetch.max.wait.ms``) and raises
:class:`~kafka_tiers.api.RetriableRemoteStorageError` when it passes; the read keeps its thread
until the remote call returns. At most ``remote.log.reader.max.pending.tasks`` reads may wait
for a thread; more are refused at once, retriably.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

from kafka_tiers.api import RetriableRemoteStorageError

T = TypeVar("T")


class RemoteReaderPool:
    """A bounded pool of reader threads.

    Args:
        threads: ``remote.log.reader.threads``.
        max_pending: ``remote.log.reader.max.pending.tasks``: reads queued beyond the busy
            threads.
        name: the thread name prefix.
    """

    def __init__(self, threads: int, max_pending: int, *,
                 name: str = "kafka-tiers-remote-reader") -> None:
        self.threads = threads
        self.max_pending = max_pending
        self._executor = concurrent.futures.ThreadPoolExecutor(threads,
                                                               thread_name_prefix=name)
        self._lock = threading.Lock()
        self._outstanding = 0
        self._closed = False

    @property
    def outstanding(self) -> int:
        """Reads running or waiting for a thread."""
        with self._lock:
            return self._outstanding

    @property
    def queued(self) -> int:
        """Reads waiting for a thread (Kafka's ``RemoteLogReaderTaskQueueSize``)."""
        with self._lock:
            return max(0, self._outstanding - self.threads)

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Start ``fn`` on a reader thread.

        Raises:
            RetriableRemoteStorageError: the pool is closed or too many reads are pending.
        """
        with self._lock:
            if self._closed:
                raise RetriableRemoteStorageError("the remote reader pool is shut down")
            if self._outstanding >= self.threads + self.max_pending:
                raise RetriableRemoteStorageError(
                    f"too many remote reads pending ({self._outstanding - self.threads}, "
                    f"remote.log.reader.max.pending.tasks={self.max_pending}); retry later")
            self._outstanding += 1
        try:
            future = self._executor.submit(fn)
        except RuntimeError:
            with self._lock:
                self._outstanding -= 1
            raise RetriableRemoteStorageError("the remote reader pool is shut down") from None
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: concurrent.futures.Future[T]) -> None:
        with self._lock:
            self._outstanding -= 1

    def run(self, fn: Callable[[], T], timeout_ms: int, what: str) -> T:
        """Run ``fn`` on a reader thread and wait at most ``timeout_ms`` for its result.

        Args:
            what: the read in words, for the timeout message (no secrets).

        Raises:
            RetriableRemoteStorageError: the timeout passed (``remote.fetch.max.wait.ms``), or
                the pool refused the read.
            Exception: whatever ``fn`` raised.
        """
        future = self.submit(fn)
        try:
            return future.result(timeout=timeout_ms / 1000)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RetriableRemoteStorageError(
                f"remote read of {what} timed out after {timeout_ms} ms "
                f"(remote.fetch.max.wait.ms); the remote tier is slow or unavailable, retry "
                f"later") from None

    def shutdown(self) -> None:
        """Refuse new reads, drop queued ones, and wait for the running ones to return."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)


__all__ = ["RemoteReaderPool"]
