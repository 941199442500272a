"""Security state shared by every broker of a cluster (SCRAM credentials, ACLs): small
versioned JSON documents, each under a name, changed by compare-and-set.

:class:`SecurityStateStore` is the interface; the broker picks the backend
(:func:`state_store_of`, one per Kafka server):

- a cluster member keeps each document in its metadata store (embedded or ZooKeeper), node
  ``/security/<name>``; every broker of the cluster sees a change through the store's watch.
- a standalone broker keeps each document in ``<first log dir>/kafka-tiers-security-<name>.json``
  (mode 0600), replaced crash-safely (temporary file, fsync, rename, fsync of the directory),
  with updates serialised across processes by an advisory lock on
  ``<file>.lock``. Its watches run in the broker's process: a change made here fires at once,
  a change another process made (``kafka-tiers scram add --dir``) is noticed within
  :data:`FILE_POLL_S`.

Both keep the document as ``{"version": 1, "data": <document>}``; a document of a newer
format version is refused with one error naming the file or node (a newer kafka-tiers wrote
it). Documents are bounded by :data:`MAX_DOCUMENT_BYTES` (ZooKeeper refuses nodes above
1 MiB): a write that would exceed it fails with :class:`SecurityStateError` and changes
nothing.

Guarantees:

- :meth:`SecurityStateStore.update` never loses a concurrent change: it reads, applies the
  caller's function, and writes conditionally on the version read; when another broker wrote
  in between it reads again and re-applies the function (bounded retries).
- A watch callback gets the whole new document (None when deleted), once at registration
  and after every change; callbacks of one document run one at a time, never with the
  store's lock held, and an exception in one is logged (never the document) and ignored.
- No document content ever reaches a log line or an error message (they hold credentials).
"""

from __future__ import annotations

import abc
import contextlib
import copy
import fcntl
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.errors import KafkaTiersError

if TYPE_CHECKING:
    from kafka_tiers.cluster.metadata_store import MetadataStore
    from kafka_tiers.kafka.server import KafkaServer

log = logging.getLogger(__name__)

#: the format version this code writes and reads (a newer one is refused)
FORMAT_VERSION = 1
#: the largest encoded document a backend writes (ZooKeeper's jute.maxbuffer is 1 MiB)
MAX_DOCUMENT_BYTES = 900 * 1024
#: where a cluster member keeps the documents in its metadata store
ROOT = "/security"
#: how often a standalone broker's watches look for changes made by another process
FILE_POLL_S = 1.0
#: how many times :meth:`SecurityStateStore.update` re-applies its function under contention
MAX_UPDATE_ATTEMPTS = 50
#: the component key of a Kafka server's store (:func:`state_store_of`)
COMPONENT_KEY = "security.state_store"

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")

#: a document transformation given to :meth:`SecurityStateStore.update`
Updater = Callable[[Any], Any]
#: a watch callback: called with the new document (None: there is none)
DocumentCallback = Callable[[Any], None]


class SecurityStateError(KafkaTiersError):
    """The security state could not be read or written (store unreachable, a document of a
    newer format, too large, or too much contention).

    Attributes:
        name: the document concerned.
    """

    def __init__(self, message: str, name: str | None = None, *,
                 retriable: bool = False) -> None:
        super().__init__(message)
        self.name = name
        self.retriable = retriable


def check_name(name: str) -> str:
    """``name`` when it is a valid document name (lower-case letters, digits, ``-``).

    Raises:
        ValueError: any other name.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"security document name must be lower-case letters, digits and '-' "
                         f"(up to 63), got {name!r}")
    return name


def wrap(name: str, doc: Any) -> bytes:
    """The stored form of ``doc``: ``{"version": 1, "data": doc}`` as compact JSON.

    Raises:
        SecurityStateError: the encoded document exceeds :data:`MAX_DOCUMENT_BYTES`.
    """
    raw = json.dumps({"version": FORMAT_VERSION, "data": doc}, separators=(",", ":"),
                     sort_keys=True).encode("utf-8")
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise SecurityStateError(
            f"security document {name!r} would be {len(raw)} bytes, above the limit of "
            f"{MAX_DOCUMENT_BYTES}; remove entries first", name)
    return raw


def wrapped_value(name: str, doc: Any) -> dict[str, Any]:
    """:func:`wrap`'s document as a JSON value (what a metadata store node or the file
    holds), checked the same way.

    Raises:
        SecurityStateError: too large, or nested too deeply to encode.
    """
    try:
        value: dict[str, Any] = json.loads(wrap(name, doc))
    except RecursionError:
        raise SecurityStateError(f"security document {name!r} is nested too deeply to "
                                 "store", name) from None
    return value


def unwrap(name: str, stored: Any, where: str) -> Any:
    """The document inside a stored ``{"version", "data"}`` value (None for None).

    Raises:
        SecurityStateError: not that shape, or a newer format version.
    """
    if stored is None:
        return None
    if not isinstance(stored, dict) or not isinstance(stored.get("version"), int):
        raise SecurityStateError(f"{where} is not a kafka-tiers security document "
                                 "(no integer \"version\"); restore it from a backup", name)
    if stored["version"] > FORMAT_VERSION:
        raise SecurityStateError(
            f"{where} has format version {stored['version']}, newer than this kafka-tiers "
            f"reads ({FORMAT_VERSION}); run the kafka-tiers release that wrote it", name)
    return stored.get("data")


class SecurityStateStore(abc.ABC):
    """Versioned JSON documents shared by the brokers (see the module docstring).

    Thread-safe. :meth:`close` stops the watches; reads and updates after it fail.
    """

    def __init__(self) -> None:
        self._watch_lock = threading.Lock()
        self._watchers: dict[str, list[DocumentCallback]] = {}
        self._fire_locks: dict[str, threading.Lock] = {}
        self._closed = False

    @abc.abstractmethod
    def read(self, name: str) -> tuple[Any, int]:
        """``(document, version)``; ``(None, -1)`` when there is none. The version grows with
        every write of the document.

        Raises:
            SecurityStateError: the store failed or the stored document is refused.
        """

    @abc.abstractmethod
    def _write(self, name: str, doc: Any, version: int) -> bool:
        """Write ``doc`` (None: delete) if the stored version is still ``version`` (-1: if
        there is none); False when another write came first."""

    def update(self, name: str, fn: Updater) -> Any:
        """Replace document ``name`` by ``fn(current)`` atomically and return the new one.

        ``fn`` gets a private copy of the current document (None when there is none) and
        returns the new one (None deletes it). It may be called several times (when another
        broker wrote meanwhile it is applied again to the newer document), so it must have
        no other effect; an exception it raises aborts the update and propagates. Returning
        a document equal to the current one writes nothing.

        Raises:
            SecurityStateError: the store failed, the document is refused or too large, or
                the write lost :data:`MAX_UPDATE_ATTEMPTS` races in a row (retriable).
        """
        check_name(name)
        new, wrote = self._update(name, fn)
        if wrote:
            self._changed(name, new)
        return new

    def _update(self, name: str, fn: Updater) -> tuple[Any, bool]:
        """The compare-and-set loop of :meth:`update`: the new document, and whether it
        was written."""
        for attempt in range(MAX_UPDATE_ATTEMPTS):
            current, version = self.read(name)
            new = fn(copy.deepcopy(current))
            if new == current:
                return new, False
            if self._write(name, new, version):
                return new, True
            time.sleep(min(0.05, 0.001 * (attempt + 1)))
        raise SecurityStateError(f"security document {name!r} changed under "
                                 f"{MAX_UPDATE_ATTEMPTS} attempts to update it; retry", name,
                                 retriable=True)

    def watch(self, name: str, callback: DocumentCallback) -> None:
        """Call ``callback(document)`` now (before returning) and whenever the document
        changes (on any broker of the cluster); None when there is none. A callback may be
        called again with an unchanged document. See the module docstring for threads."""
        check_name(name)
        with self._watch_lock:
            first = name not in self._watchers
            self._watchers.setdefault(name, []).append(callback)
            self._fire_locks.setdefault(name, threading.Lock())
        if first:
            self._start_watch(name)
        else:
            self._deliver(name, [callback])

    def close(self) -> None:
        """Stop every watch. Idempotent."""
        self._closed = True

    def _start_watch(self, name: str) -> None:
        """Begin noticing changes of ``name`` and deliver it once now (backend hook)."""
        self._deliver(name, None)

    def _changed(self, name: str, doc: Any) -> None:
        """A write of this store landed (backends with their own notification skip it)."""
        return None

    def _deliver(self, name: str, only: list[DocumentCallback] | None) -> None:
        """Read ``name`` and give it to its callbacks (or to ``only``)."""
        if self._closed:
            return
        with self._watch_lock:
            callbacks = list(only if only is not None else self._watchers.get(name, ()))
            fire_lock = self._fire_locks[name]
        if not callbacks:
            return
        with fire_lock:
            try:
                doc, _ = self.read(name)
            except Exception as exc:
                log.error("security state: cannot read %r for its watchers: %s", name,
                          str(exc)[:300])
                return
            for cb in callbacks:
                try:
                    cb(copy.deepcopy(doc))
                except Exception as exc:  # never the document: it may hold credentials
                    log.error("security state: a watcher of %r failed (%s)", name,
                              type(exc).__name__)

    def __enter__(self) -> SecurityStateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MetadataStoreStateStore(SecurityStateStore):
    """Documents as nodes ``/security/<name>`` of a cluster's metadata store; watches are
    the store's data watches, so a change by any broker reaches every broker."""

    def __init__(self, store: MetadataStore) -> None:
        super().__init__()
        self.store = store

    @staticmethod
    def path(name: str) -> str:
        """The node of document ``name``."""
        return f"{ROOT}/{check_name(name)}"

    def read(self, name: str) -> tuple[Any, int]:
        from kafka_tiers.cluster.metadata_store import MetadataStoreError

        path = self.path(name)
        try:
            got = self.store.get_or_none(path)
        except MetadataStoreError as exc:
            raise SecurityStateError(f"cannot read {path} from the metadata store: "
                                     f"{str(exc)[:200]}", name, retriable=True) from None
        if got is None:
            return None, -1
        return unwrap(name, got[0], f"metadata node {path}"), got[1]

    def _write(self, name: str, doc: Any, version: int) -> bool:
        from kafka_tiers.cluster.metadata_store import (
            BadVersionError,
            MetadataStoreError,
            NodeExistsError,
            NoNodeError,
        )

        path = self.path(name)
        try:
            if doc is None:
                if version >= 0:
                    self.store.delete(path, version)
                return True
            value = wrapped_value(name, doc)
            if version < 0:
                self.store.create(path, value, make_parents=True)
            else:
                self.store.set(path, value, version)
            return True
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        except MetadataStoreError as exc:
            raise SecurityStateError(f"cannot write {path} to the metadata store: "
                                     f"{str(exc)[:200]}", name, retriable=True) from None

    def _start_watch(self, name: str) -> None:
        # delivered once before watch() returns; then the store calls back (once more now,
        # and after every change) on its notification thread
        self._deliver(name, None)
        self.store.watch_data(self.path(name), lambda _path: self._deliver(name, None))


class FileStateStore(SecurityStateStore):
    """Documents as files ``<directory>/kafka-tiers-security-<name>.json`` (a standalone
    broker's first log dir); see the module docstring."""

    def __init__(self, directory: str | os.PathLike[str], *,
                 poll_s: float = FILE_POLL_S) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.poll_s = poll_s
        self._lock = threading.RLock()
        self._seen: dict[str, tuple[int, int, int] | None] = {}
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def file(self, name: str) -> Path:
        """The file of document ``name``."""
        return self.directory / f"kafka-tiers-security-{check_name(name)}.json"

    def _stat(self, path: Path) -> tuple[int, int, int] | None:
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def read(self, name: str) -> tuple[Any, int]:
        from kafka_tiers.log.checkpoints import read_file_nofollow

        if self._closed:
            raise SecurityStateError("the security state store is closed", name)
        path = self.file(name)
        try:
            raw = read_file_nofollow(path)
        except FileNotFoundError:
            return None, -1
        except OSError as exc:
            raise SecurityStateError(f"cannot read {path}: {exc.strerror or exc}; check its "
                                     "owner and mode (0600, the broker's user)", name) from None
        try:
            stored = json.loads(raw)
        except (ValueError, RecursionError):
            raise SecurityStateError(f"{path} is not JSON; restore it from a backup",
                                     name) from None
        doc = unwrap(name, stored, str(path))
        generation = stored.get("generation", 0)
        return doc, generation if isinstance(generation, int) else 0

    @contextlib.contextmanager
    def _file_lock(self, name: str) -> Any:
        lock_path = self.file(name).with_name(self.file(name).name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise SecurityStateError(f"cannot open {lock_path}: {exc.strerror or exc}",
                                     name) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _update(self, name: str, fn: Updater) -> tuple[Any, bool]:
        # one writer at a time, in this process and across processes sharing the directory
        with self._lock, self._file_lock(name):
            return super()._update(name, fn)

    def _write(self, name: str, doc: Any, version: int) -> bool:
        from kafka_tiers.log.checkpoints import fsync_dir, write_atomic

        path = self.file(name)
        if self.read(name)[1] != version:
            return False
        try:
            if doc is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    fsync_dir(path.parent)
                return True
            body = wrapped_value(name, doc)
            body["generation"] = version + 1 if version >= 0 else 0
            raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
            write_atomic(path, raw, mode=0o600)  # also a temporary file a crash left
        except OSError as exc:
            raise SecurityStateError(f"cannot write {path}: {exc.strerror or exc}",
                                     name) from None
        return True

    def _changed(self, name: str, doc: Any) -> None:
        with self._watch_lock:
            watched = name in self._watchers
        if watched:
            self._seen[name] = self._stat(self.file(name))
            self._deliver(name, None)

    def _start_watch(self, name: str) -> None:
        self._seen[name] = self._stat(self.file(name))
        self._deliver(name, None)
        with self._watch_lock:
            if self._poller is None and self.poll_s > 0:
                self._poller = threading.Thread(target=self._poll, daemon=True,
                                                name="security-state-poll")
                self._poller.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            with self._watch_lock:
                names = list(self._watchers)
            for name in names:
                now = self._stat(self.file(name))
                if now != self._seen.get(name):
                    self._seen[name] = now
                    self._deliver(name, None)

    def close(self) -> None:
        super().close()
        self._stop.set()
        poller = self._poller
        if poller is not None and poller is not threading.current_thread():
            poller.join(5.0)


def open_state_store(broker: Any) -> SecurityStateStore:
    """The store of ``broker``: its metadata store when it is a cluster member (after the
    session is open), else the files of its first log dir."""
    member = getattr(broker, "member", None)
    store = getattr(member, "store", None) if member is not None else None
    if store is not None:
        return MetadataStoreStateStore(store)
    return FileStateStore(broker.config["log.dirs"][0])


def _check_owner(path: Path) -> None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        raise SecurityStateError(f"cannot use {path}: {exc.strerror or exc}") from None
    if st.st_uid != os.geteuid():
        raise SecurityStateError(
            f"{path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}): run as the "
            "broker's user, or change the credentials through the broker's authenticated "
            "listener (--bootstrap-server)")


def _embedded_dir(directory: Path) -> Path | None:
    from kafka_tiers.cluster.embedded_store import JOURNAL, LOCK, SNAPSHOT

    for d in (directory / "metadata", directory):
        if any((d / name).is_file() for name in (SNAPSHOT, JOURNAL, LOCK)):
            return d
    return None


@contextlib.contextmanager
def _zookeeper_store(connect: str, timeout: float) -> Any:
    from kafka_tiers.cluster.metadata_store import MetadataStoreError
    from kafka_tiers.cluster.zookeeper_store import ZooKeeperStore

    zk = ZooKeeperStore(connect)
    try:
        zk.start(timeout)
    except MetadataStoreError as exc:
        text = str(exc)[:300]
        raise SecurityStateError(text if connect in text else f"cannot reach ZooKeeper at "
                                 f"{connect}: {text}", retriable=True) from None
    try:
        with MetadataStoreStateStore(zk) as store:
            yield store
    finally:
        zk.close()


@contextlib.contextmanager
def _embedded_store(meta: Path) -> Any:
    """The security state of the embedded store in ``meta``, opened as its only writer: the
    store's own lock (held by the server of a running broker) refuses it while one runs, and
    keeps any broker from opening the store meanwhile."""
    from kafka_tiers.cluster.embedded_store import (
        EmbeddedMetadataServer,
        EmbeddedStore,
        StoreInUseError,
    )
    from kafka_tiers.cluster.metadata_store import MetadataStoreError

    if meta.exists():
        _check_owner(meta)
        for f in meta.iterdir():
            _check_owner(f)
    else:  # made here (before the brokers' first start): in a directory of the caller's
        existing = meta.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        _check_owner(existing)
    try:
        server = EmbeddedMetadataServer(meta)
    except StoreInUseError as exc:
        owner = f"pid {exc.pid}" if exc.pid is not None else "pid unknown"
        raise SecurityStateError(
            f"a broker is running on {meta} ({owner}): stop it, or change the security "
            "state through its listener (--bootstrap-server)") from None
    except MetadataStoreError as exc:
        raise SecurityStateError(str(exc)[:300]) from None
    try:
        embedded = EmbeddedStore(server)
        embedded.start()
        try:
            with MetadataStoreStateStore(embedded) as store:
                yield store
        finally:
            embedded.close()
    finally:
        server.close()


@contextlib.contextmanager
def open_offline_store(directory: str | os.PathLike[str] | None = None, *,
                       zookeeper_connect: str | None = None, config: Any = None,
                       timeout: float = 10.0) -> Any:
    """The security state of a broker or cluster on this machine, written without asking a
    broker (``kafka-tiers scram add --dir``: the first admin user, before anyone can log
    in). Yields a :class:`SecurityStateStore`, closed on exit. Exactly one of:

    - ``zookeeper_connect``: the cluster's ZooKeeper (running brokers see the change through
      their watches).
    - ``config``: a cluster broker's :class:`~kafka_tiers.config.BrokerConfig`
      (``kafka-tiers broker start --config``): its ZooKeeper, or its embedded store
      (``metadata.dir``, by default ``<first log dir>/metadata``; made when missing).
    - ``directory``: a cluster's directory holding an embedded store (``<dir>/metadata`` of
      ``kafka-tiers cluster start``, a broker's first log dir, or a ``metadata.dir``
      itself); or a standalone broker's first log dir (``meta.properties``): its files (a
      running broker notices the change within :data:`FILE_POLL_S`).

    An embedded store is used only while no broker has it open: it is opened with the
    store's own lock (``store.lock``, which the server of a running broker holds), so a
    running broker refuses this and no broker opens the store meanwhile.

    Files and directories used must belong to the caller. ``timeout``: seconds to wait for
    ZooKeeper.

    Raises:
        SecurityStateError: neither kind of directory, files of another user, a broker
            running on an embedded store, or the store unreachable.
    """
    if zookeeper_connect:
        with _zookeeper_store(zookeeper_connect, timeout) as store:
            yield store
        return
    if config is not None:
        if config["metadata.store"] == "zookeeper":
            if not config["zookeeper.connect"]:
                raise SecurityStateError("metadata.store=zookeeper needs zookeeper.connect")
            with _zookeeper_store(str(config["zookeeper.connect"]), timeout) as store:
                yield store
            return
        log_dirs = [Path(d) for d in config["log.dirs"]]
        meta = Path(config["metadata.dir"] or log_dirs[0] / "metadata")
        with _embedded_store(meta) as store:
            yield store
        return
    if directory is None:
        raise ValueError("open_offline_store needs a directory, a config or a ZooKeeper")
    d = Path(directory)
    if not d.is_dir():
        raise SecurityStateError(f"{d} is not a directory: give a stopped cluster's directory "
                                 "(kafka-tiers cluster start --dir) or a broker's first log dir")
    _check_owner(d)
    embedded = _embedded_dir(d)
    if embedded is not None:
        with _embedded_store(embedded) as store:
            yield store
        return
    if not (d / "meta.properties").is_file():
        raise SecurityStateError(
            f"{d} is neither a cluster's directory (no metadata/ with an embedded store) nor "
            "a broker's log dir (no meta.properties): give the first log dir of the broker "
            "(started once), the --dir of kafka-tiers cluster start, or --config")
    for f in d.glob("kafka-tiers-security-*"):
        _check_owner(f)
    with FileStateStore(d, poll_s=0) as store:
        yield store


def state_store_of(server: KafkaServer) -> SecurityStateStore:
    """The Kafka server's one :class:`SecurityStateStore` (made on first use, closed with
    the server)."""
    return server.component(COMPONENT_KEY, lambda s: open_state_store(s.broker))


__all__ = [
    "COMPONENT_KEY",
    "FILE_POLL_S",
    "FORMAT_VERSION",
    "MAX_DOCUMENT_BYTES",
    "ROOT",
    "FileStateStore",
    "MetadataStoreStateStore",
    "SecurityStateError",
    "SecurityStateStore",
    "open_offline_store",
    "open_state_store",
    "state_store_of",
]
