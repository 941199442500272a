"""The log manager: every partition log of a broker's log dirs, loaded, checkpointed, shut down.

Startup (Kafka's ``LogManager.loadLogs`` with KIP-263, document 002):

1. Every log dir is claimed before any is read (:meth:`LogManager.claim_log_dirs`, the rules
   of :mod:`kafka_tiers.log.dir_ownership`): locked (``.lock``; a dir another live process
   holds refuses the start and is never touched), its ``meta.properties`` checked against this
   broker's id and cluster id (a mismatch refuses the start, naming the dir, both ids and the
   fix) and written when missing. Then each dir's ``.kafka_cleanshutdown`` marker is noted.
2. The checkpoints give each partition its recovery point and log start offset (a malformed
   recovery-point checkpoint makes the whole dir recover as after a crash).
3. Partition directories are loaded by ``num.recovery.threads.per.data.dir`` threads per dir;
   see :mod:`kafka_tiers.log.log_loader` for what is checked with
   ``sanity.check.all.logs.enabled`` on and off.
4. The clean shutdown marker is removed, so a crash from now on is seen as unclean.

Only directories that are provably replicas are loaded: a partition name holding a Kafka
segment file (``<20 digits>.log``). Any other directory (``backup-2024/``, ``foo-1/`` without log
files) is left alone and reported once with a WARN line. A partition whose files fail to load
(a malformed ``leader-epoch-checkpoint``, an index or segment the loader cannot use, anything
but an I/O error) is offline on its own, with one ERROR line naming the partition, the file and
the problem, while every other partition serves; an ``OSError`` still takes its whole dir
offline (see below).

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
  asynchronously, ``file.delete.delay.ms`` after start-up (:mod:`kafka_tiers.log.dir_deleter`:
  only Kafka-named files, the dir itself only once empty).
* A replica no longer assigned to the broker (:meth:`LogManager.delete_stray_replica`) is
  renamed ``<topic>-<partition>.<uuid>-delete`` with a WARN line and deleted after
  ``file.delete.delay.ms``, as Kafka does with stray replicas.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import KafkaTiersError
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
from kafka_tiers.log.dir_deleter import DirDeleter, remove_unused_replica_dir
from kafka_tiers.log.dir_ownership import (
    DELETE,
    FOREIGN,
    FUTURE,
    LINKED,
    OWN_PREFIXES,
    REPLICA,
    LogDirInUseError,
    check_meta_properties,
    classify_entry,
)
from kafka_tiers.log.errors import LogClosedError, LogDirError, LogError
from kafka_tiers.log.handles import configure as configure_open_files
from kafka_tiers.log.log import AppendInfo, FetchData, Log, RegionRead, RollCallback
from kafka_tiers.log.log_dir_failure import (
    LogDirFailureHandler,
    LogDirOfflineError,
    is_partition_file_error,
    is_resource_exhaustion,
    resource_error,
)
from kafka_tiers.log.names import LOG_SUFFIX, child_path, partition_dir_name, segment_file_name
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
    #: directories in log dirs that are no replicas, left alone (reported once, WARN)
    foreign_dirs: list[str] = field(default_factory=list)
    #: partitions whose files failed to load (offline on their own): partition -> problem
    failed_partitions: dict[TopicPartition, str] = field(default_factory=dict)
    #: replicas not assigned to this broker, never loaded: left alone (path) ...
    unassigned_left: list[str] = field(default_factory=list)
    #: ... or renamed ``-delete`` with their content untouched (the new path)
    unassigned_deleted: list[str] = field(default_factory=list)


class LogManager:
    """All partition logs of one broker.

    Args:
        log_dirs: the broker's ``log.dirs``.
        config: the default :class:`LogConfig` (topic overrides via ``topic_overrides``).
        sanity_check_all: ``sanity.check.all.logs.enabled``.
        recovery_threads_per_dir: ``num.recovery.threads.per.data.dir``.
        meta_properties: this broker's ``meta.properties`` (e.g. ``{"version": "1",
            "node.id": "1", "cluster.id": "..."}``): every dir's must name the same broker
            (and cluster, when ``cluster.id`` is given); written to dirs that have none.
        on_roll: passed to every log.
        hooks: the broker's :class:`~kafka_tiers.plugins.hooks.Hooks`: ``choose_log_dir`` picks
            the dir of a new replica, ``replica_moved`` and ``log_dir_failed`` are notified. Without
            hooks the least-bytes-used online dir is chosen and nothing is notified.
        num_replica_move_threads: ``num.replica.move.threads`` (None: one per log dir).
        intra_broker_throttled_rate: ``intra.broker.throttled.rate`` in bytes per second
            (None or ``LONG_MAX``: unlimited).
        on_all_dirs_offline: called once with the last error when every dir is offline (the
            broker must stop).
        file_delete_delay_ms: Kafka's ``file.delete.delay.ms``: how long a ``-delete`` dir
            waits before it is deleted (0 here; the broker's config defaults to 60000).
        reserved_dirs: directories inside log dirs that the owner's other components use
            (the embedded metadata store's ``metadata.dir``): neither loaded nor reported.
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
                 on_all_dirs_offline: Callable[[BaseException], None] | None = None,
                 file_delete_delay_ms: int = 0,
                 reserved_dirs: Iterable[str | os.PathLike[str]] = ()
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
        self.deleter = DirDeleter(file_delete_delay_ms)
        self.mover = ReplicaMover(self, num_replica_move_threads or len(self.log_dirs),
                                  self.throttle, self.deleter)
        #: dirs claimed by :meth:`claim_log_dirs` that were unusable (path -> error)
        self._unusable: dict[Path, BaseException] = {}
        self._claimed = False
        self._reserved = {os.path.normpath(os.path.abspath(os.fspath(d)))
                          for d in reserved_dirs}
        #: partitions offline because their files failed to load: partition -> problem
        self._load_failures: dict[TopicPartition, str] = {}
        self._offline_partitions: dict[TopicPartition, Path] = {}
        #: startup's ``assigned`` (None: every replica is this broker's) and what it left
        self._assigned: frozenset[TopicPartition] | None = None
        self._delete_unassigned = False
        self._unassigned_left: dict[TopicPartition, Path] = {}
        #: periodic jobs added by the owner: name -> (interval in ms, job)
        self._jobs: dict[str, tuple[int, Callable[[], object]]] = {}
        self._dir_state_listeners: list[Callable[[], None]] = []
        self._log_replaced_listeners: list[Callable[[TopicPartition, Log], None]] = []
        #: per thread: the log dirs whose fsync a batched creation defers (None: no batch)
        self._deferred_sync = threading.local()

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
        kwargs.setdefault("file_delete_delay_ms", broker["log.segment.delete.delay.ms"])
        configure_open_files(broker["log.open.files.max"])  # process-wide, as RLIMIT_NOFILE
        return cls(broker["log.dirs"], LogConfig.from_broker(broker),
                   sanity_check_all=broker["sanity.check.all.logs.enabled"],
                   recovery_threads_per_dir=broker["num.recovery.threads.per.data.dir"],
                   **kwargs)

    # ------------------------------------------------------------------ startup
    def startup(self, assigned: Iterable[TopicPartition] | None = None, *,
                delete_unassigned: bool = False) -> StartupReport:
        """Load every log of every log dir (see the module doc). Returns the report.

        ``assigned`` is the set of partitions this broker holds replicas of (a cluster member:
        its metadata store's assignments; a standalone broker: its topics file); None: every
        replica found is this broker's (tools). A replica not in it is never loaded nor
        recovered (no byte of it is read or written): with ``delete_unassigned`` (a cluster
        member: Kafka's stray replicas) it is renamed ``<topic>-<partition>.<uuid>-delete``
        with a WARN line and deleted after ``file.delete.delay.ms``; without, it is left
        alone and reported (WARN), and :meth:`get_or_create_log` refuses to adopt it.

        A dir that cannot be used (an I/O error) is offline from the start (the
        ``log_dir_failed`` hook fires for it); the other dirs load. A partition whose files fail
        to load is offline on its own (:attr:`offline_partitions`); the others load.

        Raises:
            LogDirError: every log dir is unusable, or what :meth:`claim_log_dirs` raises.
        """
        start = time.perf_counter()
        report = StartupReport()
        self._assigned = frozenset(assigned) if assigned is not None else None
        self._delete_unassigned = delete_unassigned
        futures: list[tuple[TopicPartition, Path, Path]] = []
        last_error: BaseException | None = None
        self.claim_log_dirs()
        for log_dir in self.log_dirs:
            unusable = self._unusable.get(log_dir)
            if unusable is not None:
                last_error = unusable
                self._startup_offline(log_dir, unusable, report)
                continue
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
        if self.deleter.delay_ms == 0:
            self.deleter.wait(STARTUP_DELETE_GRACE_SECONDS)
        report.logs = len(self._logs)
        report.seconds = time.perf_counter() - start
        self.report = report
        self._started = True
        return report

    def claim_log_dirs(self) -> None:
        """Lock every log dir and check it is this broker's (the rules of
        :mod:`kafka_tiers.log.dir_ownership`), before anything in any dir is read: all dirs
        are locked first, then every ``meta.properties`` is checked, and only then are missing
        ones written (a refused start writes nothing). A dir that cannot be created or opened
        (an I/O error) is remembered and goes offline at :meth:`startup`. :meth:`startup` calls
        this; an owner that reads its own files from a log dir (the broker's topics file) calls
        it first. A second call does nothing.

        Raises:
            LogDirInUseError: a dir is locked by another live process (or log manager); every
                lock taken here is released and nothing in any dir was touched.
            InconsistentBrokerIdError, InconsistentClusterIdError: a dir's ``meta.properties``
                names another broker or cluster (locks released, nothing written).
            LogDirError: a dir's ``meta.properties`` cannot be read.
        """
        if self._claimed:
            return
        unlocked: list[Path] = []  # no .lock yet: nobody holds them; created once checked
        try:
            for log_dir in self.log_dirs:
                if log_dir in self._lock_fds:
                    continue
                try:
                    if not self._lock_dir(log_dir, create=False):
                        unlocked.append(log_dir)
                except _DirUnusableError as exc:
                    self._unusable[log_dir] = exc
            to_write: dict[Path, dict[str, str]] = {}
            for log_dir in self.log_dirs:
                if log_dir in self._unusable:
                    continue
                stored = read_meta_properties(log_dir) if log_dir.is_dir() else None
                wanted = check_meta_properties(log_dir, stored, self.meta_properties)
                if wanted is not None:
                    to_write[log_dir] = wanted
            for log_dir in unlocked:
                try:
                    self._lock_dir(log_dir)
                except _DirUnusableError as exc:
                    self._unusable[log_dir] = exc
                    to_write.pop(log_dir, None)
        except BaseException:
            self._release_locks()
            raise
        self._write_meta(to_write)
        self._claimed = True

    def adopt_cluster_id(self, cluster_id: str) -> None:
        """Make ``cluster_id`` this broker's (a cluster member learns it from its metadata
        store, which may live inside a log dir: so after :meth:`claim_log_dirs`). Every claimed
        dir's ``meta.properties`` must carry the same ``cluster.id`` or none (then it is added).
        Before the claim, the claim checks it. Idempotent.

        Raises:
            InconsistentClusterIdError: a dir names another cluster (every lock is released,
                nothing written).
        """
        self.meta_properties["cluster.id"] = cluster_id
        if not self._claimed:
            return
        to_write: dict[Path, dict[str, str]] = {}
        try:
            for log_dir in self.log_dirs:
                if log_dir in self._unusable:
                    continue
                wanted = check_meta_properties(log_dir, read_meta_properties(log_dir),
                                               self.meta_properties)
                if wanted is not None:
                    to_write[log_dir] = wanted
        except BaseException:
            self._release_locks()
            self._claimed = False
            raise
        self._write_meta(to_write)

    def _write_meta(self, to_write: Mapping[Path, Mapping[str, str]]) -> None:
        for log_dir, props in to_write.items():
            try:
                write_meta_properties(log_dir, props)
            except OSError as exc:
                self._unusable[log_dir] = exc

    def _release_locks(self) -> None:
        with self._lock:
            fds = list(self._lock_fds.values())
            self._lock_fds.clear()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _lock_dir(self, log_dir: Path, *, create: bool = True) -> bool:
        """Lock ``log_dir`` (``flock`` on its ``.lock``). With ``create`` False a missing dir
        or ``.lock`` is left as it is and False returned (nothing can hold it)."""
        try:
            if not create and not (log_dir / LOCK_FILE).exists():
                return False
            log_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _DirUnusableError(f"cannot use log dir {log_dir}: {exc.strerror or exc}",
                                    path=str(log_dir)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirInUseError(
                f"log dir {log_dir} is in use by another process (its {LOCK_FILE} is locked): "
                f"stop the broker using it, or give this broker another log dir; nothing in "
                f"{log_dir} was touched", path=str(log_dir)) from None
        self._lock_fds[log_dir] = fd
        return True

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
            if tp in self._load_failures:  # the source failed to load: keep both as they are
                report.jbod_actions.append(("left", str(path)))
                continue
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
        """Load the replicas of one claimed dir. Per-partition load errors take only that
        partition offline; an ``OSError`` is raised (the caller takes the dir offline)."""
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
        foreign: list[str] = []
        expected_logs = {tp: segment_file_name(bases[0], LOG_SUFFIX)
                         for tp, (_, bases) in segment_lists.items() if bases}
        unassigned: list[tuple[TopicPartition, Path]] = []
        for entry in os.scandir(log_dir):
            if entry.is_symlink():  # never a replica: nothing is done through a link
                if not entry.is_dir() or entry.name.startswith(OWN_PREFIXES):
                    continue
            elif not entry.is_dir(follow_symlinks=False):
                continue
            if os.path.normpath(os.path.abspath(entry.path)) in self._reserved:
                continue
            kind, parsed = classify_entry(entry.name, entry.path, expected_logs)
            if kind == FOREIGN or (entry.is_symlink() and kind != LINKED):
                foreign.append(entry.name)
                continue
            if kind == LINKED and parsed is not None:  # left alone, never made anew
                foreign.append(entry.name)
                with self._lock:
                    self._offline_partitions[parsed.partition] = log_dir
                    self._load_failures[parsed.partition] = (
                        f"{entry.path} is or holds a symlink (left alone: nothing in a log dir "
                        f"is written through a link); replace the link by the file")
                continue
            if parsed is None:  # the broker's own tools' dirs
                continue
            if kind == DELETE:
                logger.info("removing %s left by a move or delete", entry.path)
                self._schedule_delete(Path(entry.path), report)  # rule 4
                continue
            if kind == FUTURE:
                if self._assigned is not None and parsed.partition not in self._assigned:
                    unassigned.append((parsed.partition, Path(entry.path)))
                    continue
                if futures is not None:  # rules 1-3, once every dir is loaded
                    futures.append((parsed.partition, Path(entry.path), log_dir))
                continue
            if kind == REPLICA:
                if self._assigned is not None and parsed.partition not in self._assigned:
                    unassigned.append((parsed.partition, Path(entry.path)))
                    continue
                jobs.append((parsed.partition, Path(entry.path)))
        for tp, path in unassigned:
            self._set_aside_unassigned(tp, path, log_dir, report)
        if foreign:
            foreign.sort()
            report.foreign_dirs += [str(log_dir / name) for name in foreign]
            logger.warning(
                "log dir %s holds %d director%s that %s not Kafka replicas, left alone: %s "
                "(a replica's dir is <topic>-<partition> holding <20 digits>.log files; move "
                "anything else out of log dirs)", log_dir, len(foreign),
                "y" if len(foreign) == 1 else "ies", "is" if len(foreign) == 1 else "are",
                ", ".join(foreign[:10]) + (" ..." if len(foreign) > 10 else ""))

        def load(job: tuple[TopicPartition, Path]) -> tuple[TopicPartition, Path, Log | str]:
            tp, path = job
            if _is_link(path):  # replaced by a link since the listing: no replica
                return tp, path, f"{path} is a symlink, not a replica directory"
            try:
                log = Log.open(
                    path, self._config_for(tp.topic),
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    high_watermark=high_watermarks.get(tp, 0), clean_shutdown=clean,
                    sanity_check_all=self.sanity_check_all, on_roll=self.on_roll,
                    time_fn=self._time, segment_list=segment_lists.get(tp))
            except OSError as exc:
                if not is_partition_file_error(exc, log_dir):
                    raise  # the device or the dir itself failed: the dir goes offline
                return tp, path, _load_problem(path, exc)  # one file: this partition only
            except Exception as exc:  # this partition's files: it alone goes offline
                return tp, path, _load_problem(path, exc)
            return tp, path, log

        # After a clean shutdown a load reads only checkpoints, names and the active tail: pure
        # Python work, which threads only slow down (they contend for the interpreter lock:
        # 20,000 partitions load in 7.6 s on one thread, 10 s on two). The threads are for
        # recovery, whose reads and CRCs run outside the interpreter lock.
        if self.recovery_threads_per_dir == 1 or len(jobs) < 2 or clean:
            results = [load(j) for j in jobs]
        else:
            with ThreadPoolExecutor(self.recovery_threads_per_dir) as pool:
                results = list(pool.map(load, jobs))
        loaded: list[tuple[TopicPartition, Path, Log]] = []
        for tp, path, outcome in results:
            if isinstance(outcome, Log):
                loaded.append((tp, path, outcome))
                continue
            logger.error("partition %s is offline: %s (log dir %s; the other partitions "
                         "serve; fix or remove that file, then restart)", tp, outcome, log_dir)
            report.failed_partitions[tp] = outcome
            report.problems.append(f"{tp}: {outcome}")
            with self._lock:
                self._offline_partitions[tp] = log_dir
                self._load_failures[tp] = outcome
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

    def _set_aside_unassigned(self, tp: TopicPartition, path: Path, log_dir: Path,
                              report: StartupReport) -> None:
        """A replica :meth:`startup` was not told is this broker's: never loaded. Renamed
        ``-delete`` (content untouched) when unassigned replicas are deleted, else left."""
        if not self._delete_unassigned:
            self._unassigned_left[tp] = path
            report.unassigned_left.append(str(path))
            logger.warning(
                "%s is a replica of %s, which is not assigned to this broker: left alone, not "
                "loaded (add the topic to this broker, or move the directory out of %s)",
                path, tp, log_dir)
            return
        name = partition_dir_name(tp)  # a -future dir's too: <topic>-<partition>.<uuid>-delete
        doomed = child_path(log_dir, f"{name}.{uuid.uuid4().hex}-delete")
        os.replace(path, doomed)
        fsync_dir(log_dir)
        self.deleter.schedule(doomed)
        report.unassigned_deleted.append(str(doomed))
        logger.warning(
            "%s in %s is not assigned to this broker: renamed to %s without loading it, "
            "deleted in %d ms (file.delete.delay.ms); to keep it, stop the broker and rename it "
            "back", tp, log_dir, doomed.name, self.deleter.delay_ms)

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
                          = None, overrides: Mapping[str, str] | None = None,
                          is_new: bool = True) -> Log:
        """The log of ``tp``, created if missing: in ``log_dir`` when given, else in the dir a
        move requested before the replica existed named, else in the dir the
        ``choose_log_dir`` hook picks (default: the online dir with the least bytes used).

        As Kafka's ``getOrCreateLog``: a replica that is not new (``is_new`` False: it existed
        before, so its log may be in a dir that is offline now) is never created while any
        log dir is offline, and a partition known offline is never created elsewhere: both
        raise :class:`LogDirOfflineError` (KAFKA_STORAGE_ERROR), so offsets are never reused.
        A replica left alone at :meth:`startup` (not assigned then) is never adopted.

        Raises:
            InvalidTopicError: the topic name is not legal.
            LogDirError: ``log_dir`` is not one of this manager's dirs.
            LogDirOfflineError: the replica's dir (or the chosen one) is offline, or the
                ``choose_log_dir`` hook failed or chose no online dir of this broker (the
                replica is not created; the message names the plugin), or ``is_new`` is
                False and a log dir is offline.
        """
        name = partition_dir_name(tp)
        with self._lock:
            if tp in self._logs:
                return self._logs[tp]
            if tp in self._offline_partitions:
                raise self._offline_error(tp, self._offline_partitions[tp])
            left = self._unassigned_left.get(tp)
            if left is not None:
                raise LogDirError(
                    f"cannot create {tp}: {left} holds a replica of it that was not assigned "
                    f"to this broker at start-up and was left alone; move it out of the log "
                    f"dir (or restart the broker to load it as assigned)", path=str(left))
            if not is_new and self.failure.offline:
                offline = sorted(str(d) for d in self.failure.offline)
                raise LogDirOfflineError(
                    f"{tp} is not created: it is not a new replica and log dir(s) "
                    f"{', '.join(offline)} are offline (its log may be there); repair them "
                    f"and restart the broker", path=offline[0], partition=tp)
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
            if (path.is_dir() and os.listdir(path)
                    and classify_entry(name, path)[0] == FOREIGN):
                raise LogDirError(
                    f"cannot create {tp} in {target}: {path} exists and is not a Kafka replica "
                    f"(no <20 digits>.log file); move it out of the log dir",
                    path=str(path))
            existed = path.exists()
            try:
                if target not in self._lock_fds:
                    self._lock_dir(target)
                log = Log.open(path, config, on_roll=self.on_roll, time_fn=self._time,
                               clean_shutdown=True)
                deferred = getattr(self._deferred_sync, "dirs", None)
                if deferred is None:
                    fsync_dir(target)
                else:  # batched_creation: once per dir at the end
                    deferred.add(target)
            except (_DirUnusableError, OSError, MemoryError) as exc:
                error: BaseException = exc
            else:
                self._logs[tp] = log
                self._log_dir_of[tp] = target
                return log
        resource = is_resource_exhaustion(error)
        if resource is not None:  # never a disk failure: refuse this creation only
            if not existed:  # a half-made replica would be refused as foreign next time
                remove_unused_replica_dir(path)
            raise resource_error(error, resource, f"creating {tp} in {target}", path=target,
                                 partition=tp) from error
        self.failure.fail(target, error)  # outside the manager's lock
        raise LogDirOfflineError(f"log dir {target} failed creating {tp}: {error}",
                                 path=str(target), partition=tp) from error

    @contextlib.contextmanager
    def batched_creation(self) -> Iterator[None]:
        """Replicas this thread creates inside the block fsync each log dir once, when the
        block ends, instead of once per replica (a topic's partitions are created together:
        20,000 partitions cost a few fsyncs, not 20,000). Nested blocks join the outer one.

        Raises:
            LogDirOfflineError: a dir's fsync at the end failed (it is offline now).
        """
        if getattr(self._deferred_sync, "dirs", None) is not None:
            yield
            return
        dirs: set[Path] = set()
        self._deferred_sync.dirs = dirs
        try:
            yield
        finally:
            self._deferred_sync.dirs = None
            for log_dir in sorted(dirs):
                with self.failure.guard(log_dir):
                    fsync_dir(log_dir)

    def _choose_dir(self, tp: TopicPartition) -> Path:
        if len(self.log_dirs) == 1 and self.log_dirs[0] not in self.failure.offline:
            return self.log_dirs[0]  # no choice: no O(replicas) sizing, no hook call
        infos = self.log_dir_infos(with_disk_space=self.hooks is not None)
        online = [i for i in infos if i.online]
        if not online:
            raise LogDirOfflineError("every log dir is offline", path=str(self.log_dirs[0]),
                                     partition=tp)
        if self.hooks is not None:
            # a hook that fails or answers no online dir of this broker: this replica cannot
            # be created (Kafka's KafkaStorageError for it), visibly, never a healthy topic
            try:
                choice = self.hooks.choose_log_dir(tp, infos)
            except KafkaTiersError as exc:
                raise LogDirOfflineError(f"{tp} cannot be created: {exc}",
                                         path=str(self.log_dirs[0]), partition=tp) from exc
            chosen = self.resolve_log_dir(choice)
            if chosen is None or chosen in self.failure.offline:
                raise LogDirOfflineError(
                    f"{tp} cannot be created: the choose_log_dir hook chose {choice!r}, which "
                    "is not an online log dir of this broker", path=str(choice), partition=tp)
            return chosen
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
        """Close and delete the log of ``tp``: renamed ``<dir>.<uuid>-delete`` first (so a
        crash midway finishes the delete at next startup), then deleted by the deleter after
        ``file.delete.delay.ms`` (only its Kafka files; see :mod:`kafka_tiers.log.dir_deleter`).
        A move of it is cancelled first. True when there was one."""
        return self._rename_for_delete(tp) is not None

    def delete_stray_replica(self, tp: TopicPartition) -> Path | None:
        """Kafka's stray-replica handling: the replica of ``tp`` is no longer assigned to this
        broker. It is closed, renamed ``<topic>-<partition>.<uuid>-delete`` with a WARN line
        naming both paths, and deleted after ``file.delete.delay.ms`` (rename it back before
        then, with the broker stopped, to keep it). Only a loaded replica can be one: a
        directory is loaded only when it is a partition name holding Kafka log files.

        Returns:
            The renamed directory, or None when this broker has no loaded replica of ``tp``.

        Raises:
            LogDirOfflineError: its dir failed during the rename (it is offline now).
        """
        doomed = self._rename_for_delete(tp)
        if doomed is not None:
            logger.warning(
                "%s in %s is not assigned to this broker: renamed to %s, deleted in %d ms "
                "(file.delete.delay.ms); to keep it, stop the broker and rename it back",
                tp, doomed.parent, doomed.name, self.deleter.delay_ms)
        return doomed

    def _rename_for_delete(self, tp: TopicPartition) -> Path | None:
        self.mover.cancel(tp)
        with self._lock:
            log = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return None
        with self.failure.guard(log_dir, tp):
            log.close()
            doomed = child_path(log_dir, f"{log.dir.name}.{uuid.uuid4().hex}-delete")
            os.replace(log.dir, doomed)
            fsync_dir(log_dir)
        self.deleter.schedule(doomed)
        return doomed

    # ------------------------------------------------------------------ serving
    def _serving(self, tp: TopicPartition) -> tuple[Log, Path]:
        with self._lock:
            log = self._logs.get(tp)
            log_dir = self._log_dir_of.get(tp)
            if log is not None and log_dir is not None:
                return log, log_dir
            offline = self._offline_partitions.get(tp)
        if offline is not None:
            raise self._offline_error(tp, offline)
        raise LogError(f"{tp} has no log on this broker")

    def _offline_error(self, tp: TopicPartition, log_dir: Path) -> LogDirOfflineError:
        problem = self._load_failures.get(tp)
        if problem is not None:
            return LogDirOfflineError(f"{tp} is offline: its files failed to load: {problem}",
                                      path=str(log_dir), partition=tp)
        return LogDirOfflineError(f"{tp} is offline: its log dir {log_dir} failed",
                                  path=str(log_dir), partition=tp)

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

    def read_region(self, tp: TopicPartition, offset: int, max_bytes: int,
                    **kwargs: Any) -> RegionRead:
        """``Log.read_region`` on the current log of ``tp`` (keyword arguments passed on),
        following it across a move's swap and taking its dir offline on an I/O error. The
        caller closes the result's ``fd``.

        Raises:
            LogDirOfflineError: the replica's dir is offline (Kafka's KafkaStorageError).
            ResourceExhaustedError: out of descriptors (retriable).
            LogError: no such replica, or what ``Log.read_region`` raises.
        """
        for _ in range(10):
            log, log_dir = self._serving(tp)
            try:
                with self.failure.guard(log_dir, tp):
                    return log.read_region(offset, max_bytes, **kwargs)
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
        their future log survived while a dir is offline, or because their files failed to
        load at startup), with that dir."""
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

    def take_partition_offline(self, tp: TopicPartition, log_dir: Path, problem: str) -> None:
        """One file of ``tp`` failed (not its dir nor its device): ``tp`` alone goes offline
        (its log closed, calls raise :class:`LogDirOfflineError` naming ``problem``, never
        created anew), with one ERROR line; the dir keeps serving the others. Idempotent;
        never raises."""
        with self._lock:
            if self._log_dir_of.get(tp) not in (None, log_dir) or tp in self._load_failures:
                return
            log = self._logs.pop(tp, None)
            self._log_dir_of.pop(tp, None)
            self._offline_partitions[tp] = log_dir
            self._load_failures[tp] = problem
        logger.error("partition %s is offline: %s (log dir %s; the other partitions serve; "
                     "fix or remove that file, then restart)", tp, problem, log_dir)
        if log is not None:
            with contextlib.suppress(Exception):
                log.close()
        with contextlib.suppress(Exception):
            self._dir_state_changed()

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
        """For the mover's swap: ``tp`` is served by ``log`` in ``log_dir`` from now on
        (the log-replaced listeners are told)."""
        with self._lock:
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
        for listener in list(self._log_replaced_listeners):
            listener(tp, log)

    def add_log_replaced_listener(self, listener: Callable[[TopicPartition, Log], None]
                                  ) -> None:
        """Call ``listener(tp, new_log)`` when a JBOD move swapped the replica of ``tp`` for
        its moved copy (the old ``Log`` is closed), so a holder of the old one (the replica
        manager) follows. Called from the mover's thread while it holds the old log's lock:
        the listener must not block nor take a lock an append may hold."""
        self._log_replaced_listeners.append(listener)

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
                if log_dir in self.failure.offline or log_dir not in self._lock_fds:
                    continue  # never write into a dir this manager does not hold
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
        # Each log is closed outside the manager's lock: closing waits for the log's lock,
        # under which a roll's callbacks run, and those may read the manager.
        with self._lock:
            logs, dirs = list(self._logs.items()), dict(self._log_dir_of)
        failed: list[tuple[Path, OSError]] = []

        def close(item: tuple[TopicPartition, Log]) -> None:
            try:
                item[1].close()
            except OSError as exc:
                failed.append((dirs[item[0]], exc))

        # As Kafka: num.recovery.threads.per.data.dir threads per dir close the logs (each
        # close fsyncs a producer snapshot: with 20,000 partitions the waits add up)
        threads = min(len(logs), self.recovery_threads_per_dir * len(self.log_dirs))
        if threads > 1:
            with ThreadPoolExecutor(
                    threads, thread_name_prefix="log-close") as pool:
                list(pool.map(close, logs))
        else:
            for item in logs:
                close(item)
        for log_dir, error in failed:
            self.failure.fail(log_dir, error)
        self.checkpoint()
        with self._lock:
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


def _is_link(path: Path) -> bool:
    return os.path.islink(path)


def _load_problem(partition_dir: Path, exc: BaseException) -> str:
    """One line naming the file (when the error knows it) and the problem of a failed load."""
    problem = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    file = getattr(exc, "path", None) or getattr(exc, "filename", None)
    if file and str(file) not in problem:
        return f"{file}: {problem}"
    if file:
        return problem
    return f"loading {partition_dir} failed: {problem}"


__all__ = ["LOCK_FILE", "STARTUP_DELETE_GRACE_SECONDS", "LogManager", "MaintenanceIntervals",
           "StartupReport"]
