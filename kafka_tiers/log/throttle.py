"""A byte-rate limiter shared by every replica move of a broker (``intra.broker.throttled.rate``).

A token bucket: tokens accrue at ``rate`` bytes per second up to a small burst; a caller takes
the bytes it is about to move with :meth:`Throttle.acquire` and sleeps while the bucket is in
debt. The bucket starts empty, so a move of ``N`` bytes at rate ``R`` takes ``N / R`` seconds
(plus the copying itself), whatever the chunk size, and several threads sharing one throttle
together stay under ``R``. A rate of ``LONG_MAX`` (the default) or below 1 means unlimited.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kafka_tiers.log.config import LONG_MAX

#: how many seconds of tokens may pile up while nobody moves data (or while a mover waits on a
#: slow fsync, which the bucket then absorbs)
BURST_SECONDS = 0.25


class Throttle:
    """A thread-safe token bucket.

    Args:
        rate: bytes per second; ``None``, ``<= 0`` or ``LONG_MAX`` means unlimited.
        clock: the time source of the bucket (``time.monotonic``; injectable for tests).
    """

    def __init__(self, rate: int | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._rate: float = 0.0
        self._tokens = 0.0
        self._last = clock()
        self._stop = threading.Event()
        self.total_bytes = 0
        self.total_wait = 0.0
        self.set_rate(rate)

    @property
    def rate(self) -> int | None:
        """Bytes per second, or None when unlimited."""
        return int(self._rate) if self._rate > 0 else None

    @property
    def unlimited(self) -> bool:
        return self._rate <= 0

    def set_rate(self, rate: int | None) -> None:
        """Change the rate (takes effect for the next :meth:`acquire`)."""
        with self._lock:
            self._rate = 0.0 if rate is None or rate <= 0 or rate >= LONG_MAX else float(rate)
            self._tokens = min(self._tokens, self._capacity())
            self._last = self._clock()

    def _capacity(self) -> float:
        return self._rate * BURST_SECONDS

    def reserve(self, nbytes: int) -> float:
        """Take ``nbytes`` tokens now; returns how long the caller must wait before using them
        (0 when the bucket had them). Never blocks."""
        with self._lock:
            self.total_bytes += nbytes
            if self._rate <= 0:
                return 0.0
            now = self._clock()
            self._tokens = min(self._capacity(), self._tokens + (now - self._last) * self._rate)
            self._last = now
            self._tokens -= nbytes
            return -self._tokens / self._rate if self._tokens < 0 else 0.0

    def acquire(self, nbytes: int, cancel: threading.Event | None = None) -> float:
        """Take ``nbytes`` tokens, sleeping while the bucket is in debt. Returns the seconds
        slept. Returns early (without error) when ``cancel`` or :meth:`close` is set."""
        wait = self.reserve(nbytes)
        if wait <= 0:
            return 0.0
        start = time.monotonic()
        deadline = start + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self._stop.is_set() or (cancel is not None and cancel.is_set()):
                break
            if cancel is not None:
                cancel.wait(min(left, 0.05))
            else:
                self._stop.wait(left)
        slept = time.monotonic() - start
        with self._lock:
            self.total_wait += slept
        return slept

    def close(self) -> None:
        """Wake every sleeper (shutdown)."""
        self._stop.set()


__all__ = ["BURST_SECONDS", "Throttle"]
