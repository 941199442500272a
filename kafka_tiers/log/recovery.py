"""Crash recovery and sanity checks of a partition's segments, as Kafka's ``LogLoader`` does.

* After an unclean shutdown, every segment from the one holding the recovery point on is
  recovered: each batch is validated (size, magic, CRC, partition leader epoch, and the offset
  rules for the header fields outside the CRC, see
  :func:`~kafka_tiers.log.records.first_offset_violation`), the indexes are rebuilt, and the
  log is cut at the first invalid batch, the one whose damaged ``baseOffset`` caused an
  overlap included (:meth:`LogSegment.recover`). When a segment had to be cut, every later
  segment is removed (its data cannot follow a hole), as Kafka does.
* A segment failing its sanity check (an index missing or inconsistent) is recovered on its own;
  its neighbours are kept, as Kafka's ``loadSegmentFiles`` does.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kafka_tiers.log.errors import CorruptIndexError, CorruptRecordError
from kafka_tiers.log.records import RecordBatch
from kafka_tiers.log.segment import LogSegment, RecoveryResult, SegmentList

logger = logging.getLogger(__name__)

#: called with (segment, batch) for every valid batch a recovery reads.
BatchCallback = Callable[[LogSegment, RecordBatch], None]


@dataclass
class RecoveryReport:
    """What a recovery did: segments recovered and removed, bytes cut, problems found."""

    recovered: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    truncated_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    def merge(self, other: RecoveryReport) -> None:
        self.recovered += other.recovered
        self.removed += other.removed
        self.truncated_bytes += other.truncated_bytes
        self.problems += other.problems


def recover_segment(segment: LogSegment, *, max_offset: int | None = None,
                    on_batch: BatchCallback | None = None) -> RecoveryResult:
    """Recover one segment (rebuild its indexes, cut a corrupt tail) and log what happened."""
    callback = (lambda b: on_batch(segment, b)) if on_batch else None
    result = segment.recover(on_batch=callback, max_offset=max_offset)
    if result.truncated_bytes:
        logger.warning("%s: truncated %d invalid bytes at position %d: %s", segment.log_path,
                       result.truncated_bytes, result.valid_bytes, result.problem)
    return result


def recover_from(segments: SegmentList, recovery_point: int, *,
                 on_batch: BatchCallback | None = None) -> RecoveryReport:
    """Recover, in place, every segment of ``segments`` from the one holding
    ``recovery_point``; a cut segment makes every later one be deleted and removed from the
    list."""
    report = RecoveryReport()
    i = max(bisect.bisect_right(segments.bases, recovery_point) - 1, 0)
    while i < len(segments):
        seg = segments[i]
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        result = recover_segment(seg, max_offset=nxt, on_batch=on_batch)
        report.recovered.append(seg.base_offset)
        if result.problem:
            report.problems.append(f"{seg.log_path}: {result.problem}")
        if result.truncated_bytes > 0:
            report.truncated_bytes += result.truncated_bytes
            for doomed in segments[i + 1:]:
                logger.warning("deleting %s: it follows a truncated segment", doomed.log_path)
                doomed.delete()
                report.removed.append(doomed.base_offset)
            del segments[i + 1:]
            break
        i += 1
    return report


def check_segment(segment: LogSegment, *, deep_tail: bool = False,
                  max_offset: int | None = None,
                  on_batch: BatchCallback | None = None) -> RecoveryReport:
    """Sanity-check one segment; recover it when the check fails."""
    report = RecoveryReport()
    try:
        segment.sanity_check(deep_tail=deep_tail)
    except (CorruptIndexError, CorruptRecordError, OSError) as exc:
        logger.warning("%s failed its sanity check (%s); recovering it", segment.log_path, exc)
        report.problems.append(f"{segment.log_path}: {exc}")
        result = recover_segment(segment, max_offset=max_offset, on_batch=on_batch)
        report.recovered.append(segment.base_offset)
        report.truncated_bytes += result.truncated_bytes
    return report


def check_segments(segments: Sequence[LogSegment], *,
                   on_batch: BatchCallback | None = None) -> RecoveryReport:
    """Sanity-check every segment not yet checked (the last one deeply)."""
    report = RecoveryReport()
    for i, seg in enumerate(segments):
        if seg.checked:
            continue
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        report.merge(check_segment(seg, deep_tail=i == len(segments) - 1, max_offset=nxt,
                                   on_batch=on_batch))
    return report


__all__ = ["RecoveryReport", "check_segment", "check_segments", "recover_from",
           "recover_segment"]
