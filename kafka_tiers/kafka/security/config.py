"""The security configuration keys, Kafka's names and defaults (registered in
:data:`kafka_tiers.config.SECTIONS`): TLS (:data:`TLS_KEYS`), SASL (:data:`SASL_KEYS`),
authorization (:data:`AUTHORIZER_KEYS`) and the brokers' own channel
(:data:`INTER_BROKER_KEYS`).

Per-listener overrides use Kafka's syntax, ``listener.name.<listener, lower case>.<key>``
(``listener.name.sasl_ssl.plain.sasl.jaas.config``, ``listener.name.ssl.ssl.client.auth``);
:func:`listener_value` resolves them. Values of such keys that hold credentials
(:func:`is_secret_key`) are handled as secrets: never logged, never in an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_tiers.api.secret import Secret
from kafka_tiers.config import ConfigKey

#: ssl.* keys (the TLS listeners' certificates, trust, client authentication, protocols)
TLS_KEYS: tuple[ConfigKey, ...] = ()
#: sasl.* keys (mechanisms, JAAS users, re-authentication, the unauthenticated byte bound)
SASL_KEYS: tuple[ConfigKey, ...] = ()
#: authorizer.class.name, super.users, allow.everyone.if.no.acl.found
AUTHORIZER_KEYS: tuple[ConfigKey, ...] = ()
#: inter.broker.listener.name, security.inter.broker.protocol and the internal transport's
INTER_BROKER_KEYS: tuple[ConfigKey, ...] = ()

#: every security key (the section registered in kafka_tiers.config.SECTIONS)
SECURITY_KEYS: tuple[ConfigKey, ...] = TLS_KEYS + SASL_KEYS + AUTHORIZER_KEYS + \
    INTER_BROKER_KEYS

#: suffixes of keys whose values are credentials wherever they appear
SECRET_SUFFIXES = ("password", "sasl.jaas.config", ".key", "secret")


def is_secret_key(name: str) -> bool:
    """Whether ``name`` (any key, a per-listener override too) holds a credential."""
    return name.endswith(SECRET_SUFFIXES)


def listener_value(config: Any, listener: str, key: str, default: Any = None) -> Any:
    """The value of ``key`` for ``listener``: ``listener.name.<listener lower>.<key>`` when
    given (raw text, a :class:`~kafka_tiers.api.Secret` for a credential), else the
    broker-wide ``key`` (typed, when declared), else ``default``."""
    originals: Mapping[str, Any] = getattr(config, "originals", {})
    override = originals.get(f"listener.name.{listener.lower()}.{key}")
    if override is not None:
        if is_secret_key(key) and not isinstance(override, Secret):
            return Secret(str(override))
        return override
    try:
        value = config[key]
    except KeyError:
        value = originals.get(key)
    return default if value is None else value


__all__ = ["AUTHORIZER_KEYS", "INTER_BROKER_KEYS", "SASL_KEYS", "SECURITY_KEYS", "TLS_KEYS",
           "is_secret_key", "listener_value"]
