"""The one place that deletes a replica's directory: Kafka's asynchronous delete of
``<topic>-<partition>.<uuid>-delete`` directories after ``file.delete.delay.ms``.

What it guarantees (the rule "never delete what is not provably ours" lives here):

* only a directory whose name is a Kafka ``-delete`` name
  (:func:`~kafka_tiers.log.names.parse_partition_dir` kind ``delete``) is deleted; anything
  else given to it is refused with a WARN line and left as it is;
* inside it, only files with Kafka's partition file names
  (:func:`~kafka_tiers.log.names.is_kafka_partition_file`) are removed, one ``unlink`` each;
  the directory itself is removed only when that leaves it empty. Any other file or
  sub-directory stays, with the directory, and one WARN line names what was kept;
* a delete runs no earlier than its delay after it was scheduled (``file.delete.delay.ms``,
  Kafka's default 60000; the log manager's own default is 0), so an operator who sees the WARN
  of a stray replica's rename has that long to rename it back;
* :meth:`DirDeleter.close` drops the deletes not yet due: their directories stay on disk and
  the next start-up schedules them again (Kafka does the same), so a shutdown never waits for
  a delay.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import threading
import time
from pathlib import Path

from kafka_tiers.log.errors import InvalidTopicError
from kafka_tiers.log.names import is_kafka_partition_file, parse_partition_dir

logger = logging.getLogger(__name__)


def delete_replica_dir(path: Path) -> list[str]:
    """Delete the Kafka files of a ``-delete`` directory, then the directory when empty.

    Returns the names left in it (not Kafka's: kept); empty when the directory is gone (or was
    already). A name that is not a ``-delete`` name deletes nothing and is returned as left.

    Raises:
        OSError: the file system failed (the caller logs it).
    """
    try:
        if parse_partition_dir(path.name).kind != "delete":
            raise InvalidTopicError(f"{path.name!r} is not a -delete directory")
    except InvalidTopicError:
        logger.warning("not deleting %s: only <topic>-<partition>.<id>-delete directories are "
                       "deleted", path)
        return [path.name]
    kept = []
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return []
    for entry in entries:
        if entry.is_file(follow_symlinks=False) and is_kafka_partition_file(entry.name):
            os.unlink(entry.path)
        else:
            kept.append(entry.name)
    if kept:
        logger.warning("kept %s: it holds %s, which %s not Kafka's; delete or move %s by hand",
                       path, ", ".join(sorted(kept)[:5]) + (" ..." if len(kept) > 5 else ""),
                       "is" if len(kept) == 1 else "are", "it" if len(kept) == 1 else "them")
        return sorted(kept)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)
    return []


def remove_unused_replica_dir(path: Path) -> list[str]:
    """Undo a replica creation that failed: remove the Kafka-named files of ``path`` (a
    partition directory the caller made moments ago) and the directory when that leaves it
    empty. Returns the names left; never raises (I/O errors leave the rest in place)."""
    kept = []
    try:
        entries = list(os.scandir(path))
    except OSError:
        return []
    for entry in entries:
        if entry.is_file(follow_symlinks=False) and is_kafka_partition_file(entry.name):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                continue
        kept.append(entry.name)
    if not kept:
        with contextlib.suppress(OSError):
            os.rmdir(path)
    return sorted(kept)


class DirDeleter:
    """Deletes ``-delete`` directories on a daemon thread, each after its delay (see the
    module doc).

    Args:
        delay_ms: ``file.delete.delay.ms``: how long after :meth:`schedule` a delete runs.
    """

    def __init__(self, delay_ms: int = 0) -> None:
        self.delay_ms = delay_ms
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, Path]] = []
        self._seq = 0
        self._running = 0
        self._thread: threading.Thread | None = None

    def schedule(self, path: Path, delay_ms: int | None = None) -> None:
        """Delete ``path`` (a ``-delete`` directory) ``delay_ms`` from now (default: the
        deleter's). Scheduling a path twice deletes it once (the second finds it gone)."""
        delay = self.delay_ms if delay_ms is None else delay_ms
        with self._lock:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() + delay / 1000.0, self._seq, path))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="kafka-tiers-log-deleter")
                self._thread.start()
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                while True:
                    if not self._heap:
                        self._thread = None
                        self._changed.notify_all()
                        return
                    due = self._heap[0][0] - time.monotonic()
                    if due <= 0:
                        _, _, path = heapq.heappop(self._heap)
                        self._running += 1
                        break
                    # a delay may be up to Kafka's long maximum: wake at least hourly
                    self._changed.wait(min(due, 3600.0))
            try:
                delete_replica_dir(path)
            except OSError as exc:
                logger.warning("cannot delete %s: %s", path, exc)
            finally:
                with self._lock:
                    self._running -= 1
                    self._changed.notify_all()

    @property
    def pending(self) -> list[Path]:
        """The directories scheduled and not deleted yet."""
        with self._lock:
            return [p for _, _, p in sorted(self._heap)]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every scheduled delete ran; True when none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._heap or self._running:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def close(self, timeout: float | None = None) -> bool:
        """Drop the deletes not due yet (their directories stay for the next start-up) and
        wait for the due and running ones; True when none is left."""
        now = time.monotonic()
        with self._lock:
            self._heap = [e for e in self._heap if e[0] <= now]
            heapq.heapify(self._heap)
            self._changed.notify_all()
        return self.wait(timeout)


__all__ = ["DirDeleter", "delete_replica_dir", "remove_unused_replica_dir"]
