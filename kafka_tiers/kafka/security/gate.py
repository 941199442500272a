"""Which requests a connection may send in its security state (checked by the server before
a request is decoded).

Before a SASL connection authenticated, only ApiVersions, SaslHandshake and
SaslAuthenticate are served (Kafka's rule); anything else closes the connection, as Kafka
does (a client that skips authentication is not told more than that).
"""

from __future__ import annotations

from kafka_tiers.kafka.security.session import ConnectionSession

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
#: the requests served before authentication
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


def refusal(session: ConnectionSession, api_key: int, now: float) -> str | None:
    """Why request ``api_key`` may not be served on ``session`` now (the connection is
    closed with that reason logged), or None."""
    if api_key in BEFORE_AUTHENTICATION:
        return None
    if not session.authenticated:
        return (f"API key {api_key} before SASL authentication completed (only ApiVersions, "
                "SaslHandshake and SaslAuthenticate are served until then)")
    if session.reauth_deadline and now > session.reauth_deadline:
        return ("the SASL session expired (connections.max.reauth.ms) and the client did "
                "not re-authenticate")
    return None


__all__ = ["BEFORE_AUTHENTICATION", "refusal"]
