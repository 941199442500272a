"""The plugin's configuration: the keys under ``rsm.config.``, checked once, as a frozen value.

Every problem is one :class:`~kafka_tiers.api.ConfigError` naming its key. No key of this
plugin holds a secret (Kerberos uses the ticket cache of the broker's process), so the store
declares no ``SECRET_KEYS`` and nothing here is a :class:`~kafka_tiers.api.Secret`; a namenode
URL carrying credentials is refused without repeating it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from kafka_tiers.api import ConfigError

NAMENODE_URL = "hdfs.namenode.url"
USER = "hdfs.user"
BASE_DIR = "hdfs.base.dir"
KERBEROS_ENABLED = "hdfs.kerberos.enabled"
KERBEROS_MUTUAL_AUTH = "hdfs.kerberos.mutual.auth"
KERBEROS_PRINCIPAL = "hdfs.kerberos.principal"
TLS_VERIFY = "hdfs.tls.verify"
TLS_CA_FILE = "hdfs.tls.ca.file"
REPLICATION = "hdfs.replication"
BLOCK_SIZE = "hdfs.block.size"
BUFFER_SIZE = "hdfs.buffer.size"
UPLOAD_CHUNK_SIZE = "hdfs.upload.chunk.size"
TIMEOUT_MS = "hdfs.timeout.ms"

#: Every key this plugin reads (``key.prefix`` is read by the object-store base class).
KEYS = (NAMENODE_URL, USER, BASE_DIR, KERBEROS_ENABLED, KERBEROS_MUTUAL_AUTH,
        KERBEROS_PRINCIPAL, TLS_VERIFY, TLS_CA_FILE, REPLICATION, BLOCK_SIZE, BUFFER_SIZE,
        UPLOAD_CHUNK_SIZE, TIMEOUT_MS)

_MUTUAL_AUTH = ("REQUIRED", "OPTIONAL", "DISABLED")


@dataclass(frozen=True, slots=True)
class HdfsSettings:
    """The checked configuration (see the README's table for each key).

    Attributes:
        namenode_urls: the WebHDFS URLs of the namenodes, in the order they are tried.
        user: the user to act as (simple auth), or to impersonate with Kerberos (``doas``).
        base_dir: the absolute HDFS directory holding every object.
        kerberos: authenticate with Kerberos (SPNEGO).
        mutual_auth: Kerberos mutual authentication: REQUIRED, OPTIONAL or DISABLED.
        principal: the Kerberos principal to use (default: the ticket cache's).
        tls_verify: False, True, or the path of a CA bundle to verify https namenodes with.
        replication: the replication factor of new files (None: the cluster's default).
        block_size: the block size of new files in bytes (None: the cluster's default).
        buffer_size: WebHDFS ``buffersize`` of reads and writes (None: the cluster's).
        upload_chunk_size: bytes read from the source per piece of a streamed upload.
        timeout_s: the connect and read timeout of every request, in seconds.
    """

    namenode_urls: tuple[str, ...]
    user: str | None
    base_dir: str
    kerberos: bool = False
    mutual_auth: str = "OPTIONAL"
    principal: str | None = None
    tls_verify: bool | str = True
    replication: int | None = None
    block_size: int | None = None
    buffer_size: int | None = None
    upload_chunk_size: int = 1 << 20
    timeout_s: float = 30.0

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> HdfsSettings:
        """Read and check the plugin's keys.

        Raises:
            ConfigError: a missing or malformed value (one line naming the key).
        """
        verify = _bool(config, TLS_VERIFY, True)
        ca_file = _text(config, TLS_CA_FILE)
        if ca_file is not None:
            if not os.path.isfile(ca_file):
                raise ConfigError(f"{TLS_CA_FILE}: no such file {ca_file!r}", key=TLS_CA_FILE,
                                  value=ca_file, expected="the path of a PEM CA bundle")
            if not verify:
                raise ConfigError(f"{TLS_CA_FILE} is set but {TLS_VERIFY}=false; drop one",
                                  key=TLS_CA_FILE, value=ca_file)
        mutual = (_text(config, KERBEROS_MUTUAL_AUTH) or "OPTIONAL").upper()
        if mutual not in _MUTUAL_AUTH:
            raise ConfigError(f"invalid value for {KERBEROS_MUTUAL_AUTH}: expected one of "
                              f"{', '.join(_MUTUAL_AUTH)}", key=KERBEROS_MUTUAL_AUTH,
                              value=mutual, expected=" | ".join(_MUTUAL_AUTH))
        block_size = _int(config, BLOCK_SIZE, 1, 2**63 - 1)
        if block_size is not None and block_size % 512:
            raise ConfigError(f"invalid value {block_size} for {BLOCK_SIZE}: HDFS block sizes "
                              "are multiples of 512 bytes", key=BLOCK_SIZE, value=block_size,
                              expected="a multiple of 512")
        return cls(
            namenode_urls=_urls(config),
            user=_text(config, USER),
            base_dir=_base_dir(config),
            kerberos=_bool(config, KERBEROS_ENABLED, False),
            mutual_auth=mutual,
            principal=_text(config, KERBEROS_PRINCIPAL),
            tls_verify=ca_file if ca_file is not None else verify,
            replication=_int(config, REPLICATION, 1, 32767),
            block_size=block_size,
            buffer_size=_int(config, BUFFER_SIZE, 1, 2**31 - 1),
            upload_chunk_size=_int(config, UPLOAD_CHUNK_SIZE, 4096, 1 << 30) or 1 << 20,
            timeout_s=(_int(config, TIMEOUT_MS, 1, 3_600_000) or 30_000) / 1000,
        )


def _text(config: Mapping[str, str], key: str) -> str | None:
    value = (config.get(key) or "").strip()
    return value or None


def _bool(config: Mapping[str, str], key: str, default: bool) -> bool:
    value = _text(config, key)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise ConfigError(f"invalid value {value!r} for {key}: expected true or false",
                          key=key, value=value, expected="true | false")
    return value.lower() == "true"


def _int(config: Mapping[str, str], key: str, low: int, high: int) -> int | None:
    value = _text(config, key)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise ConfigError(f"invalid value {value!r} for {key}: expected an integer from {low} "
                          f"to {high}", key=key, value=value, expected=f"{low}..{high}")
    return number


def _urls(config: Mapping[str, str]) -> tuple[str, ...]:
    raw = _text(config, NAMENODE_URL)
    if raw is None:
        raise ConfigError(f"{NAMENODE_URL} is required: the WebHDFS URL of the namenode "
                          "(comma-separated for HA), e.g. http://namenode:9870",
                          key=NAMENODE_URL, expected="http(s)://host:port[,http(s)://...]")
    urls = []
    for position, item in enumerate(raw.split(","), 1):
        url = item.strip()
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            parts = None
        if parts is not None and (parts.username is not None or parts.password is not None):
            # never repeat the value: it holds credentials
            raise ConfigError(f"{NAMENODE_URL}: URL {position} carries credentials; remove "
                              "them (use hdfs.user, or Kerberos)", key=NAMENODE_URL)
        if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname
                or parts.query or parts.fragment):
            raise ConfigError(f"invalid value {url!r} for {NAMENODE_URL} (URL {position}): "
                              "expected http(s)://host:port", key=NAMENODE_URL, value=url,
                              expected="http(s)://host:port")
        urls.append(url.rstrip("/"))
    return tuple(urls)


def _base_dir(config: Mapping[str, str]) -> str:
    raw = _text(config, BASE_DIR)
    if raw is None:
        raise ConfigError(f"{BASE_DIR} is required: the absolute HDFS directory of the remote "
                          "tier, e.g. /kafka/remote", key=BASE_DIR, expected="an absolute path")
    parts = [p for p in raw.split("/") if p]
    if (not raw.startswith("/") or any(p in (".", "..") or ":" in p for p in parts)):
        raise ConfigError(f"invalid value {raw!r} for {BASE_DIR}: expected an absolute HDFS "
                          "path without '.', '..' or ':'", key=BASE_DIR, value=raw,
                          expected="an absolute path")
    return "/" + "/".join(parts)


__all__ = [
    "BASE_DIR",
    "BLOCK_SIZE",
    "BUFFER_SIZE",
    "KERBEROS_ENABLED",
    "KERBEROS_MUTUAL_AUTH",
    "KERBEROS_PRINCIPAL",
    "KEYS",
    "NAMENODE_URL",
    "REPLICATION",
    "TIMEOUT_MS",
    "TLS_CA_FILE",
    "TLS_VERIFY",
    "UPLOAD_CHUNK_SIZE",
    "USER",
    "HdfsSettings",
]
