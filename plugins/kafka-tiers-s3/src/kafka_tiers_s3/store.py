"""An S3 bucket (or an S3-compatible service) as a kafka-tiers object store, through boto3.

- ``put``: :meth:`MultipartObjectStore.put <kafka_tiers.api.MultipartObjectStore.put>` on
  this module's part operations: one ``PutObject`` up to ``s3.multipart.upload.part.size``
  bytes; larger objects are streamed in a multipart upload, ``s3.multipart.upload.concurrency``
  parts in flight at once, holding at most concurrency + 1 parts in memory (the part size grows
  when a known length would need more than 10,000 parts). Every request body carries its
  checksum (``s3.checksum.algorithm``, CRC-32C by default, computed here rather than by
  botocore, whose CRC-32C needs the CRT), which S3 verifies on arrival; a multipart upload
  declares the algorithm when it is created, so S3 checks each part and keeps the object's
  composite checksum. A part's tag is ``<ETag>`` or ``<ETag>|<checksum>``. When anything fails
  (a part, reading the local data, completing) the upload is aborted once the parts in flight
  have ended, so no incomplete upload is left behind (S3 keeps, and bills, the parts of an
  upload that is neither completed nor aborted). An abort that fails too (S3 unreachable) is
  remembered (:meth:`S3ObjectStore.abort_failed_upload`) and retried before the next upload
  and at :meth:`S3ObjectStore.close`; what still remains (a crash) is found by
  :meth:`S3ObjectStore.abort_incomplete_uploads`, which the store's garbage hook
  (:meth:`S3ObjectStore.collect_garbage`, called by kafka-tiers' ``collect_orphans``) runs.
- ``get``: ``GetObject``, with ``Range: bytes=first-last`` for a byte range; the body is
  streamed, never buffered whole.
- ``delete_many``: ``DeleteObjects`` in batches of at most 1,000 keys (S3's limit), quiet mode;
  a key that fails to delete fails the call.
- ``list``: ``ListObjectsV2`` through boto3's paginator.

Retries are botocore's own, in ``standard`` mode (``s3.retry.max.attempts`` attempts in total,
with jittered exponential backoff); ``s3.api.call.attempt.timeout`` bounds each attempt's
connect and each read, ``s3.api.call.timeout`` the whole call with its retries (no new attempt
starts once it is spent). Every key is placed under ``s3.prefix`` inside the bucket.
"""

from __future__ import annotations

import base64
import builtins
import io
import logging
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, ClassVar

import crc32c

from kafka_tiers.api import (
    ByteRange,
    ConfigError,
    MultipartObjectStore,
    ObjectInfo,
    RemoteStorageError,
    RetriableRemoteStorageError,
    Secret,
    StorageCapability,
)
from kafka_tiers_s3 import errors
from kafka_tiers_s3.config import PART_SIZE, PROFILE, SECRET_KEYS, S3Config

log = logging.getLogger(__name__)

#: S3 allows at most 10,000 parts in one upload.
MAX_PARTS = 10_000
#: S3 deletes at most 1,000 keys in one ``DeleteObjects`` request.
MAX_DELETE_KEYS = 1000
_USER_AGENT = "kafka-tiers-s3/0.1.0"


def build_client(cfg: S3Config) -> Any:
    """A boto3 S3 client for the settings: credentials from the config when given (static keys
    or ``aws.profile``), else boto3's default chain; botocore ``standard`` retries.

    Raises:
        ConfigError: an unknown ``aws.profile``.
    """
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ProfileNotFound

    try:
        session = boto3.session.Session(
            # the one place the credentials are revealed: handed to boto3
            aws_access_key_id=_reveal(cfg.access_key_id),
            aws_secret_access_key=_reveal(cfg.secret_access_key),
            aws_session_token=_reveal(cfg.session_token),
            region_name=cfg.region,
            profile_name=cfg.profile,
        )
    except ProfileNotFound:
        raise ConfigError(f"{PROFILE}: profile {cfg.profile!r} is not in the AWS config files",
                          key=PROFILE, value=cfg.profile) from None
    client_config = Config(
        s3={"addressing_style": cfg.addressing_style},
        retries={"mode": "standard", "total_max_attempts": cfg.max_attempts},
        connect_timeout=cfg.connect_timeout,
        read_timeout=cfg.read_timeout,
        max_pool_connections=max(10, 2 * cfg.upload_concurrency),
        response_checksum_validation="when_supported" if cfg.checksum_check else "when_required",
        # the store sends its own checksums (s3.checksum.algorithm); with NONE, none at all
        request_checksum_calculation="when_required",
        user_agent_extra=_USER_AGENT,
    )
    if not cfg.certificate_check:
        log.warning("TLS certificate checks of the S3 endpoint are off "
                    "(aws.certificate.check.enabled=false): use this in tests only")
    return session.client("s3", endpoint_url=cfg.endpoint_url, config=client_config,
                          verify=cfg.certificate_check)


def _reveal(secret: Secret | None) -> str | None:
    return None if secret is None else secret.reveal()


class S3ObjectStore(MultipartObjectStore):
    """Objects in one bucket under ``s3.prefix``; thread-safe (one boto3 client).

    Keys given to and returned by the store are relative to ``s3.prefix``.

    Args:
        cfg: the plugin's settings.
        client: a boto3 S3 client (default: :func:`build_client`).

    Attributes:
        bucket: the bucket.
        prefix: ``s3.prefix`` without surrounding slashes ("" for none).
        part_size: bytes per part of a multipart upload (``s3.multipart.upload.part.size``;
            grown by :meth:`part_size_for` for objects that would need more than 10,000).
        upload_concurrency: parts of one upload in flight at once
            (``s3.multipart.upload.concurrency``).
        list_page_size: keys per ``ListObjectsV2`` page (S3's maximum, 1,000, by default).
    """

    SECRET_KEYS = SECRET_KEYS  # the core hands their values over as Secret
    SUPPORTED_SPI: ClassVar[str] = ">=2.0,<3"
    #: one thread-safe boto3 client serves every call; large objects go up in parts
    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({
        StorageCapability.MULTIPART_UPLOAD, StorageCapability.CONCURRENT_ACCESS})
    max_delete_batch: ClassVar[int] = MAX_DELETE_KEYS
    #: boto3 clients are thread-safe and every put is its own request or upload: the small
    #: objects of a segment copy go up at once (after its log)
    max_concurrent_puts: ClassVar[int] = 4
    max_parts = MAX_PARTS
    part_size_setting = PART_SIZE
    upload_thread_name = "kt-s3-upload"

    def __init__(self, cfg: S3Config, client: Any | None = None) -> None:
        self.config = cfg
        self.bucket = cfg.bucket
        self.prefix = cfg.prefix
        self.part_size = cfg.part_size
        self.upload_concurrency = cfg.upload_concurrency
        self.list_page_size = MAX_DELETE_KEYS
        self._secrets = cfg.secrets
        self._pending_aborts: list[tuple[str, str]] = []
        self._pending_lock = threading.Lock()
        self._call_clock = threading.local()  # the deadline of this thread's call in progress
        self.client = client if client is not None else build_client(cfg)
        self._write_args: dict[str, str] = {"StorageClass": cfg.storage_class}
        if cfg.sse_algorithm is not None:
            self._write_args["ServerSideEncryption"] = cfg.sse_algorithm
        if cfg.sse_kms_key_id is not None:
            self._write_args["SSEKMSKeyId"] = cfg.sse_kms_key_id
        self.checksum_algorithm = cfg.checksum_algorithm
        if cfg.api_call_timeout_ms is not None:
            events = self.client.meta.events
            events.register("before-call.s3", self._start_call_clock)
            events.register("before-send.s3", self._check_call_clock)
            events.register("after-call.s3", self._stop_call_clock)
            events.register("after-call-error.s3", self._stop_call_clock)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> S3ObjectStore:
        """Read the ``s3.*`` / ``aws.*`` keys and build the store (no request is sent yet).

        Raises:
            ConfigError: a missing, malformed or contradictory setting (one line naming the
                key, never a secret value).
        """
        return cls(S3Config.from_mapping(config))

    def __repr__(self) -> str:
        return (f"S3ObjectStore(bucket={self.bucket!r}, prefix={self.prefix!r}, "
                f"part_size={self.part_size})")

    # -- keys ----------------------------------------------------------------------------------

    def full_key(self, key: str) -> str:
        """The key inside the bucket: ``<s3.prefix>/<key>`` (``key`` when there is no prefix)."""
        return f"{self.prefix}/{key}" if self.prefix else key

    def _relative(self, full: str) -> str:
        return full[len(self.prefix) + 1:] if self.prefix else full

    # -- the s3.api.call.timeout budget ------------------------------------------------------

    # botocore sends every attempt of a call on the calling thread, and its prepared requests do
    # not carry the call's context in every version (1.43 has none): the deadline of the call
    # in progress is kept per thread as well.

    def _start_call_clock(self, context: dict[str, Any], **_: Any) -> None:
        deadline = time.monotonic() + (self.config.api_call_timeout_ms or 0) / 1000
        context["kt_deadline"] = deadline
        self._call_clock.deadline = deadline

    def _stop_call_clock(self, **_: Any) -> None:
        self._call_clock.deadline = None

    def _check_call_clock(self, request: Any, **_: Any) -> None:
        deadline = (getattr(request, "context", None) or {}).get("kt_deadline")
        if deadline is None:
            deadline = getattr(self._call_clock, "deadline", None)
        if deadline is not None and time.monotonic() > deadline:
            # raised inside botocore's send: not retryable, so botocore gives up at once
            raise errors.CallTimeoutError("s3.api.call.timeout spent; no further attempt")

    # -- single objects ------------------------------------------------------------------------

    def checksum_of(self, data: bytes) -> str | None:
        """The base64 checksum of a request body in ``s3.checksum.algorithm`` (S3's
        ``x-amz-checksum-*`` form: the 4 big-endian bytes of the CRC), None without one."""
        if self.checksum_algorithm is None:
            return None
        value = crc32c.crc32c(data) if self.checksum_algorithm == "CRC32C" else zlib.crc32(data)
        return base64.b64encode(value.to_bytes(4, "big")).decode("ascii")

    def _checksum_args(self, checksum: str | None) -> dict[str, str]:
        if checksum is None or self.checksum_algorithm is None:
            return {}
        return {"ChecksumAlgorithm": self.checksum_algorithm,
                f"Checksum{self.checksum_algorithm}": checksum}

    def put_object(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.full_key(key), Body=data,
                               **self._write_args, **self._checksum_args(self.checksum_of(data)))

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self.full_key(key)}
        if byte_range is not None:
            args["Range"] = str(byte_range)  # "bytes=first-last", inclusive like S3's
        response = self.client.get_object(**args)
        return _Body(response["Body"])  # type: ignore[return-value]  # unbuffered RawIOBase

    def delete_many(self, keys: Sequence[str]) -> None:
        keys = list(dict.fromkeys(keys))
        for start in range(0, len(keys), MAX_DELETE_KEYS):
            batch = keys[start:start + MAX_DELETE_KEYS]
            response = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self.full_key(k)} for k in batch], "Quiet": True})
            failed = [e for e in response.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if failed:
                raise self._delete_error(failed)

    def _delete_error(self, failed: list[dict[str, Any]]) -> RemoteStorageError:
        codes = sorted({str(e.get("Code")) for e in failed})
        sample = ", ".join(str(e.get("Key")) for e in failed[:3])
        text = (f"S3 DeleteObjects in s3://{self.bucket} failed for {len(failed)} keys "
                f"({', '.join(codes)}), e.g. {sample}")
        transient = errors.THROTTLING_CODES | errors.TRANSIENT_CODES
        if all(code in transient for code in codes):
            return RetriableRemoteStorageError(text, resource=str(failed[0].get("Key")))
        if any(code in errors.ACCESS_CODES for code in codes):
            text = "access denied: " + text
        return RemoteStorageError(text, resource=str(failed[0].get("Key")), retriable=False)

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        return self._list(prefix)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        full = self.full_key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        paginator = self.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=full,
                                   PaginationConfig={"PageSize": self.list_page_size})
        for page in pages:
            for item in page.get("Contents", []):
                yield ObjectInfo(self._relative(item["Key"]), int(item["Size"]),
                                 int(item["LastModified"].timestamp() * 1000))

    # -- multipart uploads ---------------------------------------------------------------------

    def create_multipart_upload(self, key: str) -> str:
        args = dict(self._write_args)
        if self.checksum_algorithm is not None:
            args["ChecksumAlgorithm"] = self.checksum_algorithm
        response = self.client.create_multipart_upload(Bucket=self.bucket,
                                                       Key=self.full_key(key), **args)
        return str(response["UploadId"])

    def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        """Upload one part with its checksum; returns its tag, ``<ETag>`` or
        ``<ETag>|<checksum>`` (what :meth:`complete_multipart_upload` takes back)."""
        checksum = self.checksum_of(data)
        response = self.client.upload_part(Bucket=self.bucket, Key=self.full_key(key),
                                           UploadId=upload_id, PartNumber=part_number, Body=data,
                                           **self._checksum_args(checksum))
        etag = str(response["ETag"])
        return etag if checksum is None else f"{etag}|{checksum}"

    def complete_multipart_upload(self, key: str, upload_id: str, parts: Sequence[str]) -> None:
        listed: list[dict[str, Any]] = []
        for number, tag in enumerate(parts, start=1):
            etag, _, checksum = tag.partition("|")
            part: dict[str, Any] = {"ETag": etag, "PartNumber": number}
            if checksum and self.checksum_algorithm is not None:
                part[f"Checksum{self.checksum_algorithm}"] = checksum
            listed.append(part)
        self.client.complete_multipart_upload(
            Bucket=self.bucket, Key=self.full_key(key), UploadId=upload_id,
            MultipartUpload={"Parts": listed})

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.full_key(key),
                                           UploadId=upload_id)

    def abort_failed_upload(self, key: str, upload_id: str) -> None:
        """Abort a failed (or abandoned) upload, logging no traceback when that fails too:
        an upload S3 no longer knows (``NoSuchUpload``) is gone already; any other failure (S3
        unreachable) is remembered, and the abort retried before the next upload and at
        :meth:`close`."""
        try:
            self.abort_multipart_upload(key, upload_id)
        except Exception as exc:  # the original failure matters more
            if self._gone(exc):
                return
            with self._pending_lock:
                self._pending_aborts.append((key, upload_id))
            reason = self.translate_error(exc, key) or exc
            log.warning("could not abort the multipart upload of s3://%s/%s (%s); retrying "
                        "before the next upload", self.bucket, self.full_key(key), reason)

    @staticmethod
    def _gone(exc: BaseException) -> bool:
        response = getattr(exc, "response", None) or {}
        return (response.get("Error") or {}).get("Code") == "NoSuchUpload"

    def retry_pending_aborts(self) -> int:
        """Abort again the uploads whose abort failed earlier; returns how many are still
        pending (S3 still unreachable)."""
        with self._pending_lock:
            pending, self._pending_aborts = self._pending_aborts, []
        still: list[tuple[str, str]] = []
        for key, upload_id in pending:
            try:
                self.abort_multipart_upload(key, upload_id)
            except Exception as exc:
                if not self._gone(exc):
                    still.append((key, upload_id))
        if still:
            with self._pending_lock:
                self._pending_aborts.extend(still)
        elif pending:
            log.info("aborted %d multipart uploads left by failed copies", len(pending))
        return len(still)

    @property
    def pending_aborts(self) -> int:
        """How many failed uploads still wait for their abort."""
        with self._pending_lock:
            return len(self._pending_aborts)

    def abort_incomplete_uploads(self, prefix: str, initiated_before_ms: int, *,
                                 dry_run: bool = False) -> builtins.list[str]:
        """Abort the multipart uploads under ``prefix`` (relative to ``s3.prefix``) started
        before ``initiated_before_ms`` (epoch milliseconds): the leftovers of a process that
        died mid-upload. Returns their keys (relative), sorted."""
        full = self.full_key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        paginator = self.client.get_paginator("list_multipart_uploads")
        stale: list[tuple[str, str]] = []
        for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
            for upload in page.get("Uploads", []):
                if int(upload["Initiated"].timestamp() * 1000) <= initiated_before_ms:
                    stale.append((self._relative(upload["Key"]), upload["UploadId"]))
        if not dry_run:
            for key, upload_id in stale:
                self.abort_failed_upload(key, upload_id)
        return sorted(key for key, _ in stale)

    def collect_garbage(self, prefix: str, older_than_ms: int, dry_run: bool = False
                        ) -> builtins.list[str]:
        """The garbage hook: abort the incomplete multipart uploads under ``prefix`` started
        before ``older_than_ms`` (a copy that died mid-upload leaves one; S3 bills its parts
        until it is aborted). Returns their keys, sorted; ``dry_run`` aborts nothing."""
        return self.abort_incomplete_uploads(prefix, older_than_ms, dry_run=dry_run)

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        """Store the stream (see :meth:`MultipartObjectStore.put`): one request for small
        objects, else a multipart upload with :attr:`upload_concurrency` parts in flight,
        aborted when anything fails. The aborts that failed earlier are retried first.

        Returns:
            The number of bytes stored.
        """
        if self._pending_aborts:
            self.retry_pending_aborts()
        return super().put(key, data, length)

    # -- errors and lifecycle ------------------------------------------------------------------

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        full = self.full_key(key) if key else (self.prefix or None)
        return errors.translate(exc, bucket=self.bucket, key=full, secrets=self._secrets)

    def close(self) -> None:
        if self.client is not None and self._pending_aborts:
            left = self.retry_pending_aborts()
            if left:
                log.warning("%d multipart uploads in s3://%s could not be aborted; the next "
                            "collect_orphans (or a bucket lifecycle rule for incomplete "
                            "uploads) removes them", left, self.bucket)
        client, self.client = self.client, None
        if client is not None:
            client.close()


class _Body(io.RawIOBase):
    """A ``GetObject`` body as a binary stream; closing it releases the connection."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        chunk = self._body.read(len(view))
        n = len(chunk)
        view[:n] = chunk
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._body.close()
            finally:
                super().close()



__all__ = ["MAX_DELETE_KEYS", "MAX_PARTS", "S3ObjectStore", "build_client"]
