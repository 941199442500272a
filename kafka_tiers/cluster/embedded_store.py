"""The embedded metadata store: :class:`~kafka_tiers.cluster.metadata_store.MetadataStore` for a
cluster inside one process, with no server to run.

:class:`EmbeddedMetadataServer` holds the node tree, the sessions and the watches. It is
durable in ``<directory>``: ``snapshot.json`` (the persistent nodes, replaced crash-safely:
temporary file, fsync, rename, fsync of the directory) plus ``journal.log`` (one JSON line per
committed transaction, fsynced before the call returns). Opening replays the journal over the
snapshot; a torn last line (a crash mid-write) is ignored, a damaged line before it is refused.
The journal is folded into a new snapshot when it grows past ``compact_bytes``, when the store
is opened, and after every change under :data:`SENSITIVE_ROOT` (SCRAM credentials, ACLs), so a
rotated or deleted credential leaves the disk at once. A crash between the new snapshot and the
journal's truncation loses nothing: the journal's entries are whole node values, and replaying
them over the snapshot they are already folded into gives the same tree.

One writer only: the server owning ``<directory>`` holds an exclusive ``flock`` on
``<directory>/store.lock`` (which holds its pid) from opening to :meth:`close`; the OS releases
it when the process dies. Another server on the directory, in this process or another, is
refused with :class:`StoreInUseError` (:meth:`EmbeddedMetadataServer.shared` hands out the one
already open in this process). The directory is mode 0700 and every file in it 0600 (existing
files are set so at open): the store holds the SCRAM credentials and the ACLs.

Sessions expire like ZooKeeper's: a client heartbeats every third of its session timeout; a
reaper deletes the ephemeral nodes of a session not heard of within its timeout and tells its
client, which opens a new session (``SessionEvent.EXPIRED`` then ``SessionEvent.RECONNECTED``
to its session callbacks). :meth:`EmbeddedStore.suspend` stops the heartbeats (a paused process).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_tiers.cluster.metadata_store import (
    BadVersionError,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionEvent,
    SessionExpiredError,
    SessionListener,
    Watcher,
    decode,
    encode,
    parent_of,
)
from kafka_tiers.log.checkpoints import write_atomic

log = logging.getLogger(__name__)

SNAPSHOT = "snapshot.json"
JOURNAL = "journal.log"
#: the lock file the owning server holds (``flock``) while the store is open; holds its pid
LOCK = "store.lock"
FORMAT_VERSION = 1
#: the store directory's mode and its files' (they hold credentials and ACLs)
DIR_MODE = 0o700
FILE_MODE = 0o600
#: changes below this node are folded into the snapshot at once (the journal cut)
SENSITIVE_ROOT = "/security"


class StoreInUseError(MetadataStoreError):
    """The embedded store's directory is open in another server (another process, or another
    :class:`EmbeddedMetadataServer` of this one): a running broker owns it.

    Attributes:
        directory: the store's directory.
        pid: the owner's process id when its lock file says so, else None.
    """

    def __init__(self, directory: Path, pid: int | None) -> None:
        owner = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(f"the embedded metadata store {directory} is open in another process "
                         f"({owner}): a broker is running on it; stop it, or go through its "
                         "listener")
        self.directory = directory
        self.pid = pid


@dataclass
class _Node:
    data: bytes
    version: int = 0
    owner: int | None = None  # session id of an ephemeral node
    children: set[str] = field(default_factory=set)


@dataclass
class _Session:
    sid: int
    timeout_s: float
    deadline: float
    client: EmbeddedStore


def _open_private(path: Path, flags: int) -> int:
    """A descriptor of ``path`` (never through a symlink), created and kept mode 0600."""
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # a file of an older release, or made under another umask
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_sensitive(path: str) -> bool:
    return path == SENSITIVE_ROOT or path.startswith(SENSITIVE_ROOT + "/")


class EmbeddedMetadataServer:
    """The shared state of an embedded store (see the module docstring).

    Args:
        directory: where the snapshot and journal live (created when missing); None keeps
            everything in memory (tests of the store itself).
        fsync: fsync every transaction (durable against power loss; False only survives a
            process crash).
        compact_bytes: journal size that triggers a new snapshot.

    Raises:
        StoreInUseError: another server (a running broker) has the directory open.
        MetadataStoreError: the files are damaged or of a newer format, or the directory or
            a file in it cannot be made private (another user's).
    """

    _registry: dict[str, EmbeddedMetadataServer] = {}
    #: every open server of a directory in this process (owned or shared), by resolved path
    _open: dict[str, EmbeddedMetadataServer] = {}
    _registry_lock = threading.RLock()

    def __init__(self, directory: str | os.PathLike[str] | None, *, fsync: bool = True,
                 compact_bytes: int = 16 << 20) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.fsync = fsync
        self.compact_bytes = compact_bytes
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {"/": _Node(b"")}
        self._sessions: dict[int, _Session] = {}
        self._next_sid = itertools.count(int(time.time() * 1000) << 8)
        self._child_watches: dict[str, list[tuple[EmbeddedStore, Watcher]]] = {}
        self._data_watches: dict[str, list[tuple[EmbeddedStore, Watcher]]] = {}
        self._journal: Any = None
        self._journal_bytes = 0
        self._refs = 0
        self._stop = threading.Event()
        self._closed = False
        self._lock_fd: int | None = None
        self._key = str(self.directory.resolve()) if self.directory is not None else ""
        if self.directory is not None:
            self._open_directory(self.directory)
        self._reaper = threading.Thread(target=self._reap_loop, name="embedded-store-reaper",
                                        daemon=True)
        self._reaper.start()

    def _open_directory(self, directory: Path) -> None:
        """Make the directory private, take its lock, fix the files' modes, load and compact
        (see the module docstring)."""
        try:
            directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            os.chmod(directory, DIR_MODE)
        except OSError as exc:
            raise MetadataStoreError(f"cannot make {directory} private (mode 0700): "
                                     f"{exc.strerror or exc}; it must belong to the broker's "
                                     "user") from None
        self._take_lock(directory)
        try:
            with EmbeddedMetadataServer._registry_lock:
                EmbeddedMetadataServer._open[self._key] = self
            for entry in os.scandir(directory):
                if entry.is_file(follow_symlinks=False) and entry.name != LOCK:
                    try:
                        os.close(_open_private(Path(entry.path), os.O_RDONLY))
                    except OSError as exc:
                        raise MetadataStoreError(
                            f"cannot make {entry.path} private (mode 0600): "
                            f"{exc.strerror or exc}; it must belong to the broker's user"
                        ) from None
            # a snapshot a crash left half-written is never read: it only keeps old data
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / (SNAPSHOT + ".tmp"))
            self._load()
            fd = _open_private(directory / JOURNAL, os.O_WRONLY | os.O_APPEND)
            self._journal = os.fdopen(fd, "ab")
            self._journal_bytes = self._journal.tell()
            if self._journal_bytes:
                self._snapshot()  # start from one snapshot: nothing older stays on disk
        except BaseException:
            self._release_directory()
            raise

    def _take_lock(self, directory: Path) -> None:
        """Hold ``directory/LOCK`` exclusively (never waits).

        Raises:
            StoreInUseError: another server holds it.
        """
        path = directory / LOCK
        try:
            fd = _open_private(path, os.O_RDWR)
        except OSError as exc:
            raise MetadataStoreError(f"cannot open {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
            raise StoreInUseError(directory, int(text) if text.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._lock_fd = fd

    def _release_directory(self) -> None:
        """Forget this server in the process table and release the lock (idempotent)."""
        with EmbeddedMetadataServer._registry_lock:
            if EmbeddedMetadataServer._open.get(self._key) is self:
                del EmbeddedMetadataServer._open[self._key]
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # releases the flock

    # ------------------------------------------------------------------ process registry
    @classmethod
    def shared(cls, directory: str | os.PathLike[str]) -> EmbeddedMetadataServer:
        """The server of ``directory`` in this process: the one already open there (owned by
        whoever made it, e.g. a :class:`~kafka_tiers.cluster.local_cluster.LocalCluster`),
        else one opened now and closed when the last :class:`EmbeddedStore` using it closes.

        Raises:
            StoreInUseError: another process has the directory open.
        """
        key = str(Path(directory).resolve())
        with cls._registry_lock:
            server = cls._open.get(key)
            if server is not None and not server._closed:
                return server
            server = cls._registry.get(key)
            if server is None or server._closed:
                server = cls(directory)
                cls._registry[key] = server
            return server

    def _acquire(self) -> None:
        with self._lock:
            self._refs += 1

    def _release(self) -> None:
        with self._lock:
            self._refs -= 1
            last = self._refs <= 0
        if last and self.directory is not None:
            with self._registry_lock:
                key = str(self.directory.resolve())
                if self._registry.get(key) is self:
                    del self._registry[key]
                    self.close()

    # ------------------------------------------------------------------ durability
    def _load(self) -> None:
        assert self.directory is not None
        snap = self.directory / SNAPSHOT
        if snap.exists():
            try:
                doc = json.loads(snap.read_bytes())
                version = doc["format"]
                nodes = doc["nodes"]
            except (ValueError, KeyError, TypeError, RecursionError):
                raise MetadataStoreError(f"{snap} is not an embedded metadata snapshot") from None
            if version != FORMAT_VERSION:
                raise MetadataStoreError(f"{snap} has format {version}; this release reads "
                                         f"format {FORMAT_VERSION}")
            for path, (data, ver) in nodes.items():
                self._put(path, data.encode("utf-8"), ver, None)
        jpath = self.directory / JOURNAL
        if jpath.exists():
            lines = jpath.read_bytes().split(b"\n")
            good = 0
            for i, line in enumerate(lines):
                if not line.strip():
                    good += len(line) + 1
                    continue
                try:
                    entry = json.loads(line)
                except (ValueError, RecursionError):
                    if i >= len(lines) - 2:  # the torn tail of a crash: drop it
                        log.warning("ignoring a torn last entry of %s", jpath)
                        break
                    raise MetadataStoreError(f"{jpath} is damaged at line {i + 1}") from None
                for change in entry:
                    if change[0] == "put":
                        self._put(change[1], change[2].encode("utf-8"), change[3], None)
                    else:
                        self._drop(change[1])
                good += len(line) + 1
            if good < jpath.stat().st_size:
                with open(jpath, "r+b") as fh:
                    fh.truncate(min(good, jpath.stat().st_size))

    def _put(self, path: str, data: bytes, version: int, owner: int | None) -> None:
        node = self._nodes.get(path)
        if node is None:
            parent = parent_of(path)
            if parent not in self._nodes:
                self._put(parent, b"", 0, None)
            self._nodes[parent].children.add(path.rsplit("/", 1)[1])
            self._nodes[path] = _Node(data, version, owner)
        else:
            node.data, node.version = data, version

    def _drop(self, path: str) -> None:
        node = self._nodes.pop(path, None)
        if node is None:
            return
        for child in list(node.children):
            self._drop(f"{path}/{child}" if path != "/" else f"/{child}")
        parent = self._nodes.get(parent_of(path))
        if parent is not None:
            parent.children.discard(path.rsplit("/", 1)[1])

    def _persist(self, changes: list[list[Any]]) -> None:
        if self._journal is None or not changes:
            return
        line = json.dumps(changes, separators=(",", ":")).encode("utf-8") + b"\n"
        self._journal.write(line)
        self._journal.flush()
        if self.fsync:
            os.fsync(self._journal.fileno())
        self._journal_bytes += len(line)
        if (self._journal_bytes > self.compact_bytes
                or any(_is_sensitive(change[1]) for change in changes)):
            self._snapshot()

    def _snapshot(self) -> None:
        """Fold the journal into a new snapshot: the snapshot written to a temporary file,
        fsynced, renamed over the old one and the directory fsynced, and only then the journal
        cut to nothing (a crash in between replays the journal onto the snapshot: same tree).
        """
        assert self.directory is not None and self._journal is not None
        nodes = {p: [n.data.decode("utf-8"), n.version] for p, n in self._nodes.items()
                 if n.owner is None and p != "/"}
        write_atomic(self.directory / SNAPSHOT,  # 0600 before any byte; fsync, rename
                     json.dumps({"format": FORMAT_VERSION, "nodes": nodes}).encode("utf-8"),
                     mode=FILE_MODE)
        self._journal.flush()
        os.ftruncate(self._journal.fileno(), 0)  # appends go to the new end (O_APPEND)
        self._journal_bytes = 0
        if self.fsync:
            os.fsync(self._journal.fileno())

    # ------------------------------------------------------------------ sessions
    def open_session(self, client: EmbeddedStore, timeout_s: float) -> int:
        with self._lock:
            if self._closed:
                raise MetadataStoreError("the embedded metadata store is closed")
            sid = next(self._next_sid)
            self._sessions[sid] = _Session(sid, timeout_s, time.monotonic() + timeout_s, client)
            return sid

    def heartbeat(self, sid: int) -> bool:
        with self._lock:
            s = self._sessions.get(sid)
            if s is None:
                return False
            s.deadline = time.monotonic() + s.timeout_s
            return True

    def close_session(self, sid: int, *, expired: bool = False) -> None:
        with self._lock:
            session = self._sessions.pop(sid, None)
            if session is None:
                return
            doomed = [p for p, n in self._nodes.items() if n.owner == sid]
            for path in sorted(doomed, reverse=True):
                if path in self._nodes:
                    self._drop(path)
                    self._fire(path, created_or_deleted=True)
        if expired:
            session.client._session_expired(sid)

    def _reap_loop(self) -> None:
        while not self._stop.wait(0.05):
            now = time.monotonic()
            with self._lock:
                expired = [s.sid for s in self._sessions.values() if s.deadline < now]
            for sid in expired:
                log.info("embedded metadata store: session %x expired", sid)
                self.close_session(sid, expired=True)

    def check_session(self, sid: int) -> None:
        if sid not in self._sessions:
            raise SessionExpiredError(f"session {sid:x} expired")

    # ------------------------------------------------------------------ watches
    def _fire(self, path: str, *, created_or_deleted: bool) -> None:
        for client, cb in self._data_watches.get(path, ()):
            client._notify(cb, path)
        if created_or_deleted:
            parent = parent_of(path)
            for client, cb in self._child_watches.get(parent, ()):
                client._notify(cb, parent)

    def add_watch(self, kind: str, path: str, client: EmbeddedStore, cb: Watcher) -> None:
        with self._lock:
            table = self._child_watches if kind == "children" else self._data_watches
            table.setdefault(path, []).append((client, cb))
        client._notify(cb, path)

    def remove_watches(self, client: EmbeddedStore) -> None:
        with self._lock:
            for table in (self._child_watches, self._data_watches):
                for path in list(table):
                    table[path] = [(c, cb) for c, cb in table[path] if c is not client]

    # ------------------------------------------------------------------ operations
    def read(self, path: str) -> tuple[bytes, int]:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(f"no node {path}")
            return node.data, node.version

    def exists(self, path: str) -> int | None:
        with self._lock:
            node = self._nodes.get(path)
            return None if node is None else node.version

    def children(self, path: str) -> list[str]:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(f"no node {path}")
            return sorted(node.children)

    def transaction(self, sid: int, ops: Sequence[Op], make_parents: bool = False
                    ) -> list[int | None]:
        """Apply ops atomically (validated on a scratch view first)."""
        with self._lock:
            self.check_session(sid)
            # validation pass over a view of what exists, with pending effects
            view: dict[str, int | None] = {}
            kids: dict[str, int] = {}

            def ver(p: str) -> int | None:
                if p in view:
                    return view[p]
                node = self._nodes.get(p)
                return None if node is None else node.version

            def nkids(p: str) -> int:
                node = self._nodes.get(p)
                return (len(node.children) if node else 0) + kids.get(p, 0)

            for op in ops:
                v = ver(op.path)
                if op.kind == "create":
                    if v is not None:
                        raise NodeExistsError(f"node {op.path} exists", op.path)
                    parent = parent_of(op.path)
                    if ver(parent) is None and not make_parents:
                        raise NoNodeError(f"no parent node {parent} for {op.path}", op.path)
                    view[op.path] = 0
                    kids[parent] = kids.get(parent, 0) + 1
                elif op.kind in ("set", "delete", "check"):
                    if v is None:
                        raise NoNodeError(f"no node {op.path}", op.path)
                    if op.version != -1 and op.version != v:
                        raise BadVersionError(f"node {op.path} is at version {v}, not "
                                              f"{op.version}", op.path)
                    if op.kind == "set":
                        view[op.path] = v + 1
                    elif op.kind == "delete":
                        if nkids(op.path) > 0:
                            raise NotEmptyError(f"node {op.path} has children", op.path)
                        view[op.path] = None
                        parent = parent_of(op.path)
                        kids[parent] = kids.get(parent, 0) - 1
                else:
                    raise ValueError(f"unknown op {op.kind!r}")
            # apply
            out: list[int | None] = []
            changes: list[list[Any]] = []
            fired: list[tuple[str, bool]] = []
            for op in ops:
                if op.kind == "create":
                    parent = parent_of(op.path)
                    if parent not in self._nodes:
                        self._put(parent, b"", 0, None)
                        changes.append(["put", parent, "", 0])
                        fired.append((parent, True))
                    data = encode(op.data) if op.data is not None else b""
                    self._put(op.path, data, 0, sid if op.ephemeral else None)
                    if not op.ephemeral:
                        changes.append(["put", op.path, data.decode("utf-8"), 0])
                    fired.append((op.path, True))
                    out.append(0)
                elif op.kind == "set":
                    node = self._nodes[op.path]
                    node.data = encode(op.data) if op.data is not None else b""
                    node.version += 1
                    if node.owner is None:
                        changes.append(["put", op.path, node.data.decode("utf-8"),
                                        node.version])
                    fired.append((op.path, False))
                    out.append(node.version)
                elif op.kind == "delete":
                    persistent = self._nodes[op.path].owner is None
                    self._drop(op.path)
                    if persistent:
                        changes.append(["del", op.path])
                    fired.append((op.path, True))
                    out.append(None)
                else:
                    out.append(None)
            self._persist(changes)
            for path, structural in fired:
                self._fire(path, created_or_deleted=structural)
            return out

    def delete_tree(self, sid: int, path: str, version: int) -> None:
        with self._lock:
            self.check_session(sid)
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(f"no node {path}")
            if version != -1 and node.version != version:
                raise BadVersionError(f"node {path} is at version {node.version}")
            below = sorted((p for p in self._nodes if p == path or p.startswith(path + "/")),
                           key=len, reverse=True)
            ops = [Op.delete(p) for p in below]
        self.transaction(sid, ops)

    def close(self) -> None:
        """Stop the reaper, close the journal and release the directory's lock (sessions are
        dropped). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            self._sessions.clear()
            if self._journal is not None:
                self._journal.close()
                self._journal = None
        self._release_directory()  # after the last write; never under self._lock
        if threading.current_thread() is not self._reaper:
            self._reaper.join(timeout=5)


class EmbeddedStore(MetadataStore):
    """One session with an :class:`EmbeddedMetadataServer`.

    Args:
        server: the shared server.
        session_timeout_ms: ephemeral nodes go this long after the last heartbeat.
    """

    def __init__(self, server: EmbeddedMetadataServer, *, session_timeout_ms: int = 6000
                 ) -> None:
        self.server = server
        self.timeout_s = max(session_timeout_ms, 50) / 1000.0
        self._sid: int | None = None
        self._events: queue.Queue[tuple[Callable[..., None], tuple[Any, ...]] | None] = \
            queue.Queue()
        self._session_callbacks: list[SessionListener] = []
        self._stop = threading.Event()
        self._suspended = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._lock = threading.Lock()

    # lifecycle
    def start(self, timeout: float = 10.0) -> None:
        with self._lock:
            if self._started:
                return
            self.server._acquire()
            self._sid = self.server.open_session(self, self.timeout_s)
            self._started = True
            for name, target in (("heartbeat", self._heartbeat_loop),
                                 ("events", self._event_loop)):
                t = threading.Thread(target=target, name=f"embedded-store-{name}", daemon=True)
                t.start()
                self._threads.append(t)

    def close(self) -> None:
        with self._lock:
            if not self._started:
                return
            self._started = False
            self._stop.set()
            sid, self._sid = self._sid, None
        if sid is not None:
            self.server.close_session(sid)
        self.server.remove_watches(self)
        self._events.put(None)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)
        self._threads.clear()
        self.server._release()

    def suspend(self) -> None:
        """Stop heartbeating (as a paused process): the session expires after its timeout."""
        self._suspended.set()

    def resume(self) -> None:
        """Heartbeat again (a new session is opened if the old one expired meanwhile)."""
        self._suspended.clear()

    def expire_now(self) -> None:
        """End the session at once as an expiry would (tests, an abrupt broker death)."""
        sid = self._sid
        if sid is not None:
            self.server.close_session(sid, expired=True)

    @property
    def session_id(self) -> int:
        if self._sid is None:
            raise SessionExpiredError("no session")
        return self._sid

    def _heartbeat_loop(self) -> None:
        interval = self.timeout_s / 3
        while not self._stop.wait(interval):
            if self._suspended.is_set():
                continue
            sid = self._sid
            if sid is not None and not self.server.heartbeat(sid):
                self._session_expired(sid)

    def _session_expired(self, sid: int) -> None:
        with self._lock:
            if self._sid != sid or not self._started:
                return
            self._sid = None
        self._events.put((self._call_session, (SessionEvent.EXPIRED,)))
        # a new session once the process runs again (a resumed, not a dead, broker)
        t = threading.Thread(target=self._reconnect, name="embedded-store-reconnect",
                             daemon=True)
        t.start()

    def _reconnect(self) -> None:
        while not self._stop.is_set():
            if not self._suspended.is_set():
                with self._lock:
                    if not self._started:
                        return
                    try:
                        self._sid = self.server.open_session(self, self.timeout_s)
                    except MetadataStoreError:
                        return
                self._events.put((self._call_session, (SessionEvent.RECONNECTED,)))
                return
            self._stop.wait(0.05)

    def _call_session(self, event: SessionEvent) -> None:
        for cb in list(self._session_callbacks):
            cb(event)

    def _notify(self, cb: Watcher, path: str) -> None:
        self._events.put((cb, (path,)))

    def _event_loop(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("embedded store: a watch callback failed")

    # operations
    def _live_sid(self) -> int:
        sid = self._sid
        if sid is None:
            raise SessionExpiredError("the session expired (or the store is closed)")
        return sid

    def create(self, path: str, data: Any = None, *, ephemeral: bool = False,
               make_parents: bool = True) -> None:
        self.server.transaction(self._live_sid(), [Op.create(path, data, ephemeral)],
                                make_parents=make_parents)

    def get(self, path: str) -> tuple[Any, int]:
        raw, version = self.server.read(path)
        return decode(raw), version

    def exists(self, path: str) -> int | None:
        return self.server.exists(path)

    def set(self, path: str, data: Any, version: int = -1) -> int:
        out = self.server.transaction(self._live_sid(), [Op.set(path, data, version)])
        return int(out[0] or 0)

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        if recursive:
            self.server.delete_tree(self._live_sid(), path, version)
        else:
            self.server.transaction(self._live_sid(), [Op.delete(path, version)])

    def children(self, path: str) -> list[str]:
        return self.server.children(path)

    def multi(self, ops: Sequence[Op]) -> list[int | None]:
        return self.server.transaction(self._live_sid(), list(ops))

    def watch_children(self, path: str, callback: Watcher) -> None:
        self.server.add_watch("children", path, self, callback)

    def watch_data(self, path: str, callback: Watcher) -> None:
        self.server.add_watch("data", path, self, callback)

    def on_session_event(self, callback: SessionListener) -> None:
        self._session_callbacks.append(callback)


__all__ = ["DIR_MODE", "FILE_MODE", "JOURNAL", "LOCK", "SENSITIVE_ROOT", "SNAPSHOT",
           "EmbeddedMetadataServer", "EmbeddedStore", "StoreInUseError"]
