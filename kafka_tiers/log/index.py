"""Kafka's sparse segment indexes: ``.index`` (offset -> position) and ``.timeindex``
(timestamp -> offset), memory-mapped lazily.

* ``.index``: 8-byte entries ``relativeOffset int32, position int32`` (big-endian), offsets
  relative to the segment's base offset, strictly increasing.
* ``.timeindex``: 12-byte entries ``timestamp int64, relativeOffset int32``, timestamps strictly
  increasing.

As Kafka does, the index of the active segment is preallocated to ``log.index.size.max.bytes``
(rounded down to whole entries) and memory-mapped for appends; it is trimmed to its entries when
the segment is rolled or the log closed. Constructing an index touches no file: the file is
opened (and mapped) on first use, its own descriptor is closed as soon as it is mapped (the map
keeps one), and the mapping of any index, active or not, is registered in the shared handle
cache (:mod:`kafka_tiers.log.handles`): released when idle, remapped on next use. The entry
count is kept across releases, so a size check (``is_full``) costs no descriptor. After an
unclean shutdown a preallocated file ends in zero entries; they are not entries (an entry after
the first can never be all zeros) and are ignored.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

from kafka_tiers.log.errors import CorruptIndexError, LogClosedError
from kafka_tiers.log.handles import HANDLES
from kafka_tiers.log.names import LazyFilePath


class OffsetPosition(NamedTuple):
    """An offset index entry: absolute offset and byte position in the ``.log`` file."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time index entry: a timestamp and the (absolute) offset it was reached by."""

    timestamp: int
    offset: int


#: a read-only index file up to this size is read into memory instead of being mapped: it
#: then holds no descriptor at all (most indexes of a broker with many small partitions)
SMALL_INDEX_BYTES = 1024


class _Index(LazyFilePath):
    """Common machinery: lazy open, mmap, binary search, truncation, trimming."""

    ENTRY: struct.Struct
    KIND = "index"


    def __init__(self, path: str | os.PathLike[str], base_offset: int, *,
                 max_index_size: int = 10 * 1024 * 1024, writable: bool = False) -> None:
        self._set_path(path)  # kept as a string; a Path is built only when asked for
        self.base_offset = base_offset
        self.entry_size = self.ENTRY.size
        self.max_index_size = max_index_size
        self._writable = writable
        self._lock = threading.RLock()
        self._mm: mmap.mmap | bytes | None = None  # bytes: a small read-only file, read
        self._missing = False  # the file did not exist when last opened read-only
        self._mapped = False  # the file is open (``_mm`` is None for an empty read-only file)
        self._entries: int | None = None  # None: never read; kept while released
        self._dirty = False  # written since the last fsync (survives a release)
        self._used = False  # mapped at least once by this object
        self._preallocated = False  # the file may be longer than its entries (trim cuts it)
        self._file_length = 0
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def loaded(self) -> bool:
        """True once the file was opened by this object (it may be unmapped since)."""
        return self._used

    @property
    def mapped(self) -> bool:
        """True while the file is open (holding a descriptor in the handle cache)."""
        return self._mapped

    def _load(self) -> None:
        """Map the file if it is not (the caller holds the lock); record the use.

        Raises:
            LogClosedError: the index was closed.
            OSError: opening or mapping failed (EMFILE, ENOMEM, ... are raised as they are).
        """
        if self._mapped:
            if isinstance(self._mm, mmap.mmap):
                HANDLES.touch(self)
            return
        if self._closed:
            raise LogClosedError(f"index {self.path} is closed")
        flags = (os.O_RDWR | os.O_CREAT if self._writable else os.O_RDONLY) | os.O_NOFOLLOW
        try:
            fd = os.open(self._file, flags, 0o644)
        except FileNotFoundError:
            if self._writable:
                raise
            self._mm, self._file_length, self._entries = None, 0, 0
            self._mapped = self._missing = True  # nothing open, nothing registered
            return
        self._missing = False
        try:
            length = os.fstat(fd).st_size
            self._file_length = length
            entries = length // self.entry_size
            if self._writable:
                max_entries = max(self.max_index_size // self.entry_size, 1)
                size = max(max_entries, entries) * self.entry_size
                if length != size:
                    os.ftruncate(fd, size)
                self._preallocated = True
                self._mm = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
            elif self.entry_size <= length <= SMALL_INDEX_BYTES:
                self._mm = os.pread(fd, entries * self.entry_size, 0)
            elif length >= self.entry_size:
                self._mm = mmap.mmap(fd, entries * self.entry_size, access=mmap.ACCESS_READ)
            else:
                self._mm = None
        finally:
            os.close(fd)  # the map keeps its own descriptor
        self._mapped = self._used = True
        if self._entries is None:
            self._entries = self._count_real_entries(entries) if entries else 0
        if isinstance(self._mm, mmap.mmap):
            HANDLES.touch(self)

    @property
    def missing(self) -> bool:
        """True when the file did not exist when it was last opened read-only."""
        return self._missing

    def _count_real_entries(self, entries: int) -> int:
        """Entries before the first all-zero entry at index >= 1 (a preallocated tail)."""
        mm = self._mm
        assert mm is not None
        zero = bytes(self.entry_size)
        size = self.entry_size
        if entries <= 1 or mm[(entries - 1) * size:entries * size] != zero:
            return entries
        lo, hi = 1, entries - 1  # first zero entry is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if mm[mid * size:(mid + 1) * size] == zero:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def release(self) -> bool:
        """Unmap an idle index, active or not (it remaps on next use; unsynced entries stay
        in the page cache and are synced by the next :meth:`flush`). True when released."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._unmap()
            return True
        finally:
            self._lock.release()

    def _unmap(self) -> None:
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._mm = None
        self._mapped = False
        HANDLES.forget(self)

    def flush(self) -> None:
        """Write the entries to disk (fsync), reopening the file briefly when it was released.
        """
        with self._lock:
            if not self._dirty:
                return
            if isinstance(self._mm, mmap.mmap) and self._writable:
                self._mm.flush()
            elif not self._closed and self.path.exists():
                fd = os.open(self._file, os.O_RDONLY | os.O_NOFOLLOW)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._dirty = False

    def trim(self) -> None:
        """Cut the file to its entries and switch to read-only (on roll and close). Entries
        not yet synced are fsynced first; the cut itself is not (as Kafka's
        ``trimToValidSize``): after a crash the preallocated zero tail is not taken for
        entries, so one fsync per index is saved on every roll and close."""
        with self._lock:
            if self._entries is None:
                self._writable = False
                return
            if (self._writable and not self._preallocated
                    and self._file_length == self._entries * self.entry_size):
                # not mapped writable since it became writable: the file is already cut
                self.flush()
                self._unmap()
                self._writable = False
            if self._writable:
                entries = self._entries
                fd = os.open(self._file, os.O_RDWR | os.O_NOFOLLOW)
                try:
                    if self._dirty:
                        if isinstance(self._mm, mmap.mmap):
                            self._mm.flush()
                        else:
                            os.fsync(fd)
                    self._unmap()
                    os.ftruncate(fd, entries * self.entry_size)
                finally:
                    os.close(fd)
                self._file_length = entries * self.entry_size
                self._dirty = self._preallocated = False
                self._writable = False

    def preallocate(self) -> None:
        """Create a new, empty writable index file at its preallocated size without mapping
        it (a new segment costs no descriptor until its first index entry).

        Raises:
            CorruptIndexError: the index is read-only.
        """
        with self._lock:
            if not self._writable:
                raise CorruptIndexError(f"index {self.path} is read-only", path=str(self.path))
            self._unmap()
            size = self.max_entries * self.entry_size
            fd = os.open(self._file, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
            self._file_length, self._entries, self._dirty = size, 0, False
            self._preallocated, self._missing = True, False

    def make_writable(self) -> None:
        """Reopen for appends (preallocated), as when a segment becomes active again."""
        with self._lock:
            if self._writable:
                return
            self._unmap()
            self._writable = True

    def close(self) -> None:
        """Trim (if writable) and release the file. The object cannot be used afterwards."""
        with self._lock:
            if self._closed:
                return
            self.trim()
            self._unmap()
            self._closed = True

    def delete(self) -> None:
        """Close and remove the file (missing is fine)."""
        with self._lock:
            self._unmap()
            self._closed = True
            self.path.unlink(missing_ok=True)

    def rename_to(self, path: Path) -> None:
        """Rename the file (an open mapping stays valid)."""
        with self._lock:
            if self.path.exists():
                os.replace(self.path, path)
            self._set_path(path)

    # ------------------------------------------------------------------ queries
    @property
    def entries(self) -> int:
        with self._lock:
            self._load()
            assert self._entries is not None
            return self._entries

    @property
    def max_entries(self) -> int:
        return max(self.max_index_size // self.entry_size, 1)

    @property
    def is_full(self) -> bool:
        """True when no entry can be added (no file is opened once the count is known)."""
        known = self._entries
        if known is not None:
            return known >= self.max_entries
        with self._lock:
            if self._entries is None:
                self._load()
            assert self._entries is not None
            return self._entries >= self.max_entries

    @property
    def file_length(self) -> int:
        """The file's length when opened (0 when missing)."""
        with self._lock:
            self._load()
            return self._file_length

    def _raw(self, n: int) -> tuple:
        assert self._mm is not None
        return self.ENTRY.unpack_from(self._mm, n * self.entry_size)

    def _search(self, target: int, key_index: int) -> int:
        """Index of the largest entry whose key <= target, or -1."""
        lo, hi = 0, (self._entries or 0) - 1
        if hi < 0 or self._raw(0)[key_index] > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._raw(mid)[key_index] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _truncate_entries(self, n: int) -> None:
        assert self._entries is not None
        if n >= self._entries:
            return
        if self._writable and isinstance(self._mm, mmap.mmap):
            self._mm[n * self.entry_size:self._entries * self.entry_size] = bytes(
                (self._entries - n) * self.entry_size)
            self._entries = n
            self._dirty = True
        else:
            # read-only: rewrite the file shorter
            self._unmap()
            fd = os.open(self._file, os.O_RDWR | os.O_NOFOLLOW)
            try:
                os.ftruncate(fd, n * self.entry_size)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._entries = n
            self._file_length = n * self.entry_size

    def reset(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._load()
            self._truncate_entries(0)

    def _require_writable(self) -> None:
        if not self._writable:
            raise CorruptIndexError(f"index {self.path} is read-only", path=str(self.path))
        if self._entries is not None and self._entries >= self.max_entries:
            raise CorruptIndexError(f"index {self.path} is full", path=str(self.path))

    def _load_whole_entries(self) -> None:
        """Load the index and check it holds whole entries (the first of Kafka's sanity
        checks, shared by both index kinds); the caller holds the lock.

        Raises:
            CorruptIndexError: the file length is not a multiple of the entry size.
        """
        self._load()
        if self._file_length % self.entry_size:
            raise CorruptIndexError(
                f"{self.path}: length {self._file_length} is not a multiple of "
                f"{self.entry_size}", path=str(self.path))


class OffsetIndex(_Index):
    """The ``.index`` file of a segment: sparse map from offset to byte position.

    Lookups return the largest entry at or below the target; a caller scans the log forward
    from there.
    """

    ENTRY = struct.Struct(">ii")
    KIND = "offset index"

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry (absolute offset)."""
        with self._lock:
            self._load()
            if not 0 <= n < (self._entries or 0):
                raise IndexError(n)
            rel, pos = self._raw(n)
            return OffsetPosition(self.base_offset + rel, pos)

    def all_entries(self) -> list[OffsetPosition]:
        with self._lock:
            self._load()
            return [OffsetPosition(self.base_offset + r, p)
                    for r, p in (self._raw(i) for i in range(self._entries or 0))]

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when empty."""
        with self._lock:
            self._load()
            if not self._entries:
                return OffsetPosition(self.base_offset, 0)
            rel, pos = self._raw(self._entries - 1)
            return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_offset(self) -> int:
        return self.last_entry.offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target, or ``(base_offset, 0)``."""
        with self._lock:
            self._load()
            i = self._search(target_offset - self.base_offset, 0)
            if i < 0:
                return OffsetPosition(self.base_offset, 0)
            rel, pos = self._raw(i)
            return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must strictly increase.

        Raises:
            CorruptIndexError: the index is full, read-only, or the offset does not increase.
        """
        with self._lock:
            self._load()
            self._require_writable()
            n = self._entries or 0
            rel = offset - self.base_offset
            if not 0 <= rel <= 0x7FFFFFFF:
                raise CorruptIndexError(
                    f"offset {offset} is not relative to base {self.base_offset}",
                    path=str(self.path))
            if n and self._raw(n - 1)[0] >= rel:
                raise CorruptIndexError(
                    f"offset {offset} is not above the last indexed offset "
                    f"{self.last_offset} in {self.path}", path=str(self.path))
            assert self._mm is not None
            self.ENTRY.pack_into(self._mm, n * self.entry_size, rel, position)
            self._entries = n + 1
            self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        with self._lock:
            self._load()
            i = self._search(offset - self.base_offset, 0)
            keep = i + 1
            if keep > 0 and self._raw(i)[0] + self.base_offset == offset:
                keep = i
            self._truncate_entries(keep)

    def sanity_check(self) -> None:
        """Kafka's checks: whole entries, last offset not below base, offsets increasing at
        the ends.

        Raises:
            CorruptIndexError: naming the file and the problem.
        """
        with self._lock:
            self._load_whole_entries()
            n = self._entries or 0
            if n:
                first = self._raw(0)[0]
                last = self._raw(n - 1)[0]
                if first < 0 or last < first or (n > 1 and last == first):
                    raise CorruptIndexError(
                        f"{self.path}: entries are not increasing (first relative offset "
                        f"{first}, last {last})", path=str(self.path))


class TimeIndex(_Index):
    """The ``.timeindex`` file of a segment: sparse map from timestamp to offset."""

    ENTRY = struct.Struct(">qi")
    KIND = "time index"

    def entry(self, n: int) -> TimestampOffset:
        with self._lock:
            self._load()
            if not 0 <= n < (self._entries or 0):
                raise IndexError(n)
            ts, rel = self._raw(n)
            return TimestampOffset(ts, self.base_offset + rel)

    def all_entries(self) -> list[TimestampOffset]:
        with self._lock:
            self._load()
            return [TimestampOffset(t, self.base_offset + r)
                    for t, r in (self._raw(i) for i in range(self._entries or 0))]

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        with self._lock:
            self._load()
            if not self._entries:
                return TimestampOffset(-1, self.base_offset)
            ts, rel = self._raw(self._entries - 1)
            return TimestampOffset(ts, self.base_offset + rel)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= target, or ``(-1, base_offset)``."""
        with self._lock:
            self._load()
            i = self._search(target_timestamp, 0)
            if i < 0:
                return TimestampOffset(-1, self.base_offset)
            ts, rel = self._raw(i)
            return TimestampOffset(ts, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add an entry if ``timestamp`` is above the last one (as Kafka). True if added.

        ``skip_full_check`` lets the final entry at roll use the last slot.

        Raises:
            CorruptIndexError: read-only, full, or the offset goes backwards.
        """
        with self._lock:
            self._load()
            n = self._entries or 0
            if not skip_full_check or not self._writable:
                self._require_writable()
            elif n >= self.max_entries:
                return False
            last_ts, last_rel = self._raw(n - 1) if n else (-1, -1)
            if timestamp <= last_ts:
                return False
            rel = offset - self.base_offset
            if rel < last_rel or not 0 <= rel <= 0x7FFFFFFF:
                raise CorruptIndexError(
                    f"time index offset {offset} goes backwards in {self.path}",
                    path=str(self.path))
            assert self._mm is not None
            self.ENTRY.pack_into(self._mm, n * self.entry_size, timestamp, rel)
            self._entries = n + 1
            self._dirty = True
            return True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        with self._lock:
            self._load()
            n = self._entries or 0
            keep = n
            rel = offset - self.base_offset
            while keep and self._raw(keep - 1)[1] >= rel:
                keep -= 1
            self._truncate_entries(keep)

    def sanity_check(self) -> None:
        """Kafka's checks: whole entries, last timestamp not below the first, last offset not
        below base.

        Raises:
            CorruptIndexError: naming the file and the problem.
        """
        with self._lock:
            self._load_whole_entries()
            n = self._entries or 0
            if n:
                first_ts, first_rel = self._raw(0)
                last_ts, last_rel = self._raw(n - 1)
                if last_ts < first_ts or first_rel < 0 or last_rel < first_rel:
                    raise CorruptIndexError(
                        f"{self.path}: entries are not increasing (first {first_ts}@{first_rel},"
                        f" last {last_ts}@{last_rel})", path=str(self.path))


__all__ = ["OffsetIndex", "OffsetPosition", "TimeIndex", "TimestampOffset"]
