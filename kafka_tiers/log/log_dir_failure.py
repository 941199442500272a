"""A failed log dir (KIP-113's companion, "handle disk failure for JBOD"): an I/O error takes
that dir offline, not the broker.

What is guarded: every call the :class:`~kafka_tiers.log.log_manager.LogManager` makes into a
dir on behalf of a replica or of the dir itself — ``append`` / ``read`` through the manager,
creating a log, checkpoints, flushes, retention, deleting a log, startup of a dir, and every
step of a replica move (source and destination). An :class:`OSError` there (EIO, EROFS,
EACCES, ...) is handed to :meth:`LogDirFailureHandler.fail` with the dir it happened in,
which:

1. marks the dir offline (idempotent: the first error wins, later ones are ignored);
2. takes every replica of the dir out of service: its log is closed as far as the failing disk
   allows and the partition is listed in ``offline_partitions``; a call for it raises
   :class:`LogDirOfflineError` (Kafka's ``KafkaStorageError``) from then on;
3. stops the moves whose source or destination is the dir;
4. fires the ``log_dir_failed`` hook with the dir, its partitions and the error;
5. when no dir is left online, calls ``on_all_offline`` (the broker stops; Kafka halts).

Replicas on the other dirs keep serving throughout: nothing here holds the manager's lock while
touching a log, so a hung disk cannot block the healthy ones.

Running out of a resource is never a disk failure (:func:`is_resource_exhaustion`): out of
descriptors (EMFILE, ENFILE), of memory (ENOMEM, :class:`MemoryError`) or of space (ENOSPC,
EDQUOT) refuses only the call that hit it with :class:`ResourceExhaustedError` (retriable; the
cluster answers Kafka's ``KAFKA_STORAGE_ERROR``, which Kafka clients retry), logged as a WARN
line naming the resource and the fix; the dir stays online and everything it holds keeps
serving. (Kafka takes the dir offline on any ``IOException``, ENOSPC included; we do not,
because a full disk or an exhausted descriptor table heals without replacing the disk.)
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.log.errors import LogDirError, LogError

if TYPE_CHECKING:
    from kafka_tiers.log.log_manager import LogManager

logger = logging.getLogger(__name__)


class LogDirOfflineError(LogDirError):
    """The replica's log dir is offline (Kafka's ``KafkaStorageError``); retriable on another
    replica, never on this dir until the disk is replaced and the broker restarted.

    Attributes:
        path: the offline log dir.
        partition: the replica asked for, when there is one.
    """

    def __init__(self, message: str, *, path: str | None = None,
                 partition: TopicPartition | None = None) -> None:
        super().__init__(message, path=path)
        self.partition = partition


#: errno values that say "this disk is gone or unusable" (anything else still counts when
#: raised by a guarded call, but these are what a failed disk gives)
DISK_ERRNOS = frozenset({errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENXIO,
                         errno.ENODEV})

#: errnos of the device or the file system, not of one file: they take the whole dir offline.
#: Any other ``OSError`` about one partition's file (EISDIR, ENOTDIR, ELOOP, EACCES, ENOENT,
#: ...) takes only that partition offline (:func:`is_partition_file_error`).
DEVICE_ERRNOS = frozenset(e for e in (errno.EIO, errno.EROFS, errno.ENODEV, errno.ENXIO,
                                      errno.ESTALE, getattr(errno, "EUCLEAN", None))
                          if e is not None)


def is_partition_file_error(exc: OSError, log_dir: Path) -> bool:
    """True when ``exc`` is about one file of a partition, not about ``log_dir`` or its
    device: it has an errno and not a device's (:data:`DEVICE_ERRNOS`), it does not name the log
    dir itself, and the log dir can still be listed. Never raises."""
    if exc.errno is None or exc.errno in DEVICE_ERRNOS:  # unknown: the dir, as before
        return False
    filename = getattr(exc, "filename", None)
    if filename is not None and os.path.normpath(os.fspath(filename)) == os.path.normpath(
            log_dir):
        return False
    try:
        os.listdir(log_dir)
    except OSError:
        return False
    return True


#: errno -> the resource that ran out: never a disk failure (see the module doc)
RESOURCE_ERRNOS: dict[int, str] = {
    errno.EMFILE: "file descriptors of the process (raise `ulimit -n` or lower "
                  "log.open.files.max)",
    errno.ENFILE: "file descriptors of the system (raise fs.file-max)",
    errno.ENOMEM: "memory",
    errno.ENOSPC: "disk space (free space or add a log dir)",
    errno.EDQUOT: "disk quota (raise the quota or free space)",
}


class ResourceExhaustedError(LogError):
    """A call was refused because the process ran out of descriptors, memory or disk space;
    nothing of it was done that a retry would repeat, and the log dir stays online.
    Retriable: the same call may succeed once the resource is back.

    Attributes:
        resource: what ran out, in words (with the fix).
        path: the log dir (or file) concerned, when known.
        partition: the replica asked for, when there is one.
    """

    retriable = True

    def __init__(self, message: str, *, resource: str, path: str | None = None,
                 partition: TopicPartition | None = None) -> None:
        super().__init__(message)
        self.resource = resource
        self.path = path
        self.partition = partition


def is_resource_exhaustion(exc: BaseException) -> str | None:
    """What ran out when ``exc`` says so (EMFILE, ENFILE, ENOMEM, ENOSPC, EDQUOT,
    :class:`MemoryError`), else None."""
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, ResourceExhaustedError):
        return exc.resource
    if isinstance(exc, OSError):
        return RESOURCE_ERRNOS.get(exc.errno or 0)
    return None


def resource_error(exc: BaseException, resource: str, what: str, *,
                   path: str | os.PathLike[str] | None = None,
                   partition: TopicPartition | None = None) -> ResourceExhaustedError:
    """The one-line refusal for ``what`` (e.g. "creating t-0") after running out of
    ``resource``; logs it as a WARN line."""
    if isinstance(exc, ResourceExhaustedError):
        return exc
    detail = getattr(exc, "strerror", None) or type(exc).__name__
    message = (f"{what} refused: out of {resource} ({detail}); the log dir stays online, "
               "retry later")
    logger.warning("%s", message)
    return ResourceExhaustedError(message, resource=resource,
                                  path=None if path is None else os.fspath(path),
                                  partition=partition)


def dir_of_path(path: str | os.PathLike[str] | None,
                log_dirs: list[Path]) -> Path | None:
    """The log dir (of ``log_dirs``) holding ``path``, or None."""
    if path is None:
        return None
    p = os.path.abspath(os.fspath(path))
    best: Path | None = None
    for d in log_dirs:
        root = os.path.abspath(d)
        if (p == root or p.startswith(root.rstrip(os.sep) + os.sep)) and (
                best is None or len(str(d)) > len(str(best))):
            best = d
    return best


class LogDirFailureHandler:
    """Marks dirs offline and takes their replicas out of service (see the module doc).

    Args:
        manager: the log manager whose dirs this guards.
        on_all_offline: called once, with the last error, when every dir is offline.
    """

    def __init__(self, manager: LogManager,
                 on_all_offline: Callable[[BaseException], None] | None = None) -> None:
        self.manager = manager
        self.on_all_offline = on_all_offline
        self._lock = threading.Lock()
        self.offline: dict[Path, str] = {}
        self.all_offline = threading.Event()

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir in self.offline

    @contextmanager
    def guard(self, log_dir: Path | None,
              partition: TopicPartition | None = None) -> Iterator[None]:
        """Run a block that touches ``log_dir``; an :class:`OSError` inside takes the dir
        offline (the dir named by the error's file name when it is another log dir) and is
        raised again as :class:`LogDirOfflineError`, unless it says a resource ran out
        (:func:`is_resource_exhaustion`): then only this call is refused.

        Raises:
            LogDirOfflineError: the dir is (or just went) offline.
            ResourceExhaustedError: out of descriptors, memory or disk space (retriable).
        """
        if log_dir is not None and log_dir in self.offline:
            raise LogDirOfflineError(f"log dir {log_dir} is offline"
                                     + (f"; {partition} is unavailable" if partition else ""),
                                     path=str(log_dir), partition=partition)
        try:
            yield
        except (OSError, MemoryError, ResourceExhaustedError) as exc:
            resource = is_resource_exhaustion(exc)
            if resource is not None:
                raise resource_error(exc, resource, f"a call on log dir {log_dir}"
                                     + (f" for {partition}" if partition else ""),
                                     path=log_dir, partition=partition) from exc
            if not isinstance(exc, OSError):
                raise
            failed = dir_of_path(getattr(exc, "filename", None),
                                 self.manager.log_dirs) or log_dir
            if failed is None:
                raise
            if partition is not None and is_partition_file_error(exc, failed):
                # one partition's file (a link, a directory, an unreadable file): that
                # partition goes offline, its dir serves the others
                problem = f"{type(exc).__name__}: {exc}".replace("\n", " ")
                self.manager.take_partition_offline(partition, failed, problem)
                raise LogDirOfflineError(f"{partition} is offline: {problem}",
                                         path=str(failed), partition=partition) from exc
            self.fail(failed, exc)
            raise LogDirOfflineError(
                f"log dir {failed} failed ({exc.strerror or exc}); it is offline now",
                path=str(failed), partition=partition) from exc
        except LogDirOfflineError:
            raise
        except Exception as exc:
            # another thread took the dir offline meanwhile and closed its logs under this
            # call: whatever that broke, the answer is that the dir is offline
            if log_dir is not None and log_dir in self.offline:
                raise LogDirOfflineError(f"log dir {log_dir} went offline during the call",
                                         path=str(log_dir), partition=partition) from exc
            raise

    def fail(self, log_dir: Path, error: BaseException) -> bool:
        """Take ``log_dir`` offline (see the module doc). Returns False when it already was,
        or when ``error`` only says a resource ran out (never a disk failure: the dir stays
        online). Never raises."""
        resource = is_resource_exhaustion(error)
        if resource is not None:
            logger.warning("log dir %s stays online: out of %s (%s)", log_dir, resource, error)
            return False
        with self._lock:
            if log_dir in self.offline:
                return False
            self.offline[log_dir] = f"{type(error).__name__}: {error}"
        logger.error("log dir %s failed: %s; its replicas go offline", log_dir, error)
        partitions = self.manager._take_dir_offline(log_dir)
        try:
            self.manager.mover.stop_moves_on_dir(log_dir)
        except Exception:  # never let the cleanup fail the caller
            logger.exception("stopping the moves of %s failed", log_dir)
        if self.manager.hooks is not None:
            self.manager.hooks.log_dir_failed(str(log_dir), partitions, error)
        try:
            self.manager._dir_state_changed()
        except Exception:
            logger.exception("a log dir state listener failed")
        if len(self.offline) >= len(self.manager.log_dirs) and not self.all_offline.is_set():
            self.all_offline.set()
            logger.critical("every log dir is offline; the broker must stop")
            if self.on_all_offline is not None:
                try:
                    self.on_all_offline(error)
                except Exception:
                    logger.exception("on_all_offline callback failed")
        return True


__all__ = ["DEVICE_ERRNOS", "DISK_ERRNOS", "RESOURCE_ERRNOS", "LogDirFailureHandler",
           "LogDirOfflineError", "ResourceExhaustedError", "dir_of_path",
           "is_partition_file_error", "is_resource_exhaustion", "resource_error"]
