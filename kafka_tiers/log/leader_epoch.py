"""The leader epoch cache of a partition (``leader-epoch-checkpoint``), as Kafka's
``LeaderEpochFileCache``: which leader epoch started at which offset.

Changes are kept in memory and written to the checkpoint file (crash-safely) by
:meth:`LeaderEpochCache.flush`, which :meth:`~kafka_tiers.log.log.Log.flush` calls before it
advances the recovery point, and so does closing the log. That is Kafka's rule since
KAFKA-15046: an fsync per change made a broker taking over thousands of partitions spend
milliseconds on each. It is safe because every entry the file may lack starts at or above the
recovery point, and recovery after a crash re-reads those batches and assigns their epochs
again; entries the file holds beyond the log end (a truncation not yet written) are dropped
when the log opens.

The file is checked before it is used (:func:`entries_problem`, and by the log against its
offsets): a file that is malformed or out of order is reported and ignored, and the log rebuilds
the cache from its batches' partition leader epochs (:meth:`LeaderEpochCache.rebuild`)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kafka_tiers.log.checkpoints import LeaderEpochCheckpointFile
from kafka_tiers.log.errors import LogDirError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


def entries_problem(entries: list[EpochEntry]) -> str | None:
    """Why these checkpoint entries cannot describe a log, or None: epochs and start offsets
    must be >= 0 and strictly increase from one entry to the next."""
    prev: EpochEntry | None = None
    for entry in entries:
        if entry.epoch < 0 or entry.start_offset < 0:
            return f"negative entry {entry.epoch} {entry.start_offset}"
        if prev is not None and entry.epoch <= prev.epoch:
            return f"epoch {entry.epoch} does not increase after {prev.epoch}"
        if prev is not None and entry.start_offset <= prev.start_offset:
            return (f"start offset {entry.start_offset} of epoch {entry.epoch} does not "
                    f"increase after {prev.start_offset}")
        prev = entry
    return None


class LeaderEpochCache:
    """Epoch -> start offset, kept sorted by both; persisted by :meth:`flush`.

    Args:
        checkpoint_path: the ``leader-epoch-checkpoint`` file, or None for memory only.
    """

    def __init__(self, checkpoint_path: str | Path | None) -> None:
        self._file = LeaderEpochCheckpointFile(checkpoint_path) if checkpoint_path else None
        self._lock = threading.RLock()
        self._entries: list[EpochEntry] = []
        self._dirty = False
        #: why the checkpoint file cannot be used (malformed, or entries out of order), or
        #: None; the cache then starts empty and the log rebuilds it (:meth:`rebuild`).
        self.load_problem: str | None = None
        if self._file is not None:
            try:
                entries = [EpochEntry(e, o) for e, o in self._file.read()]
            except LogDirError as exc:
                self.load_problem = str(exc)
            else:
                self.load_problem = entries_problem(entries)
                if self.load_problem is None:
                    self._entries = entries

    @property
    def path(self) -> Path | None:
        return self._file.path if self._file else None

    def move_to(self, path: Path) -> None:
        """Persist to another file from now on (after the partition dir was renamed)."""
        with self._lock:
            self._file = LeaderEpochCheckpointFile(path)

    @property
    def dirty(self) -> bool:
        """Whether the cache holds changes its checkpoint file does not have yet."""
        with self._lock:
            return self._dirty

    def flush(self) -> None:
        """Write the entries to the checkpoint file (temp file, fsync, rename) if they changed
        since the last write; a no-op for a memory-only cache."""
        with self._lock:
            if self._dirty and self._file is not None:
                self._file.write(self._entries)
            self._dirty = False

    def write_to(self, path: Path) -> None:
        """Write the current entries to another checkpoint file (a copy of the partition
        elsewhere), crash-safely, whatever this cache's own file holds."""
        with self._lock:
            LeaderEpochCheckpointFile(path).write(self._entries)

    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``. Entries with an epoch >= it or a
        start offset >= it are replaced (Kafka's rule). True when the cache changed.

        Raises:
            ValueError: a negative epoch or offset.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch {epoch} and start offset {start_offset} must be >= 0")
        with self._lock:
            if self._entries:
                last = self._entries[-1]
                if last.epoch == epoch and start_offset >= last.start_offset:
                    return False
            while self._entries and (self._entries[-1].epoch >= epoch
                                     or self._entries[-1].start_offset >= start_offset):
                self._entries.pop()
            self._entries.append(EpochEntry(epoch, start_offset))
            self._dirty = True
            return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for a follower's OffsetsForLeaderEpoch request, as Kafka:
        the latest epoch ends at the log end offset; an older one ends where the next higher
        epoch starts (the epoch returned is the largest known <= requested); an unknown
        epoch above the latest gives ``(-1, -1)``."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
            if higher is None:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = None
            for e in self._entries:
                if e.epoch <= requested_epoch:
                    floor = e
            if floor is None:
                return requested_epoch, higher.start_offset
            return floor.epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at ``offset`` was written in, when known."""
        with self._lock:
            found = None
            for e in self._entries:
                if e.start_offset <= offset:
                    found = e.epoch
            return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        with self._lock:
            before = len(self._entries)
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            if len(self._entries) != before:
                self._dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the last of them is kept, moved to
        start at ``start_offset`` (log start advanced)."""
        with self._lock:
            removed = [e for e in self._entries if e.start_offset <= start_offset]
            if not removed:
                return
            keep = [e for e in self._entries if e.start_offset > start_offset]
            first = EpochEntry(removed[-1].epoch, start_offset)
            new = [first, *keep]
            if new != self._entries:
                self._entries = new
                self._dirty = True

    def rebuild(self, epochs: Iterable[tuple[int, int]]) -> None:
        """Replace every entry by assigning ``(epoch, start offset)`` pairs in log order (the
        partition leader epochs of the log's batches), with :meth:`assign`'s rules as Kafka
        rebuilds its cache; the checkpoint file is rewritten at once and
        :attr:`load_problem` is cleared."""
        with self._lock:
            self._entries = []
            for epoch, start in epochs:
                self.assign(epoch, start)
            self._dirty = True
            self.load_problem = None
            self.flush()

    def clear(self) -> None:
        """Drop every entry, in the checkpoint file too at once (the log was emptied and
        starts afresh: no entry of the file may survive a crash)."""
        with self._lock:
            self._entries = []
            self._dirty = True
            self.flush()


__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEntry", "LeaderEpochCache",
           "entries_problem"]
