"""DescribeDirs (document 000, section 3): per log dir its state and, per partition replica,
its size, log end offset and whether it is temporary (a ``-future`` log of a move in progress).

Two sources give the same answer:

* :func:`describe_log_dirs` asks a running :class:`~kafka_tiers.log.log_manager.LogManager`
  (the broker's own view, with offline dirs as it found them);
* :func:`scan_log_dirs` reads the dirs from disk without opening any log or taking any lock
  (for tools, and for a broker that is not running): sizes are the ``.log`` file sizes, the log
  end offset comes from the last segment's last batch header (found through its offset index).

Only replicas are listed as partitions (a ``<topic>-<partition>`` directory holding Kafka log
files, see :mod:`kafka_tiers.log.dir_ownership`); other directories of a log dir (a user's
``backup-2024/``, a ``foo-0/`` without log files, a symlinked or link-holding partition dir)
are listed by name under ``foreign``, never as partitions.

Filters follow the document: ``log_dirs`` and ``topics`` of None (or empty) mean all; the result
is their intersection. A requested dir the broker does not have is listed with error
``LOG_DIR_NOT_FOUND``; an offline dir with ``KAFKA_STORAGE_ERROR`` and no partitions.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.log.dir_ownership import DELETE, FUTURE, OWN, REPLICA, classify_entry
from kafka_tiers.log.names import INDEX_SUFFIX, LOG_SUFFIX

if TYPE_CHECKING:
    from kafka_tiers.log.log_manager import LogManager

KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
LOG_DIR_NOT_FOUND = "LOG_DIR_NOT_FOUND"
DESCRIBE_VERSION = 1


@dataclass(frozen=True)
class ReplicaDescription:
    """One replica in a log dir."""

    topic: str
    partition: int
    size: int
    log_end_offset: int
    is_temporary: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "size": self.size,
                "log_end_offset": self.log_end_offset, "is_temporary": self.is_temporary}


@dataclass(frozen=True)
class LogDirDescription:
    """One log dir: ``error`` is None for a live dir, else ``KAFKA_STORAGE_ERROR`` (offline)
    or ``LOG_DIR_NOT_FOUND`` (not a dir of this broker)."""

    path: str
    error: str | None = None
    partitions: tuple[ReplicaDescription, ...] = field(default_factory=tuple)
    total_bytes: int = 0
    usable_bytes: int = 0
    error_message: str | None = None
    #: names of the dir's entries that are no replicas (left alone by the broker)
    foreign: tuple[str, ...] = ()

    @property
    def is_live(self) -> bool:
        return self.error is None

    @property
    def bytes_used(self) -> int:
        """Bytes of the (non-temporary) replicas held."""
        return sum(p.size for p in self.partitions if not p.is_temporary)

    def to_dict(self) -> dict[str, Any]:
        """Document 000's ``kafka-log-dirs`` entry, plus ``error``, ``total_bytes`` and
        ``usable_bytes``, each partition's ``log_end_offset`` and ``foreign`` (the names of
        directories that are no replicas)."""
        return {"is_live": self.is_live, "path": self.path, "error": self.error,
                "total_bytes": self.total_bytes, "usable_bytes": self.usable_bytes,
                "partitions": [p.to_dict() for p in self.partitions],
                "foreign": list(self.foreign)}


def to_json(dirs: Sequence[LogDirDescription]) -> dict[str, Any]:
    """The ``kafka-log-dirs --describe`` document of document 000 (version 1)."""
    return {"version": DESCRIBE_VERSION, "log_dirs": [d.to_dict() for d in dirs]}


def disk_space(path: str | os.PathLike[str]) -> tuple[int, int]:
    """``(total bytes, usable bytes)`` of the file system holding ``path`` ((0, 0) when it
    cannot be asked)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 0, 0
    return usage.total, usage.free


def _wanted(requested: Iterable[str | os.PathLike[str]] | None,
            have: Sequence[Path]) -> list[tuple[str, Path | None]]:
    if not requested:
        return [(str(d), d) for d in have]
    by_norm = {os.path.normpath(os.path.abspath(d)): d for d in have}
    out = []
    for r in requested:
        norm = os.path.normpath(os.path.abspath(os.fspath(r)))
        out.append((str(by_norm.get(norm, norm)), by_norm.get(norm)))
    return out


def describe_log_dirs(manager: LogManager,
                      log_dirs: Iterable[str | os.PathLike[str]] | None = None,
                      topics: Iterable[str] | None = None) -> list[LogDirDescription]:
    """DescribeDirs answered by a running log manager (see the module doc)."""
    topic_set = set(topics or ())
    out = []
    offline = manager.offline_dirs
    logs = manager.logs
    dir_of = {tp: manager.log_dir_of(tp) for tp in logs}
    futures = manager.mover.future_logs()
    for shown, d in _wanted(log_dirs, manager.log_dirs):
        if d is None:
            out.append(LogDirDescription(shown, LOG_DIR_NOT_FOUND,
                                         error_message="not a log dir of this broker"))
            continue
        if d in offline:
            out.append(LogDirDescription(shown, KAFKA_STORAGE_ERROR,
                                         error_message=offline[d]))
            continue
        parts: list[ReplicaDescription] = []
        for tp, log in logs.items():
            if dir_of.get(tp) != d or (topic_set and tp.topic not in topic_set):
                continue
            try:
                parts.append(ReplicaDescription(tp.topic, tp.partition, log.size,
                                                log.log_end_offset))
            except Exception:  # closed under us by a move's swap: it shows up next time
                continue
        for tp, (fdir, flog) in futures.items():
            if fdir != d or (topic_set and tp.topic not in topic_set):
                continue
            try:
                parts.append(ReplicaDescription(tp.topic, tp.partition, flog.size,
                                                flog.log_end_offset, True))
            except Exception:
                continue
        parts.sort(key=lambda p: (p.topic, p.partition, p.is_temporary))
        total, usable = disk_space(d)
        foreign = tuple(sorted(os.path.basename(f) for f in manager.report.foreign_dirs
                               if Path(f).parent == d))
        out.append(LogDirDescription(shown, None, tuple(parts), total, usable,
                                     foreign=foreign))
    return out


_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA_AT = 23  # lastOffsetDelta in the batch header
_MAGIC_AT = 16
_CRC_AT = 17


def _last_index_position(index_path: Path) -> int:
    try:
        data = index_path.read_bytes()
    except OSError:
        return 0
    used = len(data.rstrip(b"\0"))
    used = (used + 7) // 8 * 8
    if used < 8:
        return 0
    _rel, pos = struct.unpack_from(">ii", data, used - 8)
    return max(pos, 0)


def last_batch_header(log_path: Path) -> tuple[int, int, int] | None:
    """``(base offset, next offset, crc)`` of the last complete batch of a segment file read
    from disk (None when it holds none). Starts from the last offset index entry, so only the
    tail is read; nothing is CRC-checked."""
    index = log_path.with_name(log_path.name[:-len(LOG_SUFFIX)] + INDEX_SUFFIX)
    last = None
    with open(log_path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        pos = _last_index_position(index)
        if pos >= size:
            pos = 0
        while pos + 27 <= size:
            fh.seek(pos)
            head = fh.read(27)
            if len(head) < 27 or head[_MAGIC_AT] != 2:
                break
            base, length = _HEAD.unpack_from(head)
            if length <= 0 or pos + 12 + length > size:
                break
            (crc,) = struct.unpack_from(">I", head, _CRC_AT)
            (delta,) = struct.unpack_from(">i", head, _LAST_DELTA_AT)
            last = (base, base + delta + 1, crc)
            pos += 12 + length
    return last


def segment_end_offset(log_path: Path, base_offset: int) -> int:
    """The log end offset of one segment file read from disk: one past the last offset of its
    last complete batch (``base_offset`` when it holds none)."""
    last = last_batch_header(log_path)
    return base_offset if last is None else last[1]


def scan_partition_dir(path: Path) -> tuple[int, int]:
    """``(size, log end offset)`` of a partition directory on disk."""
    logs = []
    for entry in os.scandir(path):
        name = entry.name
        if name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX) and name[:20].isdigit():
            logs.append((int(name[:20]), entry))
    if not logs:
        return 0, 0
    logs.sort(key=lambda x: x[0])
    size = sum(e.stat().st_size for _, e in logs)
    base, last = logs[-1]
    end = segment_end_offset(Path(last.path), base)
    return size, end


def scan_log_dirs(paths: Sequence[str | os.PathLike[str]],
                  log_dirs: Iterable[str | os.PathLike[str]] | None = None,
                  topics: Iterable[str] | None = None,
                  offline: Iterable[str | os.PathLike[str]] = ()) -> list[LogDirDescription]:
    """DescribeDirs read from disk (see the module doc). ``paths`` are the broker's
    ``log.dirs``; ``offline`` the dirs its broker reported offline. A dir that cannot be
    listed is offline (``KAFKA_STORAGE_ERROR``)."""
    have = [Path(p) for p in paths]
    off = {os.path.normpath(os.path.abspath(p)) for p in offline}
    topic_set = set(topics or ())
    out = []
    for shown, d in _wanted(log_dirs, have):
        if d is None:
            out.append(LogDirDescription(shown, LOG_DIR_NOT_FOUND,
                                         error_message="not a log dir of this broker"))
            continue
        if os.path.normpath(os.path.abspath(d)) in off:
            out.append(LogDirDescription(shown, KAFKA_STORAGE_ERROR,
                                         error_message="the broker reported it offline"))
            continue
        parts = []
        foreign: list[str] = []
        try:
            entries = list(os.scandir(d))
            for entry in entries:
                if entry.is_symlink():
                    if entry.is_dir():
                        foreign.append(entry.name)
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                kind, parsed = classify_entry(entry.name, entry.path)
                if kind in (OWN, DELETE):  # the broker's own tools', a pending deletion
                    continue
                if kind not in (REPLICA, FUTURE) or parsed is None:  # foreign, linked
                    foreign.append(entry.name)
                    continue
                tp = parsed.partition
                if topic_set and tp.topic not in topic_set:
                    continue
                try:
                    size, end = scan_partition_dir(Path(entry.path))
                except FileNotFoundError:  # renamed by a move meanwhile
                    continue
                parts.append(ReplicaDescription(tp.topic, tp.partition, size, end,
                                                parsed.kind == "future"))
        except FileNotFoundError:
            out.append(LogDirDescription(
                shown, KAFKA_STORAGE_ERROR,
                error_message="the dir does not exist (a broker creates it when it starts; "
                              "if one used it, its disk is gone)"))
            continue
        except OSError as exc:
            out.append(LogDirDescription(shown, KAFKA_STORAGE_ERROR,
                                         error_message=exc.strerror or str(exc)))
            continue
        parts.sort(key=lambda p: (p.topic, p.partition, p.is_temporary))
        total, usable = disk_space(d)
        out.append(LogDirDescription(shown, None, tuple(parts), total, usable,
                                     foreign=tuple(sorted(foreign))))
    return out


__all__ = [
    "DESCRIBE_VERSION",
    "KAFKA_STORAGE_ERROR",
    "LOG_DIR_NOT_FOUND",
    "LogDirDescription",
    "ReplicaDescription",
    "describe_log_dirs",
    "disk_space",
    "last_batch_header",
    "scan_log_dirs",
    "scan_partition_dir",
    "segment_end_offset",
    "to_json",
]
