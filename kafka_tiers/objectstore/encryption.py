"""Encryption at rest of the remote tier: the key-encryption keys and the per-segment data keys.

Every segment gets a fresh 256-bit AES-GCM *data key* (:func:`new_data_key`); its chunks are
encrypted with it (:mod:`kafka_tiers.objectstore.transforms`). The data key is stored in the
segment's manifest only *wrapped*: encrypted with RSA-OAEP (SHA-256) under the public half of
a *key-encryption key pair*, whose id is stored beside it. Reading needs the private half.

Key pairs come from PEM files named in the plugin's settings (the ``rsm.config.`` keys with the
prefix stripped), as Aiven's tiered-storage plugin names them::

    encryption.enabled=true
    encryption.key.pair.id=k2                       # wraps new segments' data keys
    encryption.key.pairs=k1,k2                      # every pair known (old segments' too)
    encryption.key.pairs.k1.public.key.file=/etc/kafka/tier/k1-public.pem
    encryption.key.pairs.k1.private.key.file=/etc/kafka/tier/k1-private.pem
    encryption.key.pairs.k2.public.key.file=...
    encryption.key.pairs.k2.private.key.file=...

Rotation: add a pair and make it the ``encryption.key.pair.id``; new segments use it, old
ones stay readable with the old pair's private key until ``kafka-tiers remote rekey`` re-wraps
their data keys (manifests only are rewritten).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from kafka_tiers.api.errors import ConfigError, ManifestError

#: Bytes of a data key (AES-256).
DATA_KEY_BYTES = 32
#: The smallest RSA key accepted for a key-encryption key.
MIN_RSA_BITS = 2048
#: A key pair id: what the settings and manifests name it by.
KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

_OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(),
                     label=None)


class UnknownKeyError(ManifestError):
    """A manifest's data key is wrapped with a key pair whose private key is not configured.

    Attributes:
        key_id: the key pair id the manifest names.
    """

    def __init__(self, message: str, *, key_id: str, key: str | None = None,
                 segment_id: str | None = None) -> None:
        super().__init__(message, key=key, segment_id=segment_id)
        self.key_id = key_id


class KeyUnwrapError(ManifestError):
    """A wrapped data key does not decrypt with its key pair's private key: it was changed,
    or the configured private key is not the one the id names."""


def new_data_key() -> bytes:
    """A fresh random data key (:data:`DATA_KEY_BYTES` bytes, from the OS's CSPRNG)."""
    return os.urandom(DATA_KEY_BYTES)


@dataclass(frozen=True)
class KeyPair:
    """One key-encryption key pair (either half may be absent: a writer needs the public half,
    a reader the private one).

    Attributes:
        id: the key pair id.
        public_key: the RSA public key, or None.
        private_key: the RSA private key, or None.
    """

    id: str
    public_key: rsa.RSAPublicKey | None = field(default=None, repr=False)
    private_key: rsa.RSAPrivateKey | None = field(default=None, repr=False)


def _load_pem(path: str, what: str, config_key: str, *, private: bool
              ) -> rsa.RSAPublicKey | rsa.RSAPrivateKey:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{config_key}: cannot read {what} file {path}: "
                          f"{exc.strerror or exc}", key=config_key) from None
    try:
        key = (serialization.load_pem_private_key(raw, password=None) if private
               else serialization.load_pem_public_key(raw))
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        # never the file's content in the message: it may be a private key
        kind = type(exc).__name__
        raise ConfigError(f"{config_key}: {path} is not an unencrypted PEM {what} ({kind})",
                          key=config_key) from None
    wanted = rsa.RSAPrivateKey if private else rsa.RSAPublicKey
    if not isinstance(key, wanted):
        raise ConfigError(f"{config_key}: {path} holds a {type(key).__name__}, not an RSA "
                          f"{what}", key=config_key)
    if key.key_size < MIN_RSA_BITS:
        raise ConfigError(f"{config_key}: the RSA key in {path} has {key.key_size} bits; at "
                          f"least {MIN_RSA_BITS} are required", key=config_key)
    return key


class KeyRing:
    """The key-encryption key pairs of the settings, and the one that wraps new data keys.

    Args:
        pairs: the known pairs by id.
        active_id: the pair wrapping new data keys (must have its public key), or None for a
            read-only ring (readers: the CLI, Spark).

    Raises:
        ConfigError: ``active_id`` is not a known pair or has no public key.
    """

    def __init__(self, pairs: Mapping[str, KeyPair], active_id: str | None) -> None:
        self._pairs = dict(pairs)
        if active_id is not None:
            pair = self._pairs.get(active_id)
            if pair is None:
                raise ConfigError(f"encryption.key.pair.id={active_id} is not listed in "
                                  f"encryption.key.pairs ({', '.join(sorted(self._pairs))})",
                                  key="encryption.key.pair.id")
            if pair.public_key is None:
                raise ConfigError(f"encryption.key.pairs.{active_id}.public.key.file is not "
                                  "set: the active key pair wraps new data keys with it",
                                  key=f"encryption.key.pairs.{active_id}.public.key.file")
        self.active_id = active_id

    @classmethod
    def from_config(cls, config: Mapping[str, str], *, require_active: bool = True
                    ) -> KeyRing:
        """Read the key pairs of the settings (module docstring for the keys).

        Args:
            config: the plugin's settings (``rsm.config.`` stripped).
            require_active: whether ``encryption.key.pair.id`` must be set (a broker copying
                segments); False for readers, which need private keys only.

        Raises:
            ConfigError: a missing key, an unreadable or non-RSA PEM file, a key under 2048
                bits, an id of unsafe characters. Messages name keys and files, never key
                material.
        """
        listed = [p.strip() for p in str(config.get("encryption.key.pairs", "")).split(",")
                  if p.strip()]
        if not listed:
            raise ConfigError("encryption.key.pairs is empty: list the key pair ids "
                              "(encryption.key.pairs=k1,k2)", key="encryption.key.pairs")
        pairs: dict[str, KeyPair] = {}
        for pid in listed:
            if not KEY_ID.fullmatch(pid):
                raise ConfigError(f"encryption.key.pairs: {pid!r} is not a key pair id "
                                  "(1-64 of A-Z a-z 0-9 _ . -)", key="encryption.key.pairs")
            if pid in pairs:
                raise ConfigError(f"encryption.key.pairs lists {pid} twice",
                                  key="encryption.key.pairs")
            pub_key = f"encryption.key.pairs.{pid}.public.key.file"
            priv_key = f"encryption.key.pairs.{pid}.private.key.file"
            pub_path, priv_path = config.get(pub_key), config.get(priv_key)
            if not pub_path and not priv_path:
                raise ConfigError(f"key pair {pid} has neither {pub_key} nor {priv_key}",
                                  key=priv_key)
            public = _load_pem(str(pub_path), "public key", pub_key, private=False) \
                if pub_path else None
            private = _load_pem(str(priv_path), "private key", priv_key, private=True) \
                if priv_path else None
            if private is not None and public is None:
                public = private.public_key()  # type: ignore[union-attr]
            elif private is not None and public is not None:
                mine = private.public_key().public_numbers()  # type: ignore[union-attr]
                if mine != public.public_numbers():  # type: ignore[union-attr]
                    raise ConfigError(f"{pub_key} and {priv_key} are not one key pair",
                                      key=pub_key)
            pairs[pid] = KeyPair(pid, public, private)  # type: ignore[arg-type]
        active = str(config.get("encryption.key.pair.id", "")).strip() or None
        if active is None and require_active:
            raise ConfigError("encryption.key.pair.id is not set: name the key pair that wraps "
                              "new segments' data keys", key="encryption.key.pair.id")
        return cls(pairs, active)

    @property
    def ids(self) -> list[str]:
        """The known key pair ids, sorted."""
        return sorted(self._pairs)

    def wrap(self, data_key: bytes, key_id: str | None = None) -> tuple[str, bytes]:
        """Wrap ``data_key`` with a pair's public key (RSA-OAEP, SHA-256).

        Args:
            key_id: the pair to use (default: the active one).

        Returns:
            ``(key id, wrapped key)``.

        Raises:
            ConfigError: no such pair, no active pair, or the pair has no public key.
        """
        pid = key_id or self.active_id
        if pid is None:
            raise ConfigError("no key pair wraps new data keys: set encryption.key.pair.id",
                              key="encryption.key.pair.id")
        pair = self._pairs.get(pid)
        if pair is None or pair.public_key is None:
            raise ConfigError(f"key pair {pid} has no public key configured",
                              key=f"encryption.key.pairs.{pid}.public.key.file")
        return pid, pair.public_key.encrypt(data_key, _OAEP)

    def unwrap(self, key_id: str, wrapped: bytes, *, where: str = "a manifest",
               segment_id: str | None = None) -> bytes:
        """The data key of a manifest.

        Raises:
            UnknownKeyError: the key id is not configured, or only its public half is (the
                message names the id and the setting to add).
            KeyUnwrapError: the wrapped key does not decrypt (changed, or a different key
                under that id), or does not give a 256-bit key.
        """
        pair = self._pairs.get(key_id)
        if pair is None or pair.private_key is None:
            setting = f"encryption.key.pairs.{key_id}.private.key.file"
            raise UnknownKeyError(
                f"{where} is encrypted with key pair {key_id!r}, whose private key is not "
                f"configured (add {key_id} to encryption.key.pairs and set {setting})",
                key_id=key_id, segment_id=segment_id)
        try:
            data_key = pair.private_key.decrypt(wrapped, _OAEP)
        except ValueError:
            raise KeyUnwrapError(f"the data key of {where} does not decrypt with key pair "
                                 f"{key_id!r}: the wrapped key was changed, or the configured "
                                 "private key is not that pair's", segment_id=segment_id
                                 ) from None
        if len(data_key) != DATA_KEY_BYTES:
            raise KeyUnwrapError(f"the data key of {where} has {len(data_key)} bytes, not "
                                 f"{DATA_KEY_BYTES}", segment_id=segment_id)
        return data_key


__all__ = ["DATA_KEY_BYTES", "KEY_ID", "MIN_RSA_BITS", "KeyPair", "KeyRing", "KeyUnwrapError",
           "UnknownKeyError", "new_data_key"]
