"""The ZooKeeper metadata store: :class:`~kafka_tiers.cluster.metadata_store.MetadataStore` over a
real ZooKeeper ensemble through kazoo, with document 003's paths (see
:mod:`kafka_tiers.cluster.metadata_store`).

Node data is JSON; ``multi`` is ZooKeeper's ``multi`` (kazoo's ``transaction()``), so the
controller's batched failover writes are one round trip per batch. Watches are kazoo's
``ChildrenWatch`` / ``DataWatch``, which re-register themselves and survive a new session.
A lost session (``LOST``) is reported as ``SessionEvent.EXPIRED``; the next ``CONNECTED`` after
it as ``SessionEvent.RECONNECTED`` (the owner re-creates its ephemeral nodes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
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
)

log = logging.getLogger(__name__)


def _translate(exc: BaseException, path: str = "") -> MetadataStoreError:
    from kazoo import exceptions as kz

    where = f" ({path})" if path else ""
    if isinstance(exc, kz.NoNodeError):
        return NoNodeError(f"no node{where}", path or None)
    if isinstance(exc, kz.NodeExistsError):
        return NodeExistsError(f"node exists{where}", path or None)
    if isinstance(exc, kz.BadVersionError):
        return BadVersionError(f"version mismatch{where}", path or None)
    if isinstance(exc, kz.NotEmptyError):
        return NotEmptyError(f"node has children{where}", path or None)
    if isinstance(exc, kz.SessionExpiredError | kz.ConnectionClosedError):
        return SessionExpiredError(f"ZooKeeper session lost{where}")
    return MetadataStoreError(f"ZooKeeper error{where}: {type(exc).__name__}: {exc}")


class ZooKeeperStore(MetadataStore):
    """A kazoo session with ``hosts`` (``zookeeper.connect``, e.g. ``127.0.0.1:2181/chroot``).

    Args:
        hosts: the connect string.
        session_timeout_ms: ``zookeeper.session.timeout.ms``.
    """

    def __init__(self, hosts: str, *, session_timeout_ms: int = 18000) -> None:
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self._client: Any = None
        self._session_callbacks: list[SessionListener] = []
        self._lost = False
        self._closed = False
        self._lock = threading.Lock()

    def start(self, timeout: float = 10.0) -> None:
        try:
            from kazoo.client import KazooClient
        except ImportError:
            raise MetadataStoreError(
                "metadata.store=zookeeper needs the kazoo package, which is not installed: "
                "pip install kazoo (or use metadata.store=embedded)") from None

        with self._lock:
            if self._client is not None:
                return
            client = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000.0,
                                 connection_retry={"max_tries": -1, "delay": 0.1,
                                                   "max_delay": 1.0},
                                 command_retry={"max_tries": 3, "delay": 0.1,
                                                "max_delay": 1.0})
            client.add_listener(self._on_state)
            try:
                client.start(timeout=timeout)
            except Exception as exc:
                client.stop()
                client.close()
                raise MetadataStoreError(f"cannot reach ZooKeeper at {self.hosts}: {exc}"
                                         ) from None
            self._client = client

    def _on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST and not self._closed:
            self._lost = True
            self._dispatch(SessionEvent.EXPIRED)
        elif state == KazooState.CONNECTED and self._lost and not self._closed:
            self._lost = False
            self._dispatch(SessionEvent.RECONNECTED)

    def _dispatch(self, event: SessionEvent) -> None:
        # never block kazoo's connection thread: run the callbacks on its handler
        client = self._client
        if client is None:
            return

        def run() -> None:
            for cb in list(self._session_callbacks):
                try:
                    cb(event)
                except Exception:
                    log.exception("a session callback failed")

        client.handler.spawn(run)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            self._closed = True
        if client is not None:
            try:
                client.stop()
            finally:
                client.close()

    @property
    def client(self) -> Any:
        if self._client is None:
            raise SessionExpiredError("the ZooKeeper store is not started")
        return self._client

    @property
    def session_id(self) -> int:
        sid = self.client.client_id
        return int(sid[0]) if sid else 0

    def create(self, path: str, data: Any = None, *, ephemeral: bool = False,
               make_parents: bool = True) -> None:
        try:
            self.client.create(path, encode(data) if data is not None else b"",
                               ephemeral=ephemeral, makepath=make_parents)
        except Exception as exc:
            raise _translate(exc, path) from None

    def get(self, path: str) -> tuple[Any, int]:
        try:
            raw, stat = self.client.get(path)
        except Exception as exc:
            raise _translate(exc, path) from None
        return decode(raw), stat.version

    def exists(self, path: str) -> int | None:
        try:
            stat = self.client.exists(path)
        except Exception as exc:
            raise _translate(exc, path) from None
        return None if stat is None else stat.version

    def get_many(self, paths: Sequence[str]) -> list[tuple[Any, int] | None]:
        """Pipelined: every read is sent before the first answer is awaited."""
        from kazoo import exceptions as kz

        pending = [self.client.get_async(p) for p in paths]
        out: list[tuple[Any, int] | None] = []
        for path, p in zip(paths, pending, strict=True):
            try:
                raw, stat = p.get()
            except kz.NoNodeError:
                out.append(None)
                continue
            except Exception as exc:
                raise _translate(exc, path) from None
            out.append((decode(raw), stat.version))
        return out

    def set(self, path: str, data: Any, version: int = -1) -> int:
        try:
            stat = self.client.set(path, encode(data) if data is not None else b"", version)
        except Exception as exc:
            raise _translate(exc, path) from None
        return int(stat.version)

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        try:
            self.client.delete(path, version=version, recursive=recursive)
        except Exception as exc:
            raise _translate(exc, path) from None

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except Exception as exc:
            raise _translate(exc, path) from None

    def multi(self, ops: Sequence[Op]) -> list[int | None]:
        result = self.multi_many([ops])[0]
        if isinstance(result, MetadataStoreError):
            raise result
        return result

    def multi_many(self, batches: Sequence[Sequence[Op]]
                   ) -> list[list[int | None] | MetadataStoreError]:
        """Pipelined: every batch is sent before the first answer is awaited (ZooKeeper
        applies a session's requests in order)."""
        pending = [self._commit_async(ops) if ops else None for ops in batches]
        return [[] if p is None else self._finish(ops, p)
                for ops, p in zip(batches, pending, strict=True)]

    def _commit_async(self, ops: Sequence[Op]) -> Any:
        tx = self.client.transaction()
        for op in ops:
            if op.kind == "create":
                tx.create(op.path, encode(op.data) if op.data is not None else b"",
                          ephemeral=op.ephemeral)
            elif op.kind == "set":
                tx.set_data(op.path, encode(op.data) if op.data is not None else b"",
                            op.version)
            elif op.kind == "delete":
                tx.delete(op.path, op.version)
            elif op.kind == "check":
                tx.check(op.path, op.version)
            else:
                raise ValueError(f"unknown op {op.kind!r}")
        return tx.commit_async()

    @staticmethod
    def _finish(ops: Sequence[Op], pending: Any) -> list[int | None] | MetadataStoreError:
        from kazoo import exceptions as kz

        try:
            results = pending.get()
        except Exception as exc:
            return _translate(exc)
        for op, res in zip(ops, results, strict=True):
            if isinstance(res, kz.RolledBackError):
                continue
            if isinstance(res, Exception):
                return _translate(res, op.path)
        out: list[int | None] = []
        for op, res in zip(ops, results, strict=True):
            out.append(int(res.version) if op.kind == "set" else 0 if op.kind == "create"
                       else None)
        return out

    def watch_children(self, path: str, callback: Watcher) -> None:
        self.ensure_path(path)

        def fire(_children: list[str]) -> None:
            try:
                callback(path)
            except Exception:
                log.exception("a children watch callback failed (%s)", path)

        self.client.ChildrenWatch(path, fire)

    def watch_data(self, path: str, callback: Watcher) -> None:
        def fire(_data: bytes | None, _stat: Any) -> None:
            try:
                callback(path)
            except Exception:
                log.exception("a data watch callback failed (%s)", path)

        self.client.DataWatch(path, fire)

    def on_session_event(self, callback: SessionListener) -> None:
        self._session_callbacks.append(callback)


__all__ = ["ZooKeeperStore"]
