"""Moving a replica between the log dirs of one broker (document 000, section 1).

A move of partition ``tp`` from dir ``S`` to dir ``D`` (Kafka's shipped names, DECISIONS.md):

1. **Future log.** ``D/<topic>-<partition>.<uuid>-future`` is created. Its bulk is copied file
   by file: every *inactive* segment of the source (``.log``, ``.index``, ``.timeindex``,
   ``.txnindex``), the producer snapshots up to the copied end and the leader-epoch checkpoint —
   inactive segments are immutable, so this needs no lock and appends continue (the
   document's zero-copy: ``os.copy_file_range`` where the OS has it). The copied segments are
   checked against the source afterwards; the future is then opened as a log.
2. **Catch-up.** Record batches from the future's log end offset on are read from the source and
   appended to the future as a follower would (offsets, epochs, producer state kept), while
   producers keep appending to the source. Before every step the future's last batch is
   compared (offset and CRC) with the source's, so a truncation of the source is noticed; the
   move then starts over.
3. **Swap, under the replica's lock** (the source log's lock, which every append and read takes):
   the final catch-up; the future gets the source's high watermark and log start offsets; the
   source is closed and renamed ``<topic>-<partition>.<uuid>-delete`` (deleted asynchronously),
   the future closed, renamed to ``<topic>-<partition>`` and reopened; the manager now serves
   the new log. Appends that were waiting on the lock see :class:`LogClosedError` and retry on
   the new log (``LogManager.append`` / ``read`` do this).

Every byte copied in steps 1 and 2 is taken from one :class:`~kafka_tiers.log.throttle.Throttle`
shared by all moves (``intra.broker.throttled.rate``); moves run on a pool of
``num.replica.move.threads`` threads, further moves wait for a free thread. A move to ``any``
cancels a move; a move asked for a replica that does not exist yet is remembered and applied
when the replica is created. A crash at any point is handled by the four startup rules in
:mod:`kafka_tiers.log.log_manager`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.log.checkpoints import LEADER_EPOCH_CHECKPOINT, fsync_dir
from kafka_tiers.log.describe import last_batch_header
from kafka_tiers.log.dir_deleter import DirDeleter
from kafka_tiers.log.errors import LogClosedError, LogError, OffsetOutOfRangeError
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_dir_failure import LogDirOfflineError, dir_of_path
from kafka_tiers.log.names import (
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    child_path,
    partition_dir_name,
    segment_file_name,
)
from kafka_tiers.log.throttle import Throttle

if TYPE_CHECKING:
    from kafka_tiers.log.log_manager import LogManager

logger = logging.getLogger(__name__)

#: ``alter_replica_log_dirs`` destination that cancels a move
ANY = "any"

#: results of a move request, per partition (Kafka's error names)
NONE = "NONE"
REPLICA_NOT_AVAILABLE = "REPLICA_NOT_AVAILABLE"
LOG_DIR_NOT_FOUND = "LOG_DIR_NOT_FOUND"
KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"

#: states of a move
QUEUED, COPYING, CATCHING_UP, SWAPPING, DONE, CANCELLED, FAILED = (
    "queued", "copying", "catching_up", "swapping", "done", "cancelled", "failed")
FINAL_STATES = frozenset({DONE, CANCELLED, FAILED})

MAX_CHUNK = 1 << 20
MAX_RESTARTS = 5


class _Cancelled(Exception):
    pass


class _Restart(Exception):
    pass


@dataclass
class MoveStatus:
    """One move, as :meth:`ReplicaMover.status` reports it.

    ``bytes_total`` is the source's size when the move started (grows with appends);
    ``bytes_copied`` what was copied so far (restarts count again).
    """

    topic_partition: TopicPartition
    source_dir: str
    destination_dir: str
    state: str = QUEUED
    bytes_total: int = 0
    bytes_copied: int = 0
    error: str | None = None
    restarts: int = 0
    started: float = field(default_factory=time.time)
    finished: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic_partition.topic,
                "partition": self.topic_partition.partition,
                "source_dir": self.source_dir, "destination_dir": self.destination_dir,
                "state": self.state, "bytes_total": self.bytes_total,
                "bytes_copied": self.bytes_copied, "restarts": self.restarts,
                "error": self.error}


@dataclass
class _Move:
    status: MoveStatus
    source_dir: Path
    dest_dir: Path
    cancel: threading.Event = field(default_factory=threading.Event)
    keep_future: bool = False
    future: Log | None = None
    future_path: Path | None = None
    done: threading.Event = field(default_factory=threading.Event)
    #: (base offset, crc) of the future's last batch, once known
    last_batch: tuple[int, int] | None = None


def _copy_range(src: Path, dest: Path, length: int, throttle: Throttle,
                cancel: threading.Event, progress: MoveStatus, chunk: int) -> None:
    """Copy the first ``length`` bytes of ``src`` to a new ``dest`` in throttled chunks,
    kernel-side when possible, then fsync ``dest``. Under a throttle each chunk is synced as
    it is written: the write-back then happens in small steps the token bucket absorbs,
    instead of one long fsync per file that the rate cannot account for."""
    sync_chunks = not throttle.unlimited
    with open(src, "rb") as fin, open(dest, "wb") as fout:
        fi, fo = fin.fileno(), fout.fileno()
        done = 0
        use_cfr = hasattr(os, "copy_file_range")
        while done < length:
            if cancel.is_set():
                raise _Cancelled
            n = min(chunk, length - done)
            throttle.acquire(n, cancel)
            copied = 0
            if use_cfr:
                try:
                    copied = os.copy_file_range(fi, fo, n, done, done)
                except OSError:
                    # not supported here (EXDEV, EINVAL, ENOSYS, ...) or a failing disk: the
                    # plain path below says which file (so which log dir) failed
                    use_cfr = False
            if not use_cfr:
                try:
                    data = os.pread(fi, n, done)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, str(src)) from None
                try:
                    copied = os.pwrite(fo, data, done) if data else 0
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, str(dest)) from None
            if copied <= 0:
                break  # the source is shorter than expected: the caller re-checks
            done += copied
            progress.bytes_copied += copied
            if sync_chunks:
                os.fdatasync(fo)
        os.fsync(fo)


class ReplicaMover:
    """The broker's replica moves (see the module doc). Created by the log manager; the
    broker reaches it through ``LogManager.alter_replica_log_dirs`` and friends.

    Args:
        manager: the owning log manager.
        threads: ``num.replica.move.threads`` (pool size).
        throttle: the shared byte-rate limiter.
    """

    def __init__(self, manager: LogManager, threads: int, throttle: Throttle,
                 deleter: DirDeleter | None = None) -> None:
        self.manager = manager
        self.threads = max(1, threads)
        self.throttle = throttle
        self.deleter = deleter if deleter is not None else DirDeleter()
        self._lock = threading.RLock()
        self._moves: dict[TopicPartition, _Move] = {}
        self._history: dict[TopicPartition, MoveStatus] = {}
        self._pending: dict[TopicPartition, Path] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._closing = False

    # ------------------------------------------------------------------ requests
    @property
    def pending(self) -> dict[TopicPartition, Path]:
        """Moves remembered for replicas that do not exist yet (tp -> destination dir)."""
        with self._lock:
            return dict(self._pending)

    def take_pending(self, tp: TopicPartition) -> Path | None:
        """The remembered destination of ``tp`` (removed), or None."""
        with self._lock:
            return self._pending.pop(tp, None)

    def request(self, tp: TopicPartition, destination: str | os.PathLike[str]) -> str:
        """Move ``tp`` to ``destination`` (a log dir of the broker, or ``any``).

        Returns ``NONE`` (moving, already there, or cancelled with ``any``),
        ``REPLICA_NOT_AVAILABLE`` (no such replica yet: remembered for its creation),
        ``LOG_DIR_NOT_FOUND`` (not a log dir of this broker) or ``KAFKA_STORAGE_ERROR``
        (the source or destination dir is offline). Never raises for these.
        """
        if os.fspath(destination) == ANY:
            self.cancel(tp)
            with self._lock:
                self._pending.pop(tp, None)
            return NONE
        dest = self.manager.resolve_log_dir(destination)
        if dest is None:
            return LOG_DIR_NOT_FOUND
        if dest in self.manager.offline_dirs:
            return KAFKA_STORAGE_ERROR
        source_dir = self.manager.log_dir_of(tp)
        if source_dir is None:
            if tp in self.manager.offline_partitions:
                return KAFKA_STORAGE_ERROR
            with self._lock:
                self._pending[tp] = dest
            return REPLICA_NOT_AVAILABLE
        with self._lock:
            current = self._moves.get(tp)
        if current is not None:
            if current.dest_dir == dest:
                return NONE
            self.cancel(tp)
        if source_dir == dest:
            return NONE
        size = self._size_of(tp)  # outside the mover's lock (see _submit)
        with self._lock:
            if self._closing:
                return KAFKA_STORAGE_ERROR
            if tp not in self._moves:
                self._submit(tp, source_dir, dest, None, size)
        return NONE

    def resume(self, tp: TopicPartition, future: Log) -> None:
        """Startup rule 1: source and future both present; continue the move into
        ``future`` (already open)."""
        source_dir = self.manager.log_dir_of(tp)
        assert source_dir is not None
        size = self._size_of(tp)
        with self._lock:
            self._submit(tp, source_dir, future.dir.parent, future, size)

    def _size_of(self, tp: TopicPartition) -> int:
        """The bytes of the replica's log now (0 when it is gone or closed). Called without
        the mover's lock: it takes the log manager's, which ``get_or_create_log`` holds while
        taking the mover's (``take_pending``), so taking both here deadlocked."""
        log = self.manager.get_log(tp)
        with contextlib.suppress(LogError):
            return log.size if log is not None else 0
        return 0

    def _submit(self, tp: TopicPartition, source_dir: Path, dest: Path,
                future: Log | None, size: int) -> None:
        """Queue the move (the caller holds the mover's lock and takes no other)."""
        status = MoveStatus(tp, str(source_dir), str(dest))
        status.bytes_total = size
        move = _Move(status, source_dir, dest, future=future,
                     future_path=future.dir if future is not None else None)
        self._moves[tp] = move
        self._history[tp] = status
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="replica-move")
        self._pool.submit(self._run, tp, move)

    def cancel(self, tp: TopicPartition) -> bool:
        """Cancel the move of ``tp`` (its future log is deleted). True when one was running
        or queued."""
        with self._lock:
            move = self._moves.get(tp)
        if move is None:
            return False
        move.cancel.set()
        move.done.wait(30)
        return True

    def stop_moves_on_dir(self, log_dir: Path) -> None:
        """Stop every move from or to ``log_dir`` (it went offline). Futures on a healthy
        dir are kept only when the source dir failed (startup rule 3 leaves them alone)."""
        with self._lock:
            doomed = [m for m in self._moves.values()
                      if log_dir in (m.source_dir, m.dest_dir)]
        for m in doomed:
            m.keep_future = m.source_dir == log_dir
            m.status.error = f"log dir {log_dir} went offline"
            m.cancel.set()

    # ------------------------------------------------------------------ queries
    def status(self, tp: TopicPartition | None = None) -> list[MoveStatus]:
        """Every move requested since startup (or that of ``tp``), current and finished."""
        with self._lock:
            if tp is not None:
                s = self._history.get(tp)
                return [s] if s is not None else []
            return list(self._history.values())

    def in_progress(self) -> dict[TopicPartition, MoveStatus]:
        with self._lock:
            return {tp: m.status for tp, m in self._moves.items()}

    def future_logs(self) -> dict[TopicPartition, tuple[Path, Log]]:
        """The open future logs: tp -> (destination dir, future log)."""
        with self._lock:
            return {tp: (m.dest_dir, m.future) for tp, m in self._moves.items()
                    if m.future is not None and not m.future.closed}

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no move is queued or running; True when none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                moves = list(self._moves.values())
            if not moves:
                return True
            for m in moves:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                m.done.wait(left)

    # ------------------------------------------------------------------ the move
    def _run(self, tp: TopicPartition, move: _Move) -> None:
        status = move.status
        try:
            for _attempt in range(MAX_RESTARTS):
                try:
                    self._move_once(tp, move)
                    status.state = DONE
                    break
                except _Restart as why:
                    logger.info("restarting the move of %s: %s", tp, why)
                    status.restarts += 1
                    self._discard_future(move)
            else:
                raise LogError(f"the move of {tp} restarted {MAX_RESTARTS} times")
        except _Cancelled:
            status.state = CANCELLED if status.error is None else FAILED
            self._end_future(move)
        except LogDirOfflineError as exc:
            status.state, status.error = FAILED, str(exc)
            self._end_future(move)
        except OSError as exc:
            status.state, status.error = FAILED, f"{type(exc).__name__}: {exc}"
            self._on_os_error(move, exc)
        except LogClosedError as exc:  # the source was deleted or went offline
            status.state, status.error = FAILED, f"source closed: {exc}"
            self._end_future(move)
        except Exception as exc:
            logger.exception("the move of %s failed", tp)
            status.state, status.error = FAILED, f"{type(exc).__name__}: {exc}"
            self._discard_future(move)
        finally:
            status.finished = time.time()
            with self._lock:
                if self._moves.get(tp) is move:
                    del self._moves[tp]
            move.done.set()
        if status.state == DONE:
            # the new dir's recovery points, written after the move counts as done: without
            # them a crash only means recovering the moved log from its start (no loss)
            with contextlib.suppress(Exception):
                self.manager.checkpoint([move.source_dir, move.dest_dir])

    def _end_future(self, move: _Move) -> None:
        """After a stopped move: keep the future log (closed) when the source's dir is offline
        and the destination's is not (startup rule 3 then leaves it alone), else delete it."""
        offline = self.manager.offline_dirs
        if move.keep_future or (move.source_dir in offline and move.dest_dir not in offline):
            if move.future is not None:
                with contextlib.suppress(Exception):
                    move.future.close()
        else:
            self._discard_future(move)

    def _on_os_error(self, move: _Move, exc: OSError) -> None:
        failed = dir_of_path(getattr(exc, "filename", None), [move.source_dir, move.dest_dir])
        if failed is None:  # which disk? the one that no longer answers
            for d in (move.dest_dir, move.source_dir):
                try:
                    os.stat(d)
                    os.listdir(d)
                except OSError:
                    failed = d
                    break
        if failed is None:
            failed = move.dest_dir
        move.keep_future = move.keep_future or failed == move.source_dir
        self.manager.failure.fail(failed, exc)
        self._end_future(move)

    def _check(self, move: _Move) -> None:
        if move.cancel.is_set():
            raise _Cancelled

    def _chunk(self) -> int:
        rate = self.throttle.rate
        return MAX_CHUNK if rate is None else max(4096, min(MAX_CHUNK, rate // 20))

    def _source(self, tp: TopicPartition, move: _Move) -> Log:
        source = self.manager.get_log(tp)
        if source is None or source.closed or self.manager.log_dir_of(tp) != move.source_dir:
            raise LogClosedError(f"{tp} is no longer in {move.source_dir}")
        return source

    def _move_once(self, tp: TopicPartition, move: _Move) -> None:
        self._check(move)
        source = self._source(tp, move)
        failure = self.manager.failure
        if move.future is None:
            move.status.state = COPYING
            with failure.guard(move.dest_dir, tp):
                move.future = self._bulk_copy(tp, source, move)
        move.status.state = CATCHING_UP
        self._catch_up(source, move.future, move)
        move.status.state = SWAPPING
        self._swap(tp, source, move.future, move)

    def _bulk_copy(self, tp: TopicPartition, source: Log, move: _Move) -> Log:
        name = partition_dir_name(tp)
        path = child_path(move.dest_dir, f"{name}.{uuid.uuid4().hex}-future")
        path.mkdir()
        move.future_path = path
        fsync_dir(move.dest_dir)
        with source._lock:  # a consistent list of the inactive segments
            source._check_open()
            inactive = [(seg.base_offset, seg.next_offset, seg.files())
                        for seg in source.segments()[:-1]]
            start = source.local_log_start_offset
            log_start = source.log_start_offset
            source.leader_epoch_cache.write_to(path / LEADER_EPOCH_CHECKPOINT)
            copied_end = inactive[-1][1] if inactive else start
            snapshots = [p for p in source.dir.glob("*" + SNAPSHOT_SUFFIX)
                         if p.name[:20].isdigit() and int(p.name[:20]) <= copied_end]
        move.status.bytes_total = max(move.status.bytes_total, source.size)
        chunk = self._chunk()
        try:
            for _base, _next, files in inactive:
                for src in files:
                    self._check(move)
                    _copy_range(src, path / src.name, os.stat(src).st_size, self.throttle,
                                move.cancel, move.status, chunk)
            for snap in snapshots:
                shutil.copyfile(snap, path / snap.name)
        except FileNotFoundError as exc:
            if dir_of_path(exc.filename, [move.dest_dir]) is not None:
                raise
            raise _Restart(f"a source segment went away while copying: {exc.filename}") from None
        if inactive:  # the source's active segment starts at copied_end: so does the future's
            (path / segment_file_name(copied_end, LOG_SUFFIX)).touch()
        fsync_dir(path)
        if inactive:  # the future's last batch, read from its header (no segment check)
            last = last_batch_header(path / inactive[-1][2][0].name)
            move.last_batch = (last[0], last[2]) if last is not None else None
        with source._lock:  # the copied segments must still be the source's, unchanged
            source._check_open()
            now = {seg.base_offset: seg for seg in source.segments()[:-1]}
            for base, _next, files in inactive:
                seg = now.get(base)
                if seg is None or seg.next_offset != _next or seg.size != os.stat(
                        path / files[0].name).st_size:
                    raise _Restart(f"segment {base} of {tp} changed while it was copied")
        return Log.open(path, source.config, recovery_point=copied_end,
                        log_start_offset=max(log_start, start), high_watermark=0,
                        clean_shutdown=True, sanity_check_all=False, on_roll=None,
                        time_fn=source._time)

    def _diverged(self, source: Log, future: Log, move: _Move) -> str | None:
        end = future.log_end_offset
        if end > source.log_end_offset:
            return f"the source was truncated below {end}"
        if end <= future.local_log_start_offset:
            return None
        if move.last_batch is None:
            mine = future.read(end - 1, 1).batches()
            if not mine:
                return None
            move.last_batch = (mine[-1].base_offset, mine[-1].crc)
        base, crc = move.last_batch
        try:
            theirs = source.read(base, 1).batches()
        except OffsetOutOfRangeError:
            return None  # retention passed it; the log start offsets are applied at the swap
        if not theirs or theirs[0].base_offset != base or theirs[0].crc != crc:
            return f"the source's batch at {base} differs (truncated and rewritten)"
        return None

    def _catch_up(self, source: Log, future: Log, move: _Move, *, final: bool = False) -> None:
        """Copy batches until the future is close behind the source (``final``: until it
        has everything; the caller holds the source's lock, so the bytes are counted against
        the throttle without sleeping, keeping appends blocked as briefly as possible)."""
        chunk = self._chunk()
        while True:
            self._check(move)
            why = self._diverged(source, future, move)
            if why is not None:
                raise _Restart(why)
            start = max(future.log_end_offset, source.local_log_start_offset)
            if start > future.log_end_offset:
                raise _Restart("retention removed what the future log still needed")
            try:
                data = source.read(start, chunk)
            except OffsetOutOfRangeError as exc:
                raise _Restart(str(exc)) from None
            if not data.records:
                return
            if final:
                self.throttle.reserve(len(data.records))
            else:
                self.throttle.acquire(len(data.records), move.cancel)
                self._check(move)
            with self.manager.failure.guard(move.dest_dir):
                for part in _split(data.records, future.config.segment_bytes):
                    future.append(part, assign_offsets=False)
            move.last_batch = _last_batch(data.records)
            move.status.bytes_copied += len(data.records)
            if not final and len(data.records) < chunk // 2:
                return  # close behind: the rest is copied under the lock

    def _swap(self, tp: TopicPartition, source: Log, future: Log, move: _Move) -> None:
        manager = self.manager
        failure = manager.failure
        name = partition_dir_name(tp)
        with source._lock:  # the replica's lock: appends and reads wait here
            self._catch_up(source, future, move, final=True)
            with failure.guard(move.dest_dir, tp):
                future.update_high_watermark(source.high_watermark)
                if source.log_start_offset > future.log_start_offset:
                    future.advance_log_start_offset(source.log_start_offset)
                if source.local_log_start_offset > future.local_log_start_offset:
                    future.advance_local_log_start_offset(source.local_log_start_offset)
                future.close()
            end, log_start = future.log_end_offset, future.log_start_offset
            hw = future.high_watermark
            with failure.guard(move.source_dir, tp):
                source.close()
                doomed = child_path(move.source_dir, f"{name}.{uuid.uuid4().hex}-delete")
                os.replace(source.dir, doomed)
                fsync_dir(move.source_dir)
            final = child_path(move.dest_dir, name)
            with failure.guard(move.dest_dir, tp):
                os.replace(future.dir, final)
                fsync_dir(move.dest_dir)
                new = Log.open(final, future.config, recovery_point=end,
                               log_start_offset=log_start, high_watermark=hw,
                               clean_shutdown=True, sanity_check_all=False,
                               on_roll=manager.on_roll, time_fn=source._time)
            move.future = None
            manager._replace_log(tp, new, move.dest_dir)
        self.deleter.schedule(doomed)
        move.status.bytes_total = max(move.status.bytes_total, move.status.bytes_copied)
        if manager.hooks is not None:
            manager.hooks.replica_moved(tp, str(move.source_dir), str(move.dest_dir))
        logger.info("moved %s from %s to %s", tp, move.source_dir, move.dest_dir)

    def _discard_future(self, move: _Move) -> None:
        future, path = move.future, move.future_path
        move.future, move.future_path, move.last_batch = None, None, None
        if future is not None:
            with contextlib.suppress(Exception):
                future.close()
        if path is None or move.dest_dir in self.manager.offline_dirs:
            return
        try:
            doomed = path.with_name(path.name.rsplit("-future", 1)[0] + "-delete")
            os.replace(path, doomed)
            fsync_dir(move.dest_dir)
            self.deleter.schedule(doomed)
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.warning("cannot remove the future log %s: %s", path, exc)

    # ------------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:
        """Stop every move, keeping the future logs on disk (startup rule 1 resumes them),
        and wait for the pool and the deleter."""
        with self._lock:
            self._closing = True
            moves = list(self._moves.values())
            self._pending.clear()
        for m in moves:
            m.keep_future = True
            m.cancel.set()
        self.throttle.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=False)
            self._pool = None
        self.deleter.close(30)


def _last_batch(records: bytes | bytearray) -> tuple[int, int] | None:
    """(base offset, crc) of the last batch of a run of whole batches."""
    view = memoryview(records)
    pos, last = 0, None
    while pos + 21 <= len(view):
        last = pos
        pos += int.from_bytes(view[pos + 8:pos + 12], "big", signed=True) + 12
    if last is None:
        return None
    return (int.from_bytes(view[last:last + 8], "big", signed=True),
            int.from_bytes(view[last + 17:last + 21], "big"))


def _split(records: bytes | bytearray, limit: int) -> list[memoryview]:
    """Cut a run of whole batches into runs of at most ``limit`` bytes (a single larger batch
    stays whole), since one append may not exceed the segment size."""
    view = memoryview(records)
    out = []
    start = pos = 0
    while pos < len(view):
        size = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True) + 12
        if pos > start and pos + size - start > limit:
            out.append(view[start:pos])
            start = pos
        pos += size
    if pos > start:
        out.append(view[start:pos])
    return out


def normalize_request(moves: Mapping[TopicPartition, str | os.PathLike[str]]
                      ) -> dict[TopicPartition, str]:
    """``{tp: dir}`` with each dir either ``any`` or an absolute, normalised path.

    Raises:
        ValueError: a relative path or one with ``..`` (nothing from input may escape its
            dir).
    """
    out = {}
    for tp, d in moves.items():
        text = os.fspath(d)
        if text == ANY:
            out[tp] = ANY
            continue
        if not os.path.isabs(text):
            raise ValueError(f"log dir {text!r} for {tp} is neither 'any' nor an absolute path")
        if ".." in Path(text).parts or "\0" in text:
            raise ValueError(f"log dir {text!r} for {tp} must not contain '..'")
        out[tp] = os.path.normpath(text)
    return out


__all__ = [
    "ANY",
    "CANCELLED",
    "CATCHING_UP",
    "COPYING",
    "DONE",
    "FAILED",
    "FINAL_STATES",
    "KAFKA_STORAGE_ERROR",
    "LOG_DIR_NOT_FOUND",
    "NONE",
    "QUEUED",
    "REPLICA_NOT_AVAILABLE",
    "SWAPPING",
    "MoveStatus",
    "ReplicaMover",
    "normalize_request",
]
