"""SCRAM-SHA-256 and SCRAM-SHA-512, the server side (RFC 5802, RFC 7677), as Kafka's
``ScramSaslServer`` does, with :mod:`hashlib` and :mod:`hmac` (no server-side SCRAM library is
maintained for Python; this is the state machine of RFC 5802 section 5 and nothing more).

The server never sees a password: it holds, per user and mechanism, a salt, an iteration
count, ``StoredKey = H(ClientKey)`` and ``ServerKey`` (:class:`StoredCredential`, kept by the
SCRAM credential store). The exchange:

1. client-first ``n,,n=<user>,r=<client nonce>[,<extensions>]``: the GS2 header must be
   ``n`` (no channel binding: ``y`` and ``p=`` are refused, as Kafka does) with an empty
   authorization id or the user name itself; ``m=`` (reserved) is refused; the ``tokenauth``
   extension (delegation tokens) is refused; other extensions are ignored. User names are
   decoded from ``=2C`` and ``=3D``.
2. server-first ``r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>``, the
   server nonce from :func:`secrets.token_urlsafe`.
3. client-final ``c=<base64 GS2 header>,r=<nonce>[,...],p=<base64 proof>``: the channel
   binding must repeat the GS2 header, the nonce must end with the combined one (Kafka's
   check, which librdkafka up to 2.0 relies on: it sends its own nonce again in front), and
   ``H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey`` (constant-time compare).
4. server-final ``v=<base64 ServerSignature>``: the exchange is complete.

An unknown user gets a server-first like any user's (:func:`stand_in`): the iteration count
and salt length of the most common stored credential of the mechanism (4096 and 24 bytes
when there is none), and a salt derived from the user name by an HMAC under the cluster's
stand-in key (random, made once in the security state store, so every broker and every
restart shows an unknown user the same salt, and nobody without the store can compute it;
should the store fail, a key random to this broker process); its proof then fails exactly
as a wrong password does (RFC 5802's advice; the client sees Kafka's one generic failure
message either way). Any failure ends
the exchange with :class:`AuthenticationFailed`, whose ``reason`` is the RFC's
server-error-value (``invalid-proof``, ``unknown-user``, ``channel-bindings-dont-match``, ...)
for the broker's log.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kafka_tiers.kafka.security.sasl.exchange import AuthenticationFailed, MechanismServerBase

#: mechanism name -> hashlib name
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: the iteration count shown for an unknown user when no credential is stored (Kafka's default
#: for new credentials)
FAKE_ITERATIONS = 4096
#: the length of the salt shown for an unknown user when no credential is stored (the
#: credential store's salt length)
FAKE_SALT_BYTES = 24
#: the longest client nonce accepted
MAX_NONCE_CHARS = 256
_FAKE_KEY = secrets.token_bytes(32)
_warned = [-60.0]  # time.monotonic() of the last stand-in key warning
log = logging.getLogger(__name__)
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # RFC 5802 'printable': no ','
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


class StoredCredential(Protocol):
    """What the server keeps of a user's SCRAM password (one mechanism)."""

    @property
    def salt(self) -> bytes: ...

    @property
    def stored_key(self) -> bytes: ...

    @property
    def server_key(self) -> bytes: ...

    @property
    def iterations(self) -> int: ...


class CredentialLookup(Protocol):
    """Where SCRAM credentials are found (the SCRAM credential store)."""

    def lookup(self, user: str, mechanism: str) -> StoredCredential | None:
        """The user's credential for ``mechanism``, or None."""
        ...


@dataclass(frozen=True)
class _StandIn:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def stand_in(user: str, mechanism: str, credentials: object) -> StoredCredential:
    """The credential an unknown ``user`` seems to have (see the module docstring): the
    shape of ``credentials.stand_in_shape(mechanism)`` and a salt keyed by
    ``credentials.stand_in_key()`` when the lookup offers them (the SCRAM credential
    store does), else 4096 iterations, 24 bytes and a key of this process; random keys (no
    password matches). Deterministic in ``user`` for one key and shape."""
    shape = getattr(credentials, "stand_in_shape", None)
    iterations, salt_bytes = shape(mechanism) if callable(shape) else (FAKE_ITERATIONS,
                                                                      FAKE_SALT_BYTES)
    key_of = getattr(credentials, "stand_in_key", None)
    key = _FAKE_KEY
    if callable(key_of):
        try:
            key = key_of()
        except Exception as exc:  # the store failed: still answer like a known user
            if time.monotonic() - _warned[0] >= 60:  # one line a minute
                _warned[0] = time.monotonic()
                log.warning("SCRAM: the cluster's stand-in key cannot be read from the "
                            "security state store (%s); unknown users' salts use this "
                            "broker's own key until it can", type(exc).__name__)
    salt = b""
    block = 0
    while len(salt) < salt_bytes:
        salt += hmac.new(key, f"{block}\0{mechanism}\0{user}".encode(),
                         hashlib.sha256).digest()
        block += 1
    size = hashlib.new(HASHES[mechanism]).digest_size
    return _StandIn(salt[:salt_bytes], secrets.token_bytes(size), secrets.token_bytes(size),
                    int(iterations))


def _b64decode(text: str, what: str, user: str) -> bytes:
    if not _B64.fullmatch(text):
        raise AuthenticationFailed(None, f"invalid-encoding ({what} is not base64)", user)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise AuthenticationFailed(None, f"invalid-encoding ({what} is not base64)",
                                   user) from None


def _sasl_name(text: str) -> str | None:
    """``=2C`` and ``=3D`` decoded; None for any other ``=`` (RFC 5802 saslname)."""
    user = text.replace("=2C", ",")
    if "=" in user.replace("=3D", ""):
        return None
    return user.replace("=3D", "=")


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise AuthenticationFailed(None, "invalid-encoding (an attribute is not "
                                       "name=value)")
        out.append((name, value))
    return out


class ScramServer(MechanismServerBase):
    """One SCRAM authentication (see the module docstring).

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        credentials: where the user's credential is looked up.
        nonce: makes the server nonce (tests give RFC 7677's; never in production).
    """

    def __init__(self, mechanism: str, credentials: CredentialLookup,
                 nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24)) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism ({sorted(HASHES)})")
        super().__init__()
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._credentials = credentials
        self._nonce = nonce
        self._step = 0
        self._known = False
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""
        self._credential: StoredCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message (server-first, then server-final).

        Raises:
            AuthenticationFailed: a malformed or out-of-order message, an unsupported
                feature (channel binding, delegation tokens), or a proof that does not
                verify (a wrong password or an unknown user).
        """
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(None, "invalid-encoding (not UTF-8)",
                                       self._user) from None
        step, self._step = self._step, self._step + 1
        if step == 0:
            return self._client_first(text).encode()
        if step == 1:
            return self._client_final(text).encode()
        raise AuthenticationFailed(None, "other-error (a message after the exchange ended)",
                                   self._user)

    def _client_first(self, text: str) -> str:
        cbind, sep, rest = text.partition(",")
        if not sep:
            raise AuthenticationFailed(None, "invalid-encoding (no GS2 header)")
        if cbind != "n":
            reason = ("server-does-support-channel-binding" if cbind == "y" else
                      "channel-binding-not-supported" if cbind.startswith("p=") else
                      "invalid-encoding (GS2 header)")
            raise AuthenticationFailed(None, reason)
        authzid_part, sep, bare = rest.partition(",")
        if not sep:
            raise AuthenticationFailed(None, "invalid-encoding (no GS2 header)")
        self._gs2 = f"n,{authzid_part},"
        parts = bare.split(",")
        if parts[0].startswith("m="):
            raise AuthenticationFailed(None, "extensions-not-supported (m=)")
        if len(parts) < 2 or not parts[0].startswith("n=") or not parts[1].startswith("r="):
            raise AuthenticationFailed(None, "invalid-encoding (client-first is "
                                       "n=<user>,r=<nonce>)")
        user = _sasl_name(parts[0][2:])
        if not user:
            raise AuthenticationFailed(None, "invalid-username-encoding")
        self._user = user
        if authzid_part:
            authzid = _sasl_name(authzid_part[2:]) if authzid_part.startswith("a=") else None
            if authzid != user:
                raise AuthenticationFailed(None, "invalid-encoding (the authorization id "
                                           "differs from the user name)", user)
        client_nonce = parts[1][2:]
        if not _PRINTABLE.fullmatch(client_nonce) or len(client_nonce) > MAX_NONCE_CHARS:
            raise AuthenticationFailed(None, "invalid-encoding (client nonce)", user)
        extensions = {}
        for ext in parts[2:]:
            name, sep, value = ext.partition("=")
            if not sep or not name:
                raise AuthenticationFailed(None, "invalid-encoding (an extension is not "
                                           "name=value)", user)
            extensions[name] = value
        if extensions.get("tokenauth", "").lower() == "true":
            raise AuthenticationFailed(None, "extensions-not-supported (tokenauth: "
                                       "delegation tokens are not supported)", user)
        found = self._credentials.lookup(user, self.mechanism)
        self._known = found is not None
        credential: StoredCredential = found if found is not None \
            else stand_in(user, self.mechanism, self._credentials)
        self._credential = credential
        self._client_first_bare = bare
        self._combined_nonce = client_nonce + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = (f"r={self._combined_nonce},s={salt},"
                              f"i={int(credential.iterations)}")
        return self._server_first

    def _client_final(self, text: str) -> str:
        user = self._user
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed(None, "invalid-encoding (client-final has no proof)",
                                       user)
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise AuthenticationFailed(None, "invalid-encoding (client-final is c=...,r=...,"
                                       "p=...)", user)
        binding = _b64decode(attrs[0][1], "the channel binding", user)
        if not hmac.compare_digest(binding, self._gs2.encode()):
            raise AuthenticationFailed(None, "channel-bindings-dont-match", user)
        if not attrs[1][1].endswith(self._combined_nonce):  # Kafka's check (see above)
            raise AuthenticationFailed(None, "other-error (the nonce is not the server's)",
                                       user)
        proof = _b64decode(proof_text, "the proof", user)
        cred = self._credential
        assert cred is not None
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        signature = hmac.new(cred.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(signature):
            raise AuthenticationFailed(None, "invalid-proof" if self._known
                                       else "unknown-user", user)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        verified = hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                       cred.stored_key)
        if not self._known:
            raise AuthenticationFailed(None, "unknown-user", user)
        if not verified:
            raise AuthenticationFailed(None, "invalid-proof", user)
        server_signature = hmac.new(cred.server_key, auth_message, self._hash).digest()
        self._complete = True
        return "v=" + base64.b64encode(server_signature).decode()


__all__ = ["FAKE_ITERATIONS", "FAKE_SALT_BYTES", "HASHES", "CredentialLookup", "ScramServer",
           "StoredCredential", "stand_in"]
