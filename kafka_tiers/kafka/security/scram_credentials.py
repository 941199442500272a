"""SCRAM credentials (RFC 5802, RFC 7677; Kafka's KIP-84 and KIP-554): what a broker keeps of
a SCRAM user's password, and where.

A credential is ``(salt, StoredKey, ServerKey, iterations)``, never the password:

- ``SaltedPassword = Hi(password, salt, iterations)`` (PBKDF2-HMAC with the mechanism's hash),
- ``ClientKey = HMAC(SaltedPassword, "Client Key")``, ``StoredKey = H(ClientKey)``,
- ``ServerKey = HMAC(SaltedPassword, "Server Key")``.

The broker verifies a client's proof with ``StoredKey`` and proves itself with ``ServerKey``;
neither lets anyone log in without the password (or the SaltedPassword, which is never
kept). As in Kafka the client derives the SaltedPassword and sends it in
AlterUserScramCredentials; the broker keeps only the keys derived from it.

Mechanisms ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` with Kafka's type codes (1, 2) and
iteration bounds (:data:`MIN_ITERATIONS` 4096 to :data:`MAX_ITERATIONS` 16384).

:func:`credentials_of` gives the Kafka server's :class:`ScramCredentials`: every credential
of the cluster in the security state store's document ``scram-credentials`` (a cluster
member: the metadata store, shared by every broker; a standalone broker: a 0600 file in its
first log dir), cached in memory from the store's watch so a login reads no store.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.secret import Secret
from kafka_tiers.kafka.security.state_store import (
    SecurityStateError,
    SecurityStateStore,
    state_store_of,
)

if TYPE_CHECKING:
    from kafka_tiers.kafka.server import KafkaServer

#: the fewest iterations Kafka accepts for either mechanism
MIN_ITERATIONS = 4096
#: the most iterations Kafka accepts (its ScramControlManager.MAX_ITERATIONS)
MAX_ITERATIONS = 16384
#: Kafka's (and kafka-python's) default iteration count
DEFAULT_ITERATIONS = 4096
#: the salt length :func:`derive` makes when none is given
SALT_BYTES = 24
#: the security state document holding every credential
DOCUMENT = "scram-credentials"
#: the longest salt or salted password accepted from a client
MAX_FIELD_BYTES = 1024
#: the component key of a Kafka server's credentials (:func:`credentials_of`)
COMPONENT_KEY = "security.scram_credentials"
#: the security state document holding the cluster's key of unknown users' stand-in salts
STAND_IN_DOCUMENT = "scram-stand-in-key"
#: the length of that key in bytes
STAND_IN_KEY_BYTES = 32
#: after the store failed to give that key, seconds before it is asked again (unknown users'
#: logins never make a store request each)
STAND_IN_RETRY_S = 60.0


class ScramMechanism(enum.Enum):
    """A SCRAM mechanism: its SASL name, Kafka's type code (AlterUserScramCredentials'
    ``mechanism``) and its hash (hashlib's name)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name (``SCRAM-SHA-512``)."""
        return str(self.value[0])

    @property
    def type_code(self) -> int:
        """Kafka's wire code (1: SHA-256, 2: SHA-512)."""
        return int(self.value[1])

    @property
    def hash_name(self) -> str:
        """hashlib's name of the hash (``sha512``)."""
        return str(self.value[2])

    @property
    def digest_size(self) -> int:
        """The hash's output length in bytes."""
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def of(cls, value: ScramMechanism | str | int) -> ScramMechanism:
        """The mechanism named ``value`` (``SCRAM-SHA-512``, ``scram_sha_512``) or of type
        code ``value`` (2).

        Raises:
            ValueError: no such mechanism (the message lists the supported ones).
        """
        if isinstance(value, ScramMechanism):
            return value
        for m in cls:
            if isinstance(value, int) and not isinstance(value, bool):
                if m.type_code == value:
                    return m
            elif isinstance(value, str) and \
                    value.upper().replace("_", "-") == m.mechanism_name:
                return m
        raise ValueError(f"unsupported SCRAM mechanism {value!r}; supported: "
                         f"{', '.join(m.mechanism_name for m in cls)}")


#: the supported SASL mechanism names
MECHANISMS = tuple(m.mechanism_name for m in ScramMechanism)


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps of one user's password for one mechanism (see the module
    docstring). Its repr shows the iterations only, never key material."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def to_json(self) -> dict[str, Any]:
        """The stored form (base64 fields)."""
        return {"salt": _b64(self.salt), "stored_key": _b64(self.stored_key),
                "server_key": _b64(self.server_key), "iterations": self.iterations}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ScramCredential:
        """The credential of a stored form.

        Raises:
            ValueError: a missing or malformed field (the message names the field only).
        """
        out = {}
        for name in ("salt", "stored_key", "server_key"):
            try:
                out[name] = base64.b64decode(str(data[name]), validate=True)
            except (KeyError, binascii.Error, ValueError):
                raise ValueError(f"stored SCRAM credential: bad {name}") from None
        iterations = data.get("iterations")
        if not isinstance(iterations, int) or isinstance(iterations, bool):
            raise ValueError("stored SCRAM credential: bad iterations")
        return ScramCredential(out["salt"], out["stored_key"], out["server_key"], iterations)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def check_iterations(iterations: int) -> int:
    """``iterations`` when within Kafka's bounds.

    Raises:
        ValueError: below :data:`MIN_ITERATIONS` or above :data:`MAX_ITERATIONS`.
    """
    if not isinstance(iterations, int) or isinstance(iterations, bool) \
            or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"SCRAM iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}, "
                         f"got {iterations!r}")
    return iterations


def salted_password(password: Secret | str, mechanism: ScramMechanism | str | int,
                    salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(password, salt, iterations)``: PBKDF2-HMAC of the UTF-8 password
    with the mechanism's hash (what a client sends in AlterUserScramCredentials).

    Raises:
        ValueError: an unsupported mechanism, iterations out of range, an empty salt.
    """
    mech = ScramMechanism.of(mechanism)
    check_iterations(iterations)
    if not salt:
        raise ValueError("a SCRAM salt must not be empty")
    text = password.reveal() if isinstance(password, Secret) else password
    return hashlib.pbkdf2_hmac(mech.hash_name, text.encode("utf-8"), salt, iterations)


def from_salted_password(mechanism: ScramMechanism | str | int, salt: bytes,
                         salted: bytes, iterations: int) -> ScramCredential:
    """The credential of a SaltedPassword: ``StoredKey = H(HMAC(salted, "Client Key"))``,
    ``ServerKey = HMAC(salted, "Server Key")``.

    Raises:
        ValueError: an unsupported mechanism, iterations out of range, an empty salt or
            salted password.
    """
    mech = ScramMechanism.of(mechanism)
    check_iterations(iterations)
    if not salt or not salted:
        raise ValueError("a SCRAM salt and salted password must not be empty")
    client_key = hmac.new(salted, b"Client Key", mech.hash_name).digest()
    stored_key = hashlib.new(mech.hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", mech.hash_name).digest()
    return ScramCredential(bytes(salt), stored_key, server_key, iterations)


def derive(password: Secret | str, mechanism: ScramMechanism | str | int,
           iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
           ) -> ScramCredential:
    """The credential of ``password`` (a random :data:`SALT_BYTES`-byte salt unless given).

    Raises:
        ValueError: an unsupported mechanism, iterations out of range, an empty salt.
    """
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return from_salted_password(mechanism, salt,
                                salted_password(password, mechanism, salt, iterations),
                                iterations)


def _parse(doc: Any) -> dict[tuple[str, ScramMechanism], ScramCredential]:
    out: dict[tuple[str, ScramMechanism], ScramCredential] = {}
    users = doc.get("users") if isinstance(doc, dict) else None
    if not isinstance(users, dict):
        return out
    for user, mechs in users.items():
        if not isinstance(mechs, dict):
            continue
        for name, data in mechs.items():
            try:
                out[(str(user), ScramMechanism.of(name))] = ScramCredential.from_json(data)
            except (ValueError, TypeError, AttributeError):
                continue  # one damaged entry does not take the others' logins away
    return out


def _common_shapes(creds: Mapping[tuple[str, ScramMechanism], ScramCredential]
                   ) -> dict[ScramMechanism, tuple[int, int]]:
    """Per mechanism, the most common ``(iterations, salt length)`` of ``creds`` (a tie:
    the smallest of the most common)."""
    counts: dict[ScramMechanism, dict[tuple[int, int], int]] = {}
    for (_user, mech), cred in creds.items():
        shape = (cred.iterations, len(cred.salt))
        per = counts.setdefault(mech, {})
        per[shape] = per.get(shape, 0) + 1
    return {mech: min(per, key=lambda shape: (-per[shape], shape))
            for mech, per in counts.items()}


def _stand_in_key_of(doc: Any) -> bytes | None:
    """The key held by a :data:`STAND_IN_DOCUMENT` document, or None when malformed."""
    text = doc.get("key") if isinstance(doc, dict) else None
    try:
        key = base64.b64decode(str(text), validate=True) if text is not None else b""
    except (binascii.Error, ValueError):
        return None
    return key if len(key) == STAND_IN_KEY_BYTES else None


class ScramCredentials:
    """Every SCRAM credential of the cluster (see the module docstring).

    :meth:`lookup` answers from memory (kept current by the store's watch; a change made
    through this object is visible here at once). :meth:`upsert` and :meth:`delete` write
    through the shared store, so every broker sees them.

    The document is ``{"users": {user: {mechanism: credential}}, "serial": n}``; every
    write increases ``serial``, and a notification carrying a lower serial than the one
    held (a late delivery of an older document) is ignored, so a document is only ever
    replaced by a newer one (a deleted document resets it).
    """

    def __init__(self, store: SecurityStateStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._serial = -1
        self._creds: dict[tuple[str, ScramMechanism], ScramCredential] = {}
        self._shapes: dict[ScramMechanism, tuple[int, int]] = {}
        self._stand_in_key: bytes | None = None
        self._stand_in_failed = -STAND_IN_RETRY_S  # time.monotonic() of the last failure
        store.watch(DOCUMENT, self._apply)

    def _apply(self, doc: Any) -> None:
        serial = doc.get("serial", 0) if isinstance(doc, dict) else -1
        serial = serial if isinstance(serial, int) else 0
        parsed = _parse(doc)
        shapes = _common_shapes(parsed)
        with self._lock:
            # a late notification of an older document never undoes a newer one
            if doc is not None and serial < self._serial:
                return
            self._serial, self._creds, self._shapes = serial, parsed, shapes

    def lookup(self, user: str, mechanism: ScramMechanism | str | int
               ) -> ScramCredential | None:
        """The credential of ``user`` for ``mechanism``, or None (an unknown mechanism
        too). Reads no store."""
        try:
            mech = ScramMechanism.of(mechanism)
        except ValueError:
            return None
        return self._creds.get((user, mech))

    def stand_in_shape(self, mechanism: ScramMechanism | str | int) -> tuple[int, int]:
        """``(iterations, salt length)`` an unknown user's stand-in shows for
        ``mechanism``: those of the most common stored credential of that mechanism (so the
        answer does not tell an unknown user from most real ones), :data:`DEFAULT_ITERATIONS`
        and :data:`SALT_BYTES` when there is none. Reads no store."""
        try:
            mech = ScramMechanism.of(mechanism)
        except ValueError:
            return DEFAULT_ITERATIONS, SALT_BYTES
        return self._shapes.get(mech, (DEFAULT_ITERATIONS, SALT_BYTES))

    def stand_in_key(self) -> bytes:
        """The cluster's key of unknown users' stand-in salts: :data:`STAND_IN_KEY_BYTES`
        random bytes written once to the security state document
        :data:`STAND_IN_DOCUMENT` (the first broker to need it makes it; a compare-and-set
        keeps every broker on the same one), so every broker, a restarted one too, shows an
        unknown user the same salt and the salts cannot be computed without the store.
        Cached after the first call; after a failure the store is not asked again for
        :data:`STAND_IN_RETRY_S`.

        Raises:
            SecurityStateError: the store failed, now or less than :data:`STAND_IN_RETRY_S`
                ago (the caller falls back to a key of its own).
        """
        key = self._stand_in_key
        if key is not None:
            return key
        if time.monotonic() - self._stand_in_failed < STAND_IN_RETRY_S:
            raise SecurityStateError("the SCRAM stand-in key could not be read from the "
                                     "security state store lately; retried later",
                                     STAND_IN_DOCUMENT, retriable=True)
        fresh = _b64(os.urandom(STAND_IN_KEY_BYTES))

        def make(doc: Any) -> Any:
            if isinstance(doc, dict) and _stand_in_key_of(doc) is not None:
                return doc
            return {"key": fresh}

        try:
            key = _stand_in_key_of(self.store.update(STAND_IN_DOCUMENT, make))
        except SecurityStateError:
            self._stand_in_failed = time.monotonic()
            raise
        assert key is not None
        self._stand_in_key = key
        return key

    def describe(self, users: Iterable[str] | None = None
                 ) -> dict[str, list[tuple[ScramMechanism, int]]]:
        """``{user: [(mechanism, iterations), ...]}`` of ``users`` (every user with a
        credential when None); a user without one is left out."""
        creds = self._creds
        wanted = None if users is None else set(users)
        out: dict[str, list[tuple[ScramMechanism, int]]] = {}
        for (user, mech), cred in sorted(creds.items(), key=lambda kv: (kv[0][0],
                                                                       kv[0][1].type_code)):
            if wanted is None or user in wanted:
                out.setdefault(user, []).append((mech, cred.iterations))
        return out

    def alter(self, upsertions: Mapping[tuple[str, ScramMechanism], ScramCredential],
              deletions: Iterable[tuple[str, ScramMechanism]] = ()) -> set[str]:
        """Apply ``upsertions`` and ``deletions`` in one atomic write; returns the users
        of ``deletions`` that had no such credential (nothing is deleted for them, the rest
        is applied).

        Raises:
            SecurityStateError: the store failed or the document would be too large
                (nothing is applied).
        """
        missing: set[str] = set()
        deletions = list(deletions)

        def change(doc: Any) -> Any:
            missing.clear()
            doc = doc if isinstance(doc, dict) else {}
            users = doc.get("users") if isinstance(doc.get("users"), dict) else {}
            for user, mech in deletions:
                entry = users.get(user)
                if not isinstance(entry, dict) or entry.pop(mech.mechanism_name, None) is None:
                    missing.add(user)
                elif not entry:
                    del users[user]
            for (user, mech), cred in upsertions.items():
                entry = users.get(user)
                if not isinstance(entry, dict):
                    entry = users[user] = {}
                entry[mech.mechanism_name] = cred.to_json()
            serial = doc.get("serial", 0)
            return {"users": users, "serial": (serial if isinstance(serial, int) else 0) + 1}

        new = self.store.update(DOCUMENT, change)
        self._apply(new)
        return missing

    def upsert(self, user: str, mechanism: ScramMechanism | str | int, iterations: int,
               salt: bytes, salted_password: bytes) -> ScramCredential:
        """Add or replace ``user``'s credential for ``mechanism`` from a SaltedPassword
        (what AlterUserScramCredentials carries); returns it.

        Raises:
            ValueError: an empty user, an unsupported mechanism, iterations out of range,
                an empty salt or salted password.
            SecurityStateError: the store failed.
        """
        if not user:
            raise ValueError("a SCRAM user name must not be empty")
        mech = ScramMechanism.of(mechanism)
        cred = from_salted_password(mech, salt, salted_password, iterations)
        self.alter({(user, mech): cred})
        return cred

    def delete(self, user: str, mechanism: ScramMechanism | str | int) -> bool:
        """Remove ``user``'s credential for ``mechanism``; False when there was none.

        Raises:
            ValueError: an unsupported mechanism.
            SecurityStateError: the store failed.
        """
        mech = ScramMechanism.of(mechanism)
        return user not in self.alter({}, [(user, mech)])

    def close(self) -> None:
        """Nothing to release (the store is the server's own component)."""


def credentials_of(server: KafkaServer) -> ScramCredentials:
    """The Kafka server's one :class:`ScramCredentials` (made on first use over
    :func:`~kafka_tiers.kafka.security.state_store.state_store_of`)."""
    store = state_store_of(server)  # first: component() does not nest
    return server.component(COMPONENT_KEY, lambda _s: ScramCredentials(store))


__all__ = [
    "DEFAULT_ITERATIONS",
    "DOCUMENT",
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "STAND_IN_DOCUMENT",
    "ScramCredential",
    "ScramCredentials",
    "ScramMechanism",
    "check_iterations",
    "credentials_of",
    "derive",
    "from_salted_password",
    "salted_password",
]
