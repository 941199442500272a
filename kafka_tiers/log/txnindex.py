"""The ``.txnindex`` file of a segment: aborted transactions, as Kafka's ``TransactionIndex``.

Each entry is 34 bytes (big-endian): ``version int16 (0), producerId int64, firstOffset int64,
lastOffset int64, lastStableOffset int64``. An entry is added when an ABORT marker is appended;
consumers reading with ``read_committed`` use them to skip aborted data. The file exists only
once it has an entry and is opened only when used.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

from kafka_tiers.log.checkpoints import open_nofollow, read_file_nofollow
from kafka_tiers.log.errors import CorruptIndexError
from kafka_tiers.log.names import LazyFilePath

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


def _read(path: str) -> bytes | None:
    """The file's bytes, or None when it does not exist (one open, closed at once: the
    index holds no descriptor between calls)."""
    try:
        return read_file_nofollow(path)
    except FileNotFoundError:
        return None


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, first and last (marker) offsets, and the last
    stable offset when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(0, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class TransactionIndex(LazyFilePath):
    """The aborted transactions of one segment, appended in ``last_offset`` order."""


    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        self._set_path(path)  # kept as a string; a Path is built only when asked for
        self.base_offset = base_offset
        self._lock = threading.Lock()
        self._entries: list[AbortedTxn] | None = None
        #: written since the last fsync; True at first (files written by another object, a
        #: copy, are synced by the first flush), then only after an append
        self._unsynced = True

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            data = _read(self._file) or b""
            entries = []
            for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
                _version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                entries.append(AbortedTxn(pid, first, last, lso))
            self._entries = entries
            self._length = len(data)
        return self._entries

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction; last offsets must increase.

        Raises:
            CorruptIndexError: ``txn.last_offset`` is not above the previous entry's.
        """
        with self._lock:
            entries = self._load()
            if entries and entries[-1].last_offset >= txn.last_offset:
                raise CorruptIndexError(
                    f"aborted transaction at {txn.last_offset} is not after "
                    f"{entries[-1].last_offset} in {self.path}", path=str(self.path))
            with open(self._file, "ab", opener=open_nofollow) as fh:
                fh.write(txn.encode())
            self._unsynced = True
            entries.append(txn)
            self._length += ENTRY_SIZE

    def all_entries(self) -> list[AbortedTxn]:
        with self._lock:
            return list(self._load())

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``."""
        with self._lock:
            return [t for t in self._load()
                    if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        with self._lock:
            entries = self._load()
            keep = [t for t in entries if t.last_offset < offset]
            if len(keep) != len(entries) or self._length % ENTRY_SIZE:
                self._rewrite(keep)

    def reset(self) -> None:
        with self._lock:
            self._load()
            self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
        else:
            with open(self.path, "r+b", opener=open_nofollow) as fh:
                fh.truncate(len(entries) * ENTRY_SIZE)
                fh.flush()
                os.fsync(fh.fileno())
        self._entries = entries
        self._length = len(entries) * ENTRY_SIZE

    def sanity_check(self) -> None:
        """Whole entries, version 0, offsets within the segment.

        Raises:
            CorruptIndexError: naming the file and the problem.
        """
        with self._lock:
            data = _read(self._file)
            if data is None:
                return
            if len(data) % ENTRY_SIZE:
                raise CorruptIndexError(
                    f"{self.path}: length {len(data)} is not a multiple of {ENTRY_SIZE}",
                    path=str(self.path))
            for pos in range(0, len(data), ENTRY_SIZE):
                version, _pid, first, last, _lso = _ENTRY.unpack_from(data, pos)
                if version != 0 or last < self.base_offset or first > last:
                    raise CorruptIndexError(f"{self.path}: bad entry at byte {pos}",
                                            path=str(self.path))

    def flush(self) -> None:
        """fsync the file if it was written since the last flush (the first flush of this
        object always looks). Holds no descriptor afterwards."""
        if not self._unsynced:
            return
        with self._lock:  # an append meanwhile must not lose its flag
            try:
                fd = os.open(self._file, os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                self._unsynced = False
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._unsynced = False

    def forget(self) -> None:
        """Drop the cached entries (they are reread on next use)."""
        with self._lock:
            self._entries = None

    def delete(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)
            self._entries = []

    def rename_to(self, path: Path) -> None:
        with self._lock:
            if self.path.exists():
                os.replace(self.path, path)
            self._set_path(path)


__all__ = ["ENTRY_SIZE", "AbortedTxn", "TransactionIndex"]
