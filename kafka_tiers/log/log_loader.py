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
from kafka_tiers.log.segment import LogSegment

logger = logging.getLogger(__name__)


@dataclass
class LoadResult:
    """The segments of a loaded partition and how loading went."""

    segments: list[LogSegment]
    report: RecoveryReport = field(default_factory=RecoveryReport)
    clean_shutdown: bool = True
    checked_all: bool = True


def scan_segments(directory: Path, config: LogConfig) -> list[LogSegment]:
    """Build (lazy) segments from the names in ``directory`` and clean up leftovers."""
    logs: list[int] = []
    others: list[tuple[int, str]] = []
    for name in os.listdir(directory):
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, TEMP_SUFFIX, SWAP_SUFFIX)):
            path = directory / name
            if path.is_file():
                logger.info("removing leftover %s", path)
                path.unlink(missing_ok=True)
            continue
        parsed = parse_segment_file(name)
        if parsed is None:
            continue
        base, suffix, state = parsed
        if state:
            continue
        if suffix == LOG_SUFFIX:
            logs.append(base)
        else:
            others.append((base, name))
    bases = set(logs)
    for base, name in others:
        if base not in bases and name.endswith((".index", ".timeindex", ".txnindex")):
            logger.info("removing index %s without a log file", directory / name)
            (directory / name).unlink(missing_ok=True)
    logs.sort()
    return [LogSegment(directory, base, index_interval_bytes=config.index_interval_bytes,
                       max_index_size=config.max_index_size) for base in logs]


def load_segments(directory: Path, config: LogConfig, *, recovery_point: int,
                  log_start_offset: int, clean_shutdown: bool, sanity_check_all: bool,
                  on_batch: BatchCallback | None = None) -> LoadResult:
    """Load a partition directory; see the module doc for what is checked when.

    Returns the segments, oldest first, the last one active (writable). There is always at
    least one segment (an empty one at the log start offset is created when needed).
    """
    segments = scan_segments(directory, config)
    report = RecoveryReport()
    if not segments:
        segments = [LogSegment.create(directory, max(log_start_offset, 0),
                                      index_interval_bytes=config.index_interval_bytes,
                                      max_index_size=config.max_index_size)]
        return LoadResult(segments, report, clean_shutdown, True)
    if clean_shutdown:
        if sanity_check_all:
            report.merge(check_segments(segments[:-1], on_batch=None))
        report.merge(check_segment(segments[-1], deep_tail=True, on_batch=None))
    else:
        for i, seg in enumerate(segments):
            if seg.base_offset >= recovery_point:
                break
            nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if nxt is not None and nxt <= recovery_point:
                report.merge(check_segment(seg, max_offset=nxt))
        report.merge(recover_from(segments, recovery_point, on_batch=on_batch))
    segments[-1].become_active()
    return LoadResult(segments, report, clean_shutdown, sanity_check_all or not clean_shutdown)


__all__ = ["LoadResult", "load_segments", "scan_segments"]
