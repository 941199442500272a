"""A process-wide LRU of the open file descriptors held by logs (KIP-263's lazy indexes, taken
to active segments too).

A broker holds tens of thousands of segments; keeping descriptors open for each exhausts the
process limit (1,024 by default) long before memory runs out. So every descriptor a log keeps
between calls is one *handle* registered here:

* a segment's ``.log`` descriptor (active or not): :class:`~kafka_tiers.log.segment.LogSegment`;
* an index's memory map (``.index``, ``.timeindex``, active or not):
  :class:`~kafka_tiers.log.index.OffsetIndex` / :class:`~kafka_tiers.log.index.TimeIndex`.
  CPython's :class:`mmap.mmap` keeps a ``dup`` of the descriptor it mapped (Linux itself needs
  none once mapped, but CPython < 3.13 has no ``trackfd=False``), so the index closes its own
  descriptor right after mapping and a mapped index costs exactly one descriptor.

``.txnindex`` files, checkpoints and snapshots are opened per call and closed at once, so they
hold nothing between calls.

Contract of the cache: one registered handle is one open descriptor. :meth:`HandleCache.touch`
records a use; when more than ``capacity`` handles are registered, the least recently used are
asked to :meth:`~Releasable.release`: a handle that is busy (its lock is held) says so and stays
registered (at the most recent end), so the count stays exact; a released handle reopens
transparently on its next use (an active segment's pending fsync is kept as a flag and done on
the next flush, by reopening the file: ``fsync`` flushes the inode, whichever descriptor).
:meth:`HandleCache.forget` is called by an owner that closed its descriptor itself.

The cache is process-wide because the descriptor limit (``RLIMIT_NOFILE``) is: several brokers
in one process share it. Its capacity is the broker key ``log.open.files.max``
(:func:`configure`); Kafka has no such key (it keeps two descriptors per segment open and
operators raise the limit instead).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Protocol

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

#: the default of ``log.open.files.max``: far enough under the default limit of 1,024 to leave
#: room for sockets, checkpoints and the interpreter's own files.
DEFAULT_CAPACITY = 512

#: the smallest capacity accepted: an active segment needs its log and two index maps at once.
MIN_CAPACITY = 8


class Releasable(Protocol):
    """Something holding one OS descriptor it can close while idle and reopen on demand."""

    def release(self) -> bool:
        """Close the descriptor unless it is in use; True when closed (it reopens lazily)."""


class HandleCache:
    """Least-recently-used tracking of releasable handles, capped at ``capacity``.

    Thread-safe; no lock of the cache is held while a handle is released, so a handle may call
    :meth:`touch` while holding its own lock.

    Args:
        capacity: the most handles (descriptors) kept open between uses (>= ``MIN_CAPACITY``).

    Raises:
        ValueError: ``capacity`` below ``MIN_CAPACITY``.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[int, Releasable] = OrderedDict()
        self._last = 0  # id of the most recent one: touching it again needs no lock
        self.capacity = capacity
        #: handles closed by the cache since start (a high rate means the cap is too low)
        self.evictions = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < MIN_CAPACITY:
            raise ValueError(f"log.open.files.max must be an integer >= {MIN_CAPACITY}, "
                             f"got {value!r}")
        self._capacity = value
        self._evict(None)

    def touch(self, owner: Releasable) -> None:
        """Record a use of ``owner`` (registering it); may release the least recently used
        others. Idempotent for a registered owner (it only moves to the recent end).

        The caller holds ``owner``'s own lock, so ``owner`` cannot be released meanwhile."""
        key = id(owner)
        if key == self._last:  # reset under the lock whenever that one leaves the cache
            return
        with self._lock:
            self._last = key
            if key in self._items:
                self._items.move_to_end(key)
                return
            self._items[key] = owner
            if len(self._items) <= self._capacity:
                return
        self._evict(owner)

    def _evict(self, keep: Releasable | None) -> None:
        victims: list[Releasable] = []
        with self._lock:
            # Only look at as many as must go: a busy one goes back to the recent end.
            excess = len(self._items) - self._capacity
            for key in list(itertools.islice(self._items, max(excess, 0))):
                victim = self._items[key]
                if victim is keep:
                    continue
                del self._items[key]
                if key == self._last:
                    self._last = 0
                victims.append(victim)
        busy: list[Releasable] = []
        for victim in victims:
            if victim.release():
                self.evictions += 1
            else:
                busy.append(victim)
        if busy:
            with self._lock:
                for victim in busy:  # still open: keep counting it
                    self._items.setdefault(id(victim), victim)

    def forget(self, owner: Releasable) -> None:
        """Stop tracking ``owner`` (its owner closed the descriptor). Idempotent."""
        with self._lock:
            self._items.pop(id(owner), None)
            if id(owner) == self._last:
                self._last = 0

    def __contains__(self, owner: object) -> bool:
        with self._lock:
            return id(owner) in self._items

    def __len__(self) -> int:
        """The descriptors held open by logs right now."""
        return len(self._items)

    def release_all(self) -> int:
        """Release every idle handle (tests, tools); returns how many were closed."""
        with self._lock:
            victims = list(self._items.values())
            self._items.clear()
            self._last = 0
        closed = 0
        busy = []
        for victim in victims:
            if victim.release():
                closed += 1
            else:
                busy.append(victim)
        with self._lock:
            for victim in busy:
                self._items.setdefault(id(victim), victim)
        return closed


#: the shared cache of every log's descriptors (see the module doc).
HANDLES = HandleCache()

#: Prometheus family names of :class:`OpenFilesCollector` (as the JMX exporter would name
#: ``kafka.log:type=LogManager,name=OpenFileDescriptors`` etc.; Kafka has no such metrics).
OPEN_FILES_METRIC = "kafka_log_logmanager_openfiledescriptors"
OPEN_FILES_MAX_METRIC = "kafka_log_logmanager_openfiledescriptorsmax"
EVICTIONS_METRIC = "kafka_log_logmanager_openfileevictions"


class OpenFilesCollector(Collector):
    """Exports the handle cache (process-wide) in a broker's Prometheus registry: descriptors
    held by logs now (gauge), the cap ``log.open.files.max`` (gauge) and how many were closed
    to stay under it (counter)."""

    def __init__(self, cache: HandleCache | None = None) -> None:
        self.cache = cache if cache is not None else HANDLES

    def collect(self) -> Iterator[Metric]:
        for name, kind, doc, value in (
                (OPEN_FILES_METRIC, "gauge", "File descriptors held open by logs.",
                 len(self.cache)),
                (OPEN_FILES_MAX_METRIC, "gauge", "log.open.files.max.", self.cache.capacity),
                (EVICTIONS_METRIC, "counter",
                 "Log descriptors closed to stay under log.open.files.max.",
                 self.cache.evictions)):
            metric = Metric(name, doc, kind)
            metric.add_sample(name + ("_total" if kind == "counter" else ""), {}, float(value))
            yield metric


def configure(capacity: int) -> None:
    """Set the process-wide cap (``log.open.files.max``); closes the excess at once.

    Raises:
        ValueError: ``capacity`` below ``MIN_CAPACITY``.
    """
    HANDLES.capacity = capacity


__all__ = ["DEFAULT_CAPACITY", "EVICTIONS_METRIC", "HANDLES", "MIN_CAPACITY",
           "OPEN_FILES_MAX_METRIC", "OPEN_FILES_METRIC", "HandleCache", "OpenFilesCollector",
           "Releasable", "configure"]
