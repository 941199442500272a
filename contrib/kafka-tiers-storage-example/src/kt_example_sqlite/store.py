"""A remote tier in one SQLite database: an object store for kafka-tiers.

Only the object operations (and the multi-part ones) are written here, and the store is all
that is registered (entry point ``example-sqlite`` in ``kafka_tiers.object_store``); kafka-tiers
builds the storage manager around it: the key layout, the manifest-last commit protocol,
listing, retries, cleanup and garbage collection.

Config keys (under ``rsm.config.``):
    ``path`` (required): the database file; created when missing.
    ``part.size``: bytes per part of a multi-part upload (default 1048576).
    ``key.prefix``: prepended to every key (inherited; default empty).
"""

from __future__ import annotations

import io
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import BinaryIO, ClassVar

from kafka_tiers.api import (
    ByteRange,
    ConfigError,
    MultipartObjectStore,
    ObjectInfo,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
    StorageCapability,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    key TEXT PRIMARY KEY, data BLOB NOT NULL, size INTEGER NOT NULL, mtime_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS uploads (
    upload_id TEXT PRIMARY KEY, key TEXT NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS parts (
    upload_id TEXT NOT NULL, part_number INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (upload_id, part_number));
"""


def _now_ms() -> int:
    return int(time.time() * 1000)


class SqliteObjectStore(MultipartObjectStore):
    """Objects as rows of one SQLite file; one connection per thread.

    Args:
        path: the database file.
        part_size: bytes per part of a multi-part upload.
    """

    max_delete_batch: ClassVar[int] = 500
    SUPPORTED_SPI: ClassVar[str] = ">=2.0,<3"
    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({
        StorageCapability.MULTIPART_UPLOAD, StorageCapability.CONCURRENT_ACCESS})

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> SqliteObjectStore:
        """The store of the keys ``path`` (required) and ``part.size``.

        Raises:
            ConfigError: ``path`` missing or not openable, ``part.size`` not an int >= 1.
        """
        path = (config.get("path") or "").strip()
        if not path:
            raise ConfigError("path is required: the SQLite file holding the remote tier",
                              key="path", expected="a file path")
        raw = config.get("part.size", "1048576")
        try:
            part_size = int(raw)
            if part_size < 1:
                raise ValueError
        except ValueError:
            raise ConfigError(f"invalid value {raw!r} for part.size: expected an integer >= 1",
                              key="part.size", value=raw, expected="an integer >= 1") from None
        try:
            return cls(path, part_size)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open {path}: {exc}", key="path", value=path) from None

    def __init__(self, path: str, part_size: int) -> None:
        self.path = path
        self.part_size = part_size
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        with self._conn() as conn:
            conn.executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")  # durable once committed
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    # single objects
    def put_object(self, key: str, data: bytes) -> None:
        with self._conn() as conn:
            conn.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?)",
                         (key, data, len(data), _now_ms()))

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        conn = self._conn()
        if byte_range is None:
            row = conn.execute("SELECT data FROM objects WHERE key = ?", (key,)).fetchone()
        else:  # substr on a BLOB counts bytes, from 1
            row = conn.execute("SELECT substr(data, ?, ?) FROM objects WHERE key = ?",
                               (byte_range.first + 1, byte_range.size, key)).fetchone()
        if row is None:
            raise RemoteResourceNotFoundError(f"no object {key}", resource=key)
        return io.BytesIO(bytes(row[0]))

    def delete_many(self, keys: Sequence[str]) -> None:
        with self._conn() as conn:
            conn.executemany("DELETE FROM objects WHERE key = ?", [(k,) for k in keys])

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        # GLOB would treat * ? [ in keys as patterns; compare the leading characters instead
        rows = self._conn().execute(
            "SELECT key, size, mtime_ms FROM objects WHERE substr(key, 1, ?) = ? ORDER BY key",
            (len(prefix), prefix)).fetchall()
        return [ObjectInfo(k, s, m) for k, s, m in rows]

    # multi-part uploads
    def create_multipart_upload(self, key: str) -> str:
        upload_id = uuid.uuid4().hex
        with self._conn() as conn:
            conn.execute("INSERT INTO uploads VALUES (?, ?, ?)", (upload_id, key, _now_ms()))
        return upload_id

    def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        with self._conn() as conn:
            conn.execute("INSERT OR REPLACE INTO parts VALUES (?, ?, ?)",
                         (upload_id, part_number, data))
        return str(part_number)

    def complete_multipart_upload(self, key: str, upload_id: str, parts: Sequence[str]) -> None:
        with self._conn() as conn:  # one transaction: the object appears whole or not at all
            chunks = []
            for tag in parts:
                row = conn.execute("SELECT data FROM parts WHERE upload_id = ? AND "
                                   "part_number = ?", (upload_id, int(tag))).fetchone()
                if row is None:
                    raise RemoteStorageError(f"part {tag} of upload {upload_id} is missing")
                chunks.append(bytes(row[0]))
            data = b"".join(chunks)
            conn.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?)",
                         (key, data, len(data), _now_ms()))
            conn.execute("DELETE FROM parts WHERE upload_id = ?", (upload_id,))
            conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM parts WHERE upload_id = ?", (upload_id,))
            conn.execute("DELETE FROM uploads WHERE upload_id = ?", (upload_id,))

    def pending_uploads(self) -> int:
        """How many multi-part uploads are neither completed nor aborted."""
        return self._conn().execute("SELECT count(*) FROM uploads").fetchone()[0]

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return RetriableRemoteStorageError(f"database busy ({key})", resource=key)
        if isinstance(exc, sqlite3.Error):
            return RemoteStorageError(f"sqlite: {exc} ({key})", resource=key)
        return None

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()


__all__ = ["SqliteObjectStore"]
