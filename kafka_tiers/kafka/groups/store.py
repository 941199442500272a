"""One partition of ``__consumer_offsets`` as its coordinator holds it.

What it keeps
    :attr:`OffsetsPartition.latest`: the last value of every live key (Kafka's compacted
    view: a tombstone removes its key). Every change goes through :meth:`append`, which
    writes the records through the broker's produce path with ``acks=all`` (a cluster
    member: its replica manager, waiting ``offsets.commit.timeout.ms`` for the in-sync
    replicas; standalone: appended and flushed) and only then updates the view, so the view
    is what the log holds.
Loading
    :meth:`load` reads the partition's local log from its log start offset to its log end
    offset (as Kafka's loader does) and rebuilds the view; a record whose key or value is not
    one of :mod:`.records`' schemas is skipped with a WARN line. A batch whose records do not
    decode at all (clients cannot write one since Produce to internal topics is refused, but
    a log written before may hold one) is skipped with one ERROR line naming the partition
    and the batch's offsets, and the load goes on. Kafka's loader fails the load instead,
    leaving every group of the partition without a coordinator until an operator repairs the
    log; one bad batch losing only its own records is the lesser harm.
Bounded size: snapshots, not compaction
    The log engine does not compact. Instead, once the log holds more than
    ``2 * live keys + offsets.snapshot.min.records`` records, :meth:`append` writes a
    snapshot: every live key with its value again, as ordinary records (through the same
    replicated path), then moves the log start offset to the snapshot's first offset; the
    log engine deletes the segments wholly below it (whole segments only: the topic's
    ``segment.bytes`` is ``offsets.topic.segment.bytes``). A snapshot is just the view
    rewritten, so a crash in the middle of one loses nothing: the older records are still
    there until the log start moves, and reading a partial snapshot gives the same view.
    Followers move their log start offset with the leader's (the replica fetcher).

Every method is called with :attr:`OffsetsPartition.lock` held by the caller, except
:meth:`load`, which takes it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.kafka.groups.errors import (
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    REQUEST_TIMED_OUT,
    GroupError,
)
from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.records import ProducerRecord, RecordBatch, build_batch

if TYPE_CHECKING:
    from kafka_tiers.broker.broker import Broker

log = logging.getLogger(__name__)

#: records per batch written (a snapshot is written in batches of at most this many)
BATCH_RECORDS = 500
#: a record batch written is kept below this many bytes (max.message.bytes defaults ~1 MiB)
BATCH_BYTES = 512 * 1024


class OffsetsPartition:
    """The view of one ``__consumer_offsets`` partition led by this broker (see the module
    docstring).

    Args:
        broker: the broker (its produce path and its local log of the partition).
        tp: the partition.
        leader_epoch: the leader epoch this broker leads it in (a change means reload).
        commit_timeout_s: how long a write waits for the in-sync replicas.
        snapshot_min_records: ``offsets.snapshot.min.records``.
    """

    def __init__(self, broker: Broker, tp: TopicPartition, leader_epoch: int, *,
                 commit_timeout_s: float, snapshot_min_records: int) -> None:
        self.broker = broker
        self.tp = tp
        self.leader_epoch = leader_epoch
        self.commit_timeout_s = commit_timeout_s
        self.snapshot_min_records = snapshot_min_records
        self.lock = threading.RLock()
        self.latest: dict[bytes, bytes] = {}
        self.loaded = False
        #: set when a write failed in a way that leaves the log and the view unsure
        self.broken = False
        self.snapshots = 0

    def _local_log(self) -> Any:
        lm = self.broker.log_manager
        return None if lm is None else lm.get_log(self.tp)

    # ------------------------------------------------------------------ load
    def load(self) -> dict[bytes, bytes]:
        """Read the local log into the view; returns it.

        Raises:
            GroupError: NOT_COORDINATOR when the partition has no local log.
        """
        with self.lock:
            lg = self._local_log()
            if lg is None:
                raise GroupError(NOT_COORDINATOR, f"{self.tp} has no replica on broker "
                                 f"{self.broker.broker_id}")
            latest: dict[bytes, bytes] = {}
            offset, end = lg.log_start_offset, lg.log_end_offset
            while offset < end:
                data = lg.read(offset, 1 << 20, max_offset=end)
                if not data.records:
                    break
                pos = 0
                buf = bytes(data.records)
                while pos < len(buf):
                    batch = RecordBatch(buf, pos)
                    pos += batch.size
                    if batch.is_control:
                        continue
                    try:
                        records = batch.records()
                    except CorruptRecordError as exc:  # skipped, never retried forever
                        log.error("group coordinator: %s: the batch at offsets %d..%d does not "
                                  "decode and is skipped (its records are lost to the groups "
                                  "of this partition): %s", self.tp, batch.base_offset,
                                  batch.last_offset, exc)
                        continue
                    for rec in records:
                        if rec.offset < offset or rec.key is None:
                            continue
                        if rec.value is None:
                            latest.pop(rec.key, None)
                        else:
                            latest[rec.key] = rec.value
                offset = max(data.next_offset, offset + 1)
            self.latest = latest
            self.loaded = True
            log.info("group coordinator: loaded %s (%d live keys, offsets %d..%d)", self.tp,
                     len(latest), lg.log_start_offset, end)
            return latest

    # ------------------------------------------------------------------ write
    def append(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Write ``(key, value)`` records (value None: a tombstone) with ``acks=all`` and
        apply them to the view; then snapshot when the log has grown enough.

        Raises:
            GroupError: NOT_COORDINATOR (no longer the leader), COORDINATOR_NOT_AVAILABLE
                (not enough in-sync replicas, nothing written), REQUEST_TIMED_OUT (written,
                not known to be replicated: the view takes the records, the caller answers
                with the error).
        """
        if not records:
            return
        self._write(records)
        self._maybe_snapshot()

    def _write(self, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Write in batches; returns the first offset written."""
        first = -1
        for chunk in _chunks(records):
            batch = build_batch([ProducerRecord(v, k) for k, v in chunk])
            try:
                base = self._produce(batch)
            except _MaybeWritten as exc:
                self._apply(chunk)  # in the log, maybe not replicated yet
                raise exc.error from None
            self._apply(chunk)
            if first < 0:
                first = base
        return first

    def _apply(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        for k, v in records:
            if v is None:
                self.latest.pop(k, None)
            else:
                self.latest[k] = v

    def _produce(self, batch: bytes) -> int:
        broker = self.broker
        replicas = broker.replicas
        try:
            if replicas is None:
                return broker.produce(self.tp, batch)
            base, _ = replicas.produce(self.tp, batch, -1, self.commit_timeout_s)
            return int(base)
        except Exception as exc:
            error = _write_error(exc, self.tp)
            if error.kafka_error_code == REQUEST_TIMED_OUT or getattr(
                    exc, "code", None) == 20:  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
                raise _MaybeWritten(error) from None
            raise error from None

    # ------------------------------------------------------------------ snapshots
    def _maybe_snapshot(self) -> None:
        lg = self._local_log()
        if lg is None:
            return
        held = lg.log_end_offset - lg.log_start_offset
        if held <= 2 * len(self.latest) + self.snapshot_min_records:
            return
        self.snapshot()

    def snapshot(self) -> int:
        """Write every live key again and move the log start offset to the first of them;
        returns the new log start offset (the old one when there is nothing live: then the
        log start moves to the log end)."""
        lg = self._local_log()
        if lg is None:
            raise GroupError(NOT_COORDINATOR, f"{self.tp} has no replica here")
        start = self._write(list(self.latest.items())) if self.latest else lg.log_end_offset
        lg = self._local_log()  # a JBOD move may have swapped it
        if lg is not None:
            start = min(start, lg.high_watermark)
            lg.advance_log_start_offset(start)
        self.snapshots += 1
        log.info("group coordinator: snapshot of %s (%d live keys); log start offset %d",
                 self.tp, len(self.latest), start)
        return start


class _MaybeWritten(Exception):
    def __init__(self, error: GroupError) -> None:
        super().__init__(str(error))
        self.error = error


def _chunks(records: Sequence[tuple[bytes, bytes | None]]
            ) -> list[Sequence[tuple[bytes, bytes | None]]]:
    out: list[Sequence[tuple[bytes, bytes | None]]] = []
    cur: list[tuple[bytes, bytes | None]] = []
    size = 0
    for k, v in records:
        n = len(k) + (len(v) if v is not None else 0) + 32
        if cur and (len(cur) >= BATCH_RECORDS or size + n > BATCH_BYTES):
            out.append(cur)
            cur, size = [], 0
        cur.append((k, v))
        size += n
    if cur:
        out.append(cur)
    return out


def _write_error(exc: BaseException, tp: TopicPartition) -> GroupError:
    """Kafka's mapping of a failed write of group records to the group error returned."""
    from kafka_tiers.kafka.errors import error_of
    code, message = error_of(exc)
    if code in (6, 3):  # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
        return GroupError(NOT_COORDINATOR, f"{tp}: {message}")
    if code == 7:
        return GroupError(REQUEST_TIMED_OUT, f"{tp}: {message}")
    if code in (10, 18, 87):  # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD
        return GroupError(-1, f"{tp}: {message}")
    return GroupError(COORDINATOR_NOT_AVAILABLE, f"{tp}: {message}")

__all__ = ["OffsetsPartition"]
