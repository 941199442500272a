"""Byte-rate quotas of the remote log manager (Kafka's KIP-956: ``RLMQuotaManager``).

A broker has one copy quota (``remote.log.manager.copy.max.bytes.per.second``) shared by every
segment copy, and one fetch quota (``remote.log.manager.fetch.max.bytes.per.second``) shared by
every remote read. Each measures its rate as Kafka's sampled ``Rate`` does: the bytes recorded
in the last ``window.num`` windows of ``window.size.seconds`` each, divided by the time they
span (never less than ``window.num - 1`` whole windows, so a first burst is not a huge rate).

Copy (:meth:`RateQuota.try_acquire`)
    Before each segment copy the task asks whether the broker's copy rate is at or under the
    quota; if so the segment's bytes are recorded at once (as Kafka) and it is copied. If not,
    nothing waits: the answer is the throttle time, the task ends its copy phase (its
    retention still runs) and is rescheduled after it, so no pool thread is held while the
    quota is exceeded. A copy in progress is never cut; a segment larger than the quota still
    goes once the rate allows. Partitions told to come back keep their place in a line
    (arrival order): while one is ahead of it, a partition is not granted a copy, so one
    partition's backlog never starves another's. A place is kept ``throttle time +
    WAITER_GRACE_S`` (a partition that does not come back loses it) or until :meth:`forget`.
Fetch (:meth:`RateQuota.exceeded`)
    A remote read is skipped while the fetch rate is over the quota (the Fetch API answers
    the partition with no records and no error: the client asks again); the bytes of every
    read done are recorded.
Throttle time
    Every wait (copy) and every skip (fetch: the time until the rate is back under the quota)
    is recorded in a windowed average and maximum (Kafka's ``remote-copy-throttle-time-avg``
    / ``-max`` and ``remote-fetch-throttle-time-avg`` / ``-max``).

``max.bytes.per.second`` at its default (Long.MAX_VALUE) means unlimited: nothing is measured
against it and nobody waits. Thread-safe.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable, Hashable

#: Kafka's Long.MAX_VALUE: the default of the max.bytes.per.second keys (unlimited).
UNLIMITED = 2 ** 63 - 1


class WindowedRate:
    """Kafka's sampled rate: amounts recorded into ``windows`` windows of ``window_s``
    seconds each; :meth:`rate` is their sum over the time they span.

    Args:
        windows: how many windows are kept (``*.quota.window.num``, at least 1).
        window_s: each window's length in seconds (``*.quota.window.size.seconds``).
        clock: seconds (monotonic).
    """

    def __init__(self, windows: int, window_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if windows < 1 or window_s <= 0:
            raise ValueError(f"a windowed rate needs at least one window of a positive length "
                             f"(got {windows} windows of {window_s} s)")
        self.windows = windows
        self.window_s = float(window_s)
        self._clock = clock
        #: (window start, amount), oldest first
        self._samples: collections.deque[list[float]] = collections.deque()

    def _purge(self, now: float) -> None:
        horizon = now - self.windows * self.window_s
        while self._samples and self._samples[0][0] + self.window_s <= horizon:
            self._samples.popleft()

    def record(self, amount: float, now: float | None = None) -> None:
        """Add ``amount`` to the current window."""
        now = self._clock() if now is None else now
        self._purge(now)
        if not self._samples or now >= self._samples[-1][0] + self.window_s:
            self._samples.append([now, 0.0])
            while len(self._samples) > self.windows:
                self._samples.popleft()
        self._samples[-1][1] += amount

    def span(self, now: float | None = None) -> float:
        """Seconds the rate is measured over (Kafka's ``Rate.windowSize``): from the oldest
        window kept to now, at least ``windows - 1`` whole windows."""
        now = self._clock() if now is None else now
        self._purge(now)
        elapsed = now - self._samples[0][0] if self._samples else 0.0
        return max(elapsed, (self.windows - 1) * self.window_s, self.window_s)

    def total(self, now: float | None = None) -> float:
        """The amount recorded in the windows kept."""
        now = self._clock() if now is None else now
        self._purge(now)
        return sum(s[1] for s in self._samples)

    def rate(self, now: float | None = None) -> float:
        """Amount per second over :meth:`span`."""
        now = self._clock() if now is None else now
        return self.total(now) / self.span(now)


class WindowedStat:
    """Average and maximum of the values recorded in the last ``windows * window_s`` seconds
    (0 when none)."""

    def __init__(self, windows: int, window_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.horizon_s = windows * float(window_s)
        self._clock = clock
        self._values: collections.deque[tuple[float, float]] = collections.deque()
        self._lock = threading.Lock()

    def _purge(self, now: float) -> None:
        while self._values and self._values[0][0] <= now - self.horizon_s:
            self._values.popleft()

    def record(self, value: float) -> None:
        """Add one value."""
        with self._lock:
            now = self._clock()
            self._purge(now)
            self._values.append((now, float(value)))

    def avg(self) -> float:
        """The average of the values kept."""
        with self._lock:
            self._purge(self._clock())
            if not self._values:
                return 0.0
            return sum(v for _, v in self._values) / len(self._values)

    def max(self) -> float:
        """The largest value kept."""
        with self._lock:
            self._purge(self._clock())
            return max((v for _, v in self._values), default=0.0)


class RateQuota:
    """A broker-wide byte-rate quota (see the module docstring).

    Args:
        max_bytes_per_second: the bound (:data:`UNLIMITED`: none).
        windows, window_s: the rate's sampling (``*.quota.window.num`` and
            ``*.quota.window.size.seconds``).
        clock: seconds (monotonic); the line's places expire in real time.
    """

    #: how soon a partition behind another in the line (:meth:`try_acquire`) asks again
    POLL_S = 0.1
    #: how long past its throttle time a partition told to come back keeps its place in line
    WAITER_GRACE_S = 2.0

    def __init__(self, max_bytes_per_second: int, windows: int, window_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bound = int(max_bytes_per_second)
        self._rate = WindowedRate(windows, window_s, clock)
        self.throttle_ms = WindowedStat(windows, window_s, clock)
        self._clock = clock
        self._lock = threading.Lock()
        #: try_acquire's line: key -> monotonic time its place expires, in arrival order
        self._waiters: dict[Hashable, float] = {}

    @property
    def unlimited(self) -> bool:
        """Whether the quota is unlimited (its default)."""
        return self.bound >= UNLIMITED

    def rate(self) -> float:
        """The measured bytes per second."""
        with self._lock:
            return self._rate.rate()

    def exceeded(self) -> bool:
        """Whether the measured rate is above the bound (never when unlimited)."""
        return self.throttle_time_ms() > 0

    def throttle_time_ms(self) -> float:
        """How long until the rate is back at the bound if nothing more is recorded (Kafka's
        ``QuotaUtils.throttleTime``: ``(rate - bound) / bound * span``); 0 when under it."""
        if self.unlimited:
            return 0.0
        with self._lock:
            now = self._clock()
            if self.bound <= 0 and self._rate.rate(now) > self.bound:
                return self._rate.span(now) * 1000
            return self._over_ms(now)

    def _over_ms(self, now: float) -> float:
        """Milliseconds until the measured rate is back at the bound if nothing more is
        recorded (a bound below 1 counted as 1); 0 when at or under it. The caller holds
        the lock."""
        rate = self._rate.rate(now)
        if rate <= self.bound:
            return 0.0
        return (rate - self.bound) / max(self.bound, 1) * self._rate.span(now) * 1000

    def record(self, amount: int) -> None:
        """Count ``amount`` bytes against the quota (also when unlimited: the rate is a
        metric)."""
        with self._lock:
            self._rate.record(amount)

    def try_acquire(self, amount: int, key: Hashable) -> float:
        """Grant a copy of ``amount`` bytes now, never waiting: granted (``amount`` recorded,
        0.0 returned) when the rate is at or under the bound and no other live key is ahead
        of ``key`` in the line. Otherwise returns the milliseconds after which ``key`` should
        ask again (the throttle time, or :attr:`POLL_S` when only another key ahead stands
        in the way; at least 1) and keeps ``key``'s place in the line (recorded in
        :attr:`throttle_ms`). Unlimited: always granted."""
        if self.unlimited:
            self.record(amount)
            return 0.0
        with self._lock:
            wall = time.monotonic()
            for k in [k for k, expiry in self._waiters.items() if expiry < wall and k != key]:
                del self._waiters[k]  # did not come back in time: loses its place
            over_ms = self._over_ms(self._clock())
            if over_ms <= 0 and next(iter(self._waiters), key) == key:
                self._waiters.pop(key, None)
                self._rate.record(amount)
                return 0.0
            wait_ms = max(over_ms if over_ms > 0 else self.POLL_S * 1000, 1.0)
            self._waiters[key] = wall + wait_ms / 1000 + self.WAITER_GRACE_S  # keeps its place
        self.throttle_ms.record(wait_ms)
        return wait_ms

    def forget(self, key: Hashable) -> None:
        """``key`` no longer asks (its partition stopped or lost its leadership): its place
        in :meth:`try_acquire`'s line is given up. Idempotent."""
        with self._lock:
            self._waiters.pop(key, None)

    def note_skip(self) -> float:
        """A read skipped because the quota is exceeded: its throttle time (until the rate
        is back under the bound) is recorded and returned, in milliseconds."""
        ms = self.throttle_time_ms()
        if ms > 0 and math.isfinite(ms):
            self.throttle_ms.record(ms)
        return ms


__all__ = ["UNLIMITED", "RateQuota", "WindowedRate", "WindowedStat"]
