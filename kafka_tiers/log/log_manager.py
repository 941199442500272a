"""The log manager: every partition log of a broker's log dirs, loaded, checkpointed, shut down.

Startup (Kafka's ``LogManager.loadLogs`` with KIP-263, document 002):

1. Each log dir is locked (``.lock``), its ``meta.properties`` read (written when missing),
   and its ``.kafka_cleanshutdown`` marker noted.
2. The checkpoints give each partition its recovery point and log start offset (a malformed
   recovery-point checkpoint makes the whole dir recover as after a crash).
3. Partition directories are loaded by ``num.recovery.threads.per.data.dir`` threads per dir;
   see :mod:`kafka_tiers.log.log_loader` for what is checked with
   ``sanity.check.all.logs.enabled`` on and off.
4. The clean shutdown marker is removed, so a crash from now on is seen as unclean.

With the check off, segments left unchecked are checked on first access, or by
:meth:`LogManager.start_background_check` (document 002 starts it when the broker becomes
leader; the lead wires that).

:meth:`LogManager.shutdown` flushes and closes every log, writes the checkpoints (recovery point =
log end offset) and then the clean shutdown marker.

JBOD (document 000, KIP-113; see ``docs/jbod.md``):

* A new replica's dir is chosen by the ``choose_log_dir`` first-result hook (default: the online
  dir with the least bytes used), unless a move was requested for it before it existed.
* Replicas move between dirs with :meth:`LogManager.alter_replica_log_dirs`
  (:mod:`kafka_tiers.log.replica_mover`); :meth:`LogManager.append` and :meth:`LogManager.read`
  follow a replica across the swap.
* An I/O error takes one dir offline, not the broker (:mod:`kafka_tiers.log.log_dir_failure`);
  at startup a dir that cannot be used is offline too, and only when every dir is unusable
  does startup fail.
* Startup applies document 000's four recovery rules to ``-future`` and ``-delete`` dirs:
  source and future both present: the move resumes; only the future and no offline dir: it
  is promoted (renamed to the partition's name and loaded); only the future with an offline
  dir: it is left alone and the partition is offline; ``-delete`` dirs are deleted
  asynchronously.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.logdirs import LogDirInfo
from kafka_tiers.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SEGMENT_LIST_FILE,
    OffsetCheckpointFile,
    SegmentListCheckpoint,
    fsync_dir,
    has_clean_shutdown,
    read_meta_properties,
    remove_clean_shutdown,
    write_clean_shutdown,
    write_meta_properties,
)
from kafka_tiers.log.config import LONG_MAX, LogConfig
from kafka_tiers.log.describe import LogDirDescription, describe_log_dirs, disk_space
from kafka_tiers.log.errors import InvalidTopicError, LogClosedError, LogDirError, LogError
from kafka_tiers.log.log import AppendInfo, FetchData, Log, RollCallback
from kafka_tiers.log.log_dir_failure import LogDirFailureHandler, LogDirOfflineError
from kafka_tiers.log.names import child_path, parse_partition_dir, partition_dir_name
from kafka_tiers.log.replica_mover import MoveStatus, ReplicaMover, normalize_request
from kafka_tiers.log.throttle import Throttle

if TYPE_CHECKING:
    from kafka_tiers.plugins.hooks import Hooks

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
#: how long startup waits for the asynchronous delete of ``-delete`` dirs before returning
STARTUP_DELETE_GRACE_SECONDS = 1.0


class _DirUnusableError(LogDirError):
    """A log dir cannot be created or opened (an I/O problem: the dir goes offline)."""


@dataclass(frozen=True)
class MaintenanceIntervals:
    """How often :meth:`LogManager.run_due_tasks` does each periodic job (milliseconds)."""

    flush_check_ms: int = LONG_MAX  # log.flush.scheduler.interval.ms
    recovery_checkpoint_ms: int = 60000  # log.flush.offset.checkpoint.interval.ms
    start_offset_checkpoint_ms: int = 60000  # log.flush.start.offset.checkpoint.interval.ms
    retention_check_ms: int = 300000  # log.retention.check.interval.ms


@dataclass
class StartupReport:
    """What startup found: per-dir cleanliness, logs and segments loaded, time taken."""

    clean_shutdown: dict[str, bool] = field(default_factory=dict)
    logs: int = 0
    segments: int = 0
    unchecked_segments: int = 0
    recovered_segments: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: dirs found unusable at startup (path -> reason)
    offline_dirs: dict[str, str] = field(default_factory=dict)
    #: what the four JBOD recovery rules did: ("resumed"|"promoted"|"left"|"deleted", path)
    jbod_actions: list[tuple[str, str]] = field(default_factory=list)


class LogManager:
    """All partition logs of one broker.

    Args:
        log_dirs: the broker's ``log.dirs``.
        config: the default :class:`LogConfig` (topic overrides via ``topic_overrides``).
        sanity_check_all: ``sanity.check.all.logs.enabled``.
        recovery_threads_per_dir: ``num.recovery.threads.per.data.dir``.
        meta_properties: written to ``meta.properties`` of dirs that have none (e.g.
            ``{"version": "1", "node.id": "1", "cluster.id": "..."}``).
        on_roll: passed to every log.
        hooks: the broker's :class:`~kafka_tiers.plugins.hooks.Hooks`: ``choose_log_dir`` picks
            the dir of a new replica, ``replica_moved`` and ``log_dir_failed`` are notified. Without
            hooks the least-bytes-used online dir is chosen and nothing is notified.
        num_replica_move_threads: ``num.replica.move.threads`` (None: one per log dir).
        intra_broker_throttled_rate: ``intra.broker.throttled.rate`` in bytes per second
            (None or ``LONG_MAX``: unlimited).
        on_all_dirs_offline: called once with the last error when every dir is offline (the
            broker must stop).
    """

    def __init__(self, log_dirs: Iterable[str | os.PathLike[str]],
                 config: LogConfig | None = None, *, sanity_check_all: bool = True,
                 recovery_threads_per_dir: int = 2,
                 topic_overrides: Mapping[str, Mapping[str, str]] | None = None,
                 meta_properties: Mapping[str, str] | None = None,
                 on_roll: RollCallback | None = None,
                 intervals: MaintenanceIntervals | None = None,
                 time_fn: Callable[[], float] = time.time,
                 hooks: Hooks | None = None,
                 num_replica_move_threads: int | None = None,
                 intra_broker_throttled_rate: int | None = None,
                 on_all_dirs_offline: Callable[[BaseException], None] | None = None
                 ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise LogDirError("no log dirs given")
        self.config = config or LogConfig()
        self.sanity_check_all = sanity_check_all
        self.recovery_threads_per_dir = max(1, recovery_threads_per_dir)
        self.topic_overrides = {k: dict(v) for k, v in (topic_overrides or {}).items()}
        self.meta_properties = dict(meta_properties or {"version": "1"})
        self.on_roll = on_roll
        self.intervals = intervals or MaintenanceIntervals()
        self._last_run: dict[str, int] = {}
        self._scheduler: threading.Thread | None = None
        self._scheduler_stop = threading.Event()
        self._time = time_fn
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._lock_fds: dict[Path, int] = {}
        self._bg_thread: threading.Thread | None = None
        self._bg_stop = threading.Event()
        self._started = False
        self._shut_down = False
        self.report = StartupReport()
        self.hooks = hooks
        self.failure = LogDirFailureHandler(self, on_all_dirs_offline)
        self.throttle = Throttle(intra_broker_throttled_rate)
        self.mover = ReplicaMover(self, num_replica_move_threads or len(self.log_dirs),
                                  self.throttle)
        self._offline_partitions: dict[TopicPartition, Path] = {}
        #: periodic jobs added by the owner: name -> (interval in ms, job)
        self._jobs: dict[str, tuple[int, Callable[[], object]]] = {}
        self._dir_state_listeners: list[Callable[[], None]] = []

    @classmethod
    def from_config(cls, broker: Mapping[str, Any], **kwargs: Any) -> LogManager:
        """Build from a :class:`~kafka_tiers.config.BrokerConfig` (``log.dirs``,
        ``sanity.check.all.logs.enabled``, ``num.recovery.threads.per.data.dir``, log keys)."""
        intervals = MaintenanceIntervals(
            flush_check_ms=broker["log.flush.scheduler.interval.ms"],
            recovery_checkpoint_ms=broker["log.flush.offset.checkpoint.interval.ms"],
            start_offset_checkpoint_ms=broker["log.flush.start.offset.checkpoint.interval.ms"],
            retention_check_ms=broker["log.retention.check.interval.ms"])
        kwargs.setdefault("intervals", intervals)
        kwargs.setdefault("num_replica_move_threads", broker["num.replica.move.threads"])
        kwargs.setdefault("intra_broker_throttled_rate", broker["intra.broker.throttled.rate"])
        return cls(broker["log.dirs"], LogConfig.from_broker(broker),
                   sanity_check_all=broker["sanity.check.all.logs.enabled"],
                   recovery_threads_per_dir=broker["num.recovery.threads.per.data.dir"],
                   **kwargs)

    # ------------------------------------------------------------------ startup
    def startup(self) -> StartupReport:
        """Load every log of every log dir (see the module doc). Returns the report.

        A dir that cannot be used (an I/O error) is offline from the start (the
        ``log_dir_failed`` hook fires for it); the other dirs load.

        Raises:
            LogDirError: every log dir is unusable, or one is locked by another process.
        """
        start = time.perf_counter()
        report = StartupReport()
        futures: list[tuple[TopicPartition, Path, Path]] = []
        last_error: BaseException | None = None
        for log_dir in self.log_dirs:
            try:
                self._load_dir(log_dir, report, futures)
            except (_DirUnusableError, OSError) as exc:
                last_error = exc
                self._startup_offline(log_dir, exc, report)
        if len(self.failure.offline) == len(self.log_dirs):
            raise LogDirError(f"every log dir is unusable; last error: {last_error}",
                              path=str(self.log_dirs[-1]))
        for log_dir in self.log_dirs:
            if log_dir in self.failure.offline:
                continue
            try:
                remove_clean_shutdown(log_dir)
                SegmentListCheckpoint(log_dir / SEGMENT_LIST_FILE).remove()
            except OSError as exc:
                self.failure.fail(log_dir, exc)
        self._apply_recovery_rules(futures, report)
        # rule 4 runs in the background; small leftovers are gone when startup returns
        self.mover.deleter.wait(STARTUP_DELETE_GRACE_SECONDS)
        report.logs = len(self._logs)
        report.seconds = time.perf_counter() - start
        self.report = report
        self._started = True
        return report

    def _lock_dir(self, log_dir: Path) -> None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _DirUnusableError(f"cannot use log dir {log_dir}: {exc.strerror or exc}",
                                    path=str(log_dir)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirError(f"log dir {log_dir} is in use by another process",
                              path=str(log_dir)) from None
        self._lock_fds[log_dir] = fd

    def _startup_offline(self, log_dir: Path, exc: BaseException, report: StartupReport) -> None:
        logger.error("log dir %s is unusable at startup: %s", log_dir, exc)
        report.offline_dirs[str(log_dir)] = str(exc)
        self.failure.offline[log_dir] = f"{type(exc).__name__}: {exc}"
        with self._lock:
            for tp in [tp for tp, d in self._log_dir_of.items() if d == log_dir]:
                log = self._logs.pop(tp)
                del self._log_dir_of[tp]
                self._offline_partitions[tp] = log_dir
                with contextlib.suppress(Exception):
                    log.close()
        fd = self._lock_fds.pop(log_dir, None)
        if fd is not None:
            os.close(fd)
        if self.hooks is not None:
            self.hooks.log_dir_failed(str(log_dir), [], exc)

    def _apply_recovery_rules(self, futures: list[tuple[TopicPartition, Path, Path]],
                              report: StartupReport) -> None:
        """Document 000's rules for ``-future`` dirs (``-delete`` ones were scheduled by
        :meth:`_load_dir`)."""
        any_offline = bool(self.failure.offline)
        seen: set[TopicPartition] = set()
        for tp, path, log_dir in futures:
            if tp in seen:  # two futures of one partition: keep the first, drop the other
                self._schedule_delete(path, report)
                continue
            seen.add(tp)
            source = self._logs.get(tp)
            if source is not None:
                try:
                    with self.failure.guard(log_dir, tp):
                        future = Log.open(path, self._config_for(tp.topic), recovery_point=0,
                                          clean_shutdown=False, sanity_check_all=True,
                                          time_fn=self._time)
                except LogDirOfflineError as exc:
                    report.problems.append(str(exc))
                    continue
                report.jbod_actions.append(("resumed", str(path)))
                self.mover.resume(tp, future)
            elif not any_offline:
                final = child_path(log_dir, partition_dir_name(tp))
                try:
                    with self.failure.guard(log_dir, tp):
                        os.replace(path, final)
                        fsync_dir(log_dir)
                        log = Log.open(final, self._config_for(tp.topic), recovery_point=0,
                                       clean_shutdown=False, sanity_check_all=True,
                                       on_roll=self.on_roll, time_fn=self._time)
                except LogDirOfflineError as exc:
                    report.problems.append(str(exc))
                    continue
                report.jbod_actions.append(("promoted", str(final)))
                with self._lock:
                    self._logs[tp] = log
                    self._log_dir_of[tp] = log_dir
            else:
                report.jbod_actions.append(("left", str(path)))
                logger.warning("%s: only the future log %s survives and a log dir is "
                               "offline; the partition stays offline", tp, path)
                self._offline_partitions.setdefault(tp, log_dir)

    def _schedule_delete(self, path: Path, report: StartupReport) -> None:
        report.jbod_actions.append(("deleted", str(path)))
        doomed = path
        if not path.name.endswith("-delete"):
            doomed = path.with_name(path.name.rsplit("-future", 1)[0] + "-delete")
            os.replace(path, doomed)
        self.mover.deleter.schedule(doomed)

    def _load_dir(self, log_dir: Path, report: StartupReport,
                  futures: list[tuple[TopicPartition, Path, Path]] | None = None) -> None:
        self._lock_dir(log_dir)
        if read_meta_properties(log_dir) is None:
            write_meta_properties(log_dir, self.meta_properties)
        clean = has_clean_shutdown(log_dir)
        report.clean_shutdown[str(log_dir)] = clean
        try:
            recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        except LogDirError as exc:
            report.problems.append(str(exc))
            logger.warning("%s; recovering every log of %s", exc, log_dir)
            recovery_points, clean = {}, False
        start_offsets = self._read_optional(log_dir / LOG_START_OFFSET_CHECKPOINT, report)
        high_watermarks = self._read_optional(log_dir / REPLICATION_OFFSET_CHECKPOINT, report)
        segment_lists: dict[TopicPartition, tuple[int, list[int]]] = {}
        if clean:
            try:
                segment_lists = SegmentListCheckpoint(log_dir / SEGMENT_LIST_FILE).read()
            except LogDirError as exc:
                logger.warning("%s; listing the partition directories instead", exc)
        jobs: list[tuple[TopicPartition, Path]] = []
        for entry in os.scandir(log_dir):
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                parsed = parse_partition_dir(entry.name)
            except InvalidTopicError:
                continue
            if parsed.kind == "delete":
                logger.info("removing %s left by a move or delete", entry.path)
                self._schedule_delete(Path(entry.path), report)  # rule 4
                continue
            if parsed.kind == "future":
                if futures is not None:  # rules 1-3, once every dir is loaded
                    futures.append((parsed.partition, Path(entry.path), log_dir))
                continue
            jobs.append((parsed.partition, Path(entry.path)))

        def load(job: tuple[TopicPartition, Path]) -> tuple[TopicPartition, Path, Log]:
            tp, path = job
            log = Log.open(
                path, self._config_for(tp.topic), recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0), clean_shutdown=clean,
                sanity_check_all=self.sanity_check_all, on_roll=self.on_roll,
                time_fn=self._time, segment_list=segment_lists.get(tp))
            return tp, path, log

        if self.recovery_threads_per_dir == 1 or len(jobs) < 2:
            loaded = [load(j) for j in jobs]
        else:
            with ThreadPoolExecutor(self.recovery_threads_per_dir) as pool:
                loaded = list(pool.map(load, jobs))
        with self._lock:
            for tp, path, log in loaded:
                if tp in self._logs:
                    log.close()
                    raise LogDirError(f"{tp} has a log in both {self._log_dir_of[tp]} and "
                                      f"{path.parent}", path=str(path))
                self._logs[tp] = log
                self._log_dir_of[tp] = log_dir
                report.segments += log.num_segments
                report.unchecked_segments += log.unchecked_segments
                report.recovered_segments += len(log.load_report.recovered)
                report.problems += log.load_report.problems

    def _read_optional(self, path: Path, report: StartupReport) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except LogDirError as exc:
            report.problems.append(str(exc))
            logger.warning("%s; ignoring it", exc)
            return {}

    def _config_for(self, topic: str) -> LogConfig:
        overrides = self.topic_overrides.get(topic)
        return self.config.with_overrides(overrides) if overrides else self.config

    # ------------------------------------------------------------------ logs
    @property
    def logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def get_log(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._logs.get(tp)

    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        with self._lock:
            return self._log_dir_of.get(tp)

    def get_or_create_log(self, tp: TopicPartition, *, log_dir: str | os.PathLike[str] | None
                          = None, overrides: Mapping[str, str] | None = None) -> Log:
        """The log of ``tp``, created if missing: in ``log_dir`` when given, else in the dir a
        move requested before the replica existed named, else in the dir the
        ``choose_log_dir`` hook picks (default: the online dir with the least bytes used).

        Raises:
            InvalidTopicError: the topic name is not legal.
            LogDirError: ``log_dir`` is not one of this manager's dirs.
            LogDirOfflineError: the replica's dir (or the chosen one) is offline.
        """
        name = partition_dir_name(tp)
        with self._lock:
            if tp in self._logs:
                return self._logs[tp]
            if tp in self._offline_partitions:
                raise LogDirOfflineError(
                    f"{tp} is offline: its log dir {self._offline_partitions[tp]} failed",
                    path=str(self._offline_partitions[tp]), partition=tp)
            if log_dir is not None:
                target = self.resolve_log_dir(log_dir)
                if target is None:
                    raise LogDirError(f"{log_dir} is not a log dir of this broker",
                                      path=str(log_dir))
                self.mover.take_pending(tp)
            else:
                pending = self.mover.take_pending(tp)
                if pending is not None and pending not in self.failure.offline:
                    target = pending
                else:
                    target = self._choose_dir(tp)
            if target in self.failure.offline:
                raise LogDirOfflineError(f"log dir {target} is offline", path=str(target),
                                         partition=tp)
            config = self._config_for(tp.topic)
            if overrides:
                config = config.with_overrides(overrides)
            path = child_path(target, name)
            try:
                if target not in self._lock_fds:
                    self._lock_dir(target)
                log = Log.open(path, config, on_roll=self.on_roll, time_fn=self._time,
                               clean_shutdown=True)
                fsync_dir(target)
            except (_DirUnusableError, OSError) as exc:
                error: BaseException = exc
            else:
                self._logs[tp] = log
                self._log_dir_of[tp] = target
                return log
        self.failure.fail(target, error)  # outside the manager's lock
        raise LogDirOfflineError(f"log dir {target} failed creating {tp}: {error}",
                                 path=str(target), partition=tp) from error

    def _choose_dir(self, tp: TopicPartition) -> Path:
        infos = self.log_dir_infos(with_disk_space=self.hooks is not None)
        online = [i for i in infos if i.online]
        if not online:
            raise LogDirOfflineError("every log dir is offline", path=str(self.log_dirs[0]),
                                     partition=tp)
        if self.hooks is not None:
            return Path(self.hooks.choose_log_dir(tp, infos))
        best = min(online, key=lambda i: (i.bytes_used, i.replica_count, i.path))
        return Path(best.path)

    def log_dir_infos(self, *, with_disk_space: bool = True) -> list[LogDirInfo]:
        """One :class:`LogDirInfo` per log dir (what ``choose_log_dir`` sees): online, bytes
        held by its replicas, replica count and (``with_disk_space``) the file system's total
        and usable bytes."""
        with self._lock:
            placed = list(self._log_dir_of.items())
            logs = dict(self._logs)
        used = {d: 0 for d in self.log_dirs}
        count = {d: 0 for d in self.log_dirs}
        for tp, d in placed:
            count[d] += 1
            with contextlib.suppress(LogError):
                used[d] += logs[tp].size
        out = []
        for d in self.log_dirs:
            total, usable = disk_space(d) if with_disk_space else (0, 0)
            out.append(LogDirInfo(str(d), d not in self.failure.offline, used[d], total,
                                  usable, count[d]))
        return out

    def resolve_log_dir(self, path: str | os.PathLike[str]) -> Path | None:
        """The log dir of this manager that ``path`` names (compared normalised), or None."""
        norm = os.path.normpath(os.path.abspath(os.fspath(path)))
        for d in self.log_dirs:
            if os.path.normpath(os.path.abspath(d)) == norm:
                return d
        return None

    def delete_log(self, tp: TopicPartition) -> bool:
        """Close and delete the log of ``tp`` (renamed ``<dir>.<uuid>-delete`` first, so a
        crash midway finishes the delete at next startup). A move of it is cancelled first.
        True when there was one."""
        self.mover.cancel(tp)
        with self._lock:
            log = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return False
        with self.failure.guard(log_dir, tp):
            log.close()
            doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}-delete")
            os.replace(log.dir, doomed)
            fsync_dir(log_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # ------------------------------------------------------------------ serving
    def _serving(self, tp: TopicPartition) -> tuple[Log, Path]:
        with self._lock:
            log = self._logs.get(tp)
            log_dir = self._log_dir_of.get(tp)
            if log is not None and log_dir is not None:
                return log, log_dir
            offline = self._offline_partitions.get(tp)
        if offline is not None:
            raise LogDirOfflineError(f"{tp} is offline: its log dir {offline} failed",
                                     path=str(offline), partition=tp)
        raise LogError(f"{tp} has no log on this broker")

    def append(self, tp: TopicPartition, records: bytes | bytearray | memoryview,
               **kwargs: Any) -> AppendInfo:
        """``Log.append`` on the current log of ``tp`` (keyword arguments passed on), following
        it across a move's swap and taking its dir offline on an I/O error.

        Raises:
            LogDirOfflineError: the replica's dir is offline (Kafka's KafkaStorageError).
            LogError: no such replica, or what ``Log.append`` raises.
        """
        for _ in range(10):
            log, log_dir = self._serving(tp)
            try:
                with self.failure.guard(log_dir, tp):
                    return log.append(records, **kwargs)
            except LogClosedError:
                if self.get_log(tp) is log:
                    raise
        raise LogClosedError(f"{tp} kept being replaced during the append")

    def read(self, tp: TopicPartition, offset: int, max_bytes: int,
             **kwargs: Any) -> FetchData:
        """``Log.read`` on the current log of ``tp`` (keyword arguments passed on), following
        it across a move's swap and taking its dir offline on an I/O error.

        Raises:
            LogDirOfflineError: the replica's dir is offline (Kafka's KafkaStorageError).
            LogError: no such replica, or what ``Log.read`` raises.
        """
        for _ in range(10):
            log, log_dir = self._serving(tp)
            try:
                with self.failure.guard(log_dir, tp):
                    return log.read(offset, max_bytes, **kwargs)
            except LogClosedError:
                if self.get_log(tp) is log:
                    raise
        raise LogClosedError(f"{tp} kept being replaced during the read")

    # ------------------------------------------------------------------ JBOD
    def alter_replica_log_dirs(self, moves: Mapping[TopicPartition, str | os.PathLike[str]]
                               ) -> dict[TopicPartition, str]:
        """Document 000's ChangeReplicaDirRequest: move each replica to the given log dir of
        this broker (``any`` cancels its move). Returns per partition ``NONE`` (moving,
        already there or cancelled), ``REPLICA_NOT_AVAILABLE`` (no replica yet: remembered and
        applied when it is created), ``LOG_DIR_NOT_FOUND`` or ``KAFKA_STORAGE_ERROR``.

        Raises:
            ValueError: a dir that is neither ``any`` nor an absolute path.
        """
        return {tp: self.mover.request(tp, d) for tp, d in normalize_request(moves).items()}

    def replica_move_status(self, tp: TopicPartition | None = None) -> list[MoveStatus]:
        """The moves requested since startup (or that of ``tp``) with state and bytes."""
        return self.mover.status(tp)

    def wait_for_moves(self, timeout: float | None = None) -> bool:
        """Wait until no move is queued or running; True when none is left."""
        return self.mover.wait(timeout)

    def describe_log_dirs(self, log_dirs: Iterable[str | os.PathLike[str]] | None = None,
                          topics: Iterable[str] | None = None) -> list[LogDirDescription]:
        """Document 000's DescribeDirs (see :mod:`kafka_tiers.log.describe`)."""
        return describe_log_dirs(self, log_dirs, topics)

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Offline log dirs and why."""
        return dict(self.failure.offline)

    @property
    def offline_partitions(self) -> dict[TopicPartition, Path]:
        """Replicas out of service because their dir failed (or, startup rule 3, because only
        their future log survived while a dir is offline), with that dir."""
        with self._lock:
            return dict(self._offline_partitions)

    def mark_log_dir_offline(self, log_dir: str | os.PathLike[str],
                             error: BaseException) -> bool:
        """Take ``log_dir`` offline as after an I/O error there (see
        :mod:`kafka_tiers.log.log_dir_failure`). False when it already was.

        Raises:
            LogDirError: not a log dir of this manager.
        """
        d = self.resolve_log_dir(log_dir)
        if d is None:
            raise LogDirError(f"{log_dir} is not a log dir of this broker", path=str(log_dir))
        return self.failure.fail(d, error)

    def _take_dir_offline(self, log_dir: Path) -> list[TopicPartition]:
        """For the failure handler: remove the dir's replicas from service; their logs are
        closed outside the manager's lock, errors ignored (the disk is failing)."""
        with self._lock:
            tps = sorted(tp for tp, d in self._log_dir_of.items() if d == log_dir)
            logs = [self._logs.pop(tp) for tp in tps]
            for tp in tps:
                del self._log_dir_of[tp]
                self._offline_partitions[tp] = log_dir
            fd = self._lock_fds.pop(log_dir, None)
        for log in logs:
            with contextlib.suppress(Exception):
                log.close()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        return tps

    def _replace_log(self, tp: TopicPartition, log: Log, log_dir: Path) -> None:
        """For the mover's swap: ``tp`` is served by ``log`` in ``log_dir`` from now on."""
        with self._lock:
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir

    def add_dir_state_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after a log dir went offline (from the failing thread; it
        must not raise and must not block long)."""
        self._dir_state_listeners.append(listener)

    def _dir_state_changed(self) -> None:
        for listener in list(self._dir_state_listeners):
            listener()

    # ------------------------------------------------------------------ checks
    def check_unchecked_segments(self, tps: Iterable[TopicPartition] | None = None) -> int:
        """Sanity-check now every segment left unchecked at startup; returns how many."""
        done = 0
        targets = list(tps) if tps is not None else list(self.logs)
        for tp in targets:
            log = self.get_log(tp)
            if log is not None and not log.closed:
                try:
                    done += log.check_segments()
                except LogError as exc:  # closed under us
                    logger.info("stopped checking %s: %s", tp, exc)
        return done

    def start_background_check(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Check unchecked segments in a daemon thread (document 002: after becoming leader),
        one segment per log-lock hold so producers and fetches interleave."""
        targets = list(tps) if tps is not None else None

        def run() -> None:
            for tp in targets if targets is not None else list(self.logs):
                if self._bg_stop.is_set():
                    return
                log = self.get_log(tp)
                while log is not None and not log.closed and not self._bg_stop.is_set():
                    try:
                        if log.check_segments(max_segments=1) == 0:
                            break
                    except LogError:
                        break

        self._bg_stop.clear()
        self._bg_thread = threading.Thread(target=run, name="kafka-tiers-log-check",
                                           daemon=True)
        self._bg_thread.start()

    def wait_background_check(self, timeout: float | None = None) -> bool:
        """Wait for the background check; True when it finished."""
        if self._bg_thread is None:
            return True
        self._bg_thread.join(timeout)
        return not self._bg_thread.is_alive()

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, log_dirs: Iterable[Path] | None = None) -> None:
        """Write the recovery points, log start offsets and high watermarks of every dir (or
        of ``log_dirs``)."""
        failed: list[tuple[Path, OSError]] = []
        wanted = self.log_dirs if log_dirs is None else [d for d in self.log_dirs
                                                          if d in set(log_dirs)]
        with self._lock:
            for log_dir in wanted:
                if log_dir in self.failure.offline:
                    continue
                tps = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
                logs = {tp: self._logs[tp] for tp in tps}
                try:
                    OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(
                        {tp: lg.recovery_point for tp, lg in logs.items()})
                    OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(
                        {tp: lg.log_start_offset for tp, lg in logs.items()})
                    OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(
                        {tp: lg.high_watermark for tp, lg in logs.items()})
                except OSError as exc:
                    failed.append((log_dir, exc))
        for log_dir, error in failed:  # outside the manager's lock
            self.failure.fail(log_dir, error)

    def flush_all(self) -> None:
        """Flush every log (recovery points advance to the log end offsets)."""
        for tp, log in self.logs.items():
            try:
                with self.failure.guard(self.log_dir_of(tp), tp):
                    log.flush()
            except (LogDirOfflineError, LogClosedError):
                continue

    # ------------------------------------------------------------------ periodic jobs
    def run_due_tasks(self, now_ms: int | None = None) -> list[str]:
        """Run the periodic jobs whose interval has passed (Kafka's LogManager scheduler):
        ``flush`` (logs past their ``flush.ms``), ``checkpoint`` (recovery points, log start
        offsets and high watermarks) and ``retention`` (``delete_old_segments`` of every log).
        Jobs added with :meth:`add_periodic_job` run after those. Returns the jobs run. A
        scheduler calls this; :meth:`start_scheduler` runs one."""
        now = int(self._time() * 1000) if now_ms is None else now_ms
        ran = []
        jobs = (("flush", self.intervals.flush_check_ms),
                ("checkpoint", min(self.intervals.recovery_checkpoint_ms,
                                   self.intervals.start_offset_checkpoint_ms)),
                ("retention", self.intervals.retention_check_ms),
                *((name, interval) for name, (interval, _) in list(self._jobs.items())))
        for name, interval in jobs:
            last = self._last_run.setdefault(name, now)
            if now - last < interval:
                continue
            self._last_run[name] = now
            extra = self._jobs.get(name)
            if extra is not None:
                extra[1]()
                ran.append(name)
                continue
            for tp, log in self.logs.items():
                if log.closed:
                    continue
                try:
                    with self.failure.guard(self.log_dir_of(tp), tp):
                        if name == "flush":
                            log.maybe_flush()
                        elif name == "retention":
                            log.delete_old_segments()
                except LogError as exc:
                    logger.warning("%s of %s failed: %s", name, log.dir, exc)
            if name == "checkpoint":
                self.checkpoint()
            ran.append(name)
        return ran

    def start_scheduler(self, tick_seconds: float = 0.5) -> None:
        """Call :meth:`run_due_tasks` every ``tick_seconds`` in a daemon thread until
        :meth:`shutdown`."""
        def loop() -> None:
            while not self._scheduler_stop.wait(tick_seconds):
                try:
                    self.run_due_tasks()
                except Exception:  # keep the broker's maintenance alive; logged
                    logger.exception("log maintenance failed")

        self._scheduler_stop.clear()
        self._scheduler = threading.Thread(target=loop, name="kafka-tiers-log-scheduler",
                                           daemon=True)
        self._scheduler.start()

    def add_periodic_job(self, name: str, interval_ms: int, job: Callable[[], object]) -> None:
        """Run ``job()`` from :meth:`run_due_tasks` every ``interval_ms`` (the broker's admin
        channel, for one). Adding a name again replaces its job.

        Raises:
            ValueError: ``name`` is a built-in job's, or ``interval_ms`` is below 1.
        """
        if name in ("flush", "checkpoint", "retention"):
            raise ValueError(f"{name!r} is a built-in job of the log manager")
        if interval_ms < 1:
            raise ValueError(f"interval_ms must be >= 1, got {interval_ms}")
        self._jobs[name] = (interval_ms, job)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, *, broker_epoch: int = -1) -> None:
        """Clean shutdown: stop the background check, flush and close every log, write the
        checkpoints, then ``.kafka_cleanshutdown`` in every dir, and release the dir locks.
        Replica moves stop first; their future logs stay on disk and resume at the next
        startup. A second call does nothing."""
        if self._shut_down:
            return
        self._shut_down = True
        self._bg_stop.set()
        self._scheduler_stop.set()
        if self._bg_thread is not None:
            self._bg_thread.join()
        if self._scheduler is not None:
            self._scheduler.join()
        self.mover.shutdown()  # moves stop; their future logs stay for startup rule 1
        with self._lock:
            failed: list[tuple[Path, OSError]] = []
            for tp, log in self._logs.items():
                try:
                    log.close()
                except OSError as exc:
                    failed.append((self._log_dir_of[tp], exc))
            for log_dir, error in failed:
                self.failure.fail(log_dir, error)
            self.checkpoint()
            for log_dir in self.log_dirs:
                if log_dir not in self._lock_fds or log_dir in self.failure.offline:
                    continue
                lists = {}
                for tp, d in self._log_dir_of.items():
                    if d == log_dir:
                        log = self._logs[tp]
                        lists[tp] = (os.stat(log.dir).st_mtime_ns, log.segment_bases())
                try:
                    SegmentListCheckpoint(log_dir / SEGMENT_LIST_FILE).write(lists)
                    write_clean_shutdown(log_dir, broker_epoch)
                except OSError as exc:
                    logger.error("clean shutdown of %s failed: %s", log_dir, exc)
            for fd in self._lock_fds.values():
                os.close(fd)
            self._lock_fds.clear()

    def __enter__(self) -> LogManager:
        if not self._started:
            self.startup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["LOCK_FILE", "STARTUP_DELETE_GRACE_SECONDS", "LogManager", "MaintenanceIntervals",
           "StartupReport"]
