"""Names on disk: topic validation as Kafka does it, partition directory and segment file names.

Nothing taken from a topic name or a file name can place a file outside its log dir: topic names
are restricted to Kafka's legal characters (``[a-zA-Z0-9._-]``, at most 249, not ``.`` or
``..``) and every path built here is checked to stay inside its parent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.log.errors import InvalidTopicError

MAX_TOPIC_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
_UUID = r"[0-9a-f]{32}"
_DIR = re.compile(
    rf"(?P<topic>.+)-(?P<partition>\d+)(?:\.(?P<uuid>{_UUID})-(?P<kind>future|delete))?")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_SEGMENT_FILE = re.compile(r"(\d{20})(\.[a-z]+)((?:\.deleted|\.cleaned|\.swap)?)")
#: the files of a partition directory that are not segment-family files (Kafka's names)
PARTITION_STATE_FILES = ("leader-epoch-checkpoint", "partition.metadata")
_TMP = ".tmp"


def validate_topic(topic: str) -> str:
    """Return ``topic`` if Kafka accepts it as a topic name.

    Raises:
        InvalidTopicError: empty, ``.`` or ``..``, longer than 249, or an illegal character.
    """
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("topic name is empty", topic=topic)
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {topic!r}", topic=topic)
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(topic)} characters, the limit is {MAX_TOPIC_LENGTH}",
            topic=topic)
    if not _LEGAL.fullmatch(topic):
        raise InvalidTopicError(
            f"topic name {topic!r} has characters other than ASCII letters, digits, '.', "
            "'_' and '-'", topic=topic)
    return topic


class PartitionDir(NamedTuple):
    """A parsed partition directory name: ``<topic>-<partition>`` or a JBOD future/delete dir
    ``<topic>-<partition>.<uuid>-future|delete`` (``kind`` is ``""``, ``"future"`` or
    ``"delete"``)."""

    partition: TopicPartition
    kind: str = ""
    uuid: str = ""


def partition_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>`` for a valid topic.

    Raises:
        InvalidTopicError: the topic is not a legal Kafka topic name.
    """
    validate_topic(tp.topic)
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> PartitionDir:
    """Parse a partition directory name.

    Raises:
        InvalidTopicError: the name is not a partition directory with a legal topic.
    """
    m = _DIR.fullmatch(name)
    if not m:
        raise InvalidTopicError(f"{name!r} is not a partition directory name", topic=name)
    topic = validate_topic(m["topic"])
    return PartitionDir(TopicPartition(topic, int(m["partition"])), m["kind"] or "",
                        m["uuid"] or "")


def child_path(parent: str | Path, name: str) -> Path:
    """``parent / name``, refusing names that would leave ``parent``.

    Raises:
        InvalidTopicError: ``name`` is empty, absolute, has a separator, or is ``.``/``..``.
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise InvalidTopicError(f"{name!r} cannot name an entry inside {parent}", topic=name)
    path = Path(parent) / name
    if path.parent != Path(parent):
        raise InvalidTopicError(f"{name!r} escapes {parent}", topic=name)
    return path


def partition_dir(log_dir: str | Path, tp: TopicPartition) -> Path:
    """The directory of ``tp`` inside ``log_dir``."""
    return child_path(log_dir, partition_dir_name(tp))


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``<20-digit base offset><suffix>``, e.g. ``00000000000000000042.log``."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:020d}{suffix}"


def parse_segment_file(name: str) -> tuple[int, str, str] | None:
    """``(base offset, suffix, trailing state suffix)`` of a segment-family file name, e.g.
    ``(42, ".index", ".deleted")``; None for other names."""
    m = _SEGMENT_FILE.fullmatch(name)
    if not m:
        return None
    return int(m[1]), m[2], m[3]


def is_kafka_partition_file(name: str) -> bool:
    """True for a file name Kafka (and this broker) writes in a partition directory: a
    segment-family file (``<20 digits>`` + ``.log``/``.index``/``.timeindex``/``.txnindex``/
    ``.snapshot``, optionally ``.deleted``/``.cleaned``/``.swap``), ``leader-epoch-checkpoint``,
    ``partition.metadata``, or one of those with ``.tmp`` (an interrupted crash-safe write).
    What a delete may remove from a partition directory it owns; nothing else."""
    if name.endswith(_TMP):
        name = name[:-len(_TMP)]
    if name in PARTITION_STATE_FILES:
        return True
    parsed = parse_segment_file(name)
    return parsed is not None and parsed[1] in (*SEGMENT_SUFFIXES, SNAPSHOT_SUFFIX)


class LazyFilePath:
    """A file's name kept as a string for the ``os`` calls, its :class:`~pathlib.Path`
    built only on first use of :attr:`path` (start-up of 20,000 partitions builds none)."""

    _file: str
    _path: Path | None

    @property
    def path(self) -> Path:
        """The file as a :class:`~pathlib.Path`."""
        if self._path is None:
            self._path = Path(self._file)
        return self._path

    def _set_path(self, value: str | os.PathLike[str]) -> None:
        self._file = os.fspath(value)
        self._path = value if isinstance(value, Path) else None


__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "MAX_TOPIC_LENGTH",
    "PARTITION_STATE_FILES",
    "SEGMENT_SUFFIXES",
    "SNAPSHOT_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "LazyFilePath",
    "PartitionDir",
    "child_path",
    "is_kafka_partition_file",
    "parse_partition_dir",
    "parse_segment_file",
    "partition_dir",
    "partition_dir_name",
    "segment_file_name",
    "validate_topic",
]
