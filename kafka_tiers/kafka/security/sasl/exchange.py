"""What every SASL mechanism's server side offers, and one connection's SASL exchange.

A mechanism server (:class:`MechanismServer`) is made per authentication attempt; it is fed
the client's tokens in order (:meth:`MechanismServer.evaluate`) and answers each with the
server's token, until :attr:`MechanismServer.complete`. It raises
:class:`AuthenticationFailed` when the client did not prove who it claims to be, and never
says why to the client beyond a fixed message (a wrong password and an unknown user look the
same from outside).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class AuthenticationFailed(Exception):
    """The client failed to authenticate.

    Attributes:
        client_message: what the client is told (SaslAuthenticate's ``error_message``): a fixed
            text naming no secret and not telling an unknown user from a wrong password;
            None: Kafka's generic "Authentication failed during authentication due to
            invalid credentials with SASL mechanism <name>".
        reason: why, for the broker's log (never a password or a proof).
        user: the user name the client claimed, when it got that far ("" otherwise).
    """

    def __init__(self, client_message: str | None, reason: str, user: str = "") -> None:
        super().__init__(reason)
        self.client_message = client_message
        self.reason = reason
        self.user = user


class MechanismServer(Protocol):
    """The server side of one SASL mechanism for one authentication attempt."""

    #: the mechanism name (``PLAIN``, ``SCRAM-SHA-256``, ...)
    mechanism: str

    @property
    def complete(self) -> bool:
        """Whether the exchange succeeded (no more tokens expected)."""
        ...

    @property
    def user(self) -> str:
        """The authenticated user name (valid once :attr:`complete`); the claimed one
        before."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's next token.

        Raises:
            AuthenticationFailed: the token is malformed, out of order, or does not prove
                the claimed identity. The exchange is over then.
        """
        ...


class MechanismServerBase:
    """What every mechanism server holds in common: the claimed (then authenticated) user
    name and whether the exchange completed. A subclass sets ``mechanism``, implements
    :meth:`MechanismServer.evaluate`, records the claimed name in ``_user`` as soon as it
    reads it and sets ``_complete`` only once the client proved it."""

    mechanism: str

    def __init__(self) -> None:
        self._user = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        """Whether the exchange succeeded (no more tokens expected)."""
        return self._complete

    @property
    def user(self) -> str:
        """The authenticated user name (valid once :attr:`complete`); the claimed one
        before."""
        return self._user


@dataclass
class SaslExchange:
    """One connection's SASL exchange under way (``ConnectionSession.sasl``), from the
    SaslHandshake that chose the mechanism to the SaslAuthenticate that completed it.

    Attributes:
        mechanism: the mechanism chosen by the client.
        server: the mechanism's server state.
        reauthentication: the connection had authenticated already (KIP-368): the principal
            must come out the same.
        refusal: a reason to fail the next SaslAuthenticate outright (a re-authentication
            that asked for another mechanism), or None.
        failed: the exchange failed; the connection is closed once the response is sent.
        raw: the exchange was started by SaslHandshake v0: the client's tokens come as bare
            length-prefixed frames without a Kafka header, and the server's go back the
            same way (Kafka's framing before KIP-152).
    """

    mechanism: str
    server: MechanismServer | None
    reauthentication: bool = False
    refusal: str | None = None
    failed: bool = False
    raw: bool = False


__all__ = ["AuthenticationFailed", "MechanismServer", "SaslExchange"]
