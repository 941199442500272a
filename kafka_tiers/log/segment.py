"""One log segment: a ``.log`` file of record batches plus its ``.index``, ``.timeindex`` and
``.txnindex`` files, named by the segment's 20-digit base offset.

Constructing a segment touches no file (KIP-263): the log file's size, the indexes and the
largest timestamp are read on first use. Every descriptor a segment keeps between calls (its
``.log`` file, writable when active, and the maps of its two indexes) is registered in the
shared handle cache (:mod:`kafka_tiers.log.handles`), which closes the least recently used when
``log.open.files.max`` is reached; the next use reopens them. A write not yet fsynced is
remembered across such a release and synced by the next :meth:`LogSegment.flush`. A segment is
not thread-safe for writes: its :class:`~kafka_tiers.log.log.Log` serialises them.

Index maintenance follows Kafka's ``LogSegment``: while appending (or recovering), an offset
index entry ``(batch last offset, batch position)`` and a time index entry (largest timestamp so
far and its offset) are added before a batch when more than ``index.interval.bytes`` were
written since the previous entry; the time index gets a final entry when the segment is rolled.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from kafka_tiers.log.errors import CorruptIndexError, CorruptRecordError, LogClosedError
from kafka_tiers.log.handles import HANDLES
from kafka_tiers.log.index import OffsetIndex, TimeIndex, TimestampOffset
from kafka_tiers.log.names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file_name,
)
from kafka_tiers.log.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    RecordBatch,
    earlier_batch_is_suspect,
    leader_epoch_problem,
    offset_order_problem,
)
from kafka_tiers.log.txnindex import TransactionIndex

_PEEK = struct.Struct(">qiibIhi")  # baseOffset, length, epoch, magic, crc, attrs, lastDelta
_PEEK_SIZE = _PEEK.size  # 27
_SCAN_CHUNK = 4096
_RECOVER_CHUNK = 1024 * 1024


class BatchInfo(NamedTuple):
    """What an append knows of each batch it writes."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int


class BatchHeader(NamedTuple):
    """A batch found by scanning a segment: where it is and which offsets it holds."""

    position: int
    base_offset: int
    last_offset: int
    size: int
    #: the batch's partitionLeaderEpoch (outside the CRC: checked by the epoch rules)
    leader_epoch: int = -1


@dataclass(frozen=True)
class SegmentInfo:
    """A read-only description of a segment, for tiered storage and tools.

    ``next_offset`` is one past the segment's last offset; ``max_timestamp`` is -1 when no
    record carries a timestamp; ``txn_index_path`` is None when no transaction was aborted in
    the segment; ``producer_snapshot_path`` is the producer snapshot at ``next_offset`` (set by
    :meth:`Log.inactive_segments` when it exists).
    """

    base_offset: int
    next_offset: int
    max_timestamp: int
    size: int
    log_path: Path
    offset_index_path: Path
    time_index_path: Path
    txn_index_path: Path | None
    producer_snapshot_path: Path | None = None


class RecoveryResult(NamedTuple):
    """What recovering a segment found: bytes cut off the tail and why (None when valid)."""

    truncated_bytes: int
    valid_bytes: int
    problem: str | None
    batches: int


class LogSegment:
    """A segment of a partition log.

    Args:
        directory: the partition directory.
        base_offset: the first offset the segment may hold.
        index_interval_bytes: ``index.interval.bytes``.
        max_index_size: ``segment.index.bytes`` / ``log.index.size.max.bytes``.
        active: open writable (the log's last segment).
        file_suffix: ``""`` normally, ``".deleted"`` etc. for files being removed.
    """

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int = 4096,
                 max_index_size: int = 10 * 1024 * 1024, active: bool = False,
                 created_ms: int | None = None) -> None:
        self.dir = directory if isinstance(directory, Path) else Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self._active = active
        self._fd: int | None = None
        self._fd_writable = False
        self._fd_lock = threading.RLock()
        self._unsynced = False  # appended since the last fsync (survives a release)
        self._size: int | None = None
        self._next_offset: int | None = None
        self._max_ts: TimestampOffset | None = None
        self._bytes_since_index = 0
        self._rolling_ts: int | None = None
        self._rolling_ts_loaded = False
        self._created_ms = created_ms
        self._closed = False
        #: True once the segment passed a sanity check or was recovered (KIP-263).
        self.checked = False

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path})"

    # Files and indexes are built on first use: constructing a segment must stay cheap for
    # brokers with tens of thousands of them (KIP-263).
    @cached_property
    def _name(self) -> str:
        return segment_file_name(self.base_offset, "")

    # The os calls use plain strings: building a Path per file is a measurable share of the
    # start-up of a broker with tens of thousands of partitions.
    @cached_property
    def _prefix(self) -> str:
        return os.path.join(os.fspath(self.dir), self._name)

    @cached_property
    def _log_file(self) -> str:
        return self._prefix + LOG_SUFFIX

    @cached_property
    def log_path(self) -> Path:
        return Path(self._log_file)

    @cached_property
    def offset_index(self) -> OffsetIndex:
        return OffsetIndex(self._prefix + INDEX_SUFFIX, self.base_offset,
                           max_index_size=self.max_index_size, writable=self._active)

    @cached_property
    def time_index(self) -> TimeIndex:
        return TimeIndex(self._prefix + TIME_INDEX_SUFFIX, self.base_offset,
                         max_index_size=self.max_index_size, writable=self._active)

    @cached_property
    def txn_index(self) -> TransactionIndex:
        return TransactionIndex(self._prefix + TXN_INDEX_SUFFIX, self.base_offset)

    # ------------------------------------------------------------------ files
    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_interval_bytes: int = 4096,
               max_index_size: int = 10 * 1024 * 1024) -> LogSegment:
        """Create a new, empty active segment (its files too). Stale files of the same name
        are replaced."""
        seg = cls(directory, base_offset, index_interval_bytes=index_interval_bytes,
                  max_index_size=max_index_size, active=True,
                  created_ms=int(time.time() * 1000))
        # created and closed at once: the first append opens it through the handle cache
        os.close(os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                         0o644))
        seg._size = 0
        seg._next_offset = base_offset
        seg._max_ts = TimestampOffset(-1, base_offset)
        seg._rolling_ts_loaded = True
        seg.txn_index.path.unlink(missing_ok=True)
        seg.offset_index.preallocate()  # the preallocated files, not mapped yet
        seg.time_index.preallocate()
        seg.checked = True
        return seg

    @property
    def active(self) -> bool:
        return self._active

    def release(self) -> bool:
        """Close the ``.log`` descriptor unless in use, active segment included (reopened on
        next use; a pending fsync is done by the next :meth:`flush`). True when closed."""
        if not self._fd_lock.acquire(blocking=False):
            return False
        try:
            self._close_fd()
            return True
        finally:
            self._fd_lock.release()

    def _close_fd(self) -> None:
        """Close the ``.log`` descriptor if open and stop counting it (caller holds the lock
        or owns the segment exclusively)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        HANDLES.forget(self)

    def _get_fd(self) -> int:
        """The ``.log`` descriptor, opened if needed (writable when active); records the use
        in the handle cache (the caller holds ``_fd_lock``).

        Raises:
            LogClosedError: the segment was closed.
            OSError: the open failed (EMFILE when the process is out of descriptors).
        """
        if self._closed:
            raise LogClosedError(f"segment {self.log_path} is closed")
        if self._fd is None:
            if self._active:
                self._fd = os.open(self._log_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                                   0o644)
                self._fd_writable = True
            else:
                self._fd = os.open(self._log_file, os.O_RDONLY | os.O_NOFOLLOW)
                self._fd_writable = False
        HANDLES.touch(self)
        return self._fd

    def pread(self, size: int, position: int) -> bytes:
        """Read up to ``size`` bytes at ``position`` of the log file."""
        with self._fd_lock:
            return os.pread(self._get_fd(), size, position)

    def dup_fd(self) -> int:
        """A descriptor of the caller's own on the ``.log`` file (``os.dup``; the caller
        closes it): reads through it see the file's bytes even after the segment was
        closed, renamed or deleted. It is outside ``log.open.files.max``'s count.

        Raises:
            LogClosedError: the segment was closed.
            OSError: the process is out of descriptors (EMFILE).
        """
        with self._fd_lock:
            return os.dup(self._get_fd())

    def pread_into(self, size: int, position: int) -> bytearray:
        """Read up to ``size`` bytes at ``position`` into a new bytearray (one copy)."""
        buf = bytearray(size)
        with self._fd_lock:
            n = os.preadv(self._get_fd(), [buf], position)
        if n < size:
            del buf[n:]
        return buf

    @property
    def size(self) -> int:
        """Bytes in the ``.log`` file (a stat on first use)."""
        if self._size is None:
            with self._fd_lock:
                if self._fd is not None:
                    self._size = os.fstat(self._fd).st_size
                else:
                    self._size = os.stat(self._log_file).st_size
        return self._size

    @property
    def created_ms(self) -> int:
        if self._created_ms is None:
            try:
                self._created_ms = int(os.stat(self._log_file).st_mtime * 1000)
            except FileNotFoundError:
                self._created_ms = int(time.time() * 1000)
        return self._created_ms

    @property
    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self._log_file).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # ------------------------------------------------------------------ scanning
    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Batch headers from ``start`` to ``end`` (default: file end), reading in chunks.

        Each header is checked against the offset rules (base offsets strictly increase from
        the segment's base offset, each batch ends before the next starts): integer
        comparisons on fields already parsed.

        Raises:
            CorruptRecordError: a size that is impossible or runs past the end, or a base
                offset breaking the offset rules.
        """
        stop = self.size if end is None else end
        pos = start
        buf = b""
        buf_start = 0
        floor = self.base_offset
        while pos < stop:
            if stop - pos < LOG_OVERHEAD:
                raise CorruptRecordError(f"{stop - pos} trailing bytes are not a batch",
                                         path=str(self.log_path), position=pos)
            rel = pos - buf_start
            if rel < 0 or rel + _PEEK_SIZE > len(buf):
                buf = self.pread(min(_SCAN_CHUNK, max(stop - pos, _PEEK_SIZE)), pos)
                buf_start, rel = pos, 0
            if len(buf) - rel < _PEEK_SIZE:
                raise CorruptRecordError("the log ends inside a batch header",
                                         path=str(self.log_path), position=pos)
            base, length, epoch, magic, _crc, _attrs, last_delta = _PEEK.unpack_from(buf, rel)
            size = length + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > stop or magic != MAGIC:
                raise CorruptRecordError(
                    f"batch at {pos} has size {size} / magic {magic} (file size {stop})",
                    path=str(self.log_path), position=pos)
            if base < floor or last_delta < 0:
                raise CorruptRecordError(
                    f"batch at {pos}: {offset_order_problem(floor, base, base + last_delta)}",
                    path=str(self.log_path), position=pos)
            floor = base + last_delta + 1
            yield BatchHeader(pos, base, floor - 1, size, epoch)
            pos += size

    def iter_batches(self, start: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
        """Full batches from ``start`` (unvalidated), read in large chunks.

        Raises:
            CorruptRecordError: impossible sizes or a torn tail.
        """
        stop = self.size if end is None else end
        pos = start
        while pos < stop:
            chunk = self.pread(min(_RECOVER_CHUNK, stop - pos), pos)
            rel = 0
            progressed = False
            while len(chunk) - rel >= LOG_OVERHEAD:
                (length,) = struct.unpack_from(">i", chunk, rel + 8)
                size = length + LOG_OVERHEAD
                if size < HEADER_SIZE:
                    raise CorruptRecordError(f"batch size {size} is smaller than its header",
                                             path=str(self.log_path), position=pos + rel)
                if pos + rel + size > stop:
                    raise CorruptRecordError(
                        f"batch of {size} bytes at {pos + rel} runs past the end ({stop})",
                        path=str(self.log_path), position=pos + rel)
                if rel + size > len(chunk):
                    if rel == 0:
                        chunk = self.pread(size, pos)
                        if len(chunk) < size:
                            raise CorruptRecordError("short read", path=str(self.log_path),
                                                     position=pos)
                    else:
                        break
                batch = RecordBatch(chunk, rel)
                yield batch
                rel += size
                progressed = True
            if not progressed and stop - pos < LOG_OVERHEAD:
                raise CorruptRecordError(f"{stop - pos} trailing bytes are not a batch",
                                         path=str(self.log_path), position=pos)
            pos += rel

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch at or after ``start_position`` whose last offset >= ``offset``
        (the batch holding it), via the offset index; None when past the end."""
        entry = self.offset_index.lookup(offset)
        start = max(entry.position, start_position)
        for header in self.iter_headers(start):
            if header.last_offset >= offset:
                return header
        return None

    # ------------------------------------------------------------------ facts
    @property
    def next_offset(self) -> int:
        """One past the last offset in the segment (base offset when empty)."""
        if self._next_offset is None:
            entry = self.offset_index.last_entry
            nxt = self.base_offset
            for header in self.iter_headers(entry.position if entry.position < self.size else 0):
                nxt = header.last_offset + 1
            self._next_offset = max(nxt, entry.offset + 1 if self.offset_index.entries else nxt)
        return self._next_offset

    @property
    def max_timestamp_and_offset(self) -> TimestampOffset:
        """The largest timestamp in the segment and the offset it was reached by
        (``(-1, base)`` without timestamps), from the time index when not yet known."""
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry
        return self._max_ts

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset.timestamp

    @property
    def largest_timestamp(self) -> int:
        """The max timestamp, or the file's modification time when there is none (Kafka)."""
        ts = self.max_timestamp
        return ts if ts >= 0 else self.last_modified_ms

    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp, the reference for time-based rolling."""
        if not self._rolling_ts_loaded:
            self._rolling_ts_loaded = True
            if self.size >= HEADER_SIZE:
                head = self.pread(HEADER_SIZE, 0)
                if len(head) == HEADER_SIZE:
                    self._rolling_ts = struct.unpack_from(">q", head, 35)[0]
        return self._rolling_ts

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        ts = self.rolling_based_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def info(self) -> SegmentInfo:
        return SegmentInfo(
            base_offset=self.base_offset, next_offset=self.next_offset,
            max_timestamp=self.max_timestamp, size=self.size, log_path=self.log_path,
            offset_index_path=self.offset_index.path, time_index_path=self.time_index.path,
            txn_index_path=self.txn_index.path if self.txn_index.path.exists() else None)

    # ------------------------------------------------------------------ writes
    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchInfo]) -> None:
        """Write validated batches (``data`` is exactly their bytes, in order) and index them.

        Raises:
            LogClosedError: the segment is not the active one.
        """
        if not self._active:
            raise LogClosedError(f"segment {self.log_path} is not active")
        position = self.size
        max_ts = self.max_timestamp_and_offset
        if position == 0 and batches:
            self._rolling_ts = batches[0].max_timestamp
            self._rolling_ts_loaded = True
        with self._fd_lock:
            fd = self._get_fd()
            view = memoryview(data)
            written = 0
            self._unsynced = True
            while written < len(view):
                written += os.pwrite(fd, view[written:], position + written)
        index_interval = self.index_interval_bytes
        for b in batches:
            if b.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(b.max_timestamp, b.last_offset)
            if self._bytes_since_index > index_interval:
                self.offset_index.append(b.last_offset, position)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                self._bytes_since_index = 0
            position += b.size
            self._bytes_since_index += b.size
        self._max_ts = max_ts
        self._size = position
        if batches:
            self._next_offset = batches[-1].last_offset + 1

    def can_convert_to_relative(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def should_roll(self, *, batch_size: int, max_timestamp: int, last_offset: int,
                    now_ms: int, segment_bytes: int, roll_ms: int) -> bool:
        """Kafka's roll rule: full by size, too old, an index full, or offsets out of range."""
        size = self.size
        return (size > segment_bytes - batch_size
                or (size > 0 and self.time_waited_for_roll(now_ms, max_timestamp) > roll_ms)
                or self.offset_index.is_full or self.time_index.is_full
                or not self.can_convert_to_relative(last_offset))

    def become_inactive(self) -> None:
        """On roll: final time index entry, trim both indexes, fsync, read-only from now."""
        ts = self.max_timestamp_and_offset
        if ts.timestamp >= 0:
            self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self.flush()
        self.offset_index.trim()
        self.time_index.trim()
        with self._fd_lock:
            self._close_fd()
        self._active = False

    def become_active(self) -> None:
        """Make this (the last) segment writable again (after load or truncation)."""
        if self._active:
            return
        _ = self.next_offset, self.max_timestamp_and_offset
        # Entries are resumed from where the index left off, as Kafka's bytesSinceLastIndexEntry
        # (read before the indexes turn writable: they are mapped writable, and preallocated,
        # only when an entry is added)
        last = self.offset_index.last_entry
        self._bytes_since_index = max(0, self.size - (last.position if self.offset_index.entries
                                                      else 0))
        with self._fd_lock:
            self._close_fd()
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self._active = True

    def flush(self) -> None:
        """fsync the log file and the indexes (reopening a released file when it has writes
        not yet synced)."""
        with self._fd_lock:
            if self._unsynced:
                os.fsync(self._get_fd())
                self._unsynced = False
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets >= ``offset`` (cut at the start of the batch
        holding it); returns the bytes removed."""
        header = self.translate_offset(offset)
        if header is None:
            return 0
        position = header.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - position
        with self._fd_lock:
            if self._fd is not None and self._fd_writable:
                os.ftruncate(self._fd, position)
            else:
                os.truncate(self.log_path, position)
        self._size = position
        self._next_offset = None
        if position == 0:
            self._max_ts = TimestampOffset(-1, self.base_offset)
            self._created_ms = int(time.time() * 1000)
            self._rolling_ts, self._rolling_ts_loaded = None, True
        else:
            self._recompute_max_timestamp()
        last = self.offset_index.last_entry
        self._bytes_since_index = max(0, position - (last.position if self.offset_index.entries
                                                     else 0))
        return removed

    def _recompute_max_timestamp(self) -> None:
        entry = self.time_index.last_entry
        start = self.offset_index.lookup(entry.offset).position if entry.timestamp >= 0 else 0
        best = entry
        for batch in self.iter_batches(start):
            if batch.max_timestamp > best.timestamp:
                best = TimestampOffset(batch.max_timestamp, batch.last_offset)
        self._max_ts = best

    # ------------------------------------------------------------------ checks
    def sanity_check(self, *, deep_tail: bool = False) -> None:
        """Check the indexes against the log without reading the whole log (KIP-263's check):
        the files exist, index sizes are whole entries, entries increase, the last offset index
        entry points at a batch boundary holding that offset, and the time index stays inside
        the segment. ``deep_tail`` also validates (CRC and offset rules) every batch after the
        last index entry and that the log ends on a batch boundary (used for active segments).

        Raises:
            CorruptIndexError: an index is missing or inconsistent.
            CorruptRecordError: the log itself is damaged where it was read.
        """
        try:
            size = os.stat(self._log_file).st_size
        except FileNotFoundError:
            raise CorruptRecordError(f"{self.log_path} is missing",
                                     path=str(self.log_path)) from None
        self._size = size
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        if size > 0:  # (the loads above saw whether the files exist: no stat more)
            for index in (self.offset_index, self.time_index):
                if index.missing:
                    raise CorruptIndexError(f"{index.path} is missing", path=str(index.path))
        self.txn_index.sanity_check()
        last = self.offset_index.last_entry
        if self.offset_index.entries:
            if last.position >= size:
                raise CorruptIndexError(
                    f"{self.offset_index.path}: last entry points at byte {last.position} of a "
                    f"{size}-byte log", path=str(self.offset_index.path))
            head = self.pread(_PEEK_SIZE, last.position)
            if len(head) < _PEEK_SIZE:
                raise CorruptIndexError(f"{self.offset_index.path}: last entry past the log",
                                        path=str(self.offset_index.path))
            base, _length, _e, magic, _c, _a, delta = _PEEK.unpack_from(head)
            if magic != MAGIC or base + delta != last.offset:
                raise CorruptIndexError(
                    f"{self.offset_index.path}: last entry ({last.offset} at {last.position}) "
                    f"does not match the batch there", path=str(self.offset_index.path))
        if self.time_index.entries:
            ts_last = self.time_index.last_entry
            if ts_last.offset < self.base_offset:
                raise CorruptIndexError(f"{self.time_index.path}: offset below base",
                                        path=str(self.time_index.path))
        if deep_tail:
            start = last.position if self.offset_index.entries else 0
            nxt = None
            floor = self.base_offset
            for batch in self.iter_batches(start):
                batch.validate(self._log_file)
                bad = offset_order_problem(floor, batch.base_offset, batch.last_offset)
                if bad is not None:
                    raise CorruptRecordError(bad, path=str(self.log_path))
                floor = nxt = batch.next_offset
            if nxt is not None:
                self._next_offset = nxt
            elif start == 0:
                self._next_offset = self.base_offset
        self.checked = True

    def recover(self, *, on_batch: Callable[[RecordBatch], None] | None = None,
                max_offset: int | None = None) -> RecoveryResult:
        """Rebuild the indexes from the log, validating every batch (size, magic, CRC, and
        the offset rules for the fields outside the CRC: base offsets strictly increase, each
        batch ends before the next one starts, the first starts at or after the segment's
        base offset, every one ends below ``max_offset``); cut the log at the first invalid
        batch. When two batches overlap, the cut goes at the one whose ``baseOffset`` is
        damaged (:func:`~kafka_tiers.log.records.earlier_batch_is_suspect`), so a batch with
        a raised ``baseOffset`` is never kept.

        ``on_batch`` sees every valid batch in order (leader epochs, producer state);
        ``max_offset`` bounds the offsets the segment may hold (the next segment's base).
        """
        was_active = self._active
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._active = True  # indexes writable while rebuilding
        valid = 0
        last_index_pos = 0
        max_ts = TimestampOffset(-1, self.base_offset)
        problem: str | None = None
        count = 0
        expected_min = self.base_offset
        self._size = None
        path = str(self.log_path)
        # A batch is kept only once the batch after it (or the segment's end) confirms its
        # baseOffset, which the CRC does not cover: when two batches overlap, the damaged one
        # may be the earlier (records.earlier_batch_is_suspect), and the cut goes there.
        pending: RecordBatch | None = None

        def keep(batch: RecordBatch) -> None:
            nonlocal valid, last_index_pos, max_ts, expected_min, count
            if batch.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(batch.max_timestamp, batch.last_offset)
            if valid - last_index_pos > self.index_interval_bytes:
                self.offset_index.append(batch.last_offset, valid)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                last_index_pos = valid
            if on_batch is not None:
                on_batch(batch)
            valid += batch.size
            expected_min = batch.next_offset
            count += 1

        try:
            try:
                for batch in self.iter_batches(0):
                    position = valid + (pending.size if pending is not None else 0)
                    batch.validate(path)
                    bad = offset_order_problem(expected_min if pending is None
                                               else pending.next_offset,
                                               batch.base_offset, batch.last_offset, max_offset)
                    if bad is None and not self.can_convert_to_relative(batch.last_offset):
                        bad = f"offset {batch.last_offset} is outside this segment"
                    if bad is None:
                        bad = leader_epoch_problem(batch.partition_leader_epoch)
                    if bad is not None:
                        if (pending is not None and batch.base_offset <= pending.last_offset
                                and earlier_batch_is_suspect(expected_min, pending.base_offset,
                                                             batch.base_offset)):
                            error = CorruptRecordError(
                                f"batch at {valid} ({pending.base_offset}-"
                                f"{pending.last_offset}) overlaps the next one, which starts "
                                f"at {batch.base_offset}, and starts past {expected_min}, the "
                                "first offset it could hold: damaged baseOffset",
                                path=path, position=valid)
                            pending = None  # the cut goes before it
                            raise error
                        if pending is not None:
                            keep(pending)
                            pending = None
                        raise CorruptRecordError(f"batch at {position}: {bad}", path=path,
                                                 position=position)
                    if pending is not None:
                        keep(pending)
                    pending = batch
            finally:  # a batch not contradicted by what follows it (or by nothing) is kept
                if pending is not None:
                    keep(pending)
        except CorruptRecordError as exc:
            problem = str(exc)
        size = self.size
        truncated = size - valid
        if truncated > 0:
            with self._fd_lock:
                if self._fd is not None and self._fd_writable:
                    os.ftruncate(self._fd, valid)
                else:
                    os.truncate(self.log_path, valid)
            self._size = valid
        self._max_ts = max_ts
        self._next_offset = expected_min if count else self.base_offset
        self._bytes_since_index = valid - last_index_pos
        self._rolling_ts_loaded = False
        if max_ts.timestamp >= 0:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        if was_active:
            self.offset_index.flush()
            self.time_index.flush()
        else:
            self._active = False
            self.offset_index.trim()
            self.time_index.trim()
        with self._fd_lock:
            if not was_active:
                self._close_fd()
        self.checked = True
        return RecoveryResult(truncated, valid, problem, count)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Trim the indexes (if active) and close every file."""
        if self._closed:
            return
        if self._active:
            ts = self.max_timestamp_and_offset
            if ts.timestamp >= 0 and self.time_index.loaded:
                self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
            self.flush()
        for name in ("offset_index", "time_index"):
            index = self.__dict__.get(name)  # never built: nothing to close
            if index is not None:
                index.close()
        with self._fd_lock:
            self._close_fd()
        self._closed = True

    def close_handles(self) -> None:
        """Release the idle descriptors and mappings of the segment, active or not (they
        reopen on next use)."""
        self.release()
        for name in ("offset_index", "time_index"):
            index = self.__dict__.get(name)
            if index is not None:
                index.release()

    def files(self) -> list[Path]:
        """The segment's files that exist."""
        return [p for p in (self.log_path, self.offset_index.path, self.time_index.path,
                            self.txn_index.path) if p.exists()]

    def delete(self) -> None:
        """Remove the segment's files: renamed ``.deleted`` first (so a crash midway leaves
        files the loader removes), then unlinked."""
        self.close_for_delete()
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            if path.exists():
                doomed = path.with_name(path.name + DELETED_SUFFIX)
                os.replace(path, doomed)
                doomed.unlink(missing_ok=True)

    def close_for_delete(self) -> None:
        with self._fd_lock:
            self._close_fd()
        self.offset_index.close()
        self.time_index.close()
        self._closed = True


class SegmentList:
    """A partition's segments ordered by base offset, built lazily from base offsets.

    Startup lists base offsets only; a :class:`LogSegment` object is made the first time a
    segment is looked at, so a partition with thousands of segments costs one int each until
    used. Supports the list operations the log needs (index, slices, remove, append).
    """

    def __init__(self, bases: list[int], factory: Callable[[int], LogSegment],
                 made: dict[int, LogSegment] | None = None) -> None:
        self.bases = bases
        self._factory = factory
        self._made: dict[int, LogSegment] = made or {}

    def _get(self, base: int) -> LogSegment:
        seg = self._made.get(base)
        if seg is None:
            seg = self._made[base] = self._factory(base)
        return seg

    def __len__(self) -> int:
        return len(self.bases)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._get(b) for b in self.bases[i]]
        return self._get(self.bases[i])

    def __iter__(self) -> Iterator[LogSegment]:
        for base in list(self.bases):
            yield self._get(base)

    def __delitem__(self, i: slice) -> None:
        for base in self.bases[i]:
            self._made.pop(base, None)
        del self.bases[i]

    def index(self, seg: LogSegment) -> int:
        i = bisect.bisect_left(self.bases, seg.base_offset)
        if i == len(self.bases) or self.bases[i] != seg.base_offset:
            raise ValueError(f"{seg} is not in the list")
        return i

    def remove(self, seg: LogSegment) -> None:
        i = self.index(seg)
        del self.bases[i]
        self._made.pop(seg.base_offset, None)

    def append(self, seg: LogSegment) -> None:
        if self.bases and seg.base_offset <= self.bases[-1]:
            raise ValueError(f"{seg} does not come after base offset {self.bases[-1]}")
        self.bases.append(seg.base_offset)
        self._made[seg.base_offset] = seg

    def made(self) -> list[LogSegment]:
        """The segments built so far (the others were never touched)."""
        return [self._made[b] for b in self.bases if b in self._made]

    def unmade_count(self) -> int:
        return len(self.bases) - sum(1 for b in self.bases if b in self._made)


__all__ = ["BatchHeader", "BatchInfo", "LogSegment", "RecoveryResult", "SegmentInfo",
           "SegmentList"]
