"""Which log dirs, and which entries in them, belong to this broker (Kafka's
``BrokerMetadataCheckpoint`` checks, ``InconsistentBrokerIdException`` /
``InconsistentClusterIdException``, and its stray-replica rules).

What the log manager proves before it touches anything:

* **The dir is not in use.** Its ``.lock`` is held by this process (``flock``); a dir locked by
  another live process refuses the start (:class:`LogDirInUseError`) before anything in any dir
  is read, written, renamed or deleted.
* **The dir is this broker's.** Its ``meta.properties`` names this broker
  (``node.id``/``broker.id``) and, when the broker knows its cluster id, this cluster
  (``cluster.id``); otherwise the start is refused (:class:`InconsistentBrokerIdError`,
  :class:`InconsistentClusterIdError`). A cluster member learns the cluster id from its metadata
  store (``/cluster/id``); a standalone broker has none and checks the broker id only. A dir
  without ``meta.properties`` gets one; one without ``cluster.id`` gets the cluster's added by
  a cluster member (as Kafka does for dirs written before cluster ids existed).
* **An entry is a replica.** Only a directory whose name parses as a partition directory
  (:func:`~kafka_tiers.log.names.parse_partition_dir`) *and* that holds a Kafka segment file
  (``<20 digits>.log``) is loaded as a log, and so is the only kind a stray-replica cleanup may
  remove. JBOD ``-future``/``-delete`` directories are recognised by their Kafka name with its
  32-digit id. A partition dir that is a symlink, or whose Kafka-named files include one, is
  no replica. Everything else is :data:`FOREIGN`: left alone and reported once (WARN) at
  start-up. Every file of a replica is opened with ``O_NOFOLLOW`` (a link found later is a
  per-partition problem, ELOOP).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.log.errors import InvalidTopicError, LogDirError
from kafka_tiers.log.names import (
    LOG_SUFFIX,
    PartitionDir,
    is_kafka_partition_file,
    parse_partition_dir,
    parse_segment_file,
)

#: entry kinds of :func:`classify_entry`
REPLICA, FUTURE, DELETE, FOREIGN, OWN = "replica", "future", "delete", "foreign", "own"
#: a partition-named directory that is a symlink or holds a Kafka-named symlink: no replica
#: (left alone, reported), but its partition is never created anew elsewhere either
LINKED = "linked"

#: directory names in a log dir that are the broker's own tools', never replicas nor foreign:
#: names starting with ``kafka-tiers-`` or ``.kafka-tiers-`` (the remote tier's work dir, the
#: admin channel) and the file system's ``lost+found``
OWN_PREFIXES = ("kafka-tiers-", ".kafka-tiers-")
SYSTEM_DIRS = frozenset({"lost+found"})


class LogDirInUseError(LogDirError):
    """A log dir is locked by another live process (or another log manager)."""


class InconsistentBrokerIdError(LogDirError):
    """A log dir's ``meta.properties`` names another broker (Kafka's
    ``InconsistentBrokerIdException``).

    Attributes:
        configured: this broker's id; stored: the id in the file.
    """

    def __init__(self, message: str, *, path: str, configured: str, stored: str) -> None:
        super().__init__(message, path=path)
        self.configured = configured
        self.stored = stored


class InconsistentClusterIdError(LogDirError):
    """A log dir's ``meta.properties`` names another cluster (Kafka's
    ``InconsistentClusterIdException``).

    Attributes:
        configured: this broker's cluster id; stored: the id in the file.
    """

    def __init__(self, message: str, *, path: str, configured: str, stored: str) -> None:
        super().__init__(message, path=path)
        self.configured = configured
        self.stored = stored


def broker_id_of(props: Mapping[str, str]) -> str | None:
    """The broker id a ``meta.properties`` mapping names (``node.id``, else ``broker.id``)."""
    value = props.get("node.id") or props.get("broker.id")
    return value.strip() if value else None


def check_meta_properties(log_dir: str | os.PathLike[str], stored: Mapping[str, str] | None,
                          expected: Mapping[str, str]) -> dict[str, str] | None:
    """Check a log dir's ``meta.properties`` against this broker's (``expected``: ``node.id``
    or ``broker.id``, and ``cluster.id`` when the broker knows one).

    Args:
        log_dir: the dir (for the messages).
        stored: the dir's properties, None when it has no ``meta.properties``.
        expected: what this broker would write.

    Returns:
        The properties to write (the dir has none, or lacks the cluster id this broker has),
        or None when the file is right as it is. Nothing is written here.

    Raises:
        InconsistentBrokerIdError: a stored ``node.id``/``broker.id`` is not this broker's,
            or the stored file names no broker at all (Kafka refuses such a file too).
        InconsistentClusterIdError: the stored ``cluster.id`` is not this broker's cluster's.
    """
    if stored is None:
        return dict(expected)
    path = str(Path(log_dir) / "meta.properties")
    mine = broker_id_of(expected)
    if mine is not None and broker_id_of(stored) is None:
        raise InconsistentBrokerIdError(
            f"{path} names no broker (no node.id or broker.id): a log dir's meta.properties "
            f"must name the broker that owns it; if {log_dir} is this broker's, add "
            f"node.id={mine} to that file, else give this broker another log dir",
            path=str(log_dir), configured=mine, stored="")
    if mine is not None:
        for key in ("node.id", "broker.id"):
            theirs = (stored.get(key) or "").strip()
            if theirs and theirs != mine:
                raise InconsistentBrokerIdError(
                    f"Configured broker.id {mine} doesn't match stored {key} {theirs} in "
                    f"{path}: if you moved this data, set broker.id={theirs}; to start a new "
                    f"broker, give it empty log dirs (log.dirs) instead of another broker's",
                    path=str(log_dir), configured=mine, stored=theirs)
    cluster = (expected.get("cluster.id") or "").strip()
    theirs = (stored.get("cluster.id") or "").strip()
    if cluster and theirs and theirs != cluster:
        raise InconsistentClusterIdError(
            f"The Cluster ID {cluster} doesn't match stored cluster.id {theirs} in {path}: "
            f"the broker is trying to join the wrong cluster; check metadata.store and "
            f"zookeeper.connect (or metadata.dir), or give this broker empty log dirs",
            path=str(log_dir), configured=cluster, stored=theirs)
    if cluster and not theirs:
        return {**stored, "cluster.id": cluster}
    return None


def holds_kafka_log_files(path: str | os.PathLike[str]) -> bool:
    """True when the directory holds a Kafka segment file (``<20 digits>.log``, possibly with a
    ``.deleted``/``.cleaned``/``.swap`` state suffix) and none of its Kafka-named files
    (:func:`~kafka_tiers.log.names.is_kafka_partition_file`) is a symlink: the proof that it
    is a replica's. A directory with such a symlink is no replica (nothing is ever written,
    truncated, renamed or deleted through a link). One listing, no file opened."""
    has_log, has_link = _kafka_files(path)
    return has_log and not has_link


def _kafka_files(path: str | os.PathLike[str]) -> tuple[bool, bool]:
    """(holds a ``<20 digits>.log``, one of its Kafka-named entries is a symlink)."""
    has_log = has_link = False
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if not is_kafka_partition_file(entry.name):
                    continue
                if entry.is_symlink():
                    has_link = True
                    continue
                parsed = parse_segment_file(entry.name)
                if parsed is not None and parsed[1] == LOG_SUFFIX:
                    has_log = True
    except (FileNotFoundError, NotADirectoryError):
        pass
    return has_log, has_link


def _is_regular_file(path: str) -> bool:
    """True for a regular file that is no symlink (one ``lstat``)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def classify_entry(name: str, path: str | os.PathLike[str],
                   expected_logs: Mapping[TopicPartition, str] | None = None
                   ) -> tuple[str, PartitionDir | None]:
    """What a directory in a log dir is: ``(kind, parsed name)``.

    ``kind`` is :data:`REPLICA` (a partition name holding Kafka log files), :data:`FUTURE` or
    :data:`DELETE` (a JBOD move's or a deletion's Kafka-named dir), :data:`OWN` (the broker's
    tools' dirs, see :data:`OWN_PREFIXES`), :data:`LINKED` (a partition name that is a symlink
    or holds a Kafka-named symlink) or :data:`FOREIGN` (anything else: never touched).
    ``expected_logs`` names, per partition, a segment file it should hold (from the clean
    shutdown's segment list): when that file exists, one ``stat`` is the proof instead of a
    listing of the directory. Raises nothing.
    """
    if name in SYSTEM_DIRS or name.startswith(OWN_PREFIXES):
        return OWN, None
    try:
        parsed = parse_partition_dir(name)
    except InvalidTopicError:
        return FOREIGN, None
    if parsed.kind == "delete":
        return DELETE, parsed
    if parsed.kind == "future":
        return FUTURE, parsed
    if os.path.islink(path):
        return LINKED, parsed
    expected = (expected_logs or {}).get(parsed.partition)
    if expected is not None and _is_regular_file(os.path.join(path, expected)):
        return REPLICA, parsed
    has_log, has_link = _kafka_files(path)
    if has_link:
        return LINKED, parsed
    if has_log:
        return REPLICA, parsed
    return FOREIGN, parsed


__all__ = [
    "DELETE",
    "FOREIGN",
    "FUTURE",
    "LINKED",
    "OWN",
    "OWN_PREFIXES",
    "REPLICA",
    "SYSTEM_DIRS",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "LogDirInUseError",
    "broker_id_of",
    "check_meta_properties",
    "classify_entry",
    "holds_kafka_log_files",
]
