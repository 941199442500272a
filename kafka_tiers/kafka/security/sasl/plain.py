"""SASL/PLAIN, the server side (RFC 4616), against the users of a JAAS configuration
(``user_<name>="<password>"`` options), as Kafka's ``PlainSaslServer`` does.

The one client token is ``authzid NUL authcid NUL passwd`` (UTF-8). The authorization id
must be empty or the user name itself (Kafka allows no impersonation); user name and password
must be non-empty. The password is compared in constant time (:func:`hmac.compare_digest`),
against a random stand-in for an unknown user, so neither the answer nor its timing tells an
unknown user from a wrong password. PLAIN sends the password itself: use it on ``SASL_SSL``
only, outside tests.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping

from kafka_tiers.api.secret import Secret
from kafka_tiers.kafka.security.sasl.exchange import AuthenticationFailed, MechanismServerBase

MECHANISM = "PLAIN"
#: what a client is told on any failure (Kafka's text)
FAILED = "Authentication failed: Invalid username or password"
_STAND_IN = secrets.token_bytes(32)


class PlainServer(MechanismServerBase):
    """One PLAIN authentication (see the module docstring).

    Args:
        users: user name -> password (:class:`Secret`), from the listener's JAAS config.
    """

    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, Secret]) -> None:
        super().__init__()
        self._users = users
        self._used = False

    def evaluate(self, token: bytes) -> bytes:
        """Check the client's one token; the answer is empty.

        Raises:
            AuthenticationFailed: a second token, a malformed one, an authorization id
                other than the user, or an unknown user or wrong password.
        """
        if self._used:
            raise AuthenticationFailed(FAILED, "PLAIN takes one token; a second was sent",
                                       self._user)
        self._used = True
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                FAILED, f"malformed PLAIN token ({len(parts)} NUL-separated parts, 3 expected)")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed(FAILED, "a PLAIN token that is not UTF-8") from None
        self._user = user
        if not user:
            raise AuthenticationFailed(FAILED, "PLAIN token without a user name")
        if not password:
            raise AuthenticationFailed(FAILED, "PLAIN token without a password", user)
        if authzid and authzid != user:
            raise AuthenticationFailed(FAILED, "the authorization id differs from the user "
                                       "name (impersonation is not allowed)", user)
        expected = self._users.get(user)
        wanted = expected.reveal().encode() if expected is not None else _STAND_IN
        ok = hmac.compare_digest(password.encode(), wanted)
        if expected is None:
            raise AuthenticationFailed(FAILED, "unknown user", user)
        if not ok:
            raise AuthenticationFailed(FAILED, "wrong password", user)
        self._complete = True
        return b""


__all__ = ["FAILED", "MECHANISM", "PlainServer"]
