"""The remote log manager (RLM): copies rolled segments to the remote tier, applies local and
remote retention, and serves reads below the local log start offset (design document 004,
KIP-405 as Kafka ships it).

One task per partition, run by a small thread pool on a schedule
(``remote.log.manager.task.interval.ms``):

Leader (``become_leader(tp, leader_epoch)``)
    1. Learns the remote segments from ``list_remote_segments`` (on the first run after becoming
       leader: a new leader continues where the old one stopped, with no gap and no duplicate).
    2. Copies rolled segments whose offsets are all below the high watermark and above the
       highest remote offset, earliest first, never the active segment; each attempt with a
       fresh segment id. A failed copy is cleaned up (``delete_log_segment_data`` of the
       attempt), reported (hook ``segment_copy_failed``, ``RemoteCopyErrorsPerSec``) and the
       task is retried with exponential backoff (``remote.log.manager.task.retry.backoff.ms``
       doubling up to ``...backoff.max.ms``, +/- ``...retry.jitter``).
    3. Local retention: deletes local segments already committed remotely that breach
       ``local.retention.ms`` / ``local.retention.bytes`` (``Log.advance_local_log_start_offset``).
    4. Remote retention: deletes the oldest remote segments breaching
       ``remote.retention.period`` / ``remote.retention.bytes`` (the total retention; the log
       start offset moves first, then the segments are deleted), and the remote segments
       wholly below the log start offset (DeleteRecords moved it; ``delete_below`` triggers
       the task at once; the offset is checkpointed, so a restarted or new leader deletes
       them on its first run: nothing of it is held only in memory).
    5. Orphans: objects of failed copies (and superseded copies) older than the remote
       retention time are collected, when the plugin can (``collect_orphans``).

Follower (``become_follower(tp)``)
    Refreshes the remote segment list every interval and applies local retention only to
    segments the leader has committed. It never copies or deletes remote data.

Nothing here holds a log's lock while calling the remote tier, and produce / local fetch never
wait for the RLM: ``on_roll`` only reschedules the partition's task.

Reads (:meth:`RemoteLogManager.read`, :meth:`RemoteLogManager.submit_read` for several at
once) run on the dedicated reader pool with the ``remote.fetch.max.wait.ms`` timeout: the
remote offset index (cached, see :mod:`kafka_tiers.remote.index_cache`) gives the byte
position, and only the byte range needed is fetched. A read that ends within
``fetch.chunk.cache.prefetch.max.size`` (``rsm.config.``) bytes of its segment's end asks a
storage manager that can prefetch to start loading the partition's next remote segment
(KIP-1003; never waited for).

Quotas (KIP-956, :mod:`kafka_tiers.remote.quota`)
    A segment is copied only while the broker's copy rate is at or under
    ``remote.log.manager.copy.max.bytes.per.second`` (its bytes counted as it starts; a copy
    in progress is never cut). Over it, nothing waits: the task ends its copy phase (local and
    remote retention still run), keeps its partition's place in line (arrival order, so
    partitions take turns) and is rescheduled after the throttle time
    (``TaskResult.copy_throttle_ms``). Every remote read counts its bytes against
    ``remote.log.manager.fetch.max.bytes.per.second``; :meth:`RemoteLogManager.fetch_throttled`
    tells the Fetch API to skip remote reads while it is exceeded.

Topic switches (KIP-950)
    ``remote.log.copy.disable=true``: nothing new is copied; remote data stays readable and
    remote retention still deletes it; local segments are kept by the total retention (not
    ``local.retention.*``), and those past it are deleted whether copied or not.
    ``remote.storage.enable`` turned off (only with ``remote.log.delete.on.disable=true``):
    the leader's next run moves the log start offset up to the local log's, deletes every
    remote segment of the partition and its remaining objects, and the partition is no longer
    managed here (a follower just stops). The topic config is the durable intent: a broker
    that restarts (or becomes the leader) before that run takes the partition again with
    :meth:`RemoteLogManager.clean_up_disabled`, so the deletion is never lost.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_tiers.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    RetriableRemoteStorageError,
    TopicPartition,
)
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import HEADER_SIZE, LOG_OVERHEAD, RecordBatch
from kafka_tiers.log.segment import SegmentInfo
from kafka_tiers.plugins.hooks import Hooks
from kafka_tiers.remote.config import TopicTiering
from kafka_tiers.remote.guarded import guard
from kafka_tiers.remote.index_cache import RemoteIndexCache
from kafka_tiers.remote.metrics import RemoteStorageMetrics
from kafka_tiers.remote.quota import RateQuota
from kafka_tiers.remote.reader import RemoteReaderPool

log = logging.getLogger(__name__)

LEADER = "leader"
FOLLOWER = "follower"

#: bytes fetched beyond ``max_bytes`` on the first range of a read: the gap between an offset
#: index entry and the batch asked for is about ``index.interval.bytes`` (4096 by default).
READ_SLACK_BYTES = 8192
#: a remote range is read into its buffer this many bytes at a time (each layer of streams
#: then copies cache-sized pieces, never a freshly allocated copy of the whole range)
REMOTE_READ_CHUNK = 1 << 20

#: how many task runs pass between two orphan collections of a partition.
ORPHAN_EVERY_RUNS = 10


@dataclass(frozen=True)
class RemoteRead:
    """What a remote read returned.

    Attributes:
        fetch_offset: the offset asked for.
        records: whole record batches, the first one holding ``fetch_offset`` (CRC-checked).
        next_offset: the offset after the last batch returned.
        segment: the remote segment read.
        bytes_fetched: bytes of the log fetched from the remote tier for this read (the
            offset index, fetched once per segment into the cache, not included).
        end_position: the byte position in the segment after the last byte scanned (-1 when
            unknown).
    """

    fetch_offset: int
    records: bytes
    next_offset: int
    segment: RemoteLogSegmentMetadata
    bytes_fetched: int
    end_position: int = -1


@dataclass
class TaskResult:
    """What one run of a partition's task did.

    Attributes:
        copied: the segments copied (final metadata).
        remote_deleted: the remote segments deleted by retention.
        local_deleted: how many local segments local retention deleted.
        orphans: the orphaned object keys collected.
        error: the failure that ended the run early (then the task is retried with backoff).
        copy_throttle_ms: the copy phase ended early because the copy quota is exceeded:
            the task runs again after this many milliseconds (0: not throttled).
    """

    copied: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    remote_deleted: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    local_deleted: int = 0
    orphans: list[str] = field(default_factory=list)
    error: BaseException | None = None
    copy_throttle_ms: float = 0.0


@dataclass
class _Partition:
    tp: TopicPartition
    role: str
    leader_epoch: int
    next_run_ms: float = 0.0
    running: bool = False
    attempts: int = 0
    runs: int = 0
    segments: list[RemoteLogSegmentMetadata] | None = None
    last_error: str | None = None
    stopped: bool = False
    #: a roll asked for a run while one was in progress: run again as soon as it ends
    triggered: bool = False
    #: DeleteRecords moved the log start offset here: remote segments wholly below it go
    delete_below: int = -1


@dataclass(frozen=True)
class RemoteTierState:
    """What a follower behind the leader's local log takes from the remote tier (KIP-405).

    Attributes:
        next_offset: the offset after the remote segment holding the record just before the
            leader's local log: the follower's local log starts here.
        leader_epochs: ``(epoch, start offset)`` pairs below ``next_offset``, in order (the
            segment's stored leader-epoch checkpoint).
        producer_snapshot: the segment's producer snapshot file (the producer state at
            ``next_offset``), empty when it had no producer.
        segment: the remote segment used.
    """

    next_offset: int
    leader_epochs: list[tuple[int, int]]
    producer_snapshot: bytes
    segment: RemoteLogSegmentMetadata


StorageSource = RemoteStorageManager | Callable[[], RemoteStorageManager]


class RemoteLogManager:
    """The remote log manager of one broker (see the module docstring).

    Args:
        storage: the storage plugin behind its wrapper (``GuardedRemoteStorage``), or a
            function that loads it, called again on every use until it succeeds (so a broker
            starts while the remote tier is down and tiering resumes when it is back).
        config: the broker config (the ``remote.log.*`` keys).
        broker_id: written into the metadata of copied segments.
        log_of: the local log of a partition (None when gone).
        tiering_of: the resolved tiering settings of a partition's topic.
        work_dir: a directory of this broker for the remote index cache.
        hooks: the hook facade (copy, copy failure, remote delete), or None.
        metrics: where the figures go (a new collector by default).
        time_fn: the clock (seconds), for retention.

    Call :meth:`start` to run the scheduled tasks and :meth:`shutdown` to stop every thread.
    Tasks can also be run synchronously with :meth:`run_once`.
    """

    def __init__(self, storage: StorageSource, config: Mapping[str, Any], *, broker_id: int,
                 log_of: Callable[[TopicPartition], Log | None],
                 tiering_of: Callable[[TopicPartition], TopicTiering],
                 work_dir: str | Path, hooks: Hooks | None = None,
                 metrics: RemoteStorageMetrics | None = None,
                 time_fn: Callable[[], float] = time.time) -> None:
        if isinstance(storage, RemoteStorageManager):
            self._rsm: RemoteStorageManager | None = storage
            self._factory: Callable[[], RemoteStorageManager] | None = None
        else:
            self._rsm, self._factory = None, storage
        self.broker_id = broker_id
        self._log_of = log_of
        self._tiering_of = tiering_of
        self.hooks = hooks
        self.metrics = metrics if metrics is not None else RemoteStorageMetrics()
        self._time = time_fn
        self.interval_ms = int(config["remote.log.manager.task.interval.ms"])
        self.backoff_ms = int(config["remote.log.manager.task.retry.backoff.ms"])
        self.backoff_max_ms = int(config["remote.log.manager.task.retry.backoff.max.ms"])
        self.jitter = float(config["remote.log.manager.task.retry.jitter"])
        self.fetch_timeout_ms = int(config["remote.fetch.max.wait.ms"])
        self._pool_size = int(config["remote.log.manager.thread.pool.size"])
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._empty_snapshot = self.work_dir / "empty.snapshot"
        self._empty_snapshot.write_bytes(b"")
        self.index_cache = RemoteIndexCache(
            self.work_dir / "remote-log-index-cache",
            int(config["remote.log.index.file.cache.total.size.bytes"]))
        self.reader = RemoteReaderPool(int(config["remote.log.reader.threads"]),
                                       int(config["remote.log.reader.max.pending.tasks"]))
        self.copy_quota = RateQuota(
            int(config.get("remote.log.manager.copy.max.bytes.per.second", 2 ** 63 - 1)),
            int(config.get("remote.log.manager.copy.quota.window.num", 11)),
            int(config.get("remote.log.manager.copy.quota.window.size.seconds", 1)))
        self.fetch_quota = RateQuota(
            int(config.get("remote.log.manager.fetch.max.bytes.per.second", 2 ** 63 - 1)),
            int(config.get("remote.log.manager.fetch.quota.window.num", 11)),
            int(config.get("remote.log.manager.fetch.quota.window.size.seconds", 1)))
        for kind, quota in (("copy", self.copy_quota), ("fetch", self.fetch_quota)):
            self.metrics.set_reader(f"RemoteLogManager:remote-{kind}-throttle-time-avg",
                                    quota.throttle_ms.avg)
            self.metrics.set_reader(f"RemoteLogManager:remote-{kind}-throttle-time-max",
                                    quota.throttle_ms.max)
            self.metrics.set_reader(f"RLM{kind.capitalize()}:byte-rate", quota.rate)
        self.prefetch_max_size = _prefetch_size(config)
        self._cv = threading.Condition()
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._epochs: dict[TopicPartition, int] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._scheduler: threading.Thread | None = None
        self._stopping = False
        self._rsm_lock = threading.Lock()
        self._random = random.Random()

    # ------------------------------------------------------------------ storage

    @property
    def storage(self) -> RemoteStorageManager:
        """The storage plugin, loaded now if it could not be loaded before.

        Raises:
            RetriableRemoteStorageError: it still cannot be loaded (the remote tier is down).
        """
        with self._rsm_lock:
            if self._rsm is None:
                assert self._factory is not None
                try:
                    self._rsm = self._factory()
                except RemoteStorageError as exc:
                    raise RetriableRemoteStorageError(
                        f"the remote storage is not available yet: {exc}") from None
            return self._rsm

    @property
    def storage_loaded(self) -> bool:
        """Whether the storage plugin is loaded."""
        with self._rsm_lock:
            return self._rsm is not None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the scheduler thread and the task pool."""
        with self._cv:
            if self._scheduler is not None:
                return
            self._stopping = False
            self._executor = ThreadPoolExecutor(self._pool_size,
                                                thread_name_prefix="kafka-tiers-rlm-task")
            self._scheduler = threading.Thread(target=self._schedule_loop,
                                               name="kafka-tiers-rlm-scheduler", daemon=True)
            self._scheduler.start()

    def shutdown(self) -> None:
        """Stop scheduling, wait for running tasks and reads to return, stop every thread and
        empty the index cache. The storage plugin is not closed (its owner closes it)."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
            scheduler, self._scheduler = self._scheduler, None
            executor, self._executor = self._executor, None
        if scheduler is not None:
            scheduler.join()
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        self.reader.shutdown()
        self.index_cache.close()

    # ------------------------------------------------------------------ roles

    def become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """Lead ``tp`` in ``leader_epoch``: copy, apply retention, serve remote reads. The
        remote segment list is learned again from the remote tier.

        Raises:
            ValueError: ``leader_epoch`` is below an epoch this broker already saw for ``tp``.
        """
        with self._cv:
            seen = self._epochs.get(tp, -1)
            if leader_epoch < seen:
                raise ValueError(f"stale leader epoch {leader_epoch} for {tp}: epoch {seen} "
                                 "was seen already")
            self._epochs[tp] = leader_epoch
            p = self._partitions.get(tp)
            if p is None:
                p = self._partitions[tp] = _Partition(tp, LEADER, leader_epoch)
            p.role, p.leader_epoch, p.segments, p.attempts = LEADER, leader_epoch, None, 0
            p.stopped, p.next_run_ms = False, 0.0
            self._cv.notify_all()

    def clean_up_disabled(self, tp: TopicPartition, leader_epoch: int) -> None:
        """KIP-950 after the fact: ``tp``'s topic has tiering turned off with
        ``remote.log.delete.on.disable=true`` and this broker leads it (at start, or after a
        move), whether or not the cleanup ran before. The partition is taken as a leader for
        one cleanup run: its task (run soon; a failure is retried with backoff until it
        succeeds) moves the log start offset up to the local log's, deletes every remote
        segment listed for ``tp`` and then ``tp``'s remaining objects
        (``delete_topic_partition``: its own prefix only), and releases ``tp``. Idempotent:
        with nothing left in the remote tier it costs one listing and one prefix delete.

        Raises:
            ValueError: ``leader_epoch`` is below an epoch this broker already saw for ``tp``.
        """
        self.become_leader(tp, leader_epoch)

    def become_follower(self, tp: TopicPartition) -> None:
        """Follow ``tp``: stop copying and deleting (a copy in progress finishes), keep the
        remote segment list fresh and apply local retention to committed segments."""
        with self._cv:
            p = self._partitions.get(tp)
            if p is None:
                p = self._partitions[tp] = _Partition(tp, FOLLOWER, self._epochs.get(tp, -1))
            p.role, p.segments, p.attempts, p.stopped, p.next_run_ms = (
                FOLLOWER, None, 0, False, 0.0)
            self._cv.notify_all()
        self.copy_quota.forget(tp)  # a follower copies nothing: its place in line goes
        self.metrics.set_gauge("RemoteCopyLagBytes", tp, 0)
        self.metrics.set_gauge("RemoteCopyLagSegments", tp, 0)

    def stop_partition(self, tp: TopicPartition, delete: bool = False) -> None:
        """Stop managing ``tp`` (waiting for its running task); with ``delete``, also delete
        every remote segment of it (hook ``remote_segment_deleted`` for each) and any garbage.

        Raises:
            RemoteStorageError: the remote deletion failed (repeat the call).
        """
        with self._cv:
            p = self._partitions.get(tp)
            if p is not None:
                p.stopped = True
                while p.running:
                    self._cv.wait()
                del self._partitions[tp]
        self.copy_quota.forget(tp)
        self.metrics.remove_partition(tp)
        if delete:
            self._delete_partition_data(self.storage, tp)

    def role(self, tp: TopicPartition) -> str | None:
        """``"leader"``, ``"follower"`` or None when ``tp`` is not managed here."""
        with self._cv:
            p = self._partitions.get(tp)
            return None if p is None else p.role

    def partitions(self) -> list[TopicPartition]:
        """The partitions managed here."""
        with self._cv:
            return sorted(self._partitions)

    def last_error(self, tp: TopicPartition) -> str | None:
        """The error of the partition's last failed task run (None after a success)."""
        with self._cv:
            p = self._partitions.get(tp)
            return None if p is None else p.last_error

    def trigger(self, tp: TopicPartition) -> None:
        """Run the partition's task soon (after a roll), unless it is backing off."""
        with self._cv:
            p = self._partitions.get(tp)
            if p is not None and p.attempts == 0:
                p.next_run_ms = 0.0
                p.triggered = True  # not lost if a run in progress reschedules itself
                self._cv.notify_all()

    def delete_below(self, tp: TopicPartition, offset: int) -> None:
        """DeleteRecords moved the log start offset of ``tp`` to ``offset``: the leader's task
        (triggered now) deletes the remote segments wholly below it, through the storage
        plugin, as remote retention deletes (hooks ``remote_segment_deleted``). Nothing
        happens for a partition this broker does not lead. Idempotent."""
        with self._cv:
            p = self._partitions.get(tp)
            if p is None or p.role != LEADER:
                return
            p.delete_below = max(p.delete_below, offset)
        self.trigger(tp)

    # ------------------------------------------------------------------ scheduling

    def _now_ms(self) -> int:
        return int(self._time() * 1000)

    def _schedule_loop(self) -> None:
        while True:
            with self._cv:
                if self._stopping:
                    return
                now = time.monotonic() * 1000
                due = [p for p in self._partitions.values()
                       if not p.running and not p.stopped and p.next_run_ms <= now]
                for p in due:
                    p.running = True
                waits = [p.next_run_ms - now for p in self._partitions.values()
                         if not p.running]
                executor = self._executor
            for p in due:
                assert executor is not None
                try:
                    executor.submit(self._run_scheduled, p)
                except RuntimeError:  # shut down meanwhile
                    with self._cv:
                        p.running = False
                        self._cv.notify_all()
            with self._cv:
                if self._stopping:
                    return
                wait = min(waits, default=self.interval_ms)
                if not due:
                    self._cv.wait(timeout=max(wait, 1) / 1000)

    def _run_scheduled(self, p: _Partition) -> None:
        try:
            self._run(p)
        finally:
            with self._cv:
                p.running = False
                self._cv.notify_all()

    def _backoff_ms(self, attempts: int) -> float:
        delay = min(self.backoff_ms * 2 ** max(attempts - 1, 0), self.backoff_max_ms)
        return delay * (1 + self._random.uniform(-self.jitter, self.jitter))

    def _run(self, p: _Partition) -> TaskResult:
        result = TaskResult()
        with self._cv:
            p.triggered = False  # this run sees every segment rolled so far
        try:
            self._task(p, result)
        except Exception as exc:  # every failure backs off; the task must survive anything
            result.error = exc
        with self._cv:
            now = time.monotonic() * 1000
            p.runs += 1
            if result.error is None:
                p.attempts, p.last_error = 0, None
                # a roll during the run may have come after the run listed the segments
                p.next_run_ms = now if p.triggered else now + self.interval_ms
                if result.copy_throttle_ms > 0:  # the copy quota: back after its throttle
                    p.next_run_ms = now + min(result.copy_throttle_ms, self.interval_ms)
            else:
                p.attempts += 1
                p.last_error = f"{type(result.error).__name__}: {result.error}"
                p.next_run_ms = now + self._backoff_ms(p.attempts)
                log.warning("remote log task of %s failed (attempt %d, retry in %.0f ms): %s",
                            p.tp, p.attempts, p.next_run_ms - now, p.last_error)
        return result

    def run_once(self, tp: TopicPartition) -> TaskResult:
        """Run the partition's task now in this thread (waiting for a scheduled run to end
        first), and return what it did; its failure is in ``error`` and schedules the retry
        with backoff, as a scheduled run would.

        Raises:
            KeyError: ``tp`` is not managed here.
        """
        with self._cv:
            p = self._partitions[tp]
            while p.running:
                self._cv.wait()
            p.running = True
        try:
            return self._run(p)
        finally:
            with self._cv:
                p.running = False
                self._cv.notify_all()

    def next_run_in_ms(self, tp: TopicPartition) -> float:
        """Milliseconds until the partition's next scheduled run (negative: due)."""
        with self._cv:
            return self._partitions[tp].next_run_ms - time.monotonic() * 1000

    # ------------------------------------------------------------------ the task

    def _task(self, p: _Partition, result: TaskResult) -> None:
        lg = self._log_of(p.tp)
        if lg is None or lg.closed:
            return
        tiering = self._tiering_of(p.tp)
        storage = self.storage
        if not tiering.remote_storage_enable:  # KIP-950: tiering turned off
            self._disable(p, storage, lg)
            return
        segments = self._segments(p, storage, refresh=p.role == FOLLOWER)
        copy_error: BaseException | None = None
        if p.role == LEADER and not tiering.copy_disable:
            try:
                self._copy(p, storage, lg, segments, result)
            except Exception as exc:  # local and remote retention still run
                copy_error = exc
        result.local_deleted = self._local_retention(p, lg, tiering)
        if p.role == LEADER and not p.stopped:
            self._remote_retention(p, storage, lg, tiering, result)
            if p.runs % ORPHAN_EVERY_RUNS == 0:
                result.orphans = self._collect(storage, tiering.orphan_min_age_ms, p.tp)
        self._update_gauges(p, lg)
        if copy_error is not None:
            raise copy_error

    def _segments(self, p: _Partition, storage: RemoteStorageManager, *,
                  refresh: bool = False) -> list[RemoteLogSegmentMetadata]:
        with self._cv:
            known = p.segments
        if known is None or refresh:
            listed = storage.list_remote_segments(p.tp)
            with self._cv:
                p.segments = list(listed)
                known = p.segments
        return list(known)

    def remote_segments(self, tp: TopicPartition) -> list[RemoteLogSegmentMetadata]:
        """The remote segments of ``tp`` as this broker knows them (listed from the remote
        tier when not known yet), sorted by start offset.

        Raises:
            RemoteStorageError: the listing failed.
        """
        with self._cv:
            p = self._partitions.get(tp)
        if p is None:
            return self.storage.list_remote_segments(tp)
        return self._segments(p, self.storage)

    def tier_state(self, tp: TopicPartition, local_log_start: int) -> RemoteTierState:
        """The state a follower of ``tp`` builds from the remote tier when its log ends
        below the leader's local log start ``local_log_start`` (KIP-405's follower fetch
        from a tiered offset, as Kafka's tier state machine): the newest remote segment
        holding offset ``local_log_start - 1`` (listed afresh: the leader copied it), its
        leader-epoch checkpoint and its producer snapshot. Reads only; safe to repeat.

        Raises:
            RemoteResourceNotFoundError: no remote segment holds that offset (yet).
            RemoteStorageError: the remote tier failed (retriable).
            ValueError: a malformed leader-epoch checkpoint in the segment.
        """
        target = local_log_start - 1
        listed = self.storage.list_remote_segments(tp)
        holding = [m for m in listed if m.start_offset <= target <= m.end_offset]
        if target < 0 or not holding:
            raise RemoteResourceNotFoundError(
                f"no remote segment of {tp} holds offset {target} (the one before the "
                f"leader's local log start {local_log_start}); the follower retries")
        md = max(holding, key=lambda m: m.end_offset)
        with self._cv:
            p = self._partitions.get(tp)
            if p is not None and p.role == FOLLOWER:
                p.segments = list(listed)
        storage = self.storage
        with storage.fetch_index(md, IndexType.LEADER_EPOCH) as f:
            epochs = _parse_epoch_checkpoint(f.read(), md)
        try:
            with storage.fetch_index(md, IndexType.PRODUCER_SNAPSHOT) as f:
                snapshot = f.read()
        except RemoteResourceNotFoundError:
            snapshot = b""
        return RemoteTierState(md.end_offset + 1, epochs, snapshot, md)

    def highest_remote_offset(self, tp: TopicPartition) -> int:
        """The last offset held in the remote tier (-1 when none)."""
        segs = self.remote_segments(tp)
        return max((m.end_offset for m in segs), default=-1)

    def _still_leading(self, p: _Partition, epoch: int) -> bool:
        with self._cv:
            return (p.role == LEADER and not p.stopped and p.leader_epoch == epoch
                    and not self._stopping)

    def _copy(self, p: _Partition, storage: RemoteStorageManager, lg: Log,
              segments: list[RemoteLogSegmentMetadata], result: TaskResult) -> None:
        epoch = p.leader_epoch
        highest = max((m.end_offset for m in segments), default=-1)
        hw = lg.high_watermark
        for info in lg.inactive_segments():
            if info.next_offset - 1 <= highest or info.next_offset <= info.base_offset:
                continue
            if info.next_offset > hw:
                break  # only segments wholly below the high watermark, earliest first
            if not self._still_leading(p, epoch):
                return
            # KIP-956: never wait for the quota on a pool thread: over it, the copy phase
            # ends and the task comes back after the throttle time (retention runs now)
            throttle_ms = self.copy_quota.try_acquire(info.size, p.tp)
            if throttle_ms > 0:
                result.copy_throttle_ms = throttle_ms
                return
            md = self._copy_segment(p, storage, lg, info)
            highest = md.end_offset
            result.copied.append(md)

    def _copy_segment(self, p: _Partition, storage: RemoteStorageManager, lg: Log,
                      info: SegmentInfo) -> RemoteLogSegmentMetadata:
        tp = p.tp
        entries = [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries()]
        epochs = _segment_epochs(entries, info.base_offset, info.next_offset,
                                 max(p.leader_epoch, 0))
        md = RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate(tp), info.base_offset, info.next_offset - 1,
            max(info.max_timestamp, -1), self.broker_id, max(self._now_ms(), 0), info.size,
            epochs)
        snapshot = info.producer_snapshot_path
        if snapshot is None or not snapshot.exists():
            snapshot = self._empty_snapshot
        data = LogSegmentData(info.log_path, info.offset_index_path, info.time_index_path,
                              info.txn_index_path, snapshot, _epoch_checkpoint(entries,
                                                                               info.next_offset))
        self.metrics.mark("RemoteCopyRequestsPerSec", tp)
        try:
            custom = storage.copy_log_segment_data(md, data)
        except Exception as exc:
            self.metrics.mark("RemoteCopyErrorsPerSec", tp)
            try:  # the attempt's objects go now, or orphan collection removes them later
                storage.delete_log_segment_data(md)
            except Exception as cleanup:
                log.warning("could not clean up the failed copy %s of %s: %s",
                            md.segment_id, tp, cleanup)
            if self.hooks is not None:
                self.hooks.segment_copy_failed(tp, md, exc)
            raise
        final = md.with_custom_metadata(custom).with_state(
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        with self._cv:
            if p.segments is not None:
                p.segments.append(final)
        self.metrics.mark("RemoteCopyBytesPerSec", tp, info.size)
        log.info("copied segment %d-%d of %s to the remote tier as %s", md.start_offset,
                 md.end_offset, tp, md.segment_id)
        if self.hooks is not None:
            self.hooks.segment_copied(tp, final)
        return final

    def _local_retention(self, p: _Partition, lg: Log, tiering: TopicTiering) -> int:
        copying = not tiering.copy_disable
        if copying:
            ms, max_bytes = tiering.local_retention_ms, tiering.local_retention_bytes
        else:  # KIP-950: nothing more is copied, local segments live by the total retention
            ms, max_bytes = tiering.remote_retention_ms, tiering.remote_retention_bytes
        if ms < 0 and max_bytes < 0:
            return 0
        with self._cv:
            known = list(p.segments or [])
        highest = max((m.end_offset for m in known), default=-1)
        now = self._now_ms()
        size = lg.size
        cut = None
        hw = lg.high_watermark
        for info in lg.inactive_segments():
            if info.next_offset > hw or (copying and info.next_offset - 1 > highest):
                break  # never delete what is not committed in the remote tier
            by_time = ms >= 0 and info.max_timestamp >= 0 and now - info.max_timestamp > ms
            by_size = max_bytes >= 0 and size - info.size >= max_bytes
            if not (by_time or by_size):
                break
            size -= info.size
            cut = info.next_offset
        if cut is None:
            return 0
        if cut > highest + 1 and p.role == LEADER:  # copy disabled: beyond the remote tier
            before = len(lg.inactive_segments())
            lg.advance_log_start_offset(cut)  # remote retention deletes what is below
            return before - len(lg.inactive_segments())
        return lg.advance_local_log_start_offset(min(cut, highest + 1))

    def _disable(self, p: _Partition, storage: RemoteStorageManager, lg: Log) -> None:
        """KIP-950: tiering of the partition's topic was turned off (which Kafka allows only
        with ``remote.log.delete.on.disable=true``). The leader moves the log start offset
        up to the local log's (no reader asks the remote tier any more), deletes every remote
        segment and the partition's remaining objects; then (a follower at once) the
        partition is no longer managed here. A failure raises and the run is retried."""
        if p.role == LEADER:
            local_start = lg.local_log_start_offset
            if local_start > lg.log_start_offset:
                lg.advance_log_start_offset(min(local_start, lg.high_watermark))
            self._delete_partition_data(storage, p.tp)
            log.info("tiering of %s turned off: its remote data is deleted", p.tp)
        with self._cv:
            p.stopped = True
            p.segments = []
            if self._partitions.get(p.tp) is p:
                del self._partitions[p.tp]
            self._cv.notify_all()
        self.copy_quota.forget(p.tp)
        self.metrics.remove_partition(p.tp)

    def _delete_partition_data(self, storage: RemoteStorageManager, tp: TopicPartition
                               ) -> None:
        """Delete every remote segment listed for ``tp`` (hook ``remote_segment_deleted``
        for each), then its remaining objects (``delete_topic_partition``: its own prefix
        only). Idempotent; a failure raises (repeat the call)."""
        for md in storage.list_remote_segments(tp):
            self._delete_remote(storage, md)
        storage.delete_topic_partition(tp)

    def _remote_retention(self, p: _Partition, storage: RemoteStorageManager, lg: Log,
                          tiering: TopicTiering, result: TaskResult) -> None:
        with self._cv:
            segs = sorted(p.segments or [], key=lambda m: m.start_offset)
        if not segs:
            return
        now = self._now_ms()
        doomed: list[RemoteLogSegmentMetadata] = []
        i = 0
        # DeleteRecords: the segments wholly below the log start offset go. The log start is
        # checkpointed, so a leader that restarted (or took over) before its predecessor's
        # task ran still deletes them; it is never above the partition's true log start
        # (Log.truncate_fully_and_start_at's rule), so nothing readable is deleted here
        with self._cv:
            below = max(p.delete_below, lg.log_start_offset)
        while i < len(segs) and segs[i].end_offset < below:
            doomed.append(segs[i])
            i += 1
        if tiering.remote_retention_ms >= 0:
            while (i < len(segs) and segs[i].max_timestamp_ms >= 0
                   and now - segs[i].max_timestamp_ms > tiering.remote_retention_ms):
                doomed.append(segs[i])
                i += 1
        if tiering.remote_retention_bytes >= 0:
            highest = segs[-1].end_offset
            local_only = sum(info.size for info in lg.inactive_segments()
                             if info.next_offset - 1 > highest) + lg.active_segment.size
            total = sum(m.segment_size_in_bytes for m in segs[i:]) + local_only
            while (i < len(segs)
                   and total - segs[i].segment_size_in_bytes >= tiering.remote_retention_bytes):
                total -= segs[i].segment_size_in_bytes
                doomed.append(segs[i])
                i += 1
        if not doomed:
            return
        new_start = min(doomed[-1].end_offset + 1, lg.high_watermark)
        if new_start > lg.log_start_offset:
            lg.advance_log_start_offset(new_start)  # readers stop asking for them first
        for md in doomed:
            self._delete_remote(storage, md)
            with self._cv:
                if p.segments is not None:
                    p.segments = [m for m in p.segments if m.segment_id != md.segment_id]
            result.remote_deleted.append(md)

    def _delete_remote(self, storage: RemoteStorageManager,
                       md: RemoteLogSegmentMetadata) -> None:
        tp = md.topic_partition
        self.metrics.mark("RemoteDeleteRequestsPerSec", tp)
        try:
            storage.delete_log_segment_data(md)
        except Exception:
            self.metrics.mark("RemoteDeleteErrorsPerSec", tp)
            raise
        self.index_cache.remove(md.segment_id)
        log.info("deleted remote segment %d-%d of %s (%s)", md.start_offset, md.end_offset,
                 tp, md.segment_id)
        if self.hooks is not None:
            self.hooks.remote_segment_deleted(
                tp, md.with_state(RemoteLogSegmentState.DELETE_SEGMENT_FINISHED))

    def collect_orphans(self, tp: TopicPartition | None = None,
                        min_age_ms: int | None = None) -> list[str]:
        """Delete objects of failed or superseded copies older than ``min_age_ms`` (default:
        the partition topic's remote retention time, 7 days when unlimited); returns their
        keys. Nothing happens (an empty list) when the plugin cannot collect orphans.

        Raises:
            RemoteStorageError: the collection failed.
        """
        if min_age_ms is None:
            min_age_ms = (self._tiering_of(tp).orphan_min_age_ms if tp is not None
                          else TopicTiering().orphan_min_age_ms)
        return self._collect(self.storage, min_age_ms, tp, raise_errors=True)

    def _collect(self, storage: RemoteStorageManager, min_age_ms: int,
                 tp: TopicPartition | None, *, raise_errors: bool = False) -> list[str]:
        guarded = guard(storage)
        if not guarded.supports("collect_orphans"):
            return []
        try:
            removed = guarded.collect_orphans(min_age_ms, tp)
        except Exception as exc:
            if raise_errors:
                if isinstance(exc, RemoteStorageError):
                    raise
                raise RemoteStorageError(f"orphan collection failed: {type(exc).__name__}: "
                                         f"{exc}") from None
            log.warning("orphan collection of %s failed: %s", tp, exc)
            return []
        if removed:
            log.info("collected %d orphaned objects of %s", len(removed), tp)
        return removed

    def _update_gauges(self, p: _Partition, lg: Log) -> None:
        with self._cv:
            segs = list(p.segments or [])
            role = p.role
        highest = max((m.end_offset for m in segs), default=-1)
        lag_bytes = lag_segments = 0
        if role == LEADER:
            hw = lg.high_watermark
            for info in lg.inactive_segments():
                if info.next_offset - 1 > highest and info.next_offset <= hw:
                    lag_bytes += info.size
                    lag_segments += 1
        self.metrics.set_gauge("RemoteCopyLagBytes", p.tp, lag_bytes)
        self.metrics.set_gauge("RemoteCopyLagSegments", p.tp, lag_segments)
        self.metrics.set_gauge("RemoteLogSizeBytes", p.tp,
                               sum(m.segment_size_in_bytes for m in segs))

    # ------------------------------------------------------------------ reads

    def read(self, tp: TopicPartition, offset: int, max_bytes: int, *,
             timeout_ms: int | None = None) -> RemoteRead:
        """Read whole batches from the remote segment holding ``offset`` (at least one batch,
        at most ``max_bytes`` beyond it), on the reader pool.

        Raises:
            RetriableRemoteStorageError: the read took longer than ``remote.fetch.max.wait.ms``
                (or ``timeout_ms``), or the reader pool is full.
            RemoteResourceNotFoundError: no remote segment holds ``offset``.
            RemoteStorageError: the remote tier failed, or returned a corrupt batch.
        """
        timeout = self.fetch_timeout_ms if timeout_ms is None else timeout_ms
        return self.wait_read(tp, offset, self.submit_read(tp, offset, max_bytes), timeout)

    def submit_read(self, tp: TopicPartition, offset: int, max_bytes: int
                    ) -> Future[RemoteRead]:
        """Start a read as :meth:`read` does on the reader pool and return at once: a fetch
        starts all its remote partitions' reads this way, then waits for each with
        :meth:`wait_read` (KAFKA-14915: one fetch reads several partitions in parallel).
        The read's ``max_bytes`` is reserved against the fetch quota now, as it starts (so
        :meth:`fetch_throttled` sees it before the next read starts), and corrected to the
        bytes really fetched when it ends (taken back when it fails or is refused).

        Raises:
            RetriableRemoteStorageError: the reader pool is full
                (``remote.log.reader.max.pending.tasks``) or shut down.
        """
        self.metrics.mark("RemoteFetchRequestsPerSec", tp)
        reserved = max(int(max_bytes), 0)
        self.fetch_quota.record(reserved)
        try:
            future = self.reader.submit(lambda: self._read(tp, offset, max_bytes, reserved))
        except Exception:
            self.fetch_quota.record(-reserved)
            self.metrics.mark("RemoteFetchErrorsPerSec", tp)
            raise

        def unreserve_if_cancelled(done: Future[RemoteRead]) -> None:
            if done.cancelled():  # it never ran: nothing was fetched
                self.fetch_quota.record(-reserved)

        future.add_done_callback(unreserve_if_cancelled)
        return future

    def wait_read(self, tp: TopicPartition, offset: int, future: Future[RemoteRead],
                  timeout_ms: float) -> RemoteRead:
        """The result of a read started by :meth:`submit_read`, waited for at most
        ``timeout_ms`` (the read keeps running on its thread after a timeout).

        Raises:
            RetriableRemoteStorageError: the timeout passed.
            RemoteResourceNotFoundError, RemoteStorageError: as :meth:`read`.
        """
        try:
            try:
                result = future.result(timeout=max(timeout_ms, 0) / 1000)
            except TimeoutError:
                future.cancel()
                raise RetriableRemoteStorageError(
                    f"remote read of {tp} at offset {offset} timed out after "
                    f"{timeout_ms:.0f} ms (remote.fetch.max.wait.ms); the remote tier is slow "
                    "or unavailable, retry later") from None
        except Exception:
            self.metrics.mark("RemoteFetchErrorsPerSec", tp)
            raise
        self.metrics.mark("RemoteFetchBytesPerSec", tp, result.bytes_fetched)
        return result

    def fetch_throttled(self) -> bool:
        """Whether remote reads are to be skipped now: the broker's remote fetch rate is over
        ``remote.log.manager.fetch.max.bytes.per.second`` (KIP-956). A True answer is a
        skipped read: its throttle time is recorded (``remote-fetch-throttle-time-*``)."""
        if self.fetch_quota.unlimited or not self.fetch_quota.exceeded():
            return False
        self.fetch_quota.note_skip()
        return True

    def find_segment(self, tp: TopicPartition, offset: int) -> RemoteLogSegmentMetadata:
        """The remote segment holding ``offset`` (the list is refreshed once when the known
        one has none).

        Raises:
            RemoteResourceNotFoundError: no remote segment holds it.
        """
        for refresh in (False, True):
            with self._cv:
                p = self._partitions.get(tp)
            if p is None:
                segs = self.storage.list_remote_segments(tp)
            else:
                segs = self._segments(p, self.storage, refresh=refresh)
            for md in segs:
                if md.start_offset <= offset <= md.end_offset:
                    return md
            if p is None:
                break
        raise RemoteResourceNotFoundError(f"no remote segment of {tp} holds offset {offset}",
                                          resource="segment")

    def _read(self, tp: TopicPartition, offset: int, max_bytes: int,
              reserved: int = 0) -> RemoteRead:
        """The read on the reader pool; ``reserved`` bytes were counted against the fetch
        quota when it was submitted: the count is corrected to the bytes fetched."""
        try:
            storage = self.storage
            md = self.find_segment(tp, offset)
            position = self.index_cache.lookup(
                md, offset, lambda m: storage.fetch_index(m, IndexType.OFFSET))
            result = read_batches(storage, md, offset, max_bytes, position)
        except BaseException:
            self.fetch_quota.record(-reserved)
            raise
        self.fetch_quota.record(result.bytes_fetched - reserved)
        self._maybe_prefetch(storage, tp, md, result)
        return result

    def _maybe_prefetch(self, storage: RemoteStorageManager, tp: TopicPartition,
                        md: RemoteLogSegmentMetadata, result: RemoteRead) -> None:
        """KIP-1003: a read that ended within ``fetch.chunk.cache.prefetch.max.size`` bytes
        of its segment's end asks the storage manager (when it can prefetch) to start
        loading the rest of that budget from the start of the partition's next remote
        segment. Never waits, never fails the read."""
        budget = self.prefetch_max_size
        if budget <= 0 or result.end_position < 0:
            return
        left = md.segment_size_in_bytes - result.end_position
        if left >= budget:
            return
        prefetch = _prefetch_operation(storage)
        if prefetch is None:
            return
        try:
            with self._cv:
                p = self._partitions.get(tp)
            segs = self._segments(p, storage) if p is not None else []
            following = sorted((m for m in segs if m.start_offset > md.end_offset),
                               key=lambda m: m.start_offset)
            if following:
                prefetch(following[0], 0, budget - max(left, 0))
        except Exception as exc:  # a prefetch is a hint: the read has its data
            log.debug("prefetch of the segment after %s of %s failed: %s", md.segment_id,
                      tp, exc)


def read_batches(storage: RemoteStorageManager, md: RemoteLogSegmentMetadata, offset: int,
                 max_bytes: int, position: int) -> RemoteRead:
    """Read whole batches of a remote segment from the one holding ``offset``, starting the
    scan at byte ``position`` (from the offset index), fetching only the ranges needed.

    Raises:
        RemoteStorageError: the fetch failed, or a batch is corrupt or cut short.
    """
    size = md.segment_size_in_bytes
    buf = bytearray()
    base = position  # file position of buf[0]
    fetched = 0

    def ensure(pos: int, need: int, chunk: int) -> None:
        """Make buf hold ``need`` bytes from relative position ``pos``."""
        nonlocal buf, fetched
        if len(buf) - pos >= need:
            return
        first = base + len(buf)
        last = min(size - 1, max(first + chunk - 1, base + pos + need - 1))
        if first > last:
            return
        want, start = last - first + 1, len(buf)
        if start:
            buf += bytes(want)
        else:
            buf = bytearray(want)  # zeroed lazily by the allocator: no pass over it
        got = 0
        with storage.fetch_log_segment(md, first, last) as stream, memoryview(buf) as view:
            while got < want:
                piece = view[start + got:start + min(want, got + REMOTE_READ_CHUNK)]
                if hasattr(stream, "readinto"):
                    n = stream.readinto(piece) or 0
                else:  # a plugin's bare stream with read() only
                    data = stream.read(len(piece))
                    n = len(data)
                    piece[:n] = data
                piece.release()
                if not n:
                    break
                got += n
        if got < want:
            del buf[start + got:]
        fetched += got

    pos = 0
    out_start: int | None = None
    next_offset = offset
    chunk = max_bytes + READ_SLACK_BYTES
    while base + pos < size:
        ensure(pos, HEADER_SIZE, chunk)
        if len(buf) - pos < LOG_OVERHEAD:
            break
        batch_size = int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True) + LOG_OVERHEAD
        if len(buf) - pos < HEADER_SIZE or batch_size < HEADER_SIZE:
            raise RemoteStorageError(f"corrupt batch at byte {base + pos} of remote segment "
                                     f"{md.remote_log_segment_id}", segment_id=md.segment_id)
        base_offset = int.from_bytes(buf[pos:pos + 8], "big", signed=True)
        last_delta = int.from_bytes(buf[pos + 23:pos + 27], "big", signed=True)
        if base_offset + last_delta < offset:
            pos += batch_size  # before the offset asked for: skip without fetching it
            if pos >= len(buf):
                base, buf, pos = base + pos, bytearray(), 0
            continue
        if out_start is not None and pos + batch_size - out_start > max_bytes:
            break
        ensure(pos, batch_size, chunk if out_start is None else batch_size)
        if len(buf) - pos < batch_size:
            raise RemoteStorageError(f"remote segment {md.remote_log_segment_id} ends inside "
                                     f"the batch at byte {base + pos}",
                                     segment_id=md.segment_id)
        batch = RecordBatch(buf, pos)
        if not batch.is_valid():
            raise RemoteStorageError(f"CRC mismatch in the batch at offset {batch.base_offset} "
                                     f"of remote segment {md.remote_log_segment_id}",
                                     segment_id=md.segment_id)
        if out_start is None:
            out_start = pos
        next_offset = batch.next_offset
        pos += batch_size
        if pos - out_start >= max_bytes:
            break
    if out_start is None:
        return RemoteRead(offset, b"", offset, md, fetched, base + pos)
    with memoryview(buf) as view:  # one copy of the batches returned, not two
        records = bytes(view[out_start:pos])
    return RemoteRead(offset, records, next_offset, md, fetched, base + pos)


def _prefetch_size(config: Mapping[str, Any]) -> int:
    """``fetch.chunk.cache.prefetch.max.size`` of the storage manager's settings
    (``rsm.config.`` in the broker config; 0 when absent or malformed: no prefetch)."""
    key = "fetch.chunk.cache.prefetch.max.size"
    prefixed = getattr(config, "prefixed", None)  # a BrokerConfig holds plugin keys apart
    raw = (prefixed("rsm.config.") if callable(prefixed) else {}).get(key) \
        or config.get("rsm.config." + key, 0)
    try:
        return max(0, int(str(raw).strip()))
    except ValueError:
        return 0


def _prefetch_operation(storage: RemoteStorageManager
                        ) -> Callable[[RemoteLogSegmentMetadata, int, int], Any] | None:
    """The guarded ``prefetch`` operation of the storage manager, or None when it has none."""
    guarded = guard(storage)
    return guarded.prefetch if guarded.supports("prefetch") else None


def _segment_epochs(entries: list[tuple[int, int]], base: int, next_offset: int,
                    default_epoch: int) -> dict[int, int]:
    """Leader epoch -> first offset in the segment ``[base, next_offset)``."""
    out: dict[int, int] = {}
    for epoch, start in entries:
        if start >= next_offset:
            break
        if start <= base:
            out = {epoch: base}
        else:
            out[epoch] = start
    return out or {default_epoch: base}


def _parse_epoch_checkpoint(data: bytes, md: RemoteLogSegmentMetadata
                            ) -> list[tuple[int, int]]:
    """The ``(epoch, start offset)`` pairs of a leader-epoch checkpoint stored with the
    remote segment ``md`` (:func:`_epoch_checkpoint`'s format), below its end; the segment's
    own epochs when the checkpoint holds none.

    Raises:
        ValueError: the checkpoint is malformed (one line naming the segment).
    """
    try:
        lines = data.decode("ascii").split()
        version, count = int(lines[0]), int(lines[1])
        pairs = [(int(lines[2 + 2 * i]), int(lines[3 + 2 * i])) for i in range(count)]
        if version != 0 or len(lines) != 2 + 2 * count:
            raise ValueError("unexpected layout")
    except (UnicodeDecodeError, IndexError, ValueError) as exc:
        raise ValueError(f"the leader-epoch checkpoint of remote segment {md.segment_id} "
                         f"({md.start_offset}-{md.end_offset}) is malformed: {exc}") from None
    kept = [(e, s) for e, s in pairs if s <= md.end_offset]
    if not kept:
        kept = sorted(md.segment_leader_epochs.items(), key=lambda es: es[1])
    return kept


def _epoch_checkpoint(entries: list[tuple[int, int]], next_offset: int) -> bytes:
    """The leader-epoch checkpoint (Kafka's text format) of the entries below
    ``next_offset``."""
    kept = [(e, s) for e, s in entries if s < next_offset]
    lines = ["0", str(len(kept))] + [f"{e} {s}" for e, s in kept]
    return ("\n".join(lines) + "\n").encode("ascii")


__all__ = [
    "FOLLOWER",
    "LEADER",
    "READ_SLACK_BYTES",
    "RemoteLogManager",
    "RemoteRead",
    "RemoteTierState",
    "TaskResult",
    "read_batches",
]
