"""An :class:`~kafka_tiers.api.ObjectStore` on HDFS, over WebHDFS REST (the ``hdfs`` package).

Key ``a/b/c`` is the file ``<hdfs.base.dir>/a/b/c``.

Atomic visibility
    HDFS has no multi-part upload, and a file is visible (growing) while it is written. So
    :meth:`HdfsObjectStore.put` streams the object in ONE ``CREATE`` request to a hidden
    temporary file in the same directory (``.<name>.<uuid>.kt-tmp``), then renames it to
    the key (``RENAME``): readers see no object or the whole one. Replacing an existing
    object deletes it between a refused rename and a second one (readers may see no object
    for that instant, which the contract allows). When anything fails the temporary file is
    deleted; if even that fails (the cluster is gone, or the datanode created the file after
    the client gave up), it is left for
    :meth:`HdfsObjectStore.collect_garbage` (run by kafka-tiers' ``collect_orphans``).

    Why not ``APPEND`` in chunks: rename already gives atomicity, and one streamed request
    holds one chunk in memory whatever the segment's size. Appending would cost a namenode
    round trip and a lease per chunk, could not be resumed after a failure (how much of the
    chunk the datanode kept is unknown), and append is refused on some clusters (erasure
    coded directories, append disabled).

Directories
    Directories appear on demand (``CREATE`` makes the parents) and a delete prunes the ones it
    leaves empty, up to the base directory (a non-recursive ``DELETE`` refuses a directory
    that is not empty, so a concurrent copy is never disturbed). Names starting with ``.`` are
    reserved for temporary files: no key part may start with one, and listings skip them.
    HDFS is a tree: a key cannot also be the directory of other keys.

Reads
    ``OPEN`` with ``offset`` and ``length`` (a ranged read), streamed.

Errors
    WebHDFS answers ``{"RemoteException": {"exception": ...}}``: FileNotFoundException is
    not found; StandbyException, RetriableException, SafeModeException, any 5xx answer, and
    connection errors and timeouts are retriable; AccessControlException is a non-retriable
    "permission denied" naming the path and user; a failed TLS verification is non-retriable.
"""

from __future__ import annotations

import builtins
import http.client
import io
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, BinaryIO, ClassVar

import requests
import urllib3.exceptions
from hdfs import Client, HdfsError

from kafka_tiers.api import (
    ByteRange,
    ObjectInfo,
    ObjectStore,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
    StorageCapability,
    validate_key,
)
from kafka_tiers_hdfs.settings import HdfsSettings

log = logging.getLogger(__name__)

#: The suffix of temporary files (whose names also start with a dot).
TEMP_SUFFIX = ".kt-tmp"

#: RemoteException names after which the same call may succeed later.
RETRIABLE_EXCEPTIONS = frozenset({
    "StandbyException", "RetriableException", "SafeModeException",
    "ObserverRetryOnActiveException", "ServerTooBusyException"})


class WebHdfsServerError(Exception):
    """A WebHDFS answer with a 5xx status: the server failed, a retry may succeed.

    Attributes:
        status: the HTTP status.
        exception: the RemoteException name, when the body had one.
    """

    def __init__(self, status: int, exception: str | None, message: str) -> None:
        name = f" {exception}" if exception else ""
        super().__init__(f"HTTP {status}{name}: {message}")
        self.status = status
        self.exception = exception


def raise_for_server_error(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """A ``requests`` response hook: raise :class:`WebHdfsServerError` for a 5xx answer (the
    ``hdfs`` package's own errors do not keep the status)."""
    if response.status_code < 500:
        return
    exception, message = None, ""
    try:
        body = response.json()["RemoteException"]
        exception, message = body.get("exception"), str(body.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        message = response.text[:200].strip()
    finally:
        response.close()
    raise WebHdfsServerError(response.status_code, exception, message)


class _SizedBody:
    """An upload body of a known length: requests sends it with a Content-Length and urllib3
    iterates the chunks."""

    def __init__(self, chunks: Iterator[bytes], length: int) -> None:
        self._chunks = chunks
        self._length = length

    def __iter__(self) -> Iterator[bytes]:
        return self._chunks

    def __len__(self) -> int:
        return self._length


class _Counter:
    count = 0
    started = False


def _chunks(data: BinaryIO, length: int | None, size: int, counter: _Counter
            ) -> Iterator[bytes]:
    counter.started = True
    while True:
        want = size if length is None else min(size, length - counter.count)
        chunk = data.read(want) if want > 0 else b""
        if not chunk:
            break
        counter.count += len(chunk)
        yield chunk
    if length is not None:
        if counter.count < length:
            raise RemoteStorageError(f"the source ended after {counter.count} of the {length} "
                                     "bytes announced")
        if data.read(1):
            raise RemoteStorageError(f"the source holds more than the {length} bytes "
                                     "announced")


class _ResponseStream(io.RawIOBase):
    """The body of an OPEN; closing it closes the HTTP response (the ``read`` context)."""

    def __init__(self, raw: Any, context: AbstractContextManager[Any]) -> None:
        self._raw = raw
        self._context: AbstractContextManager[Any] | None = context

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        chunk = self._raw.read(len(view))
        n = len(chunk)
        view[:n] = chunk
        return n

    def close(self) -> None:
        context, self._context = self._context, None
        try:
            if context is not None:
                context.__exit__(None, None, None)
        finally:
            super().close()


class HdfsObjectStore(ObjectStore):
    """Objects as files under ``base_dir`` (see the module docstring).

    Args:
        client: the ``hdfs`` client (InsecureClient or KerberosClient; HA through its
            ``;``-separated URLs).
        session: the client's ``requests`` session, closed by :meth:`close`.
        base_dir: the absolute HDFS directory holding every object.
        replication: the replication factor of new files (None: the cluster's).
        block_size: the block size of new files (None: the cluster's).
        buffer_size: WebHDFS ``buffersize`` of reads and writes (None: the cluster's).
        upload_chunk_size: bytes read from the source per piece of an upload.
    """

    SUPPORTED_SPI: ClassVar[str] = ">=2.0,<3"
    #: the client is safe to share between threads (one ``requests`` session; the HA state is
    #: locked)
    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({StorageCapability.CONCURRENT_ACCESS})
    max_delete_batch: ClassVar[int] = 1000
    #: the index objects of a copy are written at once (after the log): each put is its own
    #: CREATE + RENAME of a distinct temporary file, through a thread-safe client
    max_concurrent_puts: ClassVar[int] = 4

    def __init__(self, client: Client, base_dir: str, *,
                 session: requests.Session | None = None, replication: int | None = None,
                 block_size: int | None = None, buffer_size: int | None = None,
                 upload_chunk_size: int = 1 << 20) -> None:
        self.client = client
        self.session = session
        self.base_dir = "/" + base_dir.strip("/")
        self.replication = replication
        self.block_size = block_size
        self.buffer_size = buffer_size
        self.upload_chunk_size = upload_chunk_size

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> HdfsObjectStore:
        """Check the ``hdfs.*`` keys and build the store (no request is sent).

        Raises:
            ConfigError: a missing or malformed value (one line naming the key).
        """
        from kafka_tiers_hdfs.client import make_client, new_session, quiet_hdfs_logging

        settings = HdfsSettings.from_config(config)
        quiet_hdfs_logging()
        session = new_session(settings)
        try:
            client = make_client(settings, session)
        except BaseException:
            session.close()
            raise
        return cls(client, settings.base_dir, session=session, replication=settings.replication,
                   block_size=settings.block_size, buffer_size=settings.buffer_size,
                   upload_chunk_size=settings.upload_chunk_size)

    # -- paths -------------------------------------------------------------------------------

    def path_of(self, key: str) -> str:
        """The HDFS path of a key.

        Raises:
            RemoteStorageError: the key is unsafe or has a part starting with ``.``
                (reserved for temporary files).
        """
        validate_key(key)
        if any(part.startswith(".") for part in key.split("/")):
            raise RemoteStorageError(f"invalid object key {key!r}: parts starting with '.' "
                                     "are reserved", resource=key)
        return self.base_dir.rstrip("/") + "/" + key

    @staticmethod
    def is_temporary(name: str) -> bool:
        """Whether a file name is one of this store's temporary files."""
        return name.startswith(".") and name.endswith(TEMP_SUFFIX)

    # -- the four operations -----------------------------------------------------------------

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        path = self.path_of(key)
        directory, _, name = path.rpartition("/")
        temp = f"{directory}/.{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
        counter = _Counter()
        chunks = _chunks(data, length, self.upload_chunk_size, counter)
        body: Any = chunks if length is None else _SizedBody(chunks, length)
        if length == 0:  # "Content-Length: 0" rather than an empty chunked body
            body = b"".join(chunks)
        try:
            self.client.write(temp, data=body, overwrite=False, blocksize=self.block_size,
                              replication=self.replication, buffersize=self.buffer_size)
            self._rename_over(temp, path)
        except BaseException:
            self._discard(temp, counter.started)
            raise
        return counter.count

    def _discard(self, temp: str, sent: bool) -> None:
        """Delete the temporary file of a failed write, best effort.

        Once the body started flowing, the datanode may create the file only after the client
        gave up (its request was still queued), so a delete that finds nothing is repeated a
        few times (for under a second). Whatever is still left is collected by
        ``collect_orphans``.
        """
        for delay in (0.0, 0.05, 0.1, 0.2, 0.4) if sent else (0.0,):
            time.sleep(delay)
            try:
                if self.client.delete(temp, recursive=False):
                    return
            except Exception as exc:  # the cluster is gone: collect_orphans removes it later
                log.warning("could not delete the temporary file %s of a failed write: %s",
                            temp, exc)
                return

    def _rename_over(self, temp: str, path: str) -> None:
        for attempt in range(3):
            try:
                self.client.rename(temp, path)
                return
            except HdfsError as exc:
                # a RemoteException (permission...) is final; a plain "false" means the
                # destination exists: drop it and rename again
                if exc.exception is not None or attempt == 2:
                    raise
            self.client.delete(path, recursive=False)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        path = self.path_of(key)
        offset, length = (0, None) if byte_range is None else (byte_range.first,
                                                               byte_range.size)
        context = self.client.read(path, offset=offset, length=length,
                                   buffer_size=self.buffer_size)
        raw = context.__enter__()  # raises for a missing file; then there is nothing to close
        return _ResponseStream(raw, context)  # type: ignore[return-value]  # unbuffered RawIOBase

    def delete_many(self, keys: Sequence[str]) -> None:
        emptied: set[str] = set()
        for key in keys:
            path = self.path_of(key)
            if self.client.delete(path, recursive=False):
                emptied.add(path.rpartition("/")[0])
        for directory in sorted(emptied, key=lambda d: -d.count("/")):
            self._prune(directory)

    def _prune(self, directory: str) -> None:
        """Delete empty directories from ``directory`` up to (not including) the base."""
        base = self.base_dir.rstrip("/")
        while directory.startswith(base + "/"):
            try:
                self.client.delete(directory, recursive=False)
            except HdfsError:  # not empty (a concurrent write), or not ours to delete
                return
            directory = directory.rpartition("/")[0]

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        return [ObjectInfo(key, int(status["length"]), int(status["modificationTime"]))
                for key, name, status in self._files(prefix) if not name.startswith(".")]

    def _files(self, prefix: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(key, name, FileStatus) of every file whose key starts with ``prefix``, temporary
        files included."""
        head = prefix.rpartition("/")[0]
        if head:
            try:
                start = self.path_of(head)
            except RemoteStorageError:
                return
        else:
            start = self.base_dir
        yield from self._walk(start, head + "/" if head else "", prefix)

    def _walk(self, directory: str, rel: str, prefix: str
              ) -> Iterator[tuple[str, str, dict[str, Any]]]:
        try:
            entries = self.client.list(directory, status=True)
        except HdfsError as exc:
            if exc.exception == "FileNotFoundException" or "not a directory" in str(exc):
                return  # not there (or deleted since its parent was listed)
            raise
        for name, status in sorted(entries, key=lambda e: e[0]):
            key = rel + name
            if status.get("type") == "DIRECTORY":
                if not name.startswith(".") and ((key + "/").startswith(prefix)
                                                 or prefix.startswith(key + "/")):
                    yield from self._walk(f"{directory.rstrip('/')}/{name}", key + "/", prefix)
            elif key.startswith(prefix):
                yield key, name, status

    # -- housekeeping ------------------------------------------------------------------------

    def collect_temporary_files(self, prefix: str, cutoff_ms: int, *,
                                dry_run: bool = False) -> builtins.list[str]:
        """Delete the temporary files (left by writes whose cleanup failed) under ``prefix``
        last modified at or before ``cutoff_ms``; returns their HDFS paths, sorted."""
        found = sorted(self.base_dir.rstrip("/") + "/" + key
                       for key, name, status in self._files(prefix)
                       if self.is_temporary(name) and int(status["modificationTime"]) <= cutoff_ms)
        if not dry_run:
            for path in found:
                self.client.delete(path, recursive=False)
        return found

    def collect_garbage(self, prefix: str, older_than_ms: int, dry_run: bool = False
                        ) -> builtins.list[str]:
        """The garbage hook: delete the temporary files of failed writes (those whose own
        cleanup failed) under ``prefix`` last modified before ``older_than_ms``; returns their
        HDFS paths, sorted (``dry_run``: deletes nothing)."""
        return self.collect_temporary_files(prefix, older_than_ms, dry_run=dry_run)

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        return translate(exc, key)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def translate(exc: BaseException, key: str | None) -> RemoteStorageError | None:
    """Map an exception of the ``hdfs`` package, ``requests`` or ``urllib3`` to a kafka-tiers
    error (see the module docstring); None for anything else (the default mapping applies).
    Messages name the path, user and exception, never credentials."""
    where = f" ({key})" if key else ""
    if isinstance(exc, HdfsError):
        name = getattr(exc, "exception", None)
        message = exc.message.decode("utf-8", "replace") if isinstance(
            exc.message, bytes) else str(exc.message)
        message = message.strip()[:300]
        if name == "FileNotFoundException":
            return RemoteResourceNotFoundError(f"not found{where}", resource=key)
        if name in RETRIABLE_EXCEPTIONS:
            return RetriableRemoteStorageError(f"HDFS {name}{where}: {message}", resource=key)
        if name == "AccessControlException":
            return RemoteStorageError(f"HDFS permission denied{where}: {message}",
                                      resource=key, retriable=False)
        return RemoteStorageError(f"HDFS {name or 'error'}{where}: {message}", resource=key,
                                  retriable=False)
    if isinstance(exc, WebHdfsServerError):
        return RetriableRemoteStorageError(f"WebHDFS server error{where}: {exc}", resource=key)
    if isinstance(exc, requests.exceptions.SSLError | urllib3.exceptions.SSLError):
        return RemoteStorageError(f"TLS failure talking to WebHDFS{where}: {exc}; check "
                                  "hdfs.tls.verify and hdfs.tls.ca.file", resource=key,
                                  retriable=False)
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout
                  | requests.exceptions.ChunkedEncodingError | urllib3.exceptions.HTTPError
                  | http.client.HTTPException):
        return RetriableRemoteStorageError(
            f"WebHDFS unreachable or the connection broke{where}: {type(exc).__name__}: {exc}",
            resource=key)
    return None


__all__ = [
    "RETRIABLE_EXCEPTIONS",
    "TEMP_SUFFIX",
    "HdfsObjectStore",
    "WebHdfsServerError",
    "raise_for_server_error",
    "translate",
]
