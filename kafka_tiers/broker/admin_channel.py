"""The admin channel between the CLI and a running broker's log dirs (intra-broker replica
moves and the state of its dirs), until a network transport carries these requests.

Like ZooKeeper-era Kafka's ``/admin/reassign_partitions`` node, a request is a file: the CLI
writes ``<log dir>/.kafka-tiers-admin/reassign-<id>.json`` crash-safely (temp file, fsync,
rename, fsync dir) into the admin dir of the first log dir it can write; the running broker
attaches an :class:`AdminChannel` to its log manager (:meth:`AdminChannel.attach`: a periodic
job ``admin`` of :meth:`LogManager.run_due_tasks` and a listener of dir failures), which scans
the admin dir of every online log dir, applies each request with ``alter_replica_log_dirs``, writes
``status-<id>.json`` next to it (and rewrites it as the moves progress, until every replica is
settled) and then removes the request. A crash between the two leaves the request, which is
applied again: requests are idempotent. The broker also keeps ``broker-state.json`` (its
offline dirs) in every online admin dir, which ``log-dirs describe`` reads.

Whether a broker runs is told by the dirs' ``.lock`` files: a running broker holds an
exclusive ``flock`` on each. When none is held, the CLI opens the dirs itself and performs the
moves in-process. The file formats are versioned JSON (``"version": 1``); a later network
transport replaces the files, not the requests' meaning.

Nothing from a request leaves its dir: topics are validated as Kafka topic names, log dirs must
be ``any`` or absolute paths without ``..`` and the broker accepts only its own log dirs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.transport import SOCKET_REQUEST_MAX_BYTES
from kafka_tiers.log.checkpoints import write_atomic
from kafka_tiers.log.errors import LogDirError
from kafka_tiers.log.names import validate_topic
from kafka_tiers.log.replica_mover import (
    ANY,
    CANCELLED,
    DONE,
    FAILED,
    FINAL_STATES,
    NONE,
    REPLICA_NOT_AVAILABLE,
)
from kafka_tiers.placement.limits import MAX_REQUEST_PARTITIONS

if TYPE_CHECKING:
    from kafka_tiers.log.log_manager import LogManager

logger = logging.getLogger(__name__)

ADMIN_DIR_NAME = ".kafka-tiers-admin"
#: how often a running broker looks for new requests (milliseconds).
ADMIN_POLL_MS = 500
STATE_FILE = "broker-state.json"
REQUEST_PREFIX = "reassign-"
STATUS_PREFIX = "status-"
FORMAT_VERSION = 1
#: states of a replica in a status file besides the mover's: waiting for the replica to exist
PENDING = "pending"
#: the largest request file the broker reads, and the most moves in one (the defaults of
#: socket.request.max.bytes and max.request.partitions: docs/operations.md)
MAX_REQUEST_BYTES = SOCKET_REQUEST_MAX_BYTES
MAX_REQUEST_MOVES = MAX_REQUEST_PARTITIONS


class ReassignmentError(ValueError):
    """A reassignment document that cannot be accepted (the message says where)."""


@dataclass(frozen=True)
class ReplicaAssignment:
    """One replica of a reassignment document: ``log_dir`` is ``any`` or an absolute path."""

    topic_partition: TopicPartition
    broker: int
    log_dir: str


def _json_topic(value: object) -> str:
    """``value``, read from a JSON file, as a topic name Kafka accepts.

    Raises:
        InvalidTopicError: as :func:`validate_topic`; a value that is not a ``str`` (absent,
            a number) is refused as the empty name is.
    """
    return validate_topic(value if isinstance(value, str) else "")


def parse_reassignment(doc: Any) -> list[ReplicaAssignment]:
    """Parse Kafka's reassignment JSON with document 000's ``log_dirs`` (one per replica;
    missing means ``any`` for all).

    Raises:
        ReassignmentError: wrong structure, an illegal topic, ``log_dirs`` of another length
            than ``replicas``, or a log dir neither ``any`` nor an absolute path (or with
            ``..``).
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ReassignmentError('expected {"version": 1, "partitions": [...]}')
    if doc.get("version", 1) != 1:
        raise ReassignmentError(f"unsupported version {doc.get('version')!r} (expected 1)")
    out = []
    for i, entry in enumerate(doc["partitions"]):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise ReassignmentError(f"{where} is not an object")
        partition = entry.get("partition")
        try:
            topic = _json_topic(entry.get("topic"))
        except ValueError as exc:
            raise ReassignmentError(f"{where}: {exc}") from None
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ReassignmentError(f"{where}: partition must be an int >= 0")
        replicas = entry.get("replicas")
        if (not isinstance(replicas, list) or not replicas
                or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)):
            raise ReassignmentError(f"{where}: replicas must be a non-empty list of broker ids")
        dirs = entry.get("log_dirs", [ANY] * len(replicas))
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise ReassignmentError(f"{where}: log_dirs must list one dir per replica")
        tp = TopicPartition(topic, partition)
        for broker, d in zip(replicas, dirs, strict=True):
            out.append(ReplicaAssignment(tp, broker, check_log_dir_text(d, where)))
    return out


def check_log_dir_text(d: Any, where: str = "log dir") -> str:
    """``any`` or a normalised absolute path (document 000's rule).

    Raises:
        ReassignmentError: anything else, or a path with ``..`` or NUL.
    """
    if d == ANY:
        return ANY
    if not isinstance(d, str) or not d.startswith("/"):
        raise ReassignmentError(f"{where}: log dir {d!r} is neither 'any' nor an absolute path")
    if "\0" in d or ".." in Path(d).parts:
        raise ReassignmentError(f"{where}: log dir {d!r} must not contain '..'")
    return os.path.normpath(d)


def admin_dir(log_dir: str | os.PathLike[str]) -> Path:
    return Path(log_dir) / ADMIN_DIR_NAME


def broker_running(log_dirs: Iterable[str | os.PathLike[str]]) -> bool:
    """True when a process holds the ``.lock`` of any of the dirs (a broker is running)."""
    for d in log_dirs:
        lock = Path(d) / ".lock"
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            continue
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return False


def _write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def submit_reassignment(log_dirs: Sequence[str | os.PathLike[str]],
                        moves: Mapping[TopicPartition, str]) -> str:
    """Write a request for the running broker (see the module doc); returns its id.

    Raises:
        LogDirError: no admin dir could be written.
    """
    request_id = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
    doc = {"version": FORMAT_VERSION, "id": request_id,
           "partitions": [{"topic": tp.topic, "partition": tp.partition, "log_dir": d}
                          for tp, d in moves.items()]}
    errors = []
    for d in log_dirs:
        try:
            _write_json(admin_dir(d) / f"{REQUEST_PREFIX}{request_id}.json", doc)
            return request_id
        except OSError as exc:
            errors.append(f"{d}: {exc.strerror or exc}")
    raise LogDirError("cannot write the reassignment request: " + "; ".join(errors))


def read_status(log_dirs: Iterable[str | os.PathLike[str]],
                request_id: str) -> dict[str, Any] | None:
    """The broker's status document for a request, or None while it has not taken it."""
    if not all(c.isalnum() or c == "-" for c in request_id):
        raise ValueError(f"bad request id {request_id!r}")
    for d in log_dirs:
        doc = _read_json(admin_dir(d) / f"{STATUS_PREFIX}{request_id}.json")
        if isinstance(doc, dict):
            return doc
    return None


def read_broker_state(log_dirs: Iterable[str | os.PathLike[str]]) -> dict[str, Any] | None:
    """The newest ``broker-state.json`` of the dirs (a running broker's offline dirs)."""
    best: dict[str, Any] | None = None
    for d in log_dirs:
        doc = _read_json(admin_dir(d) / STATE_FILE)
        if isinstance(doc, dict) and (best is None or doc.get("updated", 0)
                                      > best.get("updated", 0)):
            best = doc
    return best


def request_moves(doc: Any) -> dict[TopicPartition, str]:
    """The moves of a request file.

    Raises:
        ReassignmentError: a malformed request.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ReassignmentError("malformed request")
    if len(doc["partitions"]) > MAX_REQUEST_MOVES:
        raise ReassignmentError(f"{len(doc['partitions'])} moves in one request exceed "
                                f"{MAX_REQUEST_MOVES} (max.request.partitions's default)")
    out = {}
    for i, e in enumerate(doc["partitions"]):
        if not isinstance(e, dict):
            raise ReassignmentError(f"partitions[{i}] is not an object")
        part = e.get("partition")
        try:
            topic = _json_topic(e.get("topic"))
        except ValueError as exc:
            raise ReassignmentError(str(exc)) from None
        if not isinstance(part, int) or part < 0:
            raise ReassignmentError(f"partitions[{i}]: bad partition")
        out[TopicPartition(topic, part)] = check_log_dir_text(
            e.get("log_dir"), f"partitions[{i}]")
    return out


def replica_states(manager: LogManager, moves: Mapping[TopicPartition, str],
                   results: Mapping[TopicPartition, str]) -> list[dict[str, Any]]:
    """Per requested replica: the request's result, its state and bytes (for status files
    and the CLI's in-process mode)."""
    rows = []
    for tp, dest in moves.items():
        result = results.get(tp, NONE)
        here = manager.log_dir_of(tp)
        status = manager.replica_move_status(tp)
        row: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition, "log_dir": dest,
                               "result": result, "bytes_copied": 0, "bytes_total": 0,
                               "error": None}
        if status:
            row.update(bytes_copied=status[0].bytes_copied, bytes_total=status[0].bytes_total,
                       error=status[0].error)
        if result not in (NONE, REPLICA_NOT_AVAILABLE):
            row["state"] = FAILED
            row["error"] = row["error"] or result
        elif dest == ANY:
            row["state"] = DONE if here is not None else PENDING
        elif here is not None and manager.resolve_log_dir(dest) == here and not (
                status and status[0].state not in FINAL_STATES):
            row["state"] = DONE
        elif status:
            row["state"] = status[0].state
        elif here is None:
            row["state"] = PENDING
        else:
            row["state"] = FAILED
            row["error"] = row["error"] or "the move is no longer running"
        rows.append(row)
    return rows


class AdminChannel:
    """The broker side (see the module doc); :meth:`poll` runs on the manager's scheduler
    once :meth:`attach` registered it."""

    def __init__(self, manager: LogManager) -> None:
        self.manager = manager
        self._active: dict[str, tuple[Path, dict[TopicPartition, str],
                                      dict[TopicPartition, str]]] = {}

    def attach(self, poll_ms: int = ADMIN_POLL_MS) -> AdminChannel:
        """Serve the CLI from now on: write ``broker-state.json``, poll for requests every
        ``poll_ms`` on the log manager's scheduler (job ``admin``) and rewrite the state when a
        dir goes offline. Call it once, before :meth:`LogManager.start_scheduler`; returns
        ``self``."""
        self.write_state()
        self.manager.add_periodic_job("admin", poll_ms, self.poll)
        self.manager.add_dir_state_listener(self.write_state)
        return self

    def _online_admin_dirs(self) -> list[Path]:
        offline = self.manager.offline_dirs
        return [admin_dir(d) for d in self.manager.log_dirs if d not in offline]

    def write_state(self) -> None:
        """Write ``broker-state.json`` (offline dirs) to every online admin dir."""
        doc = {"version": FORMAT_VERSION, "pid": os.getpid(), "updated": time.time(),
               "log_dirs": [str(d) for d in self.manager.log_dirs],
               "offline_dirs": {str(k): v for k, v in self.manager.offline_dirs.items()}}
        for a in self._online_admin_dirs():
            with contextlib.suppress(OSError):
                _write_json(a / STATE_FILE, doc)

    def poll(self) -> int:
        """Take new requests and refresh the status of unsettled ones; returns how many
        requests were taken."""
        taken = 0
        for a in self._online_admin_dirs():
            try:
                names = sorted(n for n in os.listdir(a)
                               if n.startswith(REQUEST_PREFIX) and n.endswith(".json"))
            except FileNotFoundError:
                continue
            except OSError as exc:
                logger.warning("cannot list %s: %s", a, exc)
                continue
            for name in names:
                request_id = name[len(REQUEST_PREFIX):-len(".json")]
                if not all(c.isalnum() or c == "-" for c in request_id):
                    continue
                path = a / name
                try:
                    size = path.stat().st_size
                except OSError:
                    continue  # taken away meanwhile
                try:
                    if size > MAX_REQUEST_BYTES:
                        raise ReassignmentError(
                            f"request of {size} bytes exceeds {MAX_REQUEST_BYTES} "
                            "(socket.request.max.bytes's default); split it")
                    moves = request_moves(_read_json(path))
                    results = self.manager.alter_replica_log_dirs(moves)
                    self._active[request_id] = (a, moves, results)
                    self._write_status(request_id)
                except (ReassignmentError, ValueError) as exc:
                    with contextlib.suppress(OSError):
                        _write_json(a / f"{STATUS_PREFIX}{request_id}.json",
                                    {"version": FORMAT_VERSION, "id": request_id,
                                     "error": str(exc), "complete": True, "replicas": []})
                with contextlib.suppress(OSError):
                    path.unlink()
                taken += 1
        for request_id in list(self._active):
            self._write_status(request_id)
        return taken

    def _write_status(self, request_id: str) -> None:
        a, moves, results = self._active[request_id]
        rows = replica_states(self.manager, moves, results)
        complete = all(r["state"] in (DONE, FAILED, CANCELLED) for r in rows)
        doc = {"version": FORMAT_VERSION, "id": request_id, "updated": time.time(),
               "complete": complete, "error": None, "replicas": rows}
        try:
            _write_json(a / f"{STATUS_PREFIX}{request_id}.json", doc)
        except OSError as exc:
            logger.warning("cannot write the status of %s: %s", request_id, exc)
        if complete:
            del self._active[request_id]


__all__ = [
    "ADMIN_DIR_NAME",
    "ADMIN_POLL_MS",
    "FORMAT_VERSION",
    "PENDING",
    "REQUEST_PREFIX",
    "STATE_FILE",
    "STATUS_PREFIX",
    "AdminChannel",
    "ReassignmentError",
    "ReplicaAssignment",
    "admin_dir",
    "broker_running",
    "check_log_dir_text",
    "parse_reassignment",
    "read_broker_state",
    "read_status",
    "replica_states",
    "request_moves",
    "submit_reassignment",
]
