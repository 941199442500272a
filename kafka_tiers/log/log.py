"""The partition log: an ordered list of segments with offsets, reads, retention, truncation.

A :class:`Log` is thread-safe: one re-entrant lock serialises appends, reads and maintenance.

Offsets (Kafka's names):

* ``log_start_offset``: the first offset of the partition (remote tier included).
* ``local_log_start_offset``: the first offset still held locally (>= log start; tiered storage
  advances it after copying segments to the remote tier).
* ``high_watermark``: the last committed offset + 1, set by replication; reads can be bounded
  by it, retention never deletes above it.
* ``recovery_point``: everything below it is flushed (fsynced); recovery after a crash starts
  there.
* ``log_end_offset``: the next offset to assign.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_dir,
    open_nofollow,
    write_atomic,
)
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogClosedError,
    LogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kafka_tiers.log.index import TimestampOffset
from kafka_tiers.log.leader_epoch import LeaderEpochCache
from kafka_tiers.log.log_loader import checked_offset, load_segments, segment_factory
from kafka_tiers.log.names import SNAPSHOT_SUFFIX, parse_partition_dir
from kafka_tiers.log.producer_state import (
    REBUILD_SCAN_BYTES,
    AppendOrigin,
    BatchFacts,
    CorruptSnapshotError,
    ProducerStateManager,
    read_snapshot,
)
from kafka_tiers.log.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    ControlRecordType,
    RecordBatch,
    client_batch_problem,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from kafka_tiers.log.recovery import RecoveryReport, check_segment, recover_segment
from kafka_tiers.log.segment import BatchInfo, LogSegment, SegmentInfo, SegmentList
from kafka_tiers.log.txnindex import AbortedTxn

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


@dataclass(frozen=True)
class AppendInfo:
    """The outcome of an append: offsets assigned, timestamps and sizes."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    record_count: int
    valid_bytes: int
    log_start_offset: int
    #: a client's retried batch already in the log: nothing was appended and the offsets
    #: are the original batch's (Kafka answers a duplicate so)
    duplicate: bool = False


@dataclass(frozen=True)
class FetchData:
    """A read: whole record batches starting with the one holding ``fetch_offset``.

    ``records`` is empty when there is nothing to read at that offset (yet); the first batch
    may start before ``fetch_offset`` (it holds it), as in Kafka.
    """

    fetch_offset: int
    records: bytes | bytearray
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] = ()
    #: the offset after the last batch returned (``fetch_offset`` when nothing was read).
    next_offset: int = -1

    def batches(self) -> list[RecordBatch]:
        out = []
        pos = 0
        while pos < len(self.records):
            b = RecordBatch(self.records, pos)
            out.append(b)
            pos += b.size
        return out


@dataclass(frozen=True)
class RegionRead:
    """A read as a region of one segment file (zero copy: the bytes are never read here).

    ``fd`` is a descriptor of the caller's own on the segment's ``.log`` file (``os.dup`` of
    the segment's), to close once the region was sent, or -1 when ``size`` is 0; reads
    through it still see the bytes after the segment was closed, renamed or deleted. The
    region holds whole batches, the first one holding ``fetch_offset``; their headers were
    checked (sizes, magic, offsets, leader epochs), their records and CRCs were not read.
    """

    fetch_offset: int
    fd: int
    position: int
    size: int
    #: the offset after the last batch of the region (``fetch_offset`` when empty)
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


#: called as ``on_roll(log, rolled_segment_info)`` after a segment became inactive.
RollCallback = Callable[["Log", SegmentInfo], None]


class Log:
    """A partition log in ``directory`` (named ``<topic>-<partition>``).

    Build one with :meth:`open` (or through :class:`~kafka_tiers.log.log_manager.LogManager`).
    """

    def __init__(self, directory: Path, config: LogConfig, segments: SegmentList, *,
                 topic_partition: TopicPartition | None, log_start_offset: int,
                 recovery_point: int, high_watermark: int, on_roll: RollCallback | None,
                 time_fn: Callable[[], float], report: RecoveryReport) -> None:
        self.dir = directory
        self.config = config
        self.topic_partition = topic_partition
        self.on_roll = on_roll
        self._time = time_fn
        self._lock = threading.RLock()
        self._segments = segments
        self.load_report = report
        self._closed = False
        self._log_end_offset = segments[-1].next_offset
        # a tiered log's start may lie in the remote tier, below its first local segment
        self._log_start_offset = (max(log_start_offset, 0) if config.remote_storage_enable
                                  else max(log_start_offset, segments[0].base_offset))
        self._local_log_start_offset = max(self._log_start_offset, segments[0].base_offset)
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._high_watermark = min(max(high_watermark, self._log_start_offset),
                                   self._log_end_offset)
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()
        self.producer_state = ProducerStateManager(directory)
        self._last_producer_expiry_ms = self._now_ms()
        self._check_cursor = 0
        # checked against the log by open() (_check_leader_epochs)
        self.leader_epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)

    # ------------------------------------------------------------------ open
    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig | None = None, *,
             recovery_point: int = 0, log_start_offset: int = 0, high_watermark: int = 0,
             clean_shutdown: bool = False, sanity_check_all: bool = True,
             on_roll: RollCallback | None = None,
             time_fn: Callable[[], float] = time.time,
             segment_list: tuple[int, list[int]] | None = None) -> Log:
        """Open (creating when missing) the log in ``directory``.

        Args:
            recovery_point: from ``recovery-point-offset-checkpoint``; segments from here on are
                recovered after an unclean shutdown.
            log_start_offset: from ``log-start-offset-checkpoint``.
            high_watermark: from ``replication-offset-checkpoint``.
            clean_shutdown: the log dir held ``.kafka_cleanshutdown``.
            sanity_check_all: ``sanity.check.all.logs.enabled`` (KIP-263).
            on_roll: called after each roll with the rolled segment.
            segment_list: ``(dir mtime ns, base offsets)`` from the log dir's segment list,
                used instead of listing the directory when still valid (clean shutdown only).

        The directory need not be named ``<topic>-<partition>`` (``topic_partition`` is then
        None). After an unclean shutdown the recovered segments are fsynced and the recovery
        point moves to the log end offset.

        Raises:
            OSError: the directory cannot be created or read.
        """
        path = Path(directory)
        config = config or LogConfig()
        try:
            tp = parse_partition_dir(path.name).partition
        except LogError:
            tp = None
        path.mkdir(parents=True, exist_ok=True)

        def on_batch(seg: LogSegment, batch: RecordBatch) -> None:
            pending.append((batch.partition_leader_epoch, batch.base_offset))
            recovered.add(seg.base_offset)

        pending: list[tuple[int, int]] = []
        recovered: set[int] = set()
        result = load_segments(path, config, recovery_point=recovery_point,
                               log_start_offset=log_start_offset,
                               clean_shutdown=clean_shutdown,
                               sanity_check_all=sanity_check_all, on_batch=on_batch,
                               segment_list=segment_list)
        # the checkpoints' values are checked against the log, never obeyed blindly
        end = result.segments[-1].next_offset
        first = result.segments[0].base_offset
        # a tiered log's unusable checkpoint is replaced by 0, never by its first local
        # segment: its offsets below that are in the remote tier (see
        # truncate_fully_and_start_at's rule)
        log_start_offset = checked_offset(path, LOG_START_OFFSET_CHECKPOINT, log_start_offset,
                                          0, end, 0 if config.remote_storage_enable else first,
                                          "log start offset")
        high_watermark = checked_offset(path, REPLICATION_OFFSET_CHECKPOINT, high_watermark,
                                        0, end, max(log_start_offset, first),
                                        "high watermark")
        log = cls(path, config, result.segments, topic_partition=tp,
                  log_start_offset=log_start_offset, recovery_point=result.recovery_point,
                  high_watermark=high_watermark, on_roll=on_roll, time_fn=time_fn,
                  report=result.report)
        log._check_leader_epochs(clean_shutdown)
        for epoch, base in pending:
            if epoch >= 0 and base < log.log_end_offset:
                log.leader_epoch_cache.assign(epoch, base)
        log.leader_epoch_cache.truncate_from_end(log.log_end_offset)
        log._load_producer_state(min(recovered, default=log.log_end_offset))
        if not clean_shutdown:
            log.flush()  # what recovery kept is now durable
        return log

    def _check_leader_epochs(self, clean_shutdown: bool) -> None:
        """Check the ``leader-epoch-checkpoint`` against the log: its entries must be well
        formed (epochs and start offsets strictly increasing, none negative) and, after a
        clean shutdown (when the file was written last), start at or below the log end
        offset. A file failing that is reported (one WARN) and the cache is rebuilt from the
        batches' partition leader epochs, as Kafka rebuilds it."""
        cache = self.leader_epoch_cache
        problem = cache.load_problem
        if problem is None and clean_shutdown:
            latest = cache.latest_entry
            if latest is not None and latest.start_offset > self._log_end_offset:
                problem = (f"epoch {latest.epoch} starts at {latest.start_offset}, above the "
                           f"log end offset")
        if problem is None:
            cache.truncate_from_end(self._log_end_offset)
            cache.truncate_from_start(self._log_start_offset)
            return
        logger.warning("%s: %s is unusable (%s); the log holds [%d, %d]; ignoring it and "
                       "rebuilding the leader epochs from the batches", self.dir.name,
                       cache.path, problem, self._log_start_offset, self._log_end_offset)
        self.load_report.problems.append(f"{cache.path}: {problem}")
        epochs: list[tuple[int, int]] = []
        try:
            for seg in self._segments:
                for header in seg.iter_headers():
                    if header.leader_epoch >= 0 and (not epochs
                                                     or header.leader_epoch != epochs[-1][0]):
                        epochs.append((header.leader_epoch, header.base_offset))
        except CorruptRecordError as exc:  # reads recover that segment; epochs so far hold
            logger.warning("%s: rebuilding leader epochs stopped: %s", self.dir.name, exc)
        cache.rebuild(epochs)
        cache.truncate_from_start(self._log_start_offset)

    # ------------------------------------------------------------------ offsets
    def _now_ms(self) -> int:
        return int(self._time() * 1000)

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        return self._local_log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.update_high_watermark(offset)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to ``[log start offset, log end offset]``; returns
        the value set."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
            return self._high_watermark

    @property
    def size(self) -> int:
        """Bytes held locally (sum of segment sizes)."""
        with self._lock:
            return sum(s.size for s in self._segments)

    def segment_bases(self) -> list[int]:
        """The base offsets of the segments, oldest first (no segment is opened)."""
        with self._lock:
            return list(self._segments.bases)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy of the list)."""
        with self._lock:
            return list(self._segments)

    def inactive_segments(self) -> list[SegmentInfo]:
        """Every rolled (inactive) segment, oldest first, for tiered storage: base offset, next
        offset, max timestamp and file paths. Each is sanity-checked first."""
        with self._lock:
            out = []
            for seg in self._segments[:-1]:
                self._ensure_checked(seg)
                info = seg.info()
                snap = self.producer_state.snapshot_path(info.next_offset)
                if snap.exists():
                    info = replace(info, producer_snapshot_path=snap)
                out.append(info)
            return out

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.dir} is closed")

    # ------------------------------------------------------------------ lazy checks
    def _segment_index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (floor by base offset), or -1."""
        return bisect.bisect_right(self._segments.bases, offset) - 1

    def _ensure_checked(self, seg: LogSegment) -> None:
        """Sanity-check ``seg`` if it was not yet, as KIP-263 requires before a segment is
        served; when it was damaged, every unchecked segment before it is checked too."""
        if seg.checked:
            return
        idx = self._segments.index(seg)
        nxt = self._segments.bases[idx + 1] if idx + 1 < len(self._segments) else None
        report = check_segment(seg, max_offset=nxt)
        self.load_report.merge(report)
        if report.recovered:
            for i in range(idx):
                s = self._segments[i]
                if not s.checked:
                    self.load_report.merge(
                        check_segment(s, max_offset=self._segments.bases[i + 1]))

    def check_segments(self, *, max_segments: int | None = None) -> int:
        """Sanity-check segments not yet checked, oldest first, one lock hold per segment
        (for a background thread); returns how many were checked."""
        done = 0
        while max_segments is None or done < max_segments:
            with self._lock:
                if self._closed:
                    return done
                bases = self._segments.bases
                i = bisect.bisect_left(bases, self._check_cursor)
                while i < len(bases) and self._segments[i].checked:
                    i += 1
                if i >= len(bases):
                    self._check_cursor = bases[-1] if bases else 0
                    return done
                self._check_cursor = bases[i]
                self._ensure_checked(self._segments[i])
            done += 1
        return done

    @property
    def unchecked_segments(self) -> int:
        with self._lock:
            made = self._segments.made()
            return self._segments.unmade_count() + sum(1 for s in made if not s.checked)

    # ------------------------------------------------------------------ append
    def append(self, records: bytes | bytearray | memoryview, *, assign_offsets: bool = True,
               leader_epoch: int | None = None,
               origin: AppendOrigin | None = None) -> AppendInfo:
        """Append one or more record batches.

        As leader (``assign_offsets=True``) the log assigns offsets from the log end offset,
        stamps ``leader_epoch`` (-1 when None) into each batch and, with ``message.timestamp.type=
        LogAppendTime``, the append time. As follower (``assign_offsets=False``) the batches
        keep their offsets and epochs, which must start at or after the log end offset and
        increase. Every batch is validated (size, magic, CRC) before anything is written.

        ``origin`` (default: ``LOCAL`` as leader, ``REPLICATION`` as follower): with
        ``AppendOrigin.CLIENT`` (a producer's request; leader only) each batch is checked
        against the producer state (epochs, sequences, see
        :mod:`~kafka_tiers.log.producer_state`), batch by batch; a retried batch among the
        producer's last five makes the whole append write nothing and return that batch's
        offsets with ``duplicate=True``. Every origin updates the producer state.

        Raises:
            InvalidRecordError: an empty, corrupt or out-of-order input (nothing is written).
            ProducerStateError: (``CLIENT``) a batch breaking the idempotence rules: its
                subclasses carry Kafka's error code (nothing is written).
            RecordTooLargeError: a batch above ``max.message.bytes`` or the input above the
                segment size.
        """
        buf = bytearray(records)
        with self._lock:
            self._check_open()
            batches: list[RecordBatch] = []
            pos = 0
            try:
                while pos < len(buf):
                    if len(buf) - pos < LOG_OVERHEAD:
                        raise CorruptRecordError(f"{len(buf) - pos} trailing bytes")
                    batch = RecordBatch(buf, pos)
                    batch.validate()
                    batches.append(batch)
                    pos += batch.size
            except CorruptRecordError as exc:
                raise InvalidRecordError(f"invalid record batch at byte {pos}: {exc}") from None
            if not batches:
                raise InvalidRecordError("nothing to append: no record batch given")
            for b in batches:
                if b.size > self.config.max_message_bytes:
                    raise RecordTooLargeError(
                        f"batch of {b.size} bytes exceeds max.message.bytes "
                        f"{self.config.max_message_bytes}")
            if len(buf) > self.config.segment_bytes:
                raise RecordTooLargeError(
                    f"{len(buf)} bytes of batches exceed segment.bytes "
                    f"{self.config.segment_bytes}")
            now = self._now_ms()
            if now - self._last_producer_expiry_ms >= \
                    self.config.producer_id_expiration_check_interval_ms:
                self._expire_producers(now)  # leaders and followers alike, as Kafka
            if origin is AppendOrigin.CLIENT:
                if not assign_offsets:
                    raise ValueError("a client's append assigns offsets (it is a leader's)")
                for b in batches:  # Kafka's LogValidator: the header's offset range and count
                    if (problem := client_batch_problem(b)) is not None:
                        raise InvalidRecordError(f"{problem} in topic partition "
                                                 f"{self.topic_partition}")
                duplicate = self._check_producers(batches)
                if duplicate is not None:
                    return duplicate
            if assign_offsets:
                offset = self._log_end_offset
                append_time = now if self.config.log_append_time else -1
                epoch = NO_PARTITION_LEADER_EPOCH if leader_epoch is None else leader_epoch
                for b in batches:
                    set_base_offset(buf, b.position, offset)
                    set_partition_leader_epoch(buf, b.position, epoch)
                    if append_time >= 0:
                        set_log_append_time(buf, b.position, append_time)
                    offset += b.last_offset_delta + 1
                batches = [RecordBatch(buf, b.position) for b in batches]
            else:
                append_time = -1
                expected = self._log_end_offset
                for b in batches:
                    if b.base_offset < expected:
                        raise InvalidRecordError(
                            f"batch at offset {b.base_offset} is below the expected "
                            f"{expected} (offsets must increase from the log end offset)")
                    expected = b.next_offset
            infos = [BatchInfo(b.base_offset, b.last_offset, b.max_timestamp, b.size)
                     for b in batches]
            first = batches[0]
            last = batches[-1]
            max_ts = TimestampOffset(-1, first.base_offset)
            for b in batches:
                if b.max_timestamp > max_ts.timestamp:
                    max_ts = TimestampOffset(b.max_timestamp, b.last_offset)
            segment = self._maybe_roll(len(buf), first.max_timestamp, first.base_offset,
                                       last.last_offset, now)
            segment.append(buf, infos)
            self._log_end_offset = last.next_offset
            count = 0
            for b in batches:
                count += b.records_count
                if b.partition_leader_epoch >= 0:
                    self.leader_epoch_cache.assign(b.partition_leader_epoch, b.base_offset)
                if b.producer_id >= 0:
                    self._apply_producer_batch(segment, b)
                else:
                    self.producer_state.map_end_offset = b.next_offset
            self._unflushed_messages += count
            if (self._unflushed_messages >= self.config.flush_interval_messages
                    or now - self._last_flush_ms >= self.config.flush_interval_ms):
                self.flush()
            return AppendInfo(first.base_offset, last.last_offset, max_ts.timestamp,
                              max_ts.offset, append_time, count, len(buf),
                              self._log_start_offset)

    def _check_producers(self, batches: list[RecordBatch]) -> AppendInfo | None:
        """Check a client's batches against the producer state, in order (as if each
        before it were appended); returns the answer to a duplicate, or None."""
        pending: dict[int, tuple[int, int]] = {}
        offset = self._log_end_offset
        for b in batches:
            dup = self.producer_state.check(b, offset, pending)
            if dup is not None:
                logger.debug("%s: producer %d resent sequences %d..%d: answered with offsets "
                             "%d..%d, nothing appended", self.dir.name, b.producer_id,
                             dup.first_seq, dup.last_seq, dup.first_offset, dup.last_offset)
                return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp,
                                  dup.last_offset, -1, 0, 0, self._log_start_offset,
                                  duplicate=True)
            offset += b.last_offset_delta + 1
        return None

    def _expire_producers(self, now: int) -> None:
        self._last_producer_expiry_ms = now
        dropped = self.producer_state.remove_expired(now, self.config.producer_id_expiration_ms)
        if dropped:
            logger.info("%s: %d producer id(s) idle for producer.id.expiration.ms=%d dropped",
                        self.dir.name, dropped, self.config.producer_id_expiration_ms)

    def _apply_producer_batch(self, segment: LogSegment, batch: RecordBatch) -> None:
        """Update the producer table; an ABORT marker adds an entry to the segment's
        transaction index (first offset of the transaction, marker offset, last stable
        offset)."""
        old = self.producer_state.producers.get(batch.producer_id)
        kind = self.producer_state.update(batch)
        if kind == ControlRecordType.ABORT:
            first = (old.current_txn_first_offset if old is not None
                     and old.current_txn_first_offset >= 0 else batch.last_offset)
            lso = min(self.producer_state.ongoing_first_offsets(),
                      default=batch.last_offset + 1)
            entries = segment.txn_index.all_entries()
            if not entries or entries[-1].last_offset < batch.last_offset:
                segment.txn_index.append(AbortedTxn(batch.producer_id, first,
                                                    batch.last_offset, lso))

    def _load_producer_state(self, replay_from: int) -> None:
        """Load the newest snapshot at or below ``replay_from`` (the log end offset, or the
        first recovered segment) and replay the batches after it. Without a snapshot only the
        active segment is replayed (as Kafka does for v2 logs)."""
        upto = min(replay_from, self._log_end_offset)
        snap = self.producer_state.load_latest(upto)
        start = snap if snap >= 0 else self._segments.bases[-1]
        start = min(start, upto)
        if snap > 0 and self.producer_state.producers:
            self._rebuild_batch_windows(snap)
        self.producer_state.map_end_offset = start
        if start >= self._log_end_offset:
            return
        idx = max(self._segment_index(start), 0)
        try:
            for seg in self._segments[idx:]:
                self._ensure_checked(seg)
                for batch in seg.iter_batches(seg.offset_index.lookup(start).position
                                              if seg.base_offset <= start else 0):
                    if batch.base_offset < start:
                        continue
                    if batch.producer_id >= 0:
                        self._apply_producer_batch(seg, batch)
                    else:
                        self.producer_state.map_end_offset = batch.next_offset
        except CorruptRecordError as exc:  # served reads recover it; state stays partial
            logger.warning("%s: producer state replay stopped: %s", self.dir, exc)

    def _rebuild_batch_windows(self, snapshot_offset: int) -> None:
        """The snapshot keeps each producer's last batch only: read the last
        ``REBUILD_SCAN_BYTES`` of the log before ``snapshot_offset`` (across segments) to
        remember up to five batches per producer again, so a retry after a restart is still
        answered with its offsets."""
        idx = self._segment_index(snapshot_offset - 1)
        if idx < 0:
            return
        try:
            seg = self._segments[idx]
            self._ensure_checked(seg)
            end = seg.size
            if seg.next_offset > snapshot_offset:
                end = seg.offset_index.lookup(snapshot_offset).position
                for header in seg.iter_headers(end):
                    if header.base_offset >= snapshot_offset:
                        break
                    end = header.position + header.size
            ranges = [(seg, end)]
            budget = REBUILD_SCAN_BYTES - end
            while budget > 0 and idx > 0 and self._segments.bases[idx - 1] >= \
                    self._local_log_start_offset:
                idx -= 1
                seg = self._segments[idx]
                self._ensure_checked(seg)
                ranges.append((seg, seg.size))
                budget -= seg.size
            ranges.reverse()
            first = ranges[0][0]
            start = 0
            floor = -budget if budget < 0 else 0
            if floor > 0:
                index = first.offset_index
                lo, hi = 0, index.entries - 1
                while lo <= hi:  # the last index entry at or before the floor
                    mid = (lo + hi) // 2
                    if index.entry(mid).position <= floor:
                        start, lo = index.entry(mid).position, mid + 1
                    else:
                        hi = mid - 1

            def batches() -> Iterator[BatchFacts]:  # headers only: 61 bytes a batch
                for n, (sg, stop) in enumerate(ranges):
                    for h in sg.iter_headers(start if n == 0 else 0, stop):
                        head = sg.pread(HEADER_SIZE, h.position)
                        if len(head) < HEADER_SIZE:
                            raise CorruptRecordError("the log ends inside a batch header",
                                                     path=str(sg.log_path),
                                                     position=h.position)
                        yield BatchFacts.parse(head)

            self.producer_state.rebuild_windows(batches(), snapshot_offset)
        except CorruptRecordError as exc:  # served reads recover it; the windows stay short
            logger.warning("%s: rebuilding the producers' recent batches stopped: %s",
                           self.dir, exc)

    def _maybe_roll(self, size: int, max_timestamp: int, first_offset: int, last_offset: int,
                    now: int) -> LogSegment:
        seg = self._segments[-1]
        roll_ms = self.config.segment_ms - self.config.segment_jitter_ms
        if seg.should_roll(batch_size=size, max_timestamp=max_timestamp,
                           last_offset=last_offset, now_ms=now,
                           segment_bytes=self.config.segment_bytes, roll_ms=roll_ms):
            return self.roll(first_offset)
        return seg

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Close the active segment for writes and start a new one at
        ``max(expected_next_offset, log end offset)``; returns the new active segment. An
        empty active segment at that offset is reused."""
        with self._lock:
            self._check_open()
            new_base = max(expected_next_offset or 0, self._log_end_offset)
            old = self._segments[-1]
            if old.base_offset == new_base and old.size == 0:
                return old
            if old.base_offset >= new_base:
                raise LogError(f"cannot roll to offset {new_base}: the active segment starts at "
                               f"{old.base_offset}")
            old.become_inactive()
            self.producer_state.take_snapshot(new_base)
            new = LogSegment.create(self.dir, new_base,
                                    index_interval_bytes=self.config.index_interval_bytes,
                                    max_index_size=self.config.max_index_size)
            fsync_dir(self.dir)
            self._segments.append(new)
            # the rolled segment was fsynced by become_inactive
            if self._recovery_point < new_base:
                self._recovery_point = new_base
            if self.on_roll is not None:
                try:
                    self.on_roll(self, old.info())
                except Exception:
                    logger.exception("on_roll callback failed for %s", old.log_path)
            return new

    # ------------------------------------------------------------------ flush
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: everything) and
        advance the recovery point to it."""
        with self._lock:
            self._check_open()
            # epochs first: the checkpoint must hold every entry below the new recovery point
            self.leader_epoch_cache.flush()
            target = self._log_end_offset if offset is None else min(offset,
                                                                     self._log_end_offset)
            if target <= self._recovery_point:
                return
            start = max(self._segment_index(self._recovery_point), 0)
            for seg in self._segments[start:]:
                if seg.base_offset >= target:
                    break
                seg.flush()
            self._recovery_point = target
            if target >= self._log_end_offset:
                self._unflushed_messages = 0
            self._last_flush_ms = self._now_ms()

    def maybe_flush(self) -> bool:
        """Flush if ``flush.ms`` has passed since the last flush (for a scheduler)."""
        with self._lock:
            if (self._recovery_point < self._log_end_offset
                    and self._now_ms() - self._last_flush_ms >= self.config.flush_interval_ms):
                self.flush()
                return True
            return False

    # ------------------------------------------------------------------ read
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             isolation: str = "log_end", min_one_batch: bool = True) -> FetchData:
        """Read whole batches from the one holding ``offset``, at most ``max_bytes`` (but at
        least one batch when ``min_one_batch``).

        Args:
            max_offset: exclusive upper bound of offsets returned.
            isolation: ``"log_end"`` (everything), ``"high_watermark"`` (committed only).

        Every batch returned passes its CRC check; a corrupt one found here makes the
        segment be recovered (cut at the damage) before anything is returned.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the local log start or above the end.
        """
        with self._lock:
            self._check_open()
            if isolation not in ("log_end", "high_watermark"):
                raise ValueError(f"unknown isolation {isolation!r}")
            end = self._log_end_offset
            upper = end if isolation == "log_end" else self._high_watermark
            if max_offset is not None:
                upper = min(upper, max_offset)
            if offset < self._local_log_start_offset or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range [{self._local_log_start_offset}, {end}] of "
                    f"{self.dir.name}", offset=offset,
                    log_start_offset=self._local_log_start_offset, log_end_offset=end)
            data: bytes | bytearray = b""
            next_offset = offset
            for _attempt in range(3):
                try:
                    data, next_offset = self._read_once(offset, max_bytes, upper,
                                                        min_one_batch)
                    break
                except _CorruptRead as bad:
                    self._recover_corrupt(bad.segment)
                    end = self._log_end_offset
                    upper = min(upper, end)
            aborted: tuple[AbortedTxn, ...] = ()
            if data:
                aborted = tuple(self.collect_aborted(offset, next_offset))
            return FetchData(offset, data, self._high_watermark, self._log_start_offset,
                             self._log_end_offset, aborted, next_offset)

    def _read_once(self, offset: int, max_bytes: int, upper: int,
                   min_one: bool) -> tuple[bytes | bytearray, int]:
        """Whole, CRC-checked batches from the one holding ``offset``; returns the bytes and
        the offset after the last batch."""
        if offset >= upper:
            return b"", offset
        idx = max(self._segment_index(offset), 0)
        while idx < len(self._segments):
            seg = self._segments[idx]
            self._ensure_checked(seg)
            try:
                header = seg.translate_offset(offset)
            except CorruptRecordError:
                raise _CorruptRead(seg) from None
            if header is None:
                idx += 1
                continue
            if header.last_offset >= upper:
                return b"", offset
            start = header.position
            size = seg.size
            want = min(max_bytes, size - start)
            if min_one and header.size > want:
                want = header.size
            # 8 bytes more: the next batch's baseOffset, to check the last batch served
            buf = seg.pread_into(min(want + 8, size - start), start)
            pos = 0
            next_offset = offset
            end = min(len(buf), want)
            # the offset rules (docs/log-format.md): integer comparisons on parsed headers
            floor = seg.base_offset
            ceiling = (self._segments.bases[idx + 1] if idx + 1 < len(self._segments)
                       else None)
            while end - pos >= HEADER_SIZE:
                try:
                    batch = RecordBatch(buf, pos)
                except CorruptRecordError:
                    if pos + LOG_OVERHEAD <= end and pos + _batch_size(buf, pos) > end:
                        break  # the next batch does not fit in max_bytes
                    raise _CorruptRead(seg) from None
                if pos + batch.size > end:
                    break  # the next batch does not fit in max_bytes
                last = batch.last_offset
                if (batch.base_offset < floor or last < batch.base_offset
                        or (ceiling is not None and last >= ceiling)
                        or batch.partition_leader_epoch < NO_PARTITION_LEADER_EPOCH):
                    raise _CorruptRead(seg)
                if last >= upper:
                    break
                if not batch.is_valid():
                    raise _CorruptRead(seg)
                pos += batch.size
                floor = next_offset = last + 1
            if pos == 0:
                return b"", offset
            if len(buf) - pos >= 8 and _BASE.unpack_from(buf, pos)[0] < floor:
                raise _CorruptRead(seg)  # the next batch contradicts the last one served
            del buf[pos:]  # shrinks in place, no copy
            return buf, next_offset
        return b"", offset

    def read_region(self, offset: int, max_bytes: int, *, isolation: str = "log_end",
                    min_one_batch: bool = True) -> RegionRead:
        """Whole batches from the one holding ``offset`` as a region of one segment file
        (Kafka's ``FileRecords`` slice), at most ``max_bytes`` (at least one batch when
        ``min_one_batch``), for ``os.sendfile``. Batch boundaries come from the offset index
        and the batch headers, each checked as :meth:`read` checks them; records and CRCs
        are not read (a corrupt header makes the segment be recovered first, as in
        :meth:`read`). Like Kafka, one read serves one segment.

        The caller owns ``fd`` of the result and closes it.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the local log start or above the end.
            OSError: no descriptor could be made (EMFILE).
        """
        with self._lock:
            self._check_open()
            if isolation not in ("log_end", "high_watermark"):
                raise ValueError(f"unknown isolation {isolation!r}")
            end = self._log_end_offset
            upper = end if isolation == "log_end" else self._high_watermark
            if offset < self._local_log_start_offset or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range [{self._local_log_start_offset}, {end}] of "
                    f"{self.dir.name}", offset=offset,
                    log_start_offset=self._local_log_start_offset, log_end_offset=end)
            found: tuple[int, int, int, int] = (-1, 0, 0, offset)
            for _attempt in range(3):
                try:
                    found = self._region_once(offset, max_bytes, upper, min_one_batch)
                    break
                except _CorruptRead as bad:
                    self._recover_corrupt(bad.segment)
                    upper = min(upper, self._log_end_offset)
            fd, position, size, next_offset = found
            return RegionRead(offset, fd, position, size, next_offset, self._high_watermark,
                              self._log_start_offset, self._log_end_offset)

    def _region_once(self, offset: int, max_bytes: int, upper: int,
                     min_one: bool) -> tuple[int, int, int, int]:
        """``(fd, position, size, next offset)`` of the batches from the one holding
        ``offset`` below ``upper`` (``fd`` -1 when none)."""
        if offset >= upper:
            return -1, 0, 0, offset
        idx = max(self._segment_index(offset), 0)
        while idx < len(self._segments):
            seg = self._segments[idx]
            self._ensure_checked(seg)
            ceiling = self._segments.bases[idx + 1] if idx + 1 < len(self._segments) else None
            try:
                header = seg.translate_offset(offset)
                if header is None:
                    idx += 1
                    continue
                total, next_offset = 0, offset
                for h in seg.iter_headers(header.position):
                    if h.last_offset >= upper:
                        break
                    if ((ceiling is not None and h.last_offset >= ceiling)
                            or h.leader_epoch < NO_PARTITION_LEADER_EPOCH):
                        raise _CorruptRead(seg)
                    if total + h.size > max_bytes and not (min_one and total == 0):
                        break
                    total += h.size
                    next_offset = h.last_offset + 1
            except CorruptRecordError:
                raise _CorruptRead(seg) from None
            if total == 0:
                return -1, 0, 0, offset
            return seg.dup_fd(), header.position, total, next_offset
        return -1, 0, 0, offset

    def _recover_corrupt(self, seg: LogSegment) -> None:
        logger.error("corrupt batch in %s found on read; recovering the segment", seg.log_path)
        idx = self._segments.index(seg)
        nxt = self._segments[idx + 1].base_offset if idx + 1 < len(self._segments) else None
        result = recover_segment(seg, max_offset=nxt)
        self.load_report.recovered.append(seg.base_offset)
        self.load_report.truncated_bytes += result.truncated_bytes
        if result.problem:
            self.load_report.problems.append(f"{seg.log_path}: {result.problem}")
        if seg is self._segments[-1]:
            self._log_end_offset = seg.next_offset
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)

    def collect_aborted(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, upper_offset)`` (read_committed)."""
        with self._lock:
            out: list[AbortedTxn] = []
            idx = max(self._segment_index(start_offset), 0)
            for seg in self._segments[idx:]:
                if seg.base_offset >= upper_offset:
                    break
                out += seg.txn_index.collect_aborted(start_offset, upper_offset)
            return out

    # ------------------------------------------------------------------ timestamps
    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record with timestamp >= ``timestamp`` as ``(timestamp, offset)``, or
        None when there is none. ``-2`` gives the log start offset, ``-1`` the log end offset,
        ``-3`` the record with the largest timestamp (Kafka's ListOffsets specials)."""
        with self._lock:
            self._check_open()
            if timestamp == EARLIEST_TIMESTAMP:
                return TimestampOffset(-1, self._log_start_offset)
            if timestamp == LATEST_TIMESTAMP:
                return TimestampOffset(-1, self._log_end_offset)
            if timestamp == MAX_TIMESTAMP:
                best = None
                for seg in self._segments:
                    self._ensure_checked(seg)
                    ts = seg.max_timestamp_and_offset
                    if ts.timestamp >= 0 and (best is None or ts.timestamp > best.timestamp):
                        best = ts
                return best
            for seg in self._segments:
                self._ensure_checked(seg)
                if seg.largest_timestamp < timestamp:
                    continue
                found = self._find_in_segment(seg, timestamp)
                if found is not None:
                    return found
            return None

    def _find_in_segment(self, seg: LogSegment, timestamp: int) -> TimestampOffset | None:
        entry = seg.time_index.lookup(timestamp)
        position = seg.offset_index.lookup(max(entry.offset, seg.base_offset)).position
        for batch in seg.iter_batches(position):
            if batch.max_timestamp >= timestamp:
                for rec in batch.records():
                    if rec.timestamp >= timestamp and rec.offset >= self._log_start_offset:
                        return TimestampOffset(rec.timestamp, rec.offset)
        return None

    # ------------------------------------------------------------------ retention
    def delete_old_segments(self) -> int:
        """Apply ``retention.ms``, ``retention.bytes`` and the log start offset: delete the
        oldest segments that breach them, never above the high watermark (Kafka's rule). The
        active segment is rolled first if it must go. Returns how many were deleted."""
        with self._lock:
            self._check_open()
            now = self._now_ms()
            deleted = 0
            if self.config.retention_ms >= 0:
                deleted += self._delete_prefix(
                    lambda seg, _: now - seg.largest_timestamp > self.config.retention_ms)
            if self.config.retention_bytes >= 0:
                excess = [self.size - self.config.retention_bytes]

                def over(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_prefix(over)
            deleted += self._delete_prefix(
                lambda _s, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset)
            return deleted

    def _delete_prefix(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        doomed: list[LogSegment] = []
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            if upper > self._high_watermark:
                break
            self._ensure_checked(seg)  # its timestamps and size must be trustworthy
            if not predicate(seg, nxt):
                break
            if nxt is None and seg.size == 0:
                break
            doomed.append(seg)
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self.roll()
        self._delete_segments(doomed)
        return len(doomed)

    def _delete_segments(self, doomed: list[LogSegment]) -> None:
        for seg in doomed:
            self._segments.remove(seg)
            seg.delete()
        first = self._segments[0].base_offset
        self.producer_state.delete_snapshots(below=first)
        if first > self._local_log_start_offset:
            self._local_log_start_offset = first
        # a tiered log's offsets below its local segments are in the remote tier: deleting
        # local segments never moves its log start (the remote log manager's retention does)
        if first > self._log_start_offset and not self.config.remote_storage_enable:
            self._log_start_offset = first
            self.leader_epoch_cache.truncate_from_start(first)
        self._high_watermark = max(self._high_watermark, self._log_start_offset)
        fsync_dir(self.dir)

    def advance_log_start_offset(self, offset: int) -> None:
        """Move the log start offset up (DeleteRecords, remote retention) and delete local
        segments wholly below it. Never above the high watermark.

        Raises:
            OffsetOutOfRangeError: ``offset`` is above the high watermark.
        """
        with self._lock:
            self._check_open()
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset to {offset}, above the high watermark "
                    f"{self._high_watermark}", offset=offset,
                    log_start_offset=self._log_start_offset,
                    log_end_offset=self._log_end_offset)
            if offset <= self._log_start_offset:
                return
            self._log_start_offset = offset
            self._local_log_start_offset = max(self._local_log_start_offset, offset)
            self.leader_epoch_cache.truncate_from_start(offset)
            self._delete_prefix(lambda _s, nxt: nxt is not None and nxt.base_offset <= offset)

    def advance_local_log_start_offset(self, offset: int) -> int:
        """After segments were copied to the remote tier: delete local inactive segments
        wholly below ``offset`` and move the local log start offset to the first one kept
        (the log start offset is unchanged). Returns how many segments were deleted."""
        with self._lock:
            self._check_open()
            bases = self._segments.bases
            count = 0
            while count + 1 < len(bases) and bases[count + 1] <= min(offset,
                                                                     self._high_watermark):
                count += 1
            doomed = self._segments[:count]
            if doomed:
                for seg in doomed:
                    self._segments.remove(seg)
                    seg.delete()
                self.producer_state.delete_snapshots(below=self._segments[0].base_offset)
                fsync_dir(self.dir)
            self._local_log_start_offset = max(self._local_log_start_offset,
                                               self._segments[0].base_offset)
            return len(doomed)

    # ------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or after ``offset`` (replication: a follower truncating to
        the leader's epoch end offset). Cuts at batch boundaries. Returns True when anything
        was removed.

        Raises:
            ValueError: a negative offset.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            self._check_open()
            if offset >= self._log_end_offset:
                return False
            if offset < self._segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            doomed = self._segments[bisect.bisect_left(self._segments.bases, offset):]
            if doomed and len(doomed) == len(self._segments):
                self.truncate_fully_and_start_at(offset)
                return True
            for seg in doomed:
                self._segments.remove(seg)
                seg.delete()
            active = self._segments[-1]
            self._ensure_checked(active)
            active.become_active()
            active.truncate_to(offset)
            self._log_end_offset = active.next_offset
            self._after_truncation()
            return True

    def truncate_fully_and_start_at(self, offset: int, *,
                                    log_start_offset: int | None = None) -> None:
        """Delete every segment and restart the log empty at ``offset``.

        The log start offset rule (Kafka's, KIP-405): nothing but DeleteRecords and retention
        (:meth:`advance_log_start_offset`, :meth:`delete_old_segments`, the remote log
        manager's retention) may move a replica's log start offset above the partition's
        true log start. Emptying the local log is no such move, so:

        * ``log_start_offset`` given (the leader's, which is the partition's): the log start
          becomes it (it must be at most ``offset``);
        * otherwise a tiered log (``remote.storage.enable``, whose offsets below its local
          log live in the remote tier) keeps its log start offset (lowered to ``offset`` when
          above it); a local-only log starts at ``offset``, as nothing is kept below it.

        Raises:
            ValueError: a negative ``offset``, or ``log_start_offset`` outside ``[0,
                offset]``.
        """
        if offset < 0:
            raise ValueError(f"cannot start the log at negative offset {offset}")
        if log_start_offset is not None and not 0 <= log_start_offset <= offset:
            raise ValueError(f"log start offset {log_start_offset} must lie in [0, {offset}] "
                             f"(the new local log start)")
        with self._lock:
            self._check_open()
            if log_start_offset is not None:
                new_start = log_start_offset
            elif self.config.remote_storage_enable:
                new_start = min(self._log_start_offset, offset)
            else:
                new_start = offset
            for seg in self._segments:
                seg.delete()
            new = LogSegment.create(self.dir, offset,
                                    index_interval_bytes=self.config.index_interval_bytes,
                                    max_index_size=self.config.max_index_size)
            self._segments = SegmentList([offset], segment_factory(self.dir, self.config),
                                         {offset: new})
            self._log_end_offset = offset
            self._log_start_offset = new_start
            self._local_log_start_offset = offset
            self._high_watermark = max(min(self._high_watermark, offset), new_start)
            self.leader_epoch_cache.clear()
            self.producer_state.delete_snapshots(above=-1)
            self.producer_state.clear()
            self._after_truncation()

    def start_after_remote(self, offset: int, log_start_offset: int,
                           leader_epochs: list[tuple[int, int]],
                           producer_snapshot: bytes | None) -> None:
        """A follower of a tiered partition behind the leader's local log (KIP-405's
        follower fetch from a tiered offset): restart the local log empty at ``offset`` (the
        end of the remote segment before the leader's local log), keep ``log_start_offset``
        (the leader's: the offsets below ``offset`` are read from the remote tier), and take
        the state the records below ``offset`` left from that remote segment: its leader
        epochs (``(epoch, start offset)`` pairs in order) and its producer snapshot (the
        snapshot file's bytes, as the log would write it at ``offset``; None or empty: no
        producer). The epochs and the snapshot are durable when this returns.

        Raises:
            ValueError: as :meth:`truncate_fully_and_start_at`.
            CorruptSnapshotError: the producer snapshot is malformed (nothing is kept of it).
        """
        with self._lock:
            self.truncate_fully_and_start_at(offset, log_start_offset=log_start_offset)
            kept = [(e, s) for e, s in leader_epochs if s < offset]
            self.leader_epoch_cache.rebuild(kept)
            self.leader_epoch_cache.truncate_from_start(log_start_offset)
            self.leader_epoch_cache.flush()
            if producer_snapshot:
                path = self.producer_state.snapshot_path(offset)
                write_atomic(path, producer_snapshot)
                try:
                    read_snapshot(path)
                except CorruptSnapshotError:
                    path.unlink(missing_ok=True)
                    raise
                self._load_producer_state(offset)

    def _after_truncation(self) -> None:
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self.producer_state.delete_snapshots(above=self._log_end_offset)
        self._load_producer_state(self._log_end_offset)
        fsync_dir(self.dir)

    # ------------------------------------------------------------------ JBOD
    def copy_to(self, directory: str | os.PathLike[str]) -> Log:
        """Copy the log's files (segments, indexes, leader epochs) to ``directory`` (a new
        partition directory, e.g. in another log dir), fsync them, and open the copy there.
        Appends wait while the copy is made."""
        dest = Path(directory)
        with self._lock:
            self._check_open()
            self.flush()
            dest.mkdir(parents=True, exist_ok=False)
            for seg in self._segments:
                for src in seg.files():
                    target = dest / src.name
                    if src in (seg.offset_index.path, seg.time_index.path) and seg.active:
                        _copy_index_prefix(src, target, seg)
                    else:
                        shutil.copyfile(src, target)
                    _fsync_file(target)
            for snap in sorted(self.dir.glob("*" + SNAPSHOT_SUFFIX)):
                shutil.copyfile(snap, dest / snap.name)
                _fsync_file(dest / snap.name)
            self.leader_epoch_cache.write_to(dest / LEADER_EPOCH_CHECKPOINT)
            fsync_dir(dest)
            fsync_dir(dest.parent)
            return Log.open(dest, self.config, recovery_point=self._log_end_offset,
                            log_start_offset=self._log_start_offset,
                            high_watermark=self._high_watermark, clean_shutdown=True,
                            sanity_check_all=False, on_roll=self.on_roll, time_fn=self._time)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Flush everything, trim the active indexes and close every file. The recovery point
        becomes the log end offset; the log dir's checkpoints and clean shutdown marker are
        written by :meth:`LogManager.shutdown`."""
        with self._lock:
            if self._closed:
                return
            self.flush()
            if not self.producer_state.snapshot_path(self._log_end_offset).exists():
                self.producer_state.take_snapshot(self._log_end_offset)
            for seg in self._segments.made():
                seg.close()
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._segments)})")


_BASE = struct.Struct(">q")


def _batch_size(buf: bytes, pos: int) -> int:
    return int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True) + LOG_OVERHEAD


class _CorruptRead(Exception):
    def __init__(self, segment: LogSegment) -> None:
        super().__init__(str(segment.log_path))
        self.segment = segment


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_index_prefix(src: Path, dest: Path, seg: LogSegment) -> None:
    """Copy only the real entries of a preallocated (active) index."""
    index = seg.offset_index if src == seg.offset_index.path else seg.time_index
    length = index.entries * index.entry_size
    with open(src, "rb", opener=open_nofollow) as fin, \
            open(dest, "wb", opener=open_nofollow) as fout:
        fout.write(fin.read(length))


__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "AppendInfo",
           "FetchData", "Log", "RegionRead", "RollCallback"]
