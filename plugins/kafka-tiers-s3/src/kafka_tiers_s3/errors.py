"""botocore's exceptions as kafka-tiers storage errors.

:func:`translate` maps one exception (after botocore's own retries):

- 404 ``NoSuchKey`` / ``NotFound`` / ``NoSuchUpload``: :class:`RemoteResourceNotFoundError`;
- 404 ``NoSuchBucket``: a non-retriable :class:`RemoteStorageError` (a configuration problem,
  never mistaken for a missing segment);
- throttling (``SlowDown``, ``Throttling``, HTTP 429, ...), any 5xx, ``RequestTimeout``,
  ``OperationAborted``: :class:`RetriableRemoteStorageError`;
- 403, ``AccessDenied``, ``InvalidAccessKeyId``, ``SignatureDoesNotMatch``, ``ExpiredToken``,
  ``InvalidObjectState``, KMS refusals: a non-retriable :class:`RemoteStorageError` whose
  message starts with "access denied" and says what to check;
- refused, reset or closed connections, connect and read timeouts, a body cut short, the
  ``s3.api.call.timeout`` budget spent: :class:`RetriableRemoteStorageError`;
- ``BadDigest`` and the other checksum mismatches (the body S3 received is not the one sent,
  see ``s3.checksum.algorithm``): :class:`RetriableRemoteStorageError` (the retry sends it
  again);
- a service refusing the checksum headers (an S3-compatible store without flexible
  checksums): a non-retriable :class:`RemoteStorageError` saying to set
  ``s3.checksum.algorithm=NONE``;
- no credentials, TLS certificate errors, invalid parameters: non-retriable
  :class:`RemoteStorageError`.

Messages name the operation, the bucket and the key, the S3 error code and HTTP status; they
never carry a credential (the value of every live :class:`~kafka_tiers.api.Secret` is replaced by
``<hidden>``). botocore's own DEBUG lines (request headers with the session token and the access
key id) are kept clean by the same type: while a :class:`~kafka_tiers.api.Secret` lives, no log
record of the process carries its value.
"""

from __future__ import annotations

from collections.abc import Iterable

from botocore import exceptions as bx

from kafka_tiers.api import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
    Secret,
)

NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404", "NoSuchUpload"})
THROTTLING_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestThrottledException", "TooManyRequestsException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "LimitExceededException", "ProvisionedThroughputExceededException",
})
TRANSIENT_CODES = frozenset({
    "InternalError", "ServiceUnavailable", "RequestTimeout", "RequestTimeoutException",
    "PriorRequestNotComplete", "OperationAborted", "ServerBusy",
})
#: The body S3 received does not match its checksum (corrupted on the way): send it again.
DIGEST_CODES = frozenset({"BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch",
                          "XAmzContentSHA256Mismatch"})
#: Codes with which a service refuses a request it does not understand.
UNSUPPORTED_CODES = frozenset({"InvalidArgument", "InvalidRequest", "NotImplemented"})
ACCESS_CODES = frozenset({
    "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccountProblem",
    "AllAccessDisabled", "InvalidToken", "ExpiredToken", "TokenRefreshRequired",
    "InvalidSecurity", "InvalidObjectState", "RequestTimeTooSkewed", "KMS.DisabledException",
    "KMS.NotFoundException", "KMS.KMSInvalidStateException", "KMS.AccessDeniedException",
    "UnauthorizedAccess", "Forbidden", "403",
})


class CallTimeoutError(Exception):
    """An S3 call spent its ``s3.api.call.timeout`` budget: no further attempt was started."""


def translate(exc: BaseException, *, bucket: str, key: str | None,
              secrets: Iterable[Secret | str] = ()) -> RemoteStorageError | None:
    """Map a botocore (or urllib3) exception to a kafka-tiers storage error.

    Args:
        exc: the exception.
        bucket: the bucket the call was about.
        key: the full object key (or prefix) it was about, if any.
        secrets: secrets never to show (besides every live one).

    Returns:
        The error, or None for an exception that is not the S3 client's (the object-store
        level's default mapping applies then).
    """
    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    hidden = tuple(s if isinstance(s, Secret) else Secret(s) for s in secrets if s)

    def scrub(text: str) -> str:
        return Secret.hide(text, hidden)

    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error", {}) or {}
        meta = exc.response.get("ResponseMetadata", {}) or {}
        code = str(error.get("Code") or "")
        status = int(meta.get("HTTPStatusCode") or 0)
        server_message = str(error.get("Message") or "").strip()
        operation = getattr(exc, "operation_name", None) or "request"
        detail = f"{code or 'error'}, HTTP {status or '?'}"
        if server_message and server_message != code:
            detail += f": {server_message[:200]}"
        text = scrub(f"S3 {operation} of {where} failed ({detail})")
        if code == "NoSuchBucket":
            return RemoteStorageError(
                scrub(f"bucket {bucket!r} does not exist (S3 {operation}, HTTP {status}): check "
                      "s3.bucket.name, s3.region and s3.endpoint.url"),
                resource=key, retriable=False)
        if code in NOT_FOUND_CODES or (status == 404 and code not in ACCESS_CODES):
            return RemoteResourceNotFoundError(text, resource=key)
        if code in DIGEST_CODES:
            return RetriableRemoteStorageError(
                f"{text}; the data was damaged on the way and is sent again", resource=key)
        if code in UNSUPPORTED_CODES and "checksum" in server_message.lower():
            return RemoteStorageError(
                f"{text}; this service does not take the upload checksums: set "
                "s3.checksum.algorithm=NONE (or CRC32)", resource=key, retriable=False)
        if code in THROTTLING_CODES or status == 429:
            return RetriableRemoteStorageError(f"throttled: {text}", resource=key)
        if code in TRANSIENT_CODES or status >= 500:
            return RetriableRemoteStorageError(text, resource=key)
        if code in ACCESS_CODES or code.startswith("KMS.") or status == 403:
            return RemoteStorageError(
                f"access denied: {text}; check the credentials (aws.access.key.id, "
                "aws.profile or the AWS default chain) and the bucket and KMS key policies",
                resource=key, retriable=False)
        return RemoteStorageError(text, resource=key, retriable=False)
    if isinstance(exc, CallTimeoutError):
        return RetriableRemoteStorageError(scrub(f"S3 call about {where}: {exc}"), resource=key)
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError
                  | bx.CredentialRetrievalError):
        return RemoteStorageError(
            scrub(f"no usable AWS credentials for {where} ({type(exc).__name__}): give "
                  "aws.access.key.id and aws.secret.access.key, or aws.profile, or set up the "
                  "AWS default chain (environment, shared files, instance role)"),
            resource=key, retriable=False)
    if isinstance(exc, bx.SSLError):
        return RemoteStorageError(
            scrub(f"TLS error talking to S3 about {where}: {exc} (for a test endpoint with a "
                  "self-signed certificate, aws.certificate.check.enabled=false)"),
            resource=key, retriable=False)
    if isinstance(exc, bx.ConnectionError | bx.HTTPClientError | bx.ResponseStreamingError
                  | bx.IncompleteReadError):
        return RetriableRemoteStorageError(
            scrub(f"S3 unreachable or the connection failed about {where}: "
                  f"{type(exc).__name__}: {exc}"), resource=key)
    if isinstance(exc, bx.ParamValidationError):
        return RemoteStorageError(scrub(f"invalid S3 request about {where}: {exc}"),
                                  resource=key, retriable=False)
    try:  # raw urllib3 errors surface while a response body is read
        from urllib3 import exceptions as ux
    except ImportError:  # pragma: no cover - urllib3 comes with botocore
        return None
    if isinstance(exc, ux.ProtocolError | ux.ReadTimeoutError | ux.TimeoutError):
        return RetriableRemoteStorageError(
            scrub(f"S3 connection failed while reading {where}: {type(exc).__name__}: {exc}"),
            resource=key)
    if isinstance(exc, bx.BotoCoreError):
        return RemoteStorageError(scrub(f"S3 client error about {where}: "
                                        f"{type(exc).__name__}: {exc}"),
                                  resource=key, retriable=False)
    return None


__all__ = [
    "CallTimeoutError",
    "translate",
]
