"""One connection's security state, shared by the network thread and the handler that
serves the connection's request (never two at once: a connection is muted while a request
is in flight)."""

from __future__ import annotations

from dataclasses import dataclass

from kafka_tiers.api.authorizer import ANONYMOUS, KafkaPrincipal
from kafka_tiers.kafka.security.sasl.exchange import SaslExchange

#: listeners whose clients authenticate with SASL before any other request
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
#: listeners whose connections are TLS
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass
class ConnectionSession:
    """Who a connection is.

    Attributes:
        listener: the listener name it came in on (``PLAINTEXT``, ``INTERNAL``, ...).
        security_protocol: that listener's protocol (``PLAINTEXT``, ``SSL``,
            ``SASL_PLAINTEXT``, ``SASL_SSL``).
        peer: ``host:port`` of the client.
        ip: the client's address (what ACL hosts match).
        principal: ``User:ANONYMOUS`` until authenticated; the TLS client certificate's
            mapped subject on SSL with client authentication; the SASL user on SASL_*.
        authenticated: whether requests other than ApiVersions, SaslHandshake and
            SaslAuthenticate may be served (True at once on PLAINTEXT and SSL).
        sasl_mechanism: the mechanism chosen by SaslHandshake (None before).
        sasl: the SASL exchange under way (the mechanism's server state), or None.
        reauth_deadline: ``time.monotonic()`` after which the SASL session expired
            (``connections.max.reauth.ms``, KIP-368); 0 when it never does.
        tls_subject: the client certificate's subject (RFC 2253), when one was presented.
    """

    listener: str
    security_protocol: str
    peer: str
    ip: str
    principal: KafkaPrincipal = ANONYMOUS
    authenticated: bool = True
    sasl_mechanism: str | None = None
    sasl: SaslExchange | None = None
    reauth_deadline: float = 0.0
    tls_subject: str | None = None

    @classmethod
    def new(cls, listener: str, security_protocol: str, peer: str, ip: str
            ) -> ConnectionSession:
        """A new connection's state: SASL listeners start unauthenticated."""
        return cls(listener, security_protocol, peer, ip,
                   authenticated=security_protocol not in SASL_PROTOCOLS)


__all__ = ["SASL_PROTOCOLS", "TLS_PROTOCOLS", "ConnectionSession"]
