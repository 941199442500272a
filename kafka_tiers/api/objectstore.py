"""The object-store contract: four small operations (put, ranged get, batched delete, list by
prefix), optional ones with documented defaults (:meth:`ObjectStore.from_config`,
:meth:`ObjectStore.translate_error`, :meth:`ObjectStore.collect_garbage`, ``close``), and the
multi-part part operations of :class:`MultipartObjectStore`.

A backend registers its store class in the entry-point group ``kafka_tiers.object_store``; the
core (``kafka_tiers.objectstore``) builds the storage manager around it: key layout, manifest,
commit protocol, listing, garbage collection and the multipart engine are the core's and may
change without an SPI change.
"""

from __future__ import annotations

import builtins
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO, ClassVar, Self

from kafka_tiers.api.errors import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
)

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Value types

# --------------------------------------------------------------------------------------------
# Value types


@dataclass(frozen=True, slots=True)
class ByteRange:
    """An inclusive range of byte positions ``first..last`` inside an object.

    Raises:
        ValueError: ``first`` negative or ``last < first``.
    """

    first: int
    last: int

    def __post_init__(self) -> None:
        if self.first < 0 or self.last < self.first:
            raise ValueError(f"invalid byte range {self.first}..{self.last}")

    @property
    def size(self) -> int:
        """How many bytes the range covers."""
        return self.last - self.first + 1

    def __str__(self) -> str:
        return f"bytes={self.first}-{self.last}"


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object found by :meth:`ObjectStore.list`.

    Attributes:
        key: the object's full key.
        size: its size in bytes.
        last_modified_ms: when it was last written (epoch milliseconds).
    """

    key: str
    size: int
    last_modified_ms: int



# --------------------------------------------------------------------------------------------
# Keys and errors

_KEY_PART = re.compile(r"[A-Za-z0-9._=+,@~-]+")


def validate_key(key: str) -> str:
    """Check that ``key`` is a safe relative object key: ``/``-separated non-empty parts of
    ``A-Z a-z 0-9 . _ - = + , @ ~``, none of them ``.`` or ``..``, no leading or trailing
    ``/``. Backends mapping keys to paths may rely on this, and must still check resolved paths.

    Returns:
        The key unchanged.

    Raises:
        RemoteStorageError: the key is unsafe (the message shows it).
    """
    if not isinstance(key, str) or not key:
        raise RemoteStorageError(f"invalid object key {key!r}: empty")
    for part in key.split("/"):
        if part in ("", ".", "..") or not _KEY_PART.fullmatch(part):
            raise RemoteStorageError(f"invalid object key {key!r}: bad part {part!r}",
                                     resource=key)
    return key



def default_translate(exc: BaseException, key: str | None) -> RemoteStorageError:
    """The default mapping of a foreign exception: ``FileNotFoundError`` -> not found,
    timeouts and connection errors -> retriable, anything else -> :class:`RemoteStorageError`.
    The message names the exception type and the key, never credentials."""
    where = f" ({key})" if key else ""
    text = f"{type(exc).__name__}: {exc}{where}"
    if isinstance(exc, FileNotFoundError):
        return RemoteResourceNotFoundError(f"not found{where}", resource=key)
    if isinstance(exc, TimeoutError | ConnectionError | InterruptedError):
        return RetriableRemoteStorageError(text, resource=key)
    return RemoteStorageError(text, resource=key, retriable=False)



# --------------------------------------------------------------------------------------------
# The backend interface


class ObjectStore(ABC):
    """A flat key -> bytes store: the small interface an object-store backend implements.

    Keys are checked with :func:`validate_key` by the caller before they reach the store.
    Every method may raise the backend's own exceptions; :meth:`translate_error` turns them
    into kafka-tiers errors (the defaults map ``FileNotFoundError`` to not-found, timeouts
    and connection errors to retriable).

    Class attributes:
        max_delete_batch: the most keys one :meth:`delete_many` call receives (S3: 1000).
        max_concurrent_puts: how many :meth:`put` calls of one segment copy may run at once
            (the small index objects, on separate threads, once the log is stored); 1 (the
            default): one after the other. Declare more only when ``put`` is thread-safe.
            Wrappers (the conformance suite's fault injection) keep the default unless they
            declare it themselves.
        CAPABILITIES: the optional behaviours the store supports, as
            :class:`~kafka_tiers.api.StorageCapability` values (``"concurrent_access"``: its
            methods may be called from several threads at once; ``"multipart_upload"``: it is
            a :class:`MultipartObjectStore`). The storage manager the core builds around it
            declares these plus ``fault_injection``, ``orphan_collection`` and
            ``large_segments``.
        SUPPORTED_SPI: optional PEP 440 range of the SPI versions the store supports (say
            ``">=2.0,<3"``); the core refuses a store whose range excludes its SPI version.
        SECRET_KEYS: the configuration keys whose values are credentials: they reach
            :meth:`from_config` as :class:`~kafka_tiers.api.Secret` (see
            :attr:`kafka_tiers.api.Plugin.SECRET_KEYS`).

    Instance attributes:
        base_prefix: a key prefix of the store's own setting (say ``azure.prefix``), set by
            :meth:`from_config`; the core places every key below it, with the generic
            ``key.prefix`` nested under it (``<base_prefix>/<key.prefix>/<topic>-<partition>/``).
            The store still receives and lists full keys. Default ``""``.
    """

    max_delete_batch: ClassVar[int] = 1000
    max_concurrent_puts: ClassVar[int] = 1
    CAPABILITIES: ClassVar[frozenset[str]] = frozenset()
    SECRET_KEYS: ClassVar[frozenset[str]] = frozenset()
    base_prefix: str = ""

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        """Build the store from the plugin's config: every key under ``rsm.config.`` with the
        prefix stripped (``key.prefix`` included, which the core also reads). Should make no
        request: a service that is down when the broker starts shows as retriable errors of
        the calls.

        The default calls ``cls()`` and refuses nothing; a store with settings overrides it.

        Raises:
            ConfigError: a missing, malformed or contradictory value (naming the key, never a
                secret value).
        """
        return cls()

    @abstractmethod
    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        """Store everything ``data`` yields under ``key``, replacing any object there.

        Must be atomic: readers see the previous object, no object, or the whole new one,
        never part of it. Must not close ``data``.

        Args:
            key: the object key.
            data: a binary stream, read to its end.
            length: the number of bytes ``data`` will yield when known (for a Content-Length),
                or None.

        Returns:
            The number of bytes stored.
        """

    @abstractmethod
    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        """Open an object, whole or the inclusive ``byte_range`` of it.

        The caller guarantees that ``byte_range`` lies within the object and closes the
        returned stream.

        Raises:
            RemoteResourceNotFoundError (or a backend error :meth:`translate_error` maps to
            it): there is no object under ``key``.
        """

    @abstractmethod
    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete these keys (at most :attr:`max_delete_batch`); missing keys are ignored."""

    @abstractmethod
    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (a string prefix: ``"a/b"`` matches
        ``"a/bc"``), in any order; paginate internally."""

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        """Map a backend exception to a kafka-tiers error, or None for the default mapping.

        Override to recognise your client's errors (an HTTP 404 is
        :class:`RemoteResourceNotFoundError`, a 503 or throttling is
        :class:`RetriableRemoteStorageError`). Never put credentials in the message.
        """
        return None

    def collect_garbage(self, prefix: str, older_than_ms: int, dry_run: bool = False
                        ) -> builtins.list[str]:
        """Remove the store's own leftovers under ``prefix`` last changed before the epoch
        millisecond ``older_than_ms``: incomplete multi-part uploads, temporary files of
        failed writes; nothing :meth:`list` shows. Called by the core's orphan collection
        (after the unreferenced objects are deleted) with the same scope and age. Idempotent.

        Args:
            prefix: the key prefix collected (``""``: the whole store).
            older_than_ms: only leftovers older than this (epoch milliseconds) are touched.
            dry_run: report without removing.

        Returns:
            What was removed (or would be), for the log: upload ids, temporary file names.
            The default removes nothing and returns ``[]``.

        Raises:
            Exception: listing or removing failed (:meth:`translate_error` maps it).
        """
        return []

    def close(self) -> None:  # noqa: B027 - optional, with a do-nothing default
        """Release connections and handles. Safe to call more than once."""




class MultipartObjectStore(ObjectStore):
    """An object store with multi-part uploads (S3 multipart, Azure block lists).

    Implement the five part operations; :meth:`put` does the rest: objects of up to one part
    go up with :meth:`put_object`, larger ones in a multi-part upload with up to
    :attr:`upload_concurrency` parts in flight at once, completed with the part tags in
    part-number order. When anything fails (a part, reading ``data``, completing, an
    interrupt) the parts not yet started are dropped, the parts in flight are waited for, and
    :meth:`abort_failed_upload` is called, so that no partial object and no dangling upload
    remain; then the original error is raised.

    Memory: :meth:`put` holds at most ``upload_concurrency + 1`` parts (two when sequential).

    Thread-safety: :meth:`put` may run on several threads at once (see
    :attr:`ObjectStore.max_concurrent_puts`) when the part operations allow it. With
    :attr:`upload_concurrency` above 1, :meth:`upload_part` runs on a pool of threads (one pool
    per upload, named after :attr:`upload_thread_name`, shut down before :meth:`put` returns
    or raises), several calls at once for one upload, so it must be thread-safe; every other
    operation runs on the thread calling :meth:`put`. With 1 (the default) everything runs
    on the calling thread, one part after the other, and no thread is started.

    Attributes:
        part_size: bytes per part (S3 requires at least 5 MiB for all parts but the last); see
            :meth:`part_size_for`.
        upload_concurrency: parts of one upload in flight at once (1: sequential).
        max_parts: the service's limit on parts per object (S3 10,000, Azure 50,000), or None
            for no limit.
        part_size_setting: the name of the user's setting behind :attr:`part_size` (say
            ``"s3.multipart.upload.part.size"``), named by the error of an upload that needs
            more than :attr:`max_parts` parts; None: ``part_size``.
        upload_thread_name: the name prefix of the upload threads.
    """

    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({"multipart_upload"})

    part_size: int = 8 * 1024 * 1024
    upload_concurrency: int = 1
    max_parts: int | None = None
    part_size_setting: str | None = None
    upload_thread_name: str = "kafka-tiers-upload"

    @abstractmethod
    def put_object(self, key: str, data: bytes) -> None:
        """Store a small object in one request."""

    @abstractmethod
    def create_multipart_upload(self, key: str) -> str:
        """Start a multi-part upload; returns its upload id."""

    @abstractmethod
    def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        """Upload part ``part_number`` (1-based); returns the part's tag (ETag, block id), an
        opaque string handed back to :meth:`complete_multipart_upload`. Must be thread-safe
        when :attr:`upload_concurrency` is above 1."""

    @abstractmethod
    def complete_multipart_upload(self, key: str, upload_id: str, parts: Sequence[str]) -> None:
        """Make the object from these part tags, in part-number order (atomically)."""

    @abstractmethod
    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        """Drop an unfinished upload and its parts."""

    def abort_failed_upload(self, key: str, upload_id: str) -> None:
        """Called by :meth:`put` when an upload failed, once none of its parts is in flight.

        The default calls :meth:`abort_multipart_upload` and, when that fails too, logs a
        warning (the original failure is what :meth:`put` raises). Override to do more, such
        as remembering the upload to abort it later. Should not raise; whatever it raises is
        logged, and :meth:`put` still raises the original failure.
        """
        try:
            self.abort_multipart_upload(key, upload_id)
        except Exception as exc:  # the original failure matters; the upload expires anyway
            mapped = self.translate_error(exc, key) or default_translate(exc, key)
            log.warning("could not abort the multi-part upload %s of %s: %s", upload_id, key,
                        mapped)

    def part_size_for(self, length: int | None) -> int:
        """The part size for an object of ``length`` bytes (None: unknown): :attr:`part_size`,
        grown when the object would need more than :attr:`max_parts` parts.

        Raises:
            RemoteStorageError: :attr:`part_size` is not above 0.
        """
        size = self.part_size
        if size <= 0:
            raise RemoteStorageError(f"part_size must be > 0, got {size}")
        limit = self.max_parts
        if limit is None or length is None or length <= size * limit:
            return size
        return -(-length // limit)


    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        """Store the stream through the core's multipart engine: one :meth:`put_object` for
        up to one part (of :meth:`part_size_for` ``length`` bytes), else a multi-part upload
        (see the class docstring). Do not override.

        Returns:
            The number of bytes stored.

        Raises:
            RemoteStorageError: ``part_size`` or ``upload_concurrency`` is invalid, or an
                object of unknown length needs more than :attr:`max_parts` parts (not
                retriable: raise the part size).
            Exception: whatever the part operations or ``data`` raise (the upload aborted).
        """
        from kafka_tiers.objectstore.multipart import multipart_put  # the engine is the core's

        return multipart_put(self, key, data, length)


__all__ = [
    "ByteRange",
    "MultipartObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "default_translate",
    "validate_key",
]
