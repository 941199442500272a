"""The long poll of Fetch: a fetch that cannot give ``min_bytes`` yet waits, without polling,
until records become readable or its ``max_wait_ms`` passes (Kafka's ``DelayedFetch``).

:class:`DataArrived` is one broker-wide signal: a version number bumped whenever records may
have become readable by a consumer (a high watermark moved, records were appended). The
broker notifies it (standalone: after a produce moved the high watermark; a cluster member:
its replica manager's ``on_data`` whenever a leader's high watermark moves). A waiting fetch
remembers the version it read at, reads again only when the version moved, and sleeps on a
condition variable in between: no busy loop, one wake-up per data arrival.
"""

from __future__ import annotations

import threading
import time


class DataArrived:
    """Records may have become readable somewhere on this broker (see the module docstring).

    Thread-safe. :meth:`close` (at broker stop) wakes every waiter and makes later waits
    return at once, so a stopping broker never waits for a long poll to time out.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._version = 0
        self._closed = False

    @property
    def version(self) -> int:
        """The current version (read it before reading the logs, wait with it after)."""
        return self._version

    @property
    def closed(self) -> bool:
        return self._closed

    def notify(self) -> None:
        """Records may have become readable: bump the version and wake every waiter."""
        with self._cond:
            self._version += 1
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every waiter; waits return at once from now on. Idempotent."""
        with self._cond:
            self._closed = True
            self._version += 1
            self._cond.notify_all()

    def wait(self, seen: int, deadline: float) -> int:
        """Wait until the version differs from ``seen``, ``deadline`` (``time.monotonic()``)
        passes or the signal is closed; returns the version then."""
        with self._cond:
            while self._version == seen and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._version


__all__ = ["DataArrived"]
