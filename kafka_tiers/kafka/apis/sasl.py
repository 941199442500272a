"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2): SASL authentication on
the Kafka listeners, as Kafka's ``SaslServerAuthenticator`` does it (KIP-43, KIP-152,
KIP-368).

A connection on a ``SASL_PLAINTEXT`` or ``SASL_SSL`` listener sends (ApiVersions, then)
SaslHandshake naming a mechanism, then SaslAuthenticate requests carrying the mechanism's
tokens until the server's last token; only then is it authenticated (principal
``User:<name>``) and may send anything else (:mod:`kafka_tiers.kafka.security.gate`).

- SaslHandshake answers the enabled mechanisms. A mechanism not enabled:
  ``UNSUPPORTED_SASL_MECHANISM`` (33), then the connection is closed. A second SaslHandshake
  while an exchange is under way, or SaslAuthenticate before SaslHandshake:
  ``ILLEGAL_SASL_STATE`` (34), then the connection is closed.
- After SaslHandshake v0 the client's tokens come as bare length-prefixed frames without a
  Kafka header and the server's answers go back the same way (:func:`raw_token`, called by
  the server for such frames), as Kafka does; a failure there closes the connection without
  an answer (v0 has no way to say why). librdkafka needs v0 advertised to use SASL at all,
  then sends v1 like kafka-python and aiokafka.
- A failed SaslAuthenticate answers ``SASL_AUTHENTICATION_FAILED`` (58) with Kafka's message
  (one fixed text: an unknown user looks like a wrong password), then the connection is
  closed; the server sends that answer and closes only after
  ``connection.failed.authentication.delay.ms`` (every failed exchange, SaslHandshake's
  ``UNSUPPORTED_SASL_MECHANISM`` and v0's silent close too: :mod:`kafka_tiers.kafka.server`).
  One INFO line on ``kafka_tiers.audit`` per failure (the user claimed and the
  mechanism, escaped and truncated by :func:`~kafka_tiers.kafka.security.audit.shown`, the
  client, the listener; never a password), at most one a second per client address, the
  rest counted into the next (a bounded table: :class:`~kafka_tiers.kafka.security.audit.
  AuditLimiter`).
- Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 the successful
  SaslAuthenticate (v1+) answers ``session_lifetime_ms`` and the session expires after it; an
  authenticated connection may run SaslHandshake and SaslAuthenticate again with the same
  mechanism, and must come out as the same principal (else the connection is closed). Other
  requests are refused while that runs; after expiry only a re-authentication is served.
- On a listener that is not SASL, and on an authenticated connection that may not
  re-authenticate (``connections.max.reauth.ms`` = 0), both answer ``ILLEGAL_SASL_STATE`` and
  the connection stays open (as Kafka's request handler answers them).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from kafka_tiers.api.authorizer import KafkaPrincipal
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.audit import AuditLimiter, audit_log, shown
from kafka_tiers.kafka.security.sasl.exchange import AuthenticationFailed, SaslExchange
from kafka_tiers.kafka.security.scram_credentials import credentials_of
from kafka_tiers.kafka.security.session import SASL_PROTOCOLS, ConnectionSession

log = logging.getLogger(__name__)

NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
#: failed-authentication audit lines: at most one a second per client address
_failures = AuditLimiter(per_second=1)


def _settings(ctx: RequestContext) -> Any:
    sasl = getattr(ctx.server, "sasl", None)
    if sasl is None or ctx.security_protocol not in SASL_PROTOCOLS:
        return None
    return sasl.listener(ctx.listener)


@handles(17, 0, 1)
def sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    """Choose the mechanism of the exchange that follows (see the module docstring)."""
    session = ctx.connection
    settings = _settings(ctx)
    if settings is None:
        return ctx.response(error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(settings.mechanisms)
    mechanism = str(request.mechanism)
    raw = ctx.version == 0
    if session.sasl is not None:  # an exchange under way (or failed)
        session.sasl.failed = True
        return ctx.response(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled)
    reauthentication = session.authenticated
    if reauthentication and (not session.reauth_deadline or raw):
        return ctx.response(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled)
    if mechanism not in enabled:
        session.sasl = SaslExchange(mechanism, None, reauthentication, failed=True)
        _log_failure(ctx.connection, mechanism, "", "mechanism not enabled on this listener")
        return ctx.response(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    if reauthentication and mechanism != session.sasl_mechanism:
        session.sasl = SaslExchange(
            mechanism, None, True,
            refusal=f"SASL mechanism '{mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{session.sasl_mechanism}'")
        return ctx.response(error_code=NONE, mechanisms=enabled)
    credentials = credentials_of(ctx.server) if mechanism != "PLAIN" else None
    session.sasl = SaslExchange(mechanism, settings.new_server(mechanism, credentials),
                                reauthentication, raw=raw)
    return ctx.response(error_code=NONE, mechanisms=enabled)


@dataclass
class _Step:
    """What one client token came to."""

    error_code: int
    error_message: str | None
    answer: bytes
    lifetime_ms: int


def _step(server: Any, session: ConnectionSession, token: bytes) -> _Step:
    """Feed ``token`` to the session's exchange; on success the session is authenticated."""
    exchange = session.sasl
    settings = getattr(server, "sasl", None)
    settings = settings.listener(session.listener) if settings is not None else None
    if settings is None or exchange is None or exchange.failed or (
            exchange.server is None and exchange.refusal is None):
        if not session.authenticated:
            session.sasl = SaslExchange("", None, failed=True)
        elif exchange is not None:
            exchange.failed = True
        return _Step(ILLEGAL_SASL_STATE, "SaslAuthenticate without a SaslHandshake before it",
                     b"", 0)
    what = "re-authentication" if exchange.reauthentication else "authentication"
    try:
        if exchange.refusal is not None:
            raise AuthenticationFailed(exchange.refusal, "another mechanism for "
                                       "re-authentication", session.principal.name)
        assert exchange.server is not None
        answer = exchange.server.evaluate(token)
        if exchange.server.complete:
            principal = KafkaPrincipal("User", exchange.server.user)
            if exchange.reauthentication and principal != session.principal:
                raise AuthenticationFailed(
                    f"Cannot change principals during re-authentication from "
                    f"{session.principal}: {principal}", "another principal on "
                    f"re-authentication (was {session.principal})", exchange.server.user)
    except AuthenticationFailed as exc:
        exchange.failed = True
        _log_failure(session, exchange.mechanism, exc.user, exc.reason)
        message = exc.client_message or (f"Authentication failed during {what} due to "
                                          "invalid credentials with SASL mechanism "
                                          f"{exchange.mechanism}")
        return _Step(SASL_AUTHENTICATION_FAILED, message, b"", 0)
    if not exchange.server.complete:
        return _Step(NONE, None, answer, 0)
    reauth_ms = settings.reauth_ms
    session.principal = principal
    session.authenticated = True
    session.sasl_mechanism = exchange.mechanism
    session.sasl = None
    session.reauth_deadline = time.monotonic() + reauth_ms / 1000.0 if reauth_ms else 0.0
    log.debug("kafka connection %s: %s %s with %s (session lifetime %d ms)", session.peer,
              principal, "re-authenticated" if exchange.reauthentication else "authenticated",
              exchange.mechanism, reauth_ms)
    return _Step(NONE, None, answer, reauth_ms)


@handles(36, 0, 2)
def sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    """One token of the exchange chosen by SaslHandshake (see the module docstring)."""
    session = ctx.connection
    if session.sasl is not None and session.sasl.raw:  # v0 framing expected
        session.sasl.failed = True
        return ctx.response(error_code=ILLEGAL_SASL_STATE, error_message="SaslAuthenticate "
                            "after SaslHandshake v0 (whose tokens come without a header)",
                            auth_bytes=b"", **({"session_lifetime_ms": 0}
                                               if ctx.version >= 1 else {}))
    step = _step(ctx.server, session, bytes(request.auth_bytes or b""))
    lifetime = {"session_lifetime_ms": step.lifetime_ms} if ctx.version >= 1 else {}
    return ctx.response(error_code=step.error_code, error_message=step.error_message,
                        auth_bytes=step.answer, **lifetime)


def raw_token(server: Any, session: ConnectionSession, token: bytes) -> bytes | None:
    """The server's answer to a bare SASL token (after SaslHandshake v0), to be sent as a
    length-prefixed frame without a Kafka header; None: the exchange failed and the
    connection is to be closed without an answer (Kafka's v0 behaviour)."""
    step = _step(server, session, token)
    return step.answer if step.error_code == NONE else None


def _log_failure(session: ConnectionSession, mechanism: str, user: str, reason: str) -> None:
    admitted = _failures.admit(("failed authentication", session.ip))
    if admitted is None:
        return
    (_, client), skipped = admitted
    if client != session.ip:  # the limiter's table is full: one line for all others
        audit_log.info("failed authentication: clients beyond the audit table, the last: "
                       "client=%s listener=%s%s", session.peer, shown(session.listener),
                       f" (and {skipped} more failures since the last line)" if skipped else "")
        return
    audit_log.info("failed authentication: principal=User:%s client=%s listener=%s "
                   "mechanism=%s reason=%s%s", shown(user) or "?", session.peer,
                   shown(session.listener), shown(mechanism), shown(reason),
                   f" (and {skipped} more failures from {session.ip} since the last line)"
                   if skipped else "")


__all__ = ["raw_token", "sasl_authenticate", "sasl_handshake"]
