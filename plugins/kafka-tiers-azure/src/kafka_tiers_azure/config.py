"""The plugin's configuration: the ``azure.*`` keys (under ``rsm.config.`` in
``server.properties``), read and checked once into a frozen :class:`AzureBlobConfig`.

Key names follow Aiven's tiered storage for Apache Kafka where it has one (``azure.container.name``,
``azure.account.name``, ``azure.account.key``, ``azure.sas.token``, ``azure.connection.string``,
``azure.endpoint.url``, ``azure.upload.block.size``), so a cluster moving between the two keeps
its settings.

Credentials, exactly one way:

- ``azure.connection.string`` alone (it carries the endpoint and the key or SAS);
- ``azure.account.name`` + ``azure.account.key`` (shared key);
- ``azure.sas.token`` with ``azure.account.name`` or ``azure.endpoint.url``;
- only ``azure.account.name`` or ``azure.endpoint.url``: ``DefaultAzureCredential`` from
  ``azure-identity`` (``pip install 'kafka-tiers-azure[identity]'``).

Every error is a :class:`~kafka_tiers.api.ConfigError` of one line naming the key. The values of
``azure.connection.string``, ``azure.account.key`` and ``azure.sas.token`` (:data:`SECRET_KEYS`)
are held as :class:`~kafka_tiers.api.Secret`, with the parts that are secrets on their own (a
SAS's ``sig``, a connection string's ``AccountKey`` and ``SharedAccessSignature``): never
repeated in a message, a ``repr`` or a log line, and revealed only to the SDK
(:func:`kafka_tiers_azure.store.make_container_client`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from urllib.parse import urlsplit

from kafka_tiers.api import ConfigError, Secret

KIB = 1024
MIB = 1024 * KIB

CONTAINER = "azure.container.name"
PREFIX = "azure.prefix"
CONNECTION_STRING = "azure.connection.string"
ACCOUNT_NAME = "azure.account.name"
ACCOUNT_KEY = "azure.account.key"
SAS_TOKEN = "azure.sas.token"
ENDPOINT_URL = "azure.endpoint.url"
BLOCK_SIZE = "azure.upload.block.size"
CONCURRENCY = "azure.upload.concurrency"
DOWNLOAD_CHUNK = "azure.download.chunk.size"
RETRY_TOTAL = "azure.retry.total"
RETRY_BACKOFF = "azure.retry.backoff.ms"
RETRY_BACKOFF_MAX = "azure.retry.backoff.max.ms"
CONNECT_TIMEOUT = "azure.connection.timeout.ms"
READ_TIMEOUT = "azure.read.timeout.ms"

#: Keys whose values are secrets, held as :class:`~kafka_tiers.api.Secret` (the store class
#: declares them as its ``SECRET_KEYS``, so the core wraps them before the plugin sees them).
SECRET_KEYS: frozenset[str] = frozenset({CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN})

#: (key, default, minimum, maximum) of every integer key.
_INTS: dict[str, tuple[int, int, int]] = {
    # Azure: a block is at most 4000 MiB, a blob at most 50,000 blocks
    BLOCK_SIZE: (8 * MIB, 64 * KIB, 4000 * MIB),
    CONCURRENCY: (4, 1, 64),
    DOWNLOAD_CHUNK: (4 * MIB, 64 * KIB, 256 * MIB),
    RETRY_TOTAL: (3, 0, 20),
    RETRY_BACKOFF: (500, 0, 600_000),
    RETRY_BACKOFF_MAX: (30_000, 0, 3_600_000),
    CONNECT_TIMEOUT: (10_000, 100, 600_000),
    READ_TIMEOUT: (60_000, 100, 3_600_000),
}

#: Every ``azure.*`` key the plugin reads.
KNOWN_KEYS: frozenset[str] = frozenset(
    {CONTAINER, PREFIX, CONNECTION_STRING, ACCOUNT_NAME, ACCOUNT_KEY, SAS_TOKEN, ENDPOINT_URL,
     *_INTS})

# Azure's rule: 3-63 of a-z 0-9 -, starting with a letter or digit, no "--", no trailing "-"
_CONTAINER_NAME = re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]|\$root")
_ACCOUNT_NAME = re.compile(r"[a-z0-9]{3,24}")


class CredentialKind(Enum):
    """How the plugin authenticates."""

    CONNECTION_STRING = "connection-string"
    SHARED_KEY = "shared-key"
    SAS = "sas"
    DEFAULT_CREDENTIAL = "default-credential"


@dataclass(frozen=True)
class AzureBlobConfig:
    """The checked configuration (see the module docstring and the README's table).

    The credentials are :class:`~kafka_tiers.api.Secret` (and left out of ``repr``).
    """

    container_name: str
    prefix: str = ""
    credential_kind: CredentialKind = CredentialKind.CONNECTION_STRING
    connection_string: Secret | None = field(default=None, repr=False)
    account_name: str | None = None
    account_key: Secret | None = field(default=None, repr=False)
    sas_token: Secret | None = field(default=None, repr=False)
    endpoint_url: str | None = None
    block_size: int = _INTS[BLOCK_SIZE][0]
    upload_concurrency: int = _INTS[CONCURRENCY][0]
    download_chunk_size: int = _INTS[DOWNLOAD_CHUNK][0]
    retry_total: int = _INTS[RETRY_TOTAL][0]
    retry_backoff_ms: int = _INTS[RETRY_BACKOFF][0]
    retry_backoff_max_ms: int = _INTS[RETRY_BACKOFF_MAX][0]
    connection_timeout_ms: int = _INTS[CONNECT_TIMEOUT][0]
    read_timeout_ms: int = _INTS[READ_TIMEOUT][0]

    @property
    def account_url(self) -> str | None:
        """The blob endpoint: ``azure.endpoint.url``, else
        ``https://<account>.blob.core.windows.net`` (None with a connection string)."""
        if self.endpoint_url:
            return self.endpoint_url
        if self.account_name:
            return f"https://{self.account_name}.blob.core.windows.net"
        return None

    @property
    def secrets(self) -> tuple[Secret, ...]:
        """The credentials given (each with its secret parts: the key or SAS inside a
        connection string, a SAS's signature), to be kept out of every message."""
        return tuple(s for s in (self.connection_string, self.account_key, self.sas_token)
                     if s is not None)

    @classmethod
    def from_config(cls, config: Mapping[str, str | Secret]) -> AzureBlobConfig:
        """Read and check the plugin's keys (other keys, such as ``key.prefix``, are ignored);
        the secret keys may be ``str`` or :class:`~kafka_tiers.api.Secret`.

        Raises:
            ConfigError: a missing, malformed, conflicting or unknown ``azure.*`` key.
        """
        for key in config:
            if key.startswith("azure.") and key not in KNOWN_KEYS:
                raise ConfigError(f"unknown key {key}; known keys: "
                                  f"{', '.join(sorted(KNOWN_KEYS))}", key=key)
        # secrets as Secret from here on, with their parts, before any check can fail
        secrets = {k: _secret(config[k]) for k in SECRET_KEYS if k in config}
        text = {k: str(v).strip() for k, v in config.items()
                if k in KNOWN_KEYS and k not in SECRET_KEYS}

        def given(key: str) -> str | None:
            return text.get(key) or None

        def given_secret(key: str) -> Secret | None:
            value = secrets.get(key)
            return value if value else None

        container = given(CONTAINER)
        if container is None:
            raise ConfigError(f"{CONTAINER} is required: the container holding the remote tier",
                              key=CONTAINER, expected="a container name")
        if not _CONTAINER_NAME.fullmatch(container):
            raise ConfigError(
                f"invalid value {container!r} for {CONTAINER}: expected 3-63 characters of "
                "a-z 0-9 - starting and ending with a letter or digit, without '--'",
                key=CONTAINER, value=container, expected="an Azure container name")
        connection_string = given_secret(CONNECTION_STRING)
        account_name = given(ACCOUNT_NAME)
        account_key = given_secret(ACCOUNT_KEY)
        sas_token = given_secret(SAS_TOKEN)
        endpoint = given(ENDPOINT_URL)
        if connection_string is not None:
            for other in (ACCOUNT_NAME, ACCOUNT_KEY, SAS_TOKEN, ENDPOINT_URL):
                if given(other) is not None or given_secret(other) is not None:
                    raise ConfigError(f"{CONNECTION_STRING} cannot be set together with {other} "
                                      "(the connection string carries the account, endpoint "
                                      "and credential)", key=other)
            _check_connection_string(connection_string)
            kind = CredentialKind.CONNECTION_STRING
        else:
            if account_name is None and endpoint is None:
                raise ConfigError(
                    f"one of {CONNECTION_STRING}, {ACCOUNT_NAME} or {ENDPOINT_URL} is required",
                    key=ACCOUNT_NAME)
            if account_name is not None and not _ACCOUNT_NAME.fullmatch(account_name):
                raise ConfigError(
                    f"invalid value {account_name!r} for {ACCOUNT_NAME}: expected 3-24 "
                    "characters of a-z 0-9", key=ACCOUNT_NAME, value=account_name)
            if endpoint is not None:
                endpoint = _check_endpoint(endpoint)
            if account_key is not None and sas_token is not None:
                raise ConfigError(f"{ACCOUNT_KEY} cannot be set together with {SAS_TOKEN}: "
                                  "give one credential", key=SAS_TOKEN)
            if account_key is not None:
                if account_name is None:
                    raise ConfigError(f"{ACCOUNT_KEY} needs {ACCOUNT_NAME}", key=ACCOUNT_NAME)
                try:
                    base64.b64decode(account_key.reveal(), validate=True)
                except (binascii.Error, ValueError):
                    raise ConfigError(f"{ACCOUNT_KEY} is not valid base64 (the value is not "
                                      "shown)", key=ACCOUNT_KEY,
                                      expected="the account's base64 access key") from None
                kind = CredentialKind.SHARED_KEY
            elif sas_token is not None:
                if sas_token.reveal().startswith("?"):
                    sas_token = _secret(sas_token.reveal().lstrip("?"))
                if "sig=" not in sas_token.reveal():
                    raise ConfigError(f"{SAS_TOKEN} has no sig= parameter (the value is not "
                                      "shown)", key=SAS_TOKEN,
                                      expected="a SAS token such as sv=...&sig=...")
                kind = CredentialKind.SAS
            else:
                kind = CredentialKind.DEFAULT_CREDENTIAL
        ints = {key: _int(text, key) for key in _INTS}
        if ints[RETRY_BACKOFF_MAX] < ints[RETRY_BACKOFF]:
            raise ConfigError(f"{RETRY_BACKOFF_MAX} ({ints[RETRY_BACKOFF_MAX]}) must be at least "
                              f"{RETRY_BACKOFF} ({ints[RETRY_BACKOFF]})", key=RETRY_BACKOFF_MAX,
                              value=ints[RETRY_BACKOFF_MAX])
        return cls(
            container_name=container,
            prefix=text.get(PREFIX, ""),
            credential_kind=kind,
            connection_string=connection_string,
            account_name=account_name,
            account_key=account_key,
            sas_token=sas_token,
            endpoint_url=endpoint,
            block_size=ints[BLOCK_SIZE],
            upload_concurrency=ints[CONCURRENCY],
            download_chunk_size=ints[DOWNLOAD_CHUNK],
            retry_total=ints[RETRY_TOTAL],
            retry_backoff_ms=ints[RETRY_BACKOFF],
            retry_backoff_max_ms=ints[RETRY_BACKOFF_MAX],
            connection_timeout_ms=ints[CONNECT_TIMEOUT],
            read_timeout_ms=ints[READ_TIMEOUT],
        )


def _secret(value: str | Secret) -> Secret:
    """A credential as a :class:`Secret` of its stripped text, with the parts that are
    secrets on their own: the ``sig`` of a SAS, the ``AccountKey`` and
    ``SharedAccessSignature`` (and its ``sig``) of a connection string."""
    text = (value.reveal() if isinstance(value, Secret) else str(value)).strip()
    parts: list[str] = []
    for item in text.replace("?", "&").replace(";", "&").split("&"):
        name, sep, val = item.partition("=")
        if sep and val and name.strip().lower() in ("sig", "accountkey",
                                                    "sharedaccesssignature"):
            parts.append(val.strip())
    if "sharedaccesssignature=" in text.lower():  # the SAS inside a connection string
        sas = text[text.lower().index("sharedaccesssignature=") + 22:].split(";")[0]
        parts.append(sas.strip())
    return Secret(text, parts=parts)


def _int(text: Mapping[str, str], key: str) -> int:
    default, low, high = _INTS[key]
    raw = text.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise ConfigError(f"invalid value {raw!r} for {key}: expected an integer from {low} "
                          f"to {high}", key=key, value=raw,
                          expected=f"an integer from {low} to {high}")
    return value


def _check_connection_string(secret: Secret) -> None:
    parts = {}
    for part in secret.reveal().split(";"):
        if not part.strip():
            continue
        name, sep, val = part.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{CONNECTION_STRING} is malformed: expected Name=Value pairs "
                              "separated by ';' (the value is not shown)", key=CONNECTION_STRING)
        parts[name.strip().lower()] = val
    if "accountname" not in parts and "blobendpoint" not in parts:
        raise ConfigError(f"{CONNECTION_STRING} names no AccountName or BlobEndpoint (the value "
                          "is not shown)", key=CONNECTION_STRING)


def _check_endpoint(value: str) -> str:
    parts = urlsplit(value)
    if parts.query or parts.fragment:  # may hold a SAS: never repeat it
        raise ConfigError(f"{ENDPOINT_URL} must not have a query (the value is not shown); give "
                          f"a SAS in {SAS_TOKEN}", key=ENDPOINT_URL)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"invalid value {value!r} for {ENDPOINT_URL}: expected an http(s) URL "
                          "of the account's blob endpoint", key=ENDPOINT_URL, value=value)
    return value.rstrip("/")


__all__ = [
    "KNOWN_KEYS",
    "SECRET_KEYS",
    "AzureBlobConfig",
    "CredentialKind",
]
