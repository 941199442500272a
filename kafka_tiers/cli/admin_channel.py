"""The CLI's admin channel to a cluster started by ``kafka-tiers cluster start``: the brokers'
internal transport, reached through ``--dir``, secured as the brokers secure it.

When the brokers' internal transport is TLS (``security.inter.broker.protocol`` or
``inter.broker.listener.name`` naming an SSL or SASL_SSL listener,
:mod:`kafka_tiers.cluster.transport_security`), ``cluster start`` writes
``<dir>/internal-transport.properties`` (:func:`write_channel_file`, mode 0600): the
inter-broker listener's ``ssl.*`` keys and ``super.users``. A command given ``--dir`` then
connects with the brokers' own certificate and key (:func:`admin_security`), which is only
allowed to the user the brokers' files belong to: that file, when it holds a secret (a key
password or an inline key), and the private key file must be owned by the caller and be
neither readable nor writable by group or others; otherwise one :class:`AdminChannelError`
says which file, what is wrong and the two ways on. Anyone else reaches the cluster through
its authenticated Kafka listener: ``--bootstrap-server`` (with ``--command-config`` holding
the client's ``security.protocol``, ``ssl.*`` and ``sasl.*`` settings).

A plaintext internal transport writes no file (a stale one is removed): commands connect as
before.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_tiers.api.errors import KafkaTiersError
from kafka_tiers.api.secret import Secret
from kafka_tiers.log.checkpoints import write_atomic

#: the file ``cluster start`` writes in ``--dir`` when the internal transport is TLS
CHANNEL_FILE = "internal-transport.properties"

#: the ``ssl.*`` keys the connecting side needs (the inter-broker listener's values)
CHANNEL_SSL_KEYS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.enabled.protocols", "ssl.protocol",
    "ssl.cipher.suites", "ssl.principal.mapping.rules", "ssl.endpoint.identification.algorithm",
)
#: keys of the channel file whose value is a credential
_SECRET_KEYS = frozenset({"ssl.keystore.key", "ssl.key.password"})
#: keys naming a file that holds a private key
_KEY_FILE_KEYS = ("ssl.keystore.location",)

_OTHER_WAY = ("or reach the cluster through its authenticated Kafka listener: "
              "--bootstrap-server HOST:PORT --command-config client.properties")


class AdminChannelError(KafkaTiersError):
    """The admin channel of ``--dir`` cannot be used by this user (a file not theirs, or
    open to others). Attributes: ``path``, the file."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def _text(value: Any) -> str:
    if isinstance(value, Secret):
        return value.reveal()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def write_channel_file(directory: str | os.PathLike[str], config: Any) -> Path | None:
    """Write ``<directory>/internal-transport.properties`` for the commands given ``--dir``
    (owner-only, mode 0600, replaced atomically) when ``config`` (the brokers'
    :class:`~kafka_tiers.config.BrokerConfig`) makes the internal transport TLS; return its
    path. A plaintext internal transport removes a stale file and returns None.

    Relative file paths are written absolute (the commands run from anywhere).

    Raises:
        ConfigError: as :func:`~kafka_tiers.cluster.transport_security.inter_broker_channel`.
        OSError: the file cannot be written.
    """
    from jproperties import Properties

    from kafka_tiers.cluster.transport_security import inter_broker_channel
    from kafka_tiers.kafka.security.config import listener_value

    path = Path(directory) / CHANNEL_FILE
    channel = inter_broker_channel(config)
    if not channel.secured:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    props = Properties()
    props["security.inter.broker.protocol"] = channel.protocol
    props["super.users"] = _text(config.get("super.users") or "")
    for key in CHANNEL_SSL_KEYS:
        value = listener_value(config, channel.listener, key)
        empty_means_off = key == "ssl.endpoint.identification.algorithm"  # "" disables it
        if value is None or (not _text(value).strip() and not empty_means_off):
            continue
        text = _text(value).strip()
        if key.endswith(".location"):
            text = str(Path(text).resolve())
        props[key] = text
    out = io.BytesIO()
    props.store(out, encoding="utf-8", timestamp=False,
                initial_comments="written by kafka-tiers cluster start: the brokers' own TLS "
                        "identity, for the commands given --dir (keep it 0600)")
    write_atomic(path, out.getvalue(), mode=0o600)  # crash-safe, 0600 before any byte
    return path


def check_private_file(path: Path, what: str) -> None:
    """Check that ``path`` (``what`` it is, for the message) belongs to the calling user and
    is neither readable nor writable by group or others.

    Raises:
        AdminChannelError: it does not (one line: the file, its owner or mode, the fix, and
            the other way in).
    """
    try:
        st = path.stat()
    except OSError as exc:
        raise AdminChannelError(f"{path} ({what}) cannot be read: "
                                f"{exc.strerror or exc}; {_OTHER_WAY}", path) from None
    uid = os.getuid()
    if st.st_uid != uid:
        raise AdminChannelError(
            f"{path} ({what}) belongs to uid {st.st_uid}, not to you (uid {uid}): the "
            "admin channel of --dir uses the brokers' own key and is for the user that runs "
            f"them only; run the command as that user, {_OTHER_WAY}", path)
    if st.st_mode & 0o066:
        mode = stat.S_IMODE(st.st_mode)
        raise AdminChannelError(
            f"{path} ({what}) is open to group or others (mode {mode:04o}): a key of the "
            f"brokers must be private to their user; chmod 600 {path}, {_OTHER_WAY}", path)


def channel_config(directory: str | os.PathLike[str]) -> Any | None:
    """The brokers' TLS identity for the admin channel of ``directory`` (a
    :class:`~kafka_tiers.config.BrokerConfig` of the channel file, its files checked with
    :func:`check_private_file`), or None when the cluster's internal transport is plaintext
    (no channel file).

    Raises:
        AdminChannelError: the channel file or the key file is not the caller's, or is open
            to group or others.
        ConfigError: the channel file cannot be read.
    """
    from kafka_tiers.config import BrokerConfig, read_properties

    path = Path(directory) / CHANNEL_FILE
    if not path.exists():
        return None
    raw: Mapping[str, str] = read_properties(path)
    if any(k in raw for k in _SECRET_KEYS):
        check_private_file(path, "the admin channel's config, with the brokers' key secrets")
    for key in _KEY_FILE_KEYS:
        if raw.get(key):
            check_private_file(Path(raw[key]), f"{key}, the brokers' private key")
    return BrokerConfig(raw)


def admin_security(directory: str | os.PathLike[str]) -> Any | None:
    """The internal transport's security for a command reaching the cluster in
    ``directory``: a :class:`~kafka_tiers.cluster.transport_security.TlsChannel` with the
    brokers' TLS identity, or None for the plaintext default.

    Raises:
        AdminChannelError, ConfigError: as :func:`channel_config` and
            :func:`~kafka_tiers.cluster.transport_security.channel_security`.
    """
    config = channel_config(directory)
    if config is None:
        return None
    from kafka_tiers.cluster.transport_security import channel_security

    return channel_security(config)


__all__ = ["CHANNEL_FILE", "CHANNEL_SSL_KEYS", "AdminChannelError", "admin_security",
           "channel_config", "check_private_file", "write_channel_file"]
