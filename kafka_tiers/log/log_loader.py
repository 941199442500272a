"""Loading one partition directory into segments (Kafka's ``LogLoader`` with KIP-263).

Startup cost is what document 002 is about, so loading lists the directory once and builds
segments from file names alone; no segment file is opened, mapped or stat'ed unless a check
needs it:

* clean shutdown, ``sanity.check.all.logs.enabled=false``: only the active (last) segment is
  checked (its indexes, and every batch after its last index entry by CRC); the others are
  checked on first access or by a background task.
* clean shutdown, check enabled (the default): every segment's indexes are sanity-checked.
* unclean shutdown: every segment below the recovery point is sanity-checked and every segment
  from the recovery point on is recovered (:mod:`kafka_tiers.log.recovery`).

A segment whose check fails is recovered before anything reads it. Leftovers of interrupted
operations are cleaned: ``.deleted`` and ``.cleaned`` files and temporary checkpoint files are
removed, index files without a log file are removed.

The small files that describe a log are checked against it before they are used, never
obeyed blindly (:func:`checked_offset`): a value outside the log's range is reported with one
WARN line (partition, file, value, range) and replaced by what the segments say.

* ``kafka-tiers-segment-list``: the base offsets it lists are compared with the names of one
  ``os.scandir`` of the partition directory (no file is opened); on any difference the list is
  ignored and the partition loads as if it were absent.
* ``recovery-point-offset-checkpoint``: a recovery point above the log end offset after an
  unclean shutdown claims flushed data that is not there; every segment is then recovered.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafka_tiers.log.checkpoints import (
    RECOVERY_POINT_CHECKPOINT,
    SEGMENT_LIST_FILE,
    TEMP_SUFFIX,
)
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    is_kafka_partition_file,
)
from kafka_tiers.log.recovery import (
    BatchCallback,
    RecoveryReport,
    check_segment,
    check_segments,
    recover_from,
)
from kafka_tiers.log.segment import LogSegment, SegmentList

logger = logging.getLogger(__name__)

_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, TEMP_SUFFIX, SWAP_SUFFIX)


@dataclass
class LoadResult:
    """The segments of a loaded partition and how loading went."""

    segments: SegmentList
    report: RecoveryReport = field(default_factory=RecoveryReport)
    clean_shutdown: bool = True
    checked_all: bool = True
    #: the recovery point to use: the one given, or the log end offset when it was ignored
    recovery_point: int = 0


def checked_offset(directory: Path, file_name: str, value: int, low: int, high: int,
                   replacement: int, what: str = "offset") -> int:
    """``value`` when ``low <= value <= high``; otherwise one WARN naming the partition
    (``directory``), the checkpoint file (``file_name`` in the log dir), the value and the
    log's range, and ``replacement`` (recomputed from the segments) is returned instead."""
    if low <= value <= high:
        return value
    logger.warning(
        "%s: %s %d in %s is outside the log's range [%d, %d]; ignoring it, using %d "
        "(from the segments)", directory.name, what, value, directory.parent / file_name,
        low, high, replacement)
    return replacement


def list_names(directory: Path) -> list[str]:
    """The names in ``directory``: one ``os.scandir``, no file opened or stat'ed."""
    with os.scandir(directory) as it:
        return [entry.name for entry in it]


def scan_segments(directory: Path, config: LogConfig,
                  names: list[str] | None = None) -> SegmentList:
    """Build (lazy) segments from the names in ``directory`` (``names`` when already listed)
    and clean up leftovers.

    One ``os.scandir`` and string checks per name: no file is opened or stat'ed.
    """
    if names is None:
        names = list_names(directory)
    logs: list[int] = []
    indexes: list[str] = []
    for name in names:
        if name.endswith(LOG_SUFFIX):
            stem = name[:-4]
            if len(stem) == 20 and stem.isdigit():
                logs.append(int(stem))
        elif name.endswith(_INDEX_SUFFIXES):
            indexes.append(name)
        elif name.endswith(_LEFTOVER_SUFFIXES):
            path = directory / name
            ours = is_kafka_partition_file(name)  # never a user's notes.tmp
            if ours and path.is_file():
                logger.info("removing leftover %s", path)
                path.unlink(missing_ok=True)
    if indexes:
        stems = {name[:-4] for name in names if name.endswith(LOG_SUFFIX)}
        for name in indexes:
            stem = name.split(".", 1)[0]
            if stem not in stems and len(stem) == 20 and stem.isdigit():
                logger.info("removing index %s without a log file", directory / name)
                (directory / name).unlink(missing_ok=True)
    logs.sort()
    return SegmentList(logs, segment_factory(directory, config))


def segment_factory(directory: Path, config: LogConfig) -> Callable[[int], LogSegment]:
    """Makes the (inactive, lazy) segment of a base offset in ``directory``."""
    interval, max_size = config.index_interval_bytes, config.max_index_size

    def make(base: int) -> LogSegment:
        return LogSegment(directory, base, index_interval_bytes=interval,
                          max_index_size=max_size)

    return make


def load_segments(directory: Path, config: LogConfig, *, recovery_point: int,
                  log_start_offset: int, clean_shutdown: bool, sanity_check_all: bool,
                  on_batch: BatchCallback | None = None,
                  segment_list: tuple[int, list[int]] | None = None) -> LoadResult:
    """Load a partition directory; see the module doc for what is checked when.

    ``segment_list`` is ``(dir mtime ns, base offsets)`` recorded at the last clean shutdown;
    it is compared with the directory's names (one ``os.scandir``) and ignored on any
    difference, with a WARN naming the partition and the offsets that differ.

    A ``recovery_point`` outside ``[0, log end offset]`` is reported and ignored: after an
    unclean shutdown every segment is then recovered; the result's ``recovery_point`` is the
    one to use.

    Returns the segments, oldest first, the last one active (writable). There is always at
    least one segment (an empty one at the log start offset is created when needed).
    """
    segments = scan_segments(directory, config)
    if clean_shutdown and segment_list is not None:
        listed = segments.bases
        if listed != list(segment_list[1]):
            missing = sorted(set(listed) - set(segment_list[1]))
            absent = sorted(set(segment_list[1]) - set(listed))
            logger.warning(
                "%s: %s in %s differs from the directory (segments not listed: %s; listed but "
                "missing: %s); ignoring it for this partition", directory.name,
                SEGMENT_LIST_FILE, directory.parent, missing[:10] or "none",
                absent[:10] or "none")
    report = RecoveryReport()
    if not segments:
        segments.append(LogSegment.create(directory, max(log_start_offset, 0),
                                          index_interval_bytes=config.index_interval_bytes,
                                          max_index_size=config.max_index_size))
        return LoadResult(segments, report, clean_shutdown, True,
                          checked_offset(directory, RECOVERY_POINT_CHECKPOINT, recovery_point,
                                         0, segments[0].base_offset, segments[0].base_offset,
                                         "recovery point"))
    if clean_shutdown:
        if sanity_check_all:
            report.merge(check_segments(segments[:-1], on_batch=None))
        report.merge(check_segment(segments[-1], deep_tail=True, on_batch=None))
    else:
        bases = segments.bases
        for i in range(len(bases)):
            nxt = bases[i + 1] if i + 1 < len(bases) else None
            if nxt is None or nxt > recovery_point:
                break
            report.merge(check_segment(segments[i], max_offset=nxt))
        report.merge(recover_from(segments, recovery_point, on_batch=on_batch))
    end = segments[-1].next_offset
    if clean_shutdown:
        recovery_point = checked_offset(directory, RECOVERY_POINT_CHECKPOINT, recovery_point,
                                        0, end, end, "recovery point")
    elif checked_offset(directory, RECOVERY_POINT_CHECKPOINT, recovery_point, 0, end, 0,
                        "recovery point") != recovery_point:
        # the segments below it were only sanity-checked: recover them all
        report.merge(recover_from(segments, segments.bases[0], on_batch=on_batch))
        recovery_point = 0
    segments[-1].become_active()
    return LoadResult(segments, report, clean_shutdown, sanity_check_all or not clean_shutdown,
                      recovery_point)


__all__ = ["LoadResult", "checked_offset", "list_names", "load_segments", "scan_segments",
           "segment_factory"]
