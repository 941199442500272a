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
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafka_tiers.log.checkpoints import TEMP_SUFFIX
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    parse_segment_file,
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


def scan_segments(directory: Path, config: LogConfig) -> SegmentList:
    """Build (lazy) segments from the names in ``directory`` and clean up leftovers.

    One ``listdir`` and string checks per name: no file is opened or stat'ed.
    """
    names = os.listdir(directory)
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
            ours = parse_segment_file(name) is not None or name.endswith(TEMP_SUFFIX)
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
    after a clean shutdown, when the directory's mtime is unchanged, it replaces listing the
    directory.

    Returns the segments, oldest first, the last one active (writable). There is always at
    least one segment (an empty one at the log start offset is created when needed).
    """
    segments = None
    if clean_shutdown and segment_list is not None and segment_list[1]:
        try:
            unchanged = os.stat(directory).st_mtime_ns == segment_list[0]
        except OSError:
            unchanged = False
        if unchanged:
            segments = SegmentList(list(segment_list[1]), segment_factory(directory, config))
    if segments is None:
        segments = scan_segments(directory, config)
    report = RecoveryReport()
    if not segments:
        segments.append(LogSegment.create(directory, max(log_start_offset, 0),
                                          index_interval_bytes=config.index_interval_bytes,
                                          max_index_size=config.max_index_size))
        return LoadResult(segments, report, clean_shutdown, True)
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
    segments[-1].become_active()
    return LoadResult(segments, report, clean_shutdown, sanity_check_all or not clean_shutdown)


__all__ = ["LoadResult", "load_segments", "scan_segments"]
