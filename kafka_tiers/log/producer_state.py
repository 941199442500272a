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

Idempotence (Kafka's ``ProducerAppendInfo`` rules, checked by :meth:`ProducerStateManager.check`
on a client's append, :class:`AppendOrigin` ``CLIENT``):

- a batch whose epoch is older than the producer's -> :class:`InvalidProducerEpochError`;
- a new epoch must start at sequence 0, and within an epoch each batch's first sequence is the
  last one + 1 (``2**31 - 1`` wraps to 0) -> else :class:`OutOfOrderSequenceError`; a producer
  the table does not know (new, or expired) may start anywhere;
- a retried batch equal to one of the producer's last 5 (:data:`NUM_BATCHES_TO_RETAIN`) is a
  duplicate: the append returns that batch's offsets and writes nothing; an older one is
  answered :class:`DuplicateSequenceError` (where Kafka >= 1.0 answers out-of-order: both
  say the batch was written, only this one lets the client count it as written).

Replicated and local appends only update the table (followers learn every producer, so a new
leader detects the duplicates of the old one). The snapshot keeps only each producer's last
batch (Kafka's layout); loading one rebuilds the recent-batch window from the log's tail
(:meth:`ProducerStateManager.rebuild_windows`). Producers idle longer than
``producer.id.expiration.ms`` (by their last batch's timestamp) are dropped
(:meth:`ProducerStateManager.remove_expired`), as Kafka does.
"""

from __future__ import annotations

import enum
import os
import struct
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kafka_tiers.log.checkpoints import read_file_nofollow, write_atomic
from kafka_tiers.log.crc import crc32c
from kafka_tiers.log.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidRecordError,
    LogError,
    OutOfOrderSequenceError,
    TransactionsUnsupportedError,
)
from kafka_tiers.log.names import SNAPSHOT_SUFFIX, segment_file_name
from kafka_tiers.log.records import (
    CONTROL_MASK,
    HEADER,
    NO_SEQUENCE,
    ControlRecordType,
    RecordBatch,
)

VERSION = 1
#: batches remembered per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN,
#: which is also the most in-flight requests an idempotent producer may have)
NUM_BATCHES_TO_RETAIN = 5
#: sequences are non-negative int32 values; Integer.MAX_VALUE wraps to 0
SEQUENCE_SPACE = 1 << 31
#: bytes of the log before a snapshot read to rebuild the recent-batch windows on load
REBUILD_SCAN_BYTES = 1 << 20
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


class AppendOrigin(enum.Enum):
    """Who appends a batch, which decides what is checked (Kafka's ``AppendOrigin``)."""

    #: a producer's request through the leader: epochs and sequences checked, duplicates
    #: answered with the original offsets
    CLIENT = "client"
    #: a follower copying the leader's batches: producer state updated, nothing checked
    REPLICATION = "replication"
    #: the broker's own writes (tools, tests, the internal transport): updated, not checked
    LOCAL = "local"


class BatchMetadata(NamedTuple):
    """One remembered batch of a producer (Kafka's ``BatchMetadata``)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class BatchFacts(NamedTuple):
    """The producer facts of a batch, read from its 61-byte header alone."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    max_timestamp: int
    is_control: bool

    @classmethod
    def parse(cls, header: bytes | bytearray | memoryview) -> BatchFacts:
        """From a batch header (the first 61 bytes of a batch; nothing else is read)."""
        (base, _len, _epoch, _magic, _crc, attrs, delta, _ts, max_ts, pid, pepoch, seq,
         _count) = HEADER.unpack_from(header)
        last_seq = NO_SEQUENCE if seq == NO_SEQUENCE else (seq + delta) % SEQUENCE_SPACE
        return cls(base, base + delta, pid, pepoch, seq, last_seq, max_ts,
                   bool(attrs & CONTROL_MASK))


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether ``next_seq`` follows ``last_seq`` (with int32 wrap-around)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == SEQUENCE_SPACE - 1)


def is_older(last_seq: int, first_seq: int, batch_last_seq: int) -> bool:
    """Whether the sequences ``first_seq..batch_last_seq`` lie wholly at or before
    ``last_seq`` (modulo 2**31, within half the sequence space)."""
    behind_first = (last_seq - first_seq) % SEQUENCE_SPACE
    behind_last = (last_seq - batch_last_seq) % SEQUENCE_SPACE
    return behind_last <= behind_first < SEQUENCE_SPACE // 2


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
        #: per producer, its last batches (at most NUM_BATCHES_TO_RETAIN, current epoch)
        self.windows: dict[int, deque[BatchMetadata]] = {}
        self.map_end_offset = 0

    def clear(self) -> None:
        """Forget every producer."""
        self.producers = {}
        self.windows = {}

    def _set_table(self, entries: Iterable[ProducerStateEntry]) -> None:
        self.producers = {e.producer_id: e for e in entries}
        self.windows = {}
        for e in self.producers.values():
            if e.last_offset >= 0 and e.last_sequence >= 0:
                self.windows[e.producer_id] = deque([_last_batch(e)],
                                                    maxlen=NUM_BATCHES_TO_RETAIN)

    # ------------------------------------------------------------------ client checks
    def check(self, batch: RecordBatch, offset: int,
              pending: dict[int, tuple[int, int]]) -> BatchMetadata | None:
        """Check a client's batch against the table (Kafka's ``ProducerAppendInfo`` rules,
        see the module docstring); ``offset`` is where it would be written, for messages.

        ``pending`` holds ``producer id -> (epoch, last sequence)`` of the batches of the
        same request checked before this one (the caller passes one dict per request; this
        method records the batch in it), so a multi-batch request is checked batch by batch.

        Returns:
            the remembered batch this one duplicates (the append must write nothing and
            answer its offsets), or None when the batch may be appended.

        Raises:
            InvalidProducerEpochError: an epoch older than the producer's.
            OutOfOrderSequenceError: a gap, an overlap, or a new epoch not starting at 0.
            DuplicateSequenceError: written before, older than the remembered batches.
            TransactionsUnsupportedError: a transactional batch.
            InvalidRecordError: a control batch, or an idempotent batch without sequence.
        """
        pid = batch.producer_id
        if batch.is_control:
            raise InvalidRecordError(f"producer {pid} sent a control batch at offset {offset}: "
                                     f"clients may not write transaction markers")
        if pid < 0:
            return None
        if batch.is_transactional:
            raise TransactionsUnsupportedError(
                f"producer {pid} sent a transactional batch at offset {offset}: this broker "
                f"does not support transactions; produce without transactional.id",
                producer_id=pid)
        epoch, first_seq = batch.producer_epoch, batch.base_sequence
        if first_seq < 0:
            raise InvalidRecordError(f"producer {pid} sent a batch without a sequence number "
                                     f"(base sequence {first_seq}) at offset {offset}")
        last_seq = batch.last_sequence
        entry = self.producers.get(pid)
        if pid not in pending and entry is not None and entry.producer_epoch == epoch:
            for b in self.windows.get(pid, ()):
                if b.first_seq == first_seq and b.last_seq == last_seq:
                    return b
        if pid in pending:
            cur_epoch, cur_last = pending[pid]
        elif entry is not None:
            cur_epoch, cur_last = entry.producer_epoch, entry.last_sequence
        else:
            cur_epoch, cur_last = -1, -1
        facts = {"producer_id": pid, "producer_epoch": epoch, "base_sequence": first_seq,
                 "offset": offset}
        where = f"producer {pid} at offset {offset}"
        if epoch < cur_epoch:
            raise InvalidProducerEpochError(
                f"{where}: epoch {epoch} is older than the producer's current epoch "
                f"{cur_epoch} (a newer instance took over; re-initialise the producer)",
                expected=cur_epoch, **facts)
        if epoch != cur_epoch:
            if first_seq != 0 and cur_epoch != -1:
                raise OutOfOrderSequenceError(
                    f"{where}: the new epoch {epoch} starts at sequence {first_seq}, expected "
                    f"0 (current epoch {cur_epoch})", expected=0, **facts)
        elif not in_sequence(cur_last, first_seq):
            expected = (cur_last + 1) % SEQUENCE_SPACE
            if is_older(cur_last, first_seq, last_seq):
                raise DuplicateSequenceError(
                    f"{where}: sequences {first_seq}..{last_seq} (epoch {epoch}) were written "
                    f"before and are older than the last {NUM_BATCHES_TO_RETAIN} batches "
                    f"remembered (next expected sequence {expected})",
                    expected=expected, **facts)
            raise OutOfOrderSequenceError(
                f"{where}: sequence {first_seq} (epoch {epoch}) does not follow the last "
                f"sequence {cur_last}: expected {expected}", expected=expected, **facts)
        pending[pid] = (epoch, last_seq)
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop the producers without an open transaction whose last batch's timestamp is
        ``expiration_ms`` or more before ``now_ms`` (Kafka's ``producer.id.expiration.ms``);
        returns how many were dropped. A dropped producer's next batch is accepted at any
        sequence, as for a new producer."""
        doomed = [pid for pid, e in self.producers.items()
                  if e.current_txn_first_offset < 0 and now_ms - e.timestamp >= expiration_ms]
        for pid in doomed:
            del self.producers[pid]
            self.windows.pop(pid, None)
        return len(doomed)

    def rebuild_windows(self, batches: Iterable[BatchFacts], upto: int) -> None:
        """Rebuild the recent-batch windows from ``batches`` (the log before ``upto``, the
        offset the table was loaded at, in offset order): the snapshot held only each
        producer's last batch. Batches of another epoch, or after the producer's last batch,
        are skipped."""
        found: dict[int, list[BatchMetadata]] = {}
        for b in batches:
            if b.base_offset >= upto:
                break
            e = self.producers.get(b.producer_id)
            if (e is None or b.is_control or b.producer_epoch != e.producer_epoch
                    or b.last_offset >= e.last_offset or b.base_sequence < 0):
                continue
            found.setdefault(b.producer_id, []).append(
                BatchMetadata(b.base_sequence, b.last_sequence, b.base_offset, b.last_offset,
                              b.max_timestamp))
        for pid, older in found.items():
            window = self.windows.get(pid)
            if window is None:
                continue
            merged = older[-(NUM_BATCHES_TO_RETAIN - len(window)):] + list(window) \
                if len(window) < NUM_BATCHES_TO_RETAIN else list(window)
            self.windows[pid] = deque(merged, maxlen=NUM_BATCHES_TO_RETAIN)

    def snapshot_path(self, offset: int) -> Path:
        return self.dir / segment_file_name(offset, SNAPSHOT_SUFFIX)

    def update(self, batch: RecordBatch) -> ControlRecordType | None:
        """Apply one appended batch; returns the marker type for a control batch."""
        self.map_end_offset = batch.next_offset
        pid = batch.producer_id
        if pid < 0:
            return None
        old = self.producers.get(pid)
        if old is not None and old.producer_epoch != batch.producer_epoch:
            self.windows.pop(pid, None)  # a new epoch: its batches start afresh
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
        if batch.base_sequence >= 0:
            window = self.windows.get(pid)
            if window is None:
                window = self.windows[pid] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
            window.append(BatchMetadata(batch.base_sequence, batch.last_sequence,
                                        batch.base_offset, batch.last_offset,
                                        batch.max_timestamp))
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
                self._set_table(entries)
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
            self._set_table(entries)
            self.map_end_offset = offset
            return offset
        self.clear()
        return -1

    def delete_snapshots(self, *, above: int | None = None, below: int | None = None) -> None:
        """Remove snapshot files with offset > ``above`` or < ``below``."""
        for offset in snapshot_offsets(self.dir):
            if (above is not None and offset > above) or (below is not None and offset < below):
                self.snapshot_path(offset).unlink(missing_ok=True)


def _last_batch(e: ProducerStateEntry) -> BatchMetadata:
    """The batch a snapshot entry describes (its first sequence from the offset delta)."""
    return BatchMetadata((e.last_sequence - e.offset_delta) % SEQUENCE_SPACE, e.last_sequence,
                         e.last_offset - e.offset_delta, e.last_offset, e.timestamp)


def _coordinator_epoch(batch: RecordBatch) -> int:
    recs = batch.records()
    if recs and recs[0].value is not None and len(recs[0].value) >= 6:
        return struct.unpack_from(">i", recs[0].value, 2)[0]
    return -1


__all__ = ["NUM_BATCHES_TO_RETAIN", "AppendOrigin", "BatchMetadata", "CorruptSnapshotError",
           "ProducerStateEntry", "ProducerStateManager", "encode_snapshot", "in_sequence",
           "is_older", "read_snapshot", "snapshot_offsets"]
