"""Which requests a connection may send in its security state (checked by the server before
a request is decoded), and when a connection is closed after its response.

- Before a SASL connection authenticated, only ApiVersions, SaslHandshake and
  SaslAuthenticate are served (Kafka's rule); anything else closes the connection, as Kafka
  does (a client that skips authentication is not told more than that).
- While a SASL exchange is under way (after SaslHandshake, a re-authentication too), only
  SaslAuthenticate is served (a second SaslHandshake is answered ``ILLEGAL_SASL_STATE`` by
  its handler); anything else closes the connection.
- Once the session expired (``connections.max.reauth.ms``, KIP-368), only SaslHandshake, the
  start of a re-authentication, is served; anything else closes the connection.
- After SaslHandshake v0 the next frames are bare SASL tokens (:func:`raw_sasl_token`), not
  requests, until the exchange completes.
- A failed exchange (:attr:`SaslExchange.failed`) closes the connection once the response
  that says so is sent (:func:`closes_after_response`).
"""

from __future__ import annotations

from kafka_tiers.kafka.security.session import ConnectionSession

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
#: the requests served before authentication
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
#: the requests served while an exchange is under way
DURING_EXCHANGE = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})


def refusal(session: ConnectionSession, api_key: int, now: float) -> str | None:
    """Why request ``api_key`` may not be served on ``session`` now (the connection is
    closed with that reason logged), or None."""
    exchange = session.sasl
    if exchange is not None:
        if exchange.failed:
            return "a request after a failed SASL authentication"
        if api_key not in DURING_EXCHANGE:
            return (f"API key {api_key} during a SASL exchange (only SaslAuthenticate is "
                    "served until it completes)")
        return None
    if not session.authenticated:
        if api_key in BEFORE_AUTHENTICATION:
            return None
        return (f"API key {api_key} before SASL authentication completed (only ApiVersions, "
                "SaslHandshake and SaslAuthenticate are served until then)")
    if session.reauth_deadline and now > session.reauth_deadline \
            and api_key != SASL_HANDSHAKE:
        return ("the SASL session expired (connections.max.reauth.ms) and the client did "
                "not re-authenticate")
    return None


def raw_sasl_token(session: ConnectionSession) -> bool:
    """Whether the connection's next frame is a bare SASL token, not a Kafka request (an
    exchange started by SaslHandshake v0: the frame goes to
    :func:`kafka_tiers.kafka.apis.sasl.raw_token`)."""
    exchange = session.sasl
    return exchange is not None and exchange.raw and not exchange.failed


def closes_after_response(session: ConnectionSession) -> bool:
    """Whether the connection is closed once the response now being sent is out (a failed
    SASL exchange: Kafka closes the connection after the error response)."""
    exchange = session.sasl
    return exchange is not None and exchange.failed


__all__ = ["BEFORE_AUTHENTICATION", "DURING_EXCHANGE", "closes_after_response", "raw_sasl_token",
           "refusal"]
