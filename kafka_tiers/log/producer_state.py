"""Producer state and its ``.snapshot`` files, in Kafka's ``ProducerStateManager`` format.

The log keeps, per producer id, the last batch it wrote (epoch, sequence, offset, timestamp)
and the first offset of its open transaction. A snapshot of that table is written as
``<20-digit offset>.snapshot`` when a segment is rolled (offset = the new segment's base
offset) and at clean shutdown (offset = log end offset); tiered storage ships the snapshot at a
segment's end offset with the segment (KIP-405). File layout (big-endian)::

    version int16 (= 1), crc uint32 (CRC-32C of every byte after it),
    count int32, then count x [producerId int64, producerEpoch int16, lastSequence int32,
    lastOffset int64, offsetDelta int32, timestamp int64, coordinatorEpoch int32,
    currentTxnFirstOffset int64 (-1 when none)]
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kafka_tiers.log.checkpoints import read_file_nofollow, write_atomic
from kafka_tiers.log.crc import crc32c
from kafka_tiers.log.errors import LogError
from kafka_tiers.log.names import SNAPSHOT_SUFFIX, segment_file_name
from kafka_tiers.log.records import ControlRecordType, RecordBatch

VERSION = 1
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(LogError):
    """A producer snapshot file fails its CRC or layout check.

    Attributes:
        path: the snapshot file.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ProducerStateEntry(NamedTuple):
    """What the log remembers of one producer."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The bytes of a snapshot file holding ``entries`` (sorted by producer id)."""
    rows = sorted(entries)
    body = bytearray(_COUNT.pack(len(rows)))
    for e in rows:
        body += _ENTRY.pack(*e)
    return _HEAD.pack(VERSION, crc32c(body)) + bytes(body)


def read_snapshot(path: str | os.PathLike[str]) -> list[ProducerStateEntry]:
    """The entries of a snapshot file.

    Raises:
        CorruptSnapshotError: wrong version, CRC mismatch or a truncated file.
    """
    data = read_file_nofollow(path)
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"{path}: too short for a snapshot", path=str(path))
    version, crc = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"{path}: unknown snapshot version {version}",
                                   path=str(path))
    if crc32c(memoryview(data)[_HEAD.size:]) != crc:
        raise CorruptSnapshotError(f"{path}: CRC mismatch", path=str(path))
    (count,) = _COUNT.unpack_from(data, _HEAD.size)
    if count < 0 or _HEAD.size + _COUNT.size + count * _ENTRY.size != len(data):
        raise CorruptSnapshotError(f"{path}: declares {count} entries", path=str(path))
    pos = _HEAD.size + _COUNT.size
    out = []
    for _ in range(count):
        out.append(ProducerStateEntry(*_ENTRY.unpack_from(data, pos)))
        pos += _ENTRY.size
    return out


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files in a partition directory, ascending."""
    out = []
    for name in os.listdir(directory):
        if name.endswith(SNAPSHOT_SUFFIX):
            stem = name[:-len(SNAPSHOT_SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
    return sorted(out)


class ProducerStateManager:
    """The producer table of one partition plus its snapshot files.

    ``map_end_offset`` is the offset up to which batches were applied.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0

    def snapshot_path(self, offset: int) -> Path:
        return self.dir / segment_file_name(offset, SNAPSHOT_SUFFIX)

    def update(self, batch: RecordBatch) -> ControlRecordType | None:
        """Apply one appended batch; returns the marker type for a control batch."""
        self.map_end_offset = batch.next_offset
        pid = batch.producer_id
        if pid < 0:
            return None
        old = self.producers.get(pid)
        if batch.is_control:
            kind = batch.control_type()
            self.producers[pid] = ProducerStateEntry(
                pid, batch.producer_epoch,
                old.last_sequence if old else -1, old.last_offset if old else -1,
                old.offset_delta if old else 0, batch.max_timestamp,
                _coordinator_epoch(batch), -1)
            return kind
        first_txn = -1
        if batch.is_transactional:
            first_txn = (old.current_txn_first_offset if old and
                         old.current_txn_first_offset >= 0 else batch.base_offset)
        self.producers[pid] = ProducerStateEntry(
            pid, batch.producer_epoch, batch.last_sequence, batch.last_offset,
            batch.last_offset_delta, batch.max_timestamp,
            old.coordinator_epoch if old else -1, first_txn)
        return None

    def ongoing_first_offsets(self) -> list[int]:
        return sorted(e.current_txn_first_offset for e in self.producers.values()
                      if e.current_txn_first_offset >= 0)

    def take_snapshot(self, offset: int) -> Path:
        """Write the table as ``<offset>.snapshot`` (crash-safe)."""
        path = self.snapshot_path(offset)
        write_atomic(path, encode_snapshot(self.producers.values()))
        return path

    def load_latest(self, upto: int) -> int:
        """Load the newest valid snapshot at or below ``upto`` (corrupt ones are deleted);
        returns its offset, or -1 (empty table) when there is none."""
        exact = self.snapshot_path(upto)
        if exact.exists():  # the clean-shutdown case: no directory listing
            try:
                entries = read_snapshot(exact)
                self.producers = {e.producer_id: e for e in entries}
                self.map_end_offset = upto
                return upto
            except (CorruptSnapshotError, OSError):
                exact.unlink(missing_ok=True)
        for offset in reversed(snapshot_offsets(self.dir)):
            if offset >= upto:
                continue
            try:
                entries = read_snapshot(self.snapshot_path(offset))
            except (CorruptSnapshotError, OSError):
                self.snapshot_path(offset).unlink(missing_ok=True)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.map_end_offset = offset
            return offset
        self.producers = {}
        return -1

    def delete_snapshots(self, *, above: int | None = None, below: int | None = None) -> None:
        """Remove snapshot files with offset > ``above`` or < ``below``."""
        for offset in snapshot_offsets(self.dir):
            if (above is not None and offset > above) or (below is not None and offset < below):
                self.snapshot_path(offset).unlink(missing_ok=True)


def _coordinator_epoch(batch: RecordBatch) -> int:
    recs = batch.records()
    if recs and recs[0].value is not None and len(recs[0].value) >= 6:
        return struct.unpack_from(">i", recs[0].value, 2)[0]
    return -1


__all__ = ["CorruptSnapshotError", "ProducerStateEntry", "ProducerStateManager",
           "encode_snapshot", "read_snapshot", "snapshot_offsets"]
