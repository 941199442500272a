"""SIGTERM and SIGINT stop a broker process within its shutdown timeout
(``broker.shutdown.timeout.ms``), for ``kafka-tiers broker start`` and ``cluster start``.

What :class:`StopOnSignal` guarantees
    * The first SIGTERM or SIGINT asks for a clean shutdown: :attr:`StopOnSignal.requested`
      is set, and the command's main thread (which waits on it) runs the shutdown. The
      handler does nothing else that could block: it never calls the broker itself.
    * From that first signal, the process ends within the timeout whatever the shutdown
      does: if it has not finished ``timeout - flush budget`` seconds after the signal, one
      ERROR line names what did not stop and the key, the logs are flushed (for at most the
      flush budget: a fifth of the timeout, at most 2 s), and the process exits with code
      :data:`EXIT_FORCED`. No clean-shutdown marker is written then: the next start recovers
      the logs from their recovery points, as after a crash.
    * A backstop that needs no Python thread to run (``faulthandler``, armed at the first
      signal) ends the process :data:`BACKSTOP_SECONDS` after the timeout with every
      thread's stack on stderr, for the case where a thread holds the interpreter.
    * A second signal during the shutdown only says that the shutdown is under way.
    * A clean shutdown that finishes in time exits with code 0 (the command returns).
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import signal
import sys
import sysconfig
import threading
from collections.abc import Callable
from types import FrameType
from typing import Self

log = logging.getLogger(__name__)

#: the exit code of a process whose shutdown did not finish within its timeout.
EXIT_FORCED = 1

#: seconds after the timeout at which the faulthandler backstop ends the process.
BACKSTOP_SECONDS = 1.0

#: the key of the timeout.
TIMEOUT_KEY = "broker.shutdown.timeout.ms"


class StopOnSignal:
    """Turn SIGTERM / SIGINT into a clean shutdown bounded by ``timeout_ms``.

    Args:
        timeout_ms: ``broker.shutdown.timeout.ms``: how long the shutdown may take from the
            first signal.
        what: what stops, for the ERROR line ("broker 1", "the cluster").
        flush: called when the shutdown overran, before the forced exit, to save what it can
            (it may run while the shutdown is still under way; it must not raise).
        exit_fn: how the process ends (``os._exit``; tests replace it).

    Use :meth:`install` before starting anything, wait on :attr:`requested`, run the
    shutdown, then call :meth:`done`.
    """

    def __init__(self, timeout_ms: int, what: str, *,
                 flush: Callable[[], None] | None = None,
                 exit_fn: Callable[[int], object] = os._exit) -> None:
        self.timeout = max(int(timeout_ms), 1) / 1000.0
        self.what = what
        self.flush = flush
        self._exit = exit_fn
        #: set by the first signal: the main thread runs the shutdown
        self.requested = threading.Event()
        self._done = threading.Event()
        self._armed = False
        # reentrant: the handler may run on the main thread while it holds this lock
        self._lock = threading.RLock()

    def install(self) -> Self:
        """Handle SIGTERM and SIGINT from now on (call from the main thread)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested.is_set():
            log.warning("%s: %s received; the shutdown is under way (it ends within "
                        "%s=%d)", self.what, name, TIMEOUT_KEY, int(self.timeout * 1000))
            return
        log.info("%s: %s received; shutting down (at most %s=%d ms)", self.what, name,
                 TIMEOUT_KEY, int(self.timeout * 1000))
        self.requested.set()
        self.arm()

    def arm(self) -> None:
        """Start the deadline now (the first signal does; a command stopping for another
        reason may too). Idempotent."""
        with self._lock:
            if self._armed or self._done.is_set():
                return
            self._armed = True
        faulthandler.dump_traceback_later(self.timeout + BACKSTOP_SECONDS, exit=True)
        threading.Thread(target=self._watch, name="kafka-tiers-shutdown-deadline",
                         daemon=True).start()

    @property
    def flush_budget(self) -> float:
        """Seconds kept at the end of the timeout for :attr:`flush`."""
        return min(2.0, self.timeout / 5)

    def _watch(self) -> None:
        if self._done.wait(self.timeout - self.flush_budget):
            return
        log.error("%s did not stop within %s=%d ms (the shutdown is at %s); flushing the "
                  "logs and exiting without a clean shutdown (the next start recovers them)",
                  self.what, TIMEOUT_KEY, int(self.timeout * 1000), _where_main_is())
        if self.flush is not None:
            flusher = threading.Thread(target=self._flush, name="kafka-tiers-last-flush",
                                       daemon=True)
            flusher.start()
            flusher.join(self.flush_budget)
        if self._done.is_set():  # the shutdown finished meanwhile after all
            return
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):  # exiting anyway
                handler.flush()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self._exit(EXIT_FORCED)

    def _flush(self) -> None:
        assert self.flush is not None
        try:
            self.flush()
        except Exception as exc:
            log.warning("%s: flushing the logs before exiting failed: %s", self.what, exc)

    def done(self) -> None:
        """The shutdown finished: disarm the deadline and the backstop. Idempotent."""
        with self._lock:
            self._done.set()
            armed = self._armed
        if armed:
            faulthandler.cancel_dump_traceback_later()


def _where_main_is() -> str:
    """``file:line in function`` of the main thread's innermost frame outside the standard
    library (where the command's shutdown waits), or "unknown"."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    stdlib = sysconfig.get_paths()["stdlib"]
    while frame is not None and frame.f_code.co_filename.startswith(stdlib) \
            and frame.f_back is not None:
        frame = frame.f_back
    if frame is None:
        return "unknown"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


__all__ = ["BACKSTOP_SECONDS", "EXIT_FORCED", "TIMEOUT_KEY", "StopOnSignal"]
