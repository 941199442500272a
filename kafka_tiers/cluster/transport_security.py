"""The brokers' own channel secured: which security the internal transport takes, and who may
use it.

Kafka's keys choose it. ``inter.broker.listener.name`` names a listener of ``listeners``; by
default it is the listener of ``security.inter.broker.protocol`` (Kafka's default
``PLAINTEXT``): the listener of that name, else the one listener with that protocol
(:func:`inter_broker_channel`). The internal transport takes that listener's protocol:

- ``PLAINTEXT``: open, as before (anyone who reaches 127.0.0.1 and the port is served, the
  CLI's ``--dir`` commands of every local user among them). The internal transport is never
  less protected than the Kafka listeners unless the operator says so: when a Kafka listener
  is secured (SSL, SASL_*) or an authorizer is configured, a PLAINTEXT reached by default
  (neither ``inter.broker.listener.name`` nor ``security.inter.broker.protocol`` given) is
  refused at start with one :class:`~kafka_tiers.api.ConfigError` naming both ways out (Kafka
  refuses such a broker too); one given explicitly is served, with one WARN line at start
  saying it is a back door around the listeners' security.
- ``SSL`` or ``SASL_SSL``: TLS with mutual authentication (:class:`TlsChannel`). Every broker
  presents the inter-broker listener's certificate (its ``ssl.keystore.*``, with Kafka's
  ``listener.name.<l>.`` overrides) and verifies its peer's against the listener's
  ``ssl.truststore.*``; the peer's principal (the certificate's subject mapped by
  ``ssl.principal.mapping.rules``) must be in ``super.users``, else the connection is closed
  before any request is served (one WARN line per peer host and reason a minute). The
  broker's handler table then refuses any request that did not come through such a
  connection (:meth:`~kafka_tiers.cluster.transport.HandlerTable.require_authentication`). A
  broker opening a connection checks the other side the same way (a certificate from the
  truststore's CA, a super user).
- ``SASL_PLAINTEXT``: refused at start with one :class:`~kafka_tiers.api.ConfigError`: the
  internal transport authenticates brokers by their certificates, which needs TLS.

Kafka differs: its brokers talk over the inter-broker Kafka listener itself, with SASL there
when the protocol is SASL_SSL. kafka-tiers' internal transport authenticates with the
certificates only (SASL_SSL's SASL part is the Kafka listener's, for clients).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_tiers.api.authorizer import KafkaPrincipal
from kafka_tiers.api.errors import ConfigError
from kafka_tiers.cluster.transport import (
    ErrorCode,
    LogRateLimit,
    PeerRefusedError,
    TransportError,
)

log = logging.getLogger(__name__)

#: protocols whose internal transport is TLS with mutual authentication
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
#: seconds a TLS handshake of the internal transport may take
HANDSHAKE_TIMEOUT_S = 10.0
#: the refusal of SASL_PLAINTEXT between brokers
SASL_PLAINTEXT_REFUSED = (
    "security.inter.broker.protocol SASL_PLAINTEXT: the internal transport needs TLS to "
    "authenticate brokers: set the inter-broker listener to SSL or SASL_SSL "
    "(inter.broker.listener.name or security.inter.broker.protocol)")
#: what a secured broker must say about its internal transport
PLAINTEXT_CHOICE = ("inter.broker.listener.name naming an SSL or SASL_SSL listener, or "
                    "security.inter.broker.protocol=PLAINTEXT given explicitly")


@dataclass(frozen=True)
class InterBrokerChannel:
    """The security the internal transport takes.

    Attributes:
        protocol: ``PLAINTEXT``, ``SSL`` or ``SASL_SSL``.
        listener: the listener whose ``ssl.*`` settings it uses (``listener.name.<l>.``
            overrides first); the protocol's name when no Kafka listener has it.
        open_kafka_listeners: False when some Kafka listener is secured or an authorizer is
            configured while this channel is PLAINTEXT (explicitly: a back door, warned at
            start).
    """

    protocol: str
    listener: str
    open_kafka_listeners: bool = True

    @property
    def secured(self) -> bool:
        """Whether the internal transport is TLS with mutual authentication."""
        return self.protocol in TLS_PROTOCOLS


def inter_broker_channel(config: Any) -> InterBrokerChannel:
    """Resolve ``inter.broker.listener.name`` / ``security.inter.broker.protocol`` against
    ``listeners`` (see the module docstring).

    Raises:
        ConfigError: both keys given (Kafka: only one of them); a listener name that is not
            in ``listeners``; several listeners with the protocol and none named after it
            (name one with ``inter.broker.listener.name``); ``SASL_PLAINTEXT`` between
            brokers; PLAINTEXT by default (neither key given) while a Kafka listener is
            secured or ``authorizer.class.name`` is set (:data:`PLAINTEXT_CHOICE`).
    """
    from kafka_tiers.kafka.listeners_config import listener_specs

    specs = listener_specs(config)
    originals: Mapping[str, Any] = getattr(config, "originals", config)
    name = config.get("inter.broker.listener.name")
    if name:
        if "security.inter.broker.protocol" in originals:
            raise ConfigError("inter.broker.listener.name and security.inter.broker.protocol "
                              "are both given; give only one of them (as Kafka)",
                              key="inter.broker.listener.name")
        name = str(name).upper()
        chosen = [s for s in specs if s.name == name]
        if not chosen:
            raise ConfigError(f"inter.broker.listener.name {name} is not a listener of "
                              f"listeners ({', '.join(s.name for s in specs) or 'none'}); "
                              "name one of them", key="inter.broker.listener.name")
        protocol, listener = chosen[0].security_protocol, name
    else:
        protocol = str(config.get("security.inter.broker.protocol") or "PLAINTEXT").upper()
        by_name = [s for s in specs if s.name == protocol]
        by_protocol = [s for s in specs if s.security_protocol == protocol]
        if by_name:
            listener = by_name[0].name
            protocol = by_name[0].security_protocol
        elif len(by_protocol) > 1:
            raise ConfigError(
                f"listeners {', '.join(s.name for s in by_protocol)} all use {protocol}, the "
                "security.inter.broker.protocol: name the brokers' one with "
                "inter.broker.listener.name", key="inter.broker.listener.name")
        elif by_protocol:
            listener = by_protocol[0].name
        else:  # no Kafka listener has it: the broker-wide ssl.* keys
            listener = protocol
    if protocol == "SASL_PLAINTEXT":
        raise ConfigError(SASL_PLAINTEXT_REFUSED, key="security.inter.broker.protocol")
    secured = [f"listener {s.name} is {s.security_protocol}" for s in specs
               if s.security_protocol != "PLAINTEXT"]
    authorizer = str(config.get("authorizer.class.name") or "").strip()
    if authorizer:
        secured.append(f"authorizer.class.name={authorizer}")
    if protocol == "PLAINTEXT" and secured and not (
            name or "security.inter.broker.protocol" in originals):
        raise ConfigError(
            f"the brokers' internal transport would be PLAINTEXT by default while "
            f"{', '.join(secured)}: anyone who reaches its port could send replication and "
            "controller requests without a credential, around SASL and ACLs; set "
            "inter.broker.listener.name to an SSL or SASL_SSL listener (the brokers' "
            "certificate principal in super.users), or set security.inter.broker.protocol="
            "PLAINTEXT to accept an open internal transport (an isolated network)",
            key="security.inter.broker.protocol", expected=PLAINTEXT_CHOICE)
    return InterBrokerChannel(protocol, listener, protocol in TLS_PROTOCOLS or not secured)


class TlsChannel:
    """TLS with mutual authentication for the internal transport (a
    :class:`~kafka_tiers.cluster.transport.ChannelSecurity`).

    Both sides use the inter-broker listener's TLS
    (:class:`~kafka_tiers.kafka.security.tls.ListenerTls`, with client certificates required
    whatever the listener's ``ssl.client.auth``): its certificate, its truststore, its
    ``ssl.principal.mapping.rules``, and its reload of changed certificate files (new
    connections take the new files).

    Args:
        listener_tls: the inter-broker listener's TLS (client authentication required).
        super_users: the principals served, as ``TYPE:NAME`` text (``super.users`` parsed
            by :func:`~kafka_tiers.kafka.security.acl_authorizer.parse_super_users`); every
            other peer is refused.
        check_hostname: the connecting side checks the server's certificate names the
            address it dialled (``ssl.endpoint.identification.algorithm=https``, Kafka's
            default).
        handshake_timeout: seconds a handshake may take.
    """

    def __init__(self, listener_tls: Any, super_users: frozenset[str], *,
                 check_hostname: bool = True,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT_S) -> None:
        self.tls = listener_tls
        self.super_users = super_users
        self.check_hostname = check_hostname
        self.handshake_timeout = handshake_timeout
        self._warned = LogRateLimit(60.0)

    def client_context(self) -> ssl.SSLContext:
        """The connecting side's context: this broker's certificate, the truststore's CAs,
        TLS 1.2 or newer as the listener allows; rebuilt when the listener reloaded its
        files (the listener's own cache of it: ``ListenerTls.client_context``)."""
        context: ssl.SSLContext = self.tls.client_context(self.check_hostname)
        return context

    def _principal(self, sock: ssl.SSLSocket) -> KafkaPrincipal | None:
        from kafka_tiers.kafka.security.tls import NoMatchingRule

        try:
            principal, subject = self.tls.principal(sock)
        except NoMatchingRule:
            return None
        return principal if subject is not None else None

    def wrap(self, sock: socket.socket) -> socket.socket:
        """The server side of TLS over an accepted connection, the handshake not done yet;
        see :meth:`~kafka_tiers.cluster.transport.ChannelSecurity.wrap`."""
        sock.settimeout(self.handshake_timeout)
        return self.tls.context().wrap_socket(sock, server_side=True,
                                              do_handshake_on_connect=False)

    def accept(self, sock: socket.socket, peer: str) -> KafkaPrincipal:
        """The TLS handshake (a client certificate required, at most
        ``handshake_timeout``), then the peer's principal must be a super user; see
        :meth:`~kafka_tiers.cluster.transport.ChannelSecurity.accept`."""
        assert isinstance(sock, ssl.SSLSocket)
        host = peer.rpartition(":")[0] or peer
        try:
            sock.do_handshake()
        except (OSError, ValueError) as exc:  # ssl.SSLError, a reset, a timeout
            self._refused(host, "handshake", f"{peer}: the TLS handshake failed "
                          f"({_reason(exc)}): not TLS, or a certificate the truststore "
                          "does not trust")
            raise PeerRefusedError(f"{peer}: TLS handshake failed") from None
        principal = self._principal(sock)
        if principal is None or str(principal) not in self.super_users:
            self._refused(host, f"principal {principal}",
                          f"{peer}: principal {principal} is not in super.users; only "
                          "brokers (super users) may use the internal transport")
            raise PeerRefusedError(f"{peer}: principal {principal} refused")
        sock.settimeout(None)
        return principal

    def connect(self, sock: socket.socket, host: str) -> socket.socket:
        """TLS handshake as the client with this broker's certificate; the server must
        present a certificate of the truststore's CA whose principal is a super user; see
        :meth:`~kafka_tiers.cluster.transport.ChannelSecurity.connect`."""
        sock.settimeout(self.handshake_timeout)
        try:
            tls = self.client_context().wrap_socket(sock, server_hostname=host)
        except (OSError, ValueError) as exc:
            raise TransportError(f"{host}: TLS handshake of the internal transport failed: "
                                 f"{_reason(exc)} (is the other side a broker with a "
                                 "certificate of the same CA, and speaking TLS?)",
                                 ErrorCode.NETWORK_EXCEPTION, sent=False) from None
        principal = self._principal(tls)
        if principal is None or str(principal) not in self.super_users:
            with contextlib.suppress(OSError):
                tls.close()
            raise TransportError(f"{host}: the internal transport's server is {principal}, "
                                 "which is not in super.users: not a broker of this cluster",
                                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED, sent=False)
        return tls

    def _refused(self, host: str, why: str, line: str) -> None:
        if self._warned.allow(f"{host} {why}"):
            log.warning("internal transport refused a connection from %s (at most one such "
                        "line per peer and reason a minute)", line)


def _reason(exc: BaseException) -> str:
    """A handshake failure in a few words (never a key or a password: OpenSSL's reason)."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def channel_security(config: Any) -> TlsChannel | None:
    """The internal transport's security for a broker with ``config`` (a
    :class:`~kafka_tiers.config.BrokerConfig`): a :class:`TlsChannel` when the inter-broker
    protocol is SSL or SASL_SSL, else None (plaintext; one WARN line when it was chosen
    explicitly beside a secured Kafka listener or an authorizer). Call once per broker
    start.

    Raises:
        ConfigError: as :func:`inter_broker_channel`; an empty ``super.users``, one without
            this broker's own certificate principal, or no truststore on a secured channel
            (no broker could be served); the listener's
            certificate or trust cannot be loaded (the file and the key named, never a
            password).
    """
    channel = inter_broker_channel(config)
    if not channel.secured:
        if not channel.open_kafka_listeners:
            log.warning("the brokers' internal transport is PLAINTEXT (as configured) while "
                        "a Kafka listener is secured or an authorizer is set: whoever reaches "
                        "127.0.0.1 and the port can send replication and controller requests "
                        "without a credential; set inter.broker.listener.name to an SSL or "
                        "SASL_SSL listener unless the network is isolated")
        return None
    from kafka_tiers.kafka.security.acl_authorizer import parse_super_users
    from kafka_tiers.kafka.security.config import listener_value
    from kafka_tiers.kafka.security.tls import ListenerTls, tls_settings

    super_users = parse_super_users(config.get("super.users"))
    where = f"the internal transport is {channel.protocol} (listener {channel.listener})"
    if not super_users:
        raise ConfigError(f"{where} but super.users is empty: no broker could be served; add "
                          "the brokers' certificate principal, e.g. "
                          "super.users=User:CN=broker,O=example", key="super.users")
    settings = tls_settings(config, channel.listener)
    if not (settings.truststore_location or settings.truststore_certificates):
        raise ConfigError(f"{where} but has no truststore to verify brokers' certificates: "
                          "set ssl.truststore.location (PEM CA certificates)",
                          key=settings.keys["ssl.truststore.location"])
    required = config.with_overrides(
        {f"listener.name.{channel.listener.lower()}.ssl.client.auth": "required"})
    algorithm = str(listener_value(config, channel.listener,
                                   "ssl.endpoint.identification.algorithm", "https") or "")
    listener_tls = ListenerTls(required, channel.listener)
    own = _own_principal(listener_tls)
    if str(own) not in super_users:
        raise ConfigError(f"{where} but this broker's own certificate principal {own} is not "
                          "in super.users: the brokers (and this broker's controller) could "
                          f"not talk to each other; add {own} to super.users",
                          key="super.users")
    return TlsChannel(listener_tls, super_users,
                      check_hostname=algorithm.strip().lower() == "https")


def _own_principal(listener_tls: Any) -> KafkaPrincipal:
    """The principal the other brokers see for this broker: its certificate's subject mapped
    by ``ssl.principal.mapping.rules``.

    Raises:
        ConfigError: the certificate does not allow client authentication (an extended key
            usage without ``clientAuth``), or no mapping rule applies to its subject.
    """
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from kafka_tiers.kafka.security.tls import NoMatchingRule, keystore_certificate

    cert = keystore_certificate(listener_tls.settings)
    subject = cert.subject.rfc4514_string()
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None
    if usages is not None and not {ExtendedKeyUsageOID.CLIENT_AUTH,
                                   ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE} & set(usages):
        key = listener_tls.settings.keys["ssl.keystore.location"]
        raise ConfigError(f"the internal transport: the broker certificate {subject} ({key}) "
                          "does not allow TLS client authentication, and each broker is the "
                          "TLS client of the others: issue it with extendedKeyUsage "
                          "serverAuth,clientAuth", key=key)
    try:
        return KafkaPrincipal("User", listener_tls.mapper.name(subject))
    except NoMatchingRule as exc:
        raise ConfigError(f"the internal transport: {exc}",
                          key="ssl.principal.mapping.rules") from None


__all__ = ["HANDSHAKE_TIMEOUT_S", "PLAINTEXT_CHOICE", "SASL_PLAINTEXT_REFUSED", "TLS_PROTOCOLS",
           "InterBrokerChannel", "TlsChannel", "channel_security", "inter_broker_channel"]
