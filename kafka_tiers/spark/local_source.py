"""``source=local``: read a broker's log directories offline, Kafka's own included.

The partition directories ``<topic>-<partition>`` of every log dir are found by name (JBOD
``-future`` / ``-delete`` directories and ``.deleted`` / ``.cleaned`` / ``.swap`` files are
ignored), and each ``<20-digit base offset>.log`` file is one segment, its ``.index`` the offset
index used to split it. Nothing is opened for writing and nothing is recovered: a log dir of a
running or crashed broker is read as it is; the last segment of a partition may end in a
half-written batch, which ends the data (as Kafka's recovery would truncate it). A CRC error is
corruption, as for remote data.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from kafka_tiers.log.errors import LogError
from kafka_tiers.log.names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    parse_partition_dir,
    parse_segment_file,
)
from kafka_tiers.spark.planning import SegmentInfo


def _partition_dirs(log_dirs: Iterable[str], topic: str) -> dict[int, Path]:
    found: dict[int, Path] = {}
    for log_dir in log_dirs:
        root = Path(log_dir)
        if not root.is_dir():
            raise FileNotFoundError(f"log dir {root} does not exist")
        for entry in root.iterdir():
            if not entry.is_dir():
                continue
            try:
                parsed = parse_partition_dir(entry.name)
            except LogError:
                continue
            if parsed.kind or parsed.partition.topic != topic:
                continue
            found[parsed.partition.partition] = entry
    return found


def local_partitions(log_dirs: Iterable[str], topic: str) -> list[int]:
    """The partitions of ``topic`` with a directory in the log dirs, sorted.

    Raises:
        FileNotFoundError: a log dir does not exist.
    """
    return sorted(_partition_dirs(log_dirs, topic))


def local_segments(log_dirs: Iterable[str], topic: str, partition: int) -> list[SegmentInfo]:
    """The segments of one partition in the log dirs, sorted by base offset (empty when the
    partition has no directory)."""
    directory = _partition_dirs(log_dirs, topic).get(partition)
    if directory is None:
        return []
    bases = []
    for entry in directory.iterdir():
        parsed = parse_segment_file(entry.name)
        if parsed and parsed[1] == LOG_SUFFIX and not parsed[2]:
            bases.append(parsed[0])
    bases.sort()
    out = []
    for i, base in enumerate(bases):
        log_path = directory / f"{base:020d}{LOG_SUFFIX}"
        index_path = directory / f"{base:020d}{INDEX_SUFFIX}"
        end = bases[i + 1] - 1 if i + 1 < len(bases) else None

        def load(index_path: Path = index_path) -> bytes:
            try:
                return index_path.read_bytes()
            except FileNotFoundError:
                return b""  # no index: the segment is read whole, unsplit

        out.append(SegmentInfo(base, end, os.path.getsize(log_path), None, str(log_path),
                               None, str(log_path), load))
    return out


class LocalRange:
    """Opens byte ranges of a local segment file (inclusive positions, like
    ``fetch_log_segment``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, start: int, end: int | None) -> BinaryIO:
        """A stream of ``path`` from ``start`` to ``end`` (inclusive; None = to the end)."""
        import io

        fh = open(self.path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        fh.seek(start)
        if end is None:
            return fh
        data = fh.read(end - start + 1)
        fh.close()
        return io.BytesIO(data)


__all__ = ["LocalRange", "local_partitions", "local_segments"]
