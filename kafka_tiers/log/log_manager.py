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
"""

from __future__ import annotations

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
from typing import Any

from kafka_tiers.api.cluster import TopicPartition
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
from kafka_tiers.log.errors import InvalidTopicError, LogDirError, LogError
from kafka_tiers.log.log import Log, RollCallback
from kafka_tiers.log.names import child_path, parse_partition_dir, partition_dir_name

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"


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
    """

    def __init__(self, log_dirs: Iterable[str | os.PathLike[str]],
                 config: LogConfig | None = None, *, sanity_check_all: bool = True,
                 recovery_threads_per_dir: int = 2,
                 topic_overrides: Mapping[str, Mapping[str, str]] | None = None,
                 meta_properties: Mapping[str, str] | None = None,
                 on_roll: RollCallback | None = None,
                 intervals: MaintenanceIntervals | None = None,
                 time_fn: Callable[[], float] = time.time) -> None:
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
        self.report = StartupReport()

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
        return cls(broker["log.dirs"], LogConfig.from_broker(broker),
                   sanity_check_all=broker["sanity.check.all.logs.enabled"],
                   recovery_threads_per_dir=broker["num.recovery.threads.per.data.dir"],
                   **kwargs)

    # ------------------------------------------------------------------ startup
    def startup(self) -> StartupReport:
        """Load every log of every log dir (see the module doc). Returns the report.

        Raises:
            LogDirError: a log dir cannot be created, locked or read.
        """
        start = time.perf_counter()
        report = StartupReport()
        for log_dir in self.log_dirs:
            self._load_dir(log_dir, report)
        for log_dir in self.log_dirs:
            remove_clean_shutdown(log_dir)
            SegmentListCheckpoint(log_dir / SEGMENT_LIST_FILE).remove()
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
            raise LogDirError(f"cannot use log dir {log_dir}: {exc.strerror or exc}",
                              path=str(log_dir)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirError(f"log dir {log_dir} is in use by another process",
                              path=str(log_dir)) from None
        self._lock_fds[log_dir] = fd

    def _load_dir(self, log_dir: Path, report: StartupReport) -> None:
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
                logger.info("removing %s left by an interrupted delete", entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if parsed.kind == "future":
                continue  # JBOD moves resume these; they are not the partition's log
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
        """The log of ``tp``, created (in ``log_dir`` or the dir with fewest logs) if missing.

        Raises:
            InvalidTopicError: the topic name is not legal.
            LogDirError: ``log_dir`` is not one of this manager's dirs.
        """
        name = partition_dir_name(tp)
        with self._lock:
            if tp in self._logs:
                return self._logs[tp]
            if log_dir is not None:
                target = Path(log_dir)
                if target not in self.log_dirs:
                    raise LogDirError(f"{target} is not a log dir of this broker",
                                      path=str(target))
            else:
                counts = {d: 0 for d in self.log_dirs}
                for d in self._log_dir_of.values():
                    counts[d] += 1
                target = min(self.log_dirs, key=lambda d: (counts[d], str(d)))
            if target not in self._lock_fds:
                self._lock_dir(target)
            config = self._config_for(tp.topic)
            if overrides:
                config = config.with_overrides(overrides)
            path = child_path(target, name)
            log = Log.open(path, config, on_roll=self.on_roll, time_fn=self._time,
                           clean_shutdown=True)
            fsync_dir(target)
            self._logs[tp] = log
            self._log_dir_of[tp] = target
            return log

    def delete_log(self, tp: TopicPartition) -> bool:
        """Close and delete the log of ``tp`` (renamed ``<dir>.<uuid>-delete`` first, so a
        crash midway finishes the delete at next startup). True when there was one."""
        with self._lock:
            log = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return False
        log.close()
        doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}-delete")
        os.replace(log.dir, doomed)
        fsync_dir(log_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

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
    def checkpoint(self) -> None:
        """Write the recovery points, log start offsets and high watermarks of every dir."""
        with self._lock:
            for log_dir in self.log_dirs:
                tps = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
                logs = {tp: self._logs[tp] for tp in tps}
                OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(
                    {tp: lg.recovery_point for tp, lg in logs.items()})
                OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(
                    {tp: lg.log_start_offset for tp, lg in logs.items()})
                OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(
                    {tp: lg.high_watermark for tp, lg in logs.items()})

    def flush_all(self) -> None:
        """Flush every log (recovery points advance to the log end offsets)."""
        for log in self.logs.values():
            log.flush()

    # ------------------------------------------------------------------ periodic jobs
    def run_due_tasks(self, now_ms: int | None = None) -> list[str]:
        """Run the periodic jobs whose interval has passed (Kafka's LogManager scheduler):
        ``flush`` (logs past their ``flush.ms``), ``checkpoint`` (recovery points, log start
        offsets and high watermarks) and ``retention`` (``delete_old_segments`` of every log).
        Returns the jobs run. A scheduler calls this; :meth:`start_scheduler` runs one."""
        now = int(self._time() * 1000) if now_ms is None else now_ms
        ran = []
        jobs = (("flush", self.intervals.flush_check_ms),
                ("checkpoint", min(self.intervals.recovery_checkpoint_ms,
                                   self.intervals.start_offset_checkpoint_ms)),
                ("retention", self.intervals.retention_check_ms))
        for name, interval in jobs:
            last = self._last_run.setdefault(name, now)
            if now - last < interval:
                continue
            self._last_run[name] = now
            for log in self.logs.values():
                if log.closed:
                    continue
                try:
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

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, *, broker_epoch: int = -1) -> None:
        """Clean shutdown: stop the background check, flush and close every log, write the
        checkpoints, then ``.kafka_cleanshutdown`` in every dir, and release the dir locks."""
        self._bg_stop.set()
        self._scheduler_stop.set()
        if self._bg_thread is not None:
            self._bg_thread.join()
        if self._scheduler is not None:
            self._scheduler.join()
        with self._lock:
            for log in self._logs.values():
                log.close()
            self.checkpoint()
            for log_dir in self.log_dirs:
                lists = {}
                for tp, d in self._log_dir_of.items():
                    if d == log_dir:
                        log = self._logs[tp]
                        lists[tp] = (os.stat(log.dir).st_mtime_ns, log.segment_bases())
                if log_dir in self._lock_fds:
                    SegmentListCheckpoint(log_dir / SEGMENT_LIST_FILE).write(lists)
            for log_dir in self.log_dirs:
                if log_dir in self._lock_fds:
                    write_clean_shutdown(log_dir, broker_epoch)
            for fd in self._lock_fds.values():
                os.close(fd)
            self._lock_fds.clear()

    def __enter__(self) -> LogManager:
        if not self._started:
            self.startup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["LOCK_FILE", "LogManager", "MaintenanceIntervals", "StartupReport"]
