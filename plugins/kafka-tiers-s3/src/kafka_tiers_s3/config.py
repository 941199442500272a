"""The S3 plugin's settings: the keys under ``rsm.config.`` (prefix stripped), read and checked.

Key names follow the S3 backend of Aiven's tiered storage for Apache Kafka where it has one
(``s3.bucket.name``, ``s3.region``, ``s3.endpoint.url``, ``s3.path.style.access.enabled``,
``s3.storage.class``, ``s3.multipart.upload.part.size``, ``s3.api.call.timeout``,
``s3.api.call.attempt.timeout``, ``aws.access.key.id``, ``aws.secret.access.key``,
``aws.session.token``, ``aws.certificate.check.enabled``, ``aws.checksum.check.enabled``),
with the same defaults, except that ``s3.region`` may be left to boto3 and the timeouts, left
to the SDK there, default to a 10 s connect and 60 s read timeout here. The others are this
plugin's own: ``s3.prefix``, ``aws.profile``, ``s3.sse.algorithm``, ``s3.sse.kms.key.id``,
``s3.multipart.upload.concurrency``, ``s3.retry.max.attempts``, ``s3.checksum.algorithm``.
``key.prefix`` is read by the object-store level itself.

Every error is a :class:`~kafka_tiers.api.ConfigError` with one line naming the key. The secret
keys (``aws.access.key.id``, ``aws.secret.access.key``, ``aws.session.token``, declared in
:data:`SECRET_KEYS`) are held as :class:`~kafka_tiers.api.Secret`: never repeated in a message, a
``repr`` or a log line, and revealed only to boto3 (:func:`kafka_tiers_s3.store.build_client`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import overload
from urllib.parse import urlsplit

from kafka_tiers.api import ConfigError, Secret

log = logging.getLogger(__name__)

MiB = 1024 * 1024

BUCKET = "s3.bucket.name"
PREFIX = "s3.prefix"
REGION = "s3.region"
ENDPOINT_URL = "s3.endpoint.url"
PATH_STYLE = "s3.path.style.access.enabled"
STORAGE_CLASS = "s3.storage.class"
SSE_ALGORITHM = "s3.sse.algorithm"
SSE_KMS_KEY_ID = "s3.sse.kms.key.id"
PART_SIZE = "s3.multipart.upload.part.size"
UPLOAD_CONCURRENCY = "s3.multipart.upload.concurrency"
API_CALL_TIMEOUT = "s3.api.call.timeout"
API_CALL_ATTEMPT_TIMEOUT = "s3.api.call.attempt.timeout"
MAX_ATTEMPTS = "s3.retry.max.attempts"
ACCESS_KEY_ID = "aws.access.key.id"
SECRET_ACCESS_KEY = "aws.secret.access.key"
SESSION_TOKEN = "aws.session.token"
PROFILE = "aws.profile"
CERTIFICATE_CHECK = "aws.certificate.check.enabled"
CHECKSUM_CHECK = "aws.checksum.check.enabled"
CHECKSUM_ALGORITHM = "s3.checksum.algorithm"

#: Keys whose values are secrets, held as :class:`~kafka_tiers.api.Secret` (the store class
#: declares them as its ``SECRET_KEYS``, so the core wraps them before the plugin sees them).
SECRET_KEYS: frozenset[str] = frozenset({ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN})

#: Every key this plugin reads (``key.prefix`` is the object-store level's).
KNOWN_KEYS: frozenset[str] = frozenset({
    BUCKET, PREFIX, REGION, ENDPOINT_URL, PATH_STYLE, STORAGE_CLASS, SSE_ALGORITHM,
    SSE_KMS_KEY_ID, PART_SIZE, UPLOAD_CONCURRENCY, API_CALL_TIMEOUT, API_CALL_ATTEMPT_TIMEOUT,
    MAX_ATTEMPTS, ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN, PROFILE, CERTIFICATE_CHECK,
    CHECKSUM_CHECK, CHECKSUM_ALGORITHM,
})

#: S3 allows parts of 5 MiB to 5 GiB (all but the last part) and at most 10,000 parts.
PART_SIZE_MIN = 5 * MiB
PART_SIZE_MAX = 5 * 1024 * MiB
PART_SIZE_DEFAULT = 25 * MiB
UPLOAD_CONCURRENCY_DEFAULT = 4
UPLOAD_CONCURRENCY_MAX = 64
MAX_ATTEMPTS_DEFAULT = 3
MAX_ATTEMPTS_MAX = 20
#: Connect and read timeouts (seconds) when ``s3.api.call.attempt.timeout`` is not set.
CONNECT_TIMEOUT_DEFAULT = 10.0
READ_TIMEOUT_DEFAULT = 60.0

#: Server-side encryption algorithms (``x-amz-server-side-encryption``): SSE-S3, SSE-KMS and
#: dual-layer SSE-KMS.
SSE_ALGORITHMS: tuple[str, ...] = ("AES256", "aws:kms", "aws:kms:dsse")
_KMS_ALGORITHMS = frozenset({"aws:kms", "aws:kms:dsse"})
#: Upload checksums (``s3.checksum.algorithm``): every ``PutObject`` and part carries its
#: checksum, which S3 verifies (a corrupted upload fails with ``BadDigest``), and a multipart
#: upload declares it so S3 keeps a composite checksum of the parts. ``CRC32C`` (the default) is
#: the checksum Kafka's record batches use; ``NONE`` sends none, for S3-compatible services
#: without flexible checksums.
CHECKSUM_ALGORITHMS: tuple[str, ...] = ("CRC32C", "CRC32", "NONE")
CHECKSUM_ALGORITHM_DEFAULT = "CRC32C"

#: Storage classes whose objects cannot be read without a restore: a remote tier must be
#: readable at any time, so they are refused.
UNREADABLE_STORAGE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})


@functools.lru_cache(maxsize=1)
def known_storage_classes() -> tuple[str, ...]:
    """The storage classes of botocore's S3 model (``STANDARD``, ``STANDARD_IA``, ...)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("s3")
    return tuple(model.shape_for("StorageClass").enum)


@dataclass(frozen=True, slots=True)
class S3Config:
    """The plugin's validated settings (see the README for each key's meaning).

    The credentials are :class:`~kafka_tiers.api.Secret` (and left out of ``repr``).
    """

    bucket: str
    prefix: str = ""
    region: str | None = None
    endpoint_url: str | None = None
    path_style: bool | None = None
    storage_class: str = "STANDARD"
    sse_algorithm: str | None = None
    sse_kms_key_id: str | None = None
    part_size: int = PART_SIZE_DEFAULT
    upload_concurrency: int = UPLOAD_CONCURRENCY_DEFAULT
    api_call_timeout_ms: int | None = None
    api_call_attempt_timeout_ms: int | None = None
    max_attempts: int = MAX_ATTEMPTS_DEFAULT
    access_key_id: Secret | None = field(default=None, repr=False)
    secret_access_key: Secret | None = field(default=None, repr=False)
    session_token: Secret | None = field(default=None, repr=False)
    profile: str | None = None
    certificate_check: bool = True
    checksum_check: bool = False
    checksum_algorithm: str | None = CHECKSUM_ALGORITHM_DEFAULT

    @property
    def secrets(self) -> tuple[Secret, ...]:
        """The credentials given, to be kept out of every message (their ``repr`` is
        ``<hidden>``; while they live, the core keeps them out of every log record)."""
        return tuple(s for s in (self.access_key_id, self.secret_access_key,
                                 self.session_token) if s)

    @property
    def connect_timeout(self) -> float:
        """Seconds to wait for a connection, per attempt."""
        if self.api_call_attempt_timeout_ms is None:
            return CONNECT_TIMEOUT_DEFAULT
        return self.api_call_attempt_timeout_ms / 1000

    @property
    def read_timeout(self) -> float:
        """Seconds to wait for a response (or the next bytes of one), per attempt."""
        if self.api_call_attempt_timeout_ms is None:
            return READ_TIMEOUT_DEFAULT
        return self.api_call_attempt_timeout_ms / 1000

    @property
    def addressing_style(self) -> str:
        """botocore's ``addressing_style``: ``path``, ``virtual`` or ``auto`` (not set)."""
        if self.path_style is None:
            return "auto"
        return "path" if self.path_style else "virtual"

    @classmethod
    def from_mapping(cls, config: Mapping[str, str | Secret]) -> S3Config:
        """Read and check the plugin's keys; the secret keys may be ``str`` or
        :class:`~kafka_tiers.api.Secret`.

        Raises:
            ConfigError: a missing, malformed or contradictory value; one line naming the key,
                never repeating a secret value.
        """
        get = _Reader(config)
        bucket = get.text(BUCKET)
        if not bucket:
            raise ConfigError(f"{BUCKET} is required: the S3 bucket holding the remote tier",
                              key=BUCKET, expected="a bucket name")
        if not 3 <= len(bucket) <= 255 or any(c.isspace() or c == "/" for c in bucket):
            raise ConfigError(f"invalid value {bucket!r} for {BUCKET}: expected a bucket name "
                              "(3-255 characters, no spaces or '/')", key=BUCKET, value=bucket)
        prefix = _prefix(get.text(PREFIX) or "")
        endpoint_url = get.text(ENDPOINT_URL)
        if endpoint_url is not None:
            parts = urlsplit(endpoint_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"invalid value {endpoint_url!r} for {ENDPOINT_URL}: "
                                  "expected an http:// or https:// URL",
                                  key=ENDPOINT_URL, value=endpoint_url)

        storage_class = (get.text(STORAGE_CLASS) or "STANDARD").upper()
        if storage_class in UNREADABLE_STORAGE_CLASSES:
            raise ConfigError(
                f"{STORAGE_CLASS}={storage_class} is not supported: its objects must be restored "
                "before they can be read, and the remote tier is read at any time (use "
                "GLACIER_IR for archive pricing with instant reads)",
                key=STORAGE_CLASS, value=storage_class)
        if storage_class not in known_storage_classes():
            allowed = ", ".join(c for c in known_storage_classes()
                                if c not in UNREADABLE_STORAGE_CLASSES)
            raise ConfigError(f"invalid value {storage_class!r} for {STORAGE_CLASS}: expected "
                              f"one of {allowed}", key=STORAGE_CLASS, value=storage_class)

        kms_key_id = get.text(SSE_KMS_KEY_ID)
        algorithm = get.text(SSE_ALGORITHM)
        if algorithm is not None and algorithm.lower() == "none":
            algorithm = None
        if algorithm is not None:
            matches = [a for a in SSE_ALGORITHMS if a.lower() == algorithm.lower()]
            if not matches:
                raise ConfigError(f"invalid value {algorithm!r} for {SSE_ALGORITHM}: expected "
                                  f"none, {', '.join(SSE_ALGORITHMS)}", key=SSE_ALGORITHM,
                                  value=algorithm)
            algorithm = matches[0]
        if kms_key_id is not None:
            if algorithm is None:
                algorithm = "aws:kms"
            elif algorithm not in _KMS_ALGORITHMS:
                raise ConfigError(f"{SSE_KMS_KEY_ID} needs {SSE_ALGORITHM}=aws:kms (or "
                                  f"aws:kms:dsse), not {algorithm}", key=SSE_KMS_KEY_ID)

        checksum_algorithm = (get.text(CHECKSUM_ALGORITHM) or CHECKSUM_ALGORITHM_DEFAULT).upper()
        if checksum_algorithm not in CHECKSUM_ALGORITHMS:
            raise ConfigError(f"invalid value {checksum_algorithm!r} for {CHECKSUM_ALGORITHM}: "
                              f"expected one of {', '.join(CHECKSUM_ALGORITHMS)}",
                              key=CHECKSUM_ALGORITHM, value=checksum_algorithm)

        access_key_id = get.secret(ACCESS_KEY_ID)
        secret_access_key = get.secret(SECRET_ACCESS_KEY)
        session_token = get.secret(SESSION_TOKEN)
        profile = get.text(PROFILE)
        if (access_key_id is None) != (secret_access_key is None):
            raise ConfigError(f"{ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} must be given together",
                              key=ACCESS_KEY_ID if access_key_id is None else SECRET_ACCESS_KEY)
        if session_token is not None and access_key_id is None:
            raise ConfigError(f"{SESSION_TOKEN} needs {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY}",
                              key=SESSION_TOKEN)
        if profile is not None and access_key_id is not None:
            raise ConfigError(f"give either {PROFILE} or the static credentials "
                              f"{ACCESS_KEY_ID}/{SECRET_ACCESS_KEY}, not both", key=PROFILE)

        unknown = sorted(k for k in config if k.startswith(("s3.", "aws."))
                         and k not in KNOWN_KEYS)
        if unknown:
            log.warning("ignoring unknown S3 plugin keys: %s", ", ".join(unknown))

        return cls(
            bucket=bucket,
            prefix=prefix,
            region=get.text(REGION),
            endpoint_url=endpoint_url,
            path_style=get.boolean(PATH_STYLE, None),
            storage_class=storage_class,
            sse_algorithm=algorithm,
            sse_kms_key_id=kms_key_id,
            part_size=get.integer(PART_SIZE, PART_SIZE_DEFAULT, PART_SIZE_MIN, PART_SIZE_MAX),
            upload_concurrency=get.integer(UPLOAD_CONCURRENCY, UPLOAD_CONCURRENCY_DEFAULT, 1,
                                           UPLOAD_CONCURRENCY_MAX),
            api_call_timeout_ms=get.integer(API_CALL_TIMEOUT, None, 1, 2**63 - 1),
            api_call_attempt_timeout_ms=get.integer(API_CALL_ATTEMPT_TIMEOUT, None, 1,
                                                    2**63 - 1),
            max_attempts=get.integer(MAX_ATTEMPTS, MAX_ATTEMPTS_DEFAULT, 1, MAX_ATTEMPTS_MAX),
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            session_token=session_token,
            profile=profile,
            certificate_check=bool(get.boolean(CERTIFICATE_CHECK, True)),
            checksum_check=bool(get.boolean(CHECKSUM_CHECK, False)),
            checksum_algorithm=None if checksum_algorithm == "NONE" else checksum_algorithm,
        )


class _Reader:
    """Typed reads of string config values; every error names the key."""

    def __init__(self, config: Mapping[str, str | Secret]) -> None:
        self._config = config

    def text(self, key: str) -> str | None:
        """The stripped value, None when absent or blank."""
        raw = self._config.get(key)
        if raw is None:
            return None
        value = str(raw).strip()
        return value or None

    def secret(self, key: str) -> Secret | None:
        """A secret value (never repeated), None when absent; blank is an error."""
        if key not in self._config:
            return None
        given = Secret.of(self._config[key])
        if given is None or not given.reveal().strip():
            raise ConfigError(f"{key} is empty", key=key, expected="a non-empty value")
        stripped = given.reveal().strip()
        return given if stripped == given.reveal() else Secret(stripped)

    def boolean(self, key: str, default: bool | None) -> bool | None:
        value = self.text(key)
        if value is None:
            return default
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"invalid value {value!r} for {key}: expected true or false",
                          key=key, value=value, expected="true or false")

    @overload
    def integer(self, key: str, default: int, low: int, high: int) -> int: ...

    @overload
    def integer(self, key: str, default: None, low: int, high: int) -> int | None: ...

    def integer(self, key: str, default: int | None, low: int, high: int) -> int | None:
        value = self.text(key)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            expected = (f"an integer >= {low}" if high >= 2**63 - 1
                        else f"an integer from {low} to {high}")
            raise ConfigError(f"invalid value {value!r} for {key}: expected {expected}",
                              key=key, value=value, expected=expected)
        return number


def _prefix(raw: str) -> str:
    prefix = raw.strip().strip("/")
    if not prefix:
        return ""
    for part in prefix.split("/"):
        if part in ("", ".", "..") or any(c.isspace() or ord(c) < 32 for c in part):
            raise ConfigError(f"invalid value {raw!r} for {PREFIX}: expected /-separated "
                              "non-empty parts without spaces, '.' or '..'", key=PREFIX,
                              value=raw)
    return prefix


__all__ = [
    "CHECKSUM_ALGORITHMS",
    "KNOWN_KEYS",
    "PART_SIZE_DEFAULT",
    "PART_SIZE_MAX",
    "PART_SIZE_MIN",
    "SECRET_KEYS",
    "SSE_ALGORITHMS",
    "S3Config",
    "known_storage_classes",
]
