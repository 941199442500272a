"""The Azure Blob object store: block blobs in one container, through ``azure-storage-blob``.

How the object-store operations map onto the Blob service:

========================== =====================================================================
``put_object``             Put Blob (``upload_blob``), one request: objects up to one block
``create_multipart_upload`` a fresh upload id (no request: block blobs need no "create")
``upload_part``            Put Block (``stage_block``) with a block id made of the upload id and
                           the part number: unique per upload, and the same length for every
                           upload (Azure refuses block ids of different lengths on one blob)
``complete_...``           Put Block List (``commit_block_list``): the blob appears whole, at once
``abort_...``              nothing: blocks that were staged but never committed are invisible
                           and garbage-collected by the service (after 7 days); a committed blob
                           under the same key is untouched, and a failed upload commits nothing
``get``                    Get Blob (``download_blob``), ranged with ``x-ms-range``, streamed in
                           chunks of ``azure.download.chunk.size``
``delete_many``            Blob Batch (``delete_blobs``), at most 256 keys per request; one key
                           alone with Delete Blob (no batch body to build and parse); missing
                           keys are ignored
``list``                   List Blobs by prefix (paginated by the SDK)
========================== =====================================================================

``put`` is :meth:`MultipartObjectStore.put <kafka_tiers.api.MultipartObjectStore.put>` on these
operations: uploads larger than one block (``azure.upload.block.size``, grown when a known length
would need more than 50,000 blocks) stage up to ``azure.upload.concurrency`` blocks at once
(holding at most that many plus one blocks in memory) and commit them in order; when the length
is known, the first block goes on the wire as soon as it is read. A failure commits nothing
(the staged blocks are left to the service's garbage collection). The small objects of a
segment copy are stored at once, after its log (:attr:`AzureBlobStore.max_concurrent_puts`).

Errors: every SDK exception is turned into a kafka-tiers error *inside* this module (see
:meth:`AzureBlobStore.translate_error`) and raised ``from None``, so that no SDK exception -- whose
text may hold a request URL with a SAS signature -- travels further; messages go through
:meth:`kafka_tiers.api.Secret.hide`. The credentials are
:class:`~kafka_tiers.api.Secret` values, revealed only in :func:`make_container_client`; while
they live, no log record of the process (urllib3's request lines with a SAS in their URL
included) carries them.
"""

from __future__ import annotations

import base64
import contextlib
import io
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    IncompleteReadError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.blob import BlobBlock, BlobType, ContainerClient, ExponentialRetry

from kafka_tiers.api import (
    ByteRange,
    ConfigError,
    MultipartObjectStore,
    ObjectInfo,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
    Secret,
    StorageCapability,
    default_translate,
    validate_key,
)
from kafka_tiers_azure.config import (
    BLOCK_SIZE,
    PREFIX,
    SECRET_KEYS,
    AzureBlobConfig,
    CredentialKind,
)

if TYPE_CHECKING:
    from azure.storage.blob import StorageStreamDownloader

#: Azure's limits: sub-requests of one Blob Batch, blocks of one blob.
MAX_BATCH = 256
MAX_BLOCKS = 50_000

#: HTTP statuses and service error codes that a later attempt may get past.
RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
RETRIABLE_CODES = frozenset({"ServerBusy", "OperationTimedOut", "InternalError"})


class BackoffRetry(ExponentialRetry):
    """The SDK's retry policy with a millisecond backoff: ``initial * 2**n``, jittered down to
    half, capped at ``maximum`` (the SDK's own policy waits 15 s and more between attempts).

    Args:
        retry_total: retries after the first attempt.
        initial_ms: the first backoff.
        maximum_ms: the longest backoff.
    """

    def __init__(self, retry_total: int, initial_ms: int, maximum_ms: int) -> None:
        super().__init__(initial_backoff=0, increment_base=2, retry_total=retry_total,
                         random_jitter_range=0)
        self.initial_ms = initial_ms
        self.maximum_ms = maximum_ms

    def get_backoff_time(self, settings: dict[str, Any]) -> float:
        """Seconds to wait before retry number ``settings["count"]`` (1 for the first)."""
        full = min(self.maximum_ms, self.initial_ms * (2 ** max(0, settings["count"] - 1)))
        return random.uniform(full / 2, full) / 1000.0


def block_id(upload_id: str, part_number: int) -> str:
    """The base64 block id of part ``part_number`` (1-based) of an upload: always 52 characters
    for a 32-character upload id, so every block of every upload of a blob has the same
    length."""
    if not 1 <= part_number <= MAX_BLOCKS:
        raise RemoteStorageError(f"part {part_number} is beyond Azure's {MAX_BLOCKS} blocks per "
                                 "blob; raise azure.upload.block.size")
    return base64.b64encode(f"{upload_id}-{part_number:05d}".encode("ascii")).decode("ascii")


def make_container_client(config: AzureBlobConfig) -> ContainerClient:
    """A ``ContainerClient`` for the configuration: its credential, endpoint, retry policy,
    timeouts and transfer sizes. Makes no request.

    Raises:
        ConfigError: azure-identity is needed but missing, or the SDK refuses a value.
    """
    options: dict[str, Any] = {
        "retry_policy": BackoffRetry(config.retry_total, config.retry_backoff_ms,
                                     config.retry_backoff_max_ms),
        "connection_timeout": config.connection_timeout_ms / 1000.0,
        "read_timeout": config.read_timeout_ms / 1000.0,
        "max_single_get_size": config.download_chunk_size,
        "max_chunk_get_size": config.download_chunk_size,
        # put_object sends at most one block: always as a single Put Blob
        "max_single_put_size": config.block_size + 1,
        "max_block_size": config.block_size,
        "logging_enable": False,
    }
    kind = config.credential_kind
    # the one place the credentials are revealed: handed to the SDK
    try:
        if kind is CredentialKind.CONNECTION_STRING:
            assert config.connection_string is not None
            return ContainerClient.from_connection_string(
                config.connection_string.reveal(), config.container_name, **options)
        credential: Any
        if kind is CredentialKind.SHARED_KEY:
            assert config.account_key is not None
            credential = {"account_name": config.account_name,
                          "account_key": config.account_key.reveal()}
        elif kind is CredentialKind.SAS:
            from azure.core.credentials import AzureSasCredential

            assert config.sas_token is not None
            credential = AzureSasCredential(config.sas_token.reveal())
        else:
            credential = _default_credential()
        return ContainerClient(config.account_url or "", config.container_name,
                               credential=credential, **options)
    except ValueError as exc:  # the SDK's own checks; its text may quote a value
        raise ConfigError(f"the Azure SDK refused the configuration: "
                          f"{Secret.hide(str(exc), config.secrets)}") from None


def _default_credential() -> Any:
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise ConfigError(
            "no azure.connection.string, azure.account.key or azure.sas.token is given, so "
            "DefaultAzureCredential is used, but azure-identity is not installed: "
            "pip install 'kafka-tiers-azure[identity]'", key="azure.account.key") from None
    return DefaultAzureCredential()


class AzureBlobStore(MultipartObjectStore):
    """Objects as block blobs of one container (see the module docstring).

    Thread-safe: the SDK's clients are, and nothing here is shared between calls but them.
    ``put`` is :class:`MultipartObjectStore`'s, with ``azure.upload.concurrency`` blocks in
    flight (:attr:`upload_concurrency`) and at most :data:`MAX_BLOCKS` blocks (:attr:`max_parts`).

    Args:
        config: the checked configuration.
        client: the container client to use (default: made from ``config``); closed by
            :meth:`close`.
    """

    SECRET_KEYS = SECRET_KEYS  # the core hands their values over as Secret
    SUPPORTED_SPI: ClassVar[str] = ">=2.0,<3"
    #: the SDK's clients are thread-safe; large blobs go up as block lists
    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({
        StorageCapability.MULTIPART_UPLOAD, StorageCapability.CONCURRENT_ACCESS})
    max_delete_batch: ClassVar[int] = MAX_BATCH
    #: the SDK's clients are thread-safe, and every put is its own blob (or block list)
    max_concurrent_puts: ClassVar[int] = 4
    max_parts = MAX_BLOCKS
    part_size_setting = BLOCK_SIZE
    upload_thread_name = "kafka-tiers-azure-upload"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AzureBlobStore:
        """Check the ``azure.*`` keys and build the store (no request is made).
        ``azure.prefix`` becomes :attr:`base_prefix`: kafka-tiers nests ``key.prefix`` (which
        the conformance suite sets per test) below it.

        Raises:
            ConfigError: a missing, malformed, conflicting or unknown key (one line naming it;
                never a secret's value).
        """
        prefix = str(config.get(PREFIX, "") or "").strip().strip("/")
        try:
            if prefix:
                validate_key(prefix)
        except RemoteStorageError as exc:
            raise ConfigError(f"{PREFIX}: {exc}", key=PREFIX,
                              expected="/-separated parts of A-Z a-z 0-9 . _ - = + , @ ~"
                              ) from None
        store = cls(AzureBlobConfig.from_config(config))
        store.base_prefix = prefix
        return store

    def __init__(self, config: AzureBlobConfig, client: ContainerClient | None = None) -> None:
        self.config = config
        self.part_size = config.block_size
        self.upload_concurrency = config.upload_concurrency
        self._secrets = config.secrets
        self.container: ContainerClient = client or make_container_client(config)
        self._closed = False
        self._close_lock = threading.Lock()

    # -- errors ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _sdk(self, key: str | None) -> Iterator[None]:
        """Around SDK calls: turn every exception into a kafka-tiers error with a redacted
        message, raised ``from None`` (the SDK's exception text may hold a SAS)."""
        try:
            yield
        except RemoteStorageError:
            raise
        except Exception as exc:
            mapped = self.translate_error(exc, key)
            if mapped is None:  # not the SDK's own type (a ValueError, a socket timeout)
                default = default_translate(exc, key)
                mapped = type(default)(Secret.hide(str(default), self._secrets),
                                       resource=key, retriable=default.retriable)
            raise mapped from None

    def _text(self, exc: BaseException) -> str:
        """The first line of an SDK message, redacted and shortened."""
        message = getattr(exc, "message", None) or str(exc)
        first = str(message).strip().splitlines()[0] if str(message).strip() else ""
        first = Secret.hide(first, self._secrets)
        return first if len(first) <= 300 else first[:297] + "..."

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        """Map an SDK exception:

        - ``BlobNotFound`` (404) -> :class:`RemoteResourceNotFoundError`; a missing container
          is a non-retriable :class:`RemoteStorageError` naming it (not a missing segment);
        - authentication or authorization failures (401, 403) -> non-retriable;
        - connection failures, timeouts, truncated responses, 408, 429, 5xx, ``ServerBusy``
          -> :class:`RetriableRemoteStorageError`;
        - any other ``AzureError`` -> non-retriable :class:`RemoteStorageError`.

        Messages hold the status, the service's error code, its first line redacted, and the
        key; never a credential. Returns None for exceptions that are not the SDK's.
        """
        if not isinstance(exc, AzureError):
            return None
        where = f" ({key})" if key else ""
        status = getattr(exc, "status_code", None)
        code = getattr(exc, "error_code", None)  # a StorageErrorCode (a str enum) or a str
        code = str(getattr(code, "value", code)) if code else None
        detail = f"{status or ''} {code or type(exc).__name__}".strip()
        text = self._text(exc)
        container = self.config.container_name
        if code == "ContainerNotFound":
            return RemoteStorageError(
                f"Azure container {container!r} does not exist (create it, or fix "
                f"azure.container.name){where}", resource=key, retriable=False)
        if isinstance(exc, ResourceNotFoundError) or status == 404:
            return RemoteResourceNotFoundError(f"not found in container {container!r}{where}",
                                               resource=key)
        if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
            return RemoteStorageError(
                f"Azure refused the credentials for container {container!r} ({detail}: {text})"
                f"{where}; check the {self.config.credential_kind.value} settings",
                resource=key, retriable=False)
        if isinstance(exc, ServiceRequestError | ServiceResponseError | IncompleteReadError):
            return RetriableRemoteStorageError(
                f"Azure Blob endpoint unreachable or connection lost ({type(exc).__name__}: "
                f"{text}){where}", resource=key)
        if isinstance(exc, HttpResponseError) and (status in RETRIABLE_STATUS
                                                   or code in RETRIABLE_CODES):
            return RetriableRemoteStorageError(f"Azure Blob is busy or failing ({detail}: "
                                               f"{text}){where}", resource=key)
        return RemoteStorageError(f"Azure Blob error ({detail}: {text}){where}", resource=key,
                                  retriable=False)

    # -- single objects --------------------------------------------------------------------

    def put_object(self, key: str, data: bytes) -> None:
        """Store ``data`` in one Put Blob request (replacing any blob there)."""
        with self._sdk(key):
            self.container.upload_blob(key, data, length=len(data), overwrite=True,
                                       blob_type=BlobType.BLOCKBLOB, max_concurrency=1)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        """Open a blob, or the inclusive range of it, as a stream read in chunks.

        Raises:
            RemoteResourceNotFoundError: no blob under ``key``.
            RetriableRemoteStorageError: the service is unreachable or busy (also while
                reading the stream).
        """
        with self._sdk(key):
            if byte_range is None:
                downloader = self.container.download_blob(key, max_concurrency=1)
            else:
                downloader = self.container.download_blob(
                    key, offset=byte_range.first, length=byte_range.size, max_concurrency=1)
        return io.BufferedReader(_DownloadStream(downloader, lambda: self._sdk(key)),
                                 buffer_size=1 << 16)

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete up to 256 blobs in one Blob Batch request; missing blobs are ignored.

        Raises:
            RemoteStorageError: the batch failed, or a sub-request failed other than with 404
                (the error names the first such key).
        """
        if not keys:
            return
        if len(keys) > MAX_BATCH:
            raise RemoteStorageError(f"{len(keys)} keys in one delete; Azure allows {MAX_BATCH}")
        if len(keys) == 1:
            self._delete_one(keys[0])
            return
        with self._sdk(keys[0]):
            responses = list(self.container.delete_blobs(
                *keys, delete_snapshots="include", raise_on_any_failure=False))
        for blob, response in zip(keys, responses, strict=False):
            status = response.status_code
            if status in (200, 202, 404):
                continue
            reason = getattr(response, "reason", "") or ""
            error_class = (RetriableRemoteStorageError if status in RETRIABLE_STATUS
                           else RemoteStorageError)
            raise error_class(f"Azure Blob delete failed ({status} {reason}) ({blob})",
                              resource=blob)

    def _delete_one(self, key: str) -> None:
        """Delete Blob (with its snapshots); a missing blob is ignored, a missing container
        is not."""
        with self._sdk(key):
            try:
                self.container.delete_blob(key, delete_snapshots="include")
            except ResourceNotFoundError as exc:
                code = getattr(exc, "error_code", None)
                if str(getattr(code, "value", code)) == "ContainerNotFound":
                    raise

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        """Every committed blob whose name starts with ``prefix`` (uncommitted blocks of failed
        uploads are not blobs and never listed)."""
        with self._sdk(prefix or None):
            for blob in self.container.list_blobs(name_starts_with=prefix or None):
                modified = blob.last_modified
                yield ObjectInfo(blob.name, int(blob.size or 0),
                                 int(modified.timestamp() * 1000) if modified else 0)

    # -- block uploads ---------------------------------------------------------------------

    def create_multipart_upload(self, key: str) -> str:
        """A fresh upload id (32 hex digits); nothing is sent."""
        return uuid.uuid4().hex

    def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        """Stage one block (Put Block, with an MD5 of the block checked by the service);
        returns its block id."""
        block = block_id(upload_id, part_number)
        with self._sdk(key):
            self.container.get_blob_client(key).stage_block(
                block, data, length=len(data), validate_content=True)
        return block

    def complete_multipart_upload(self, key: str, upload_id: str, parts: Sequence[str]) -> None:
        """Commit the staged blocks in order (Put Block List): the blob appears whole."""
        with self._sdk(key):
            self.container.get_blob_client(key).commit_block_list(
                [BlobBlock(block_id=p) for p in parts])

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        """Nothing to send: staged blocks that are never committed stay invisible and are
        garbage-collected by the service; a committed blob under ``key`` is untouched."""

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP connections; safe to call more than once."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self.container.close()
        close_credential = getattr(self.container.credential, "close", None)
        if callable(close_credential):  # DefaultAzureCredential holds its own sessions
            close_credential()


class _DownloadStream(io.RawIOBase):
    """A raw stream over a ``StorageStreamDownloader``; SDK errors while reading are
    translated."""

    def __init__(self, downloader: StorageStreamDownloader[bytes],
                 guard: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        self._downloader: StorageStreamDownloader[bytes] | None = downloader
        self._guard = guard

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._downloader is None:
            raise ValueError("read from a closed stream")
        view = memoryview(buffer).cast("B")
        with self._guard():
            chunk = self._downloader.read(len(view))
        n = len(chunk)
        view[:n] = chunk
        return n

    def close(self) -> None:
        self._downloader = None  # the SDK reads each chunk whole: no connection is held open
        super().close()


__all__ = [
    "MAX_BATCH",
    "MAX_BLOCKS",
    "RETRIABLE_CODES",
    "RETRIABLE_STATUS",
    "AzureBlobStore",
    "BackoffRetry",
    "block_id",
    "make_container_client",
]
