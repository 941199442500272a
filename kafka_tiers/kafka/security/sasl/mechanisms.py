"""The SASL mechanisms a broker serves, and each SASL listener's settings, read once at
start-up from Kafka's keys (a bad value stops the broker with one error naming the key).

Served: ``PLAIN`` (users from a JAAS config), ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (the
SCRAM credential store). ``GSSAPI`` (Kerberos; Kafka's default for ``sasl.enabled.mechanisms``)
and ``OAUTHBEARER`` are refused by name: a SASL listener must set
``sasl.enabled.mechanisms`` (or ``listener.name.<listener>.sasl.enabled.mechanisms``).

Per SASL listener (``listener.name.<listener>.<key>`` wins over ``<key>``):

- ``sasl.enabled.mechanisms``: what SaslHandshake offers, in the order given;
- PLAIN's users: the ``user_<name>="<password>"`` options of
  ``listener.name.<listener>.plain.sasl.jaas.config``, else of ``sasl.jaas.config``
  (required when PLAIN is enabled);
- ``sasl.server.max.receive.size``: the largest frame read before authentication completes;
- ``connections.max.reauth.ms``: the session lifetime (0: sessions never expire).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.api.secret import Secret
from kafka_tiers.kafka.security.config import listener_value
from kafka_tiers.kafka.security.sasl.exchange import MechanismServer
from kafka_tiers.kafka.security.sasl.jaas import parse_jaas_config
from kafka_tiers.kafka.security.sasl.plain import PlainServer
from kafka_tiers.kafka.security.sasl.scram import HASHES, CredentialLookup, ScramServer
from kafka_tiers.kafka.security.session import SASL_PROTOCOLS

#: the mechanisms this broker serves
SERVED = ("PLAIN", *HASHES)
#: mechanisms Kafka knows that this broker refuses, and why
NOT_SERVED = {"GSSAPI": "Kerberos (GSSAPI) is not supported",
              "OAUTHBEARER": "OAUTHBEARER (OAuth 2 bearer tokens) is not supported"}
#: Kafka's default of sasl.server.max.receive.size
DEFAULT_MAX_RECEIVE_SIZE = 524288


@dataclass(frozen=True)
class ListenerSasl:
    """The SASL settings of one listener (see the module docstring).

    Attributes:
        listener: the listener name.
        mechanisms: the enabled mechanisms, in the order given.
        plain_users: PLAIN's user name -> password (empty when PLAIN is not enabled).
        max_receive_size: ``sasl.server.max.receive.size``.
        reauth_ms: ``connections.max.reauth.ms`` (0: never).
    """

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, Secret] = field(default_factory=dict, repr=False)
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE
    reauth_ms: int = 0

    def new_server(self, mechanism: str, credentials: CredentialLookup) -> MechanismServer:
        """A mechanism server for one authentication attempt.

        Raises:
            ValueError: ``mechanism`` is not enabled on this listener.
        """
        if mechanism not in self.mechanisms:
            raise ValueError(f"{mechanism} is not enabled on listener {self.listener}")
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return ScramServer(mechanism, credentials)


class SaslSettings:
    """Every SASL listener's :class:`ListenerSasl`, by listener name."""

    def __init__(self, listeners: Mapping[str, ListenerSasl]) -> None:
        self._listeners = dict(listeners)

    @classmethod
    def of(cls, config: Any, specs: Iterable[Any]) -> SaslSettings:
        """The settings of the SASL listeners among ``specs`` (``ListenerSpec``s).

        Raises:
            ConfigError: an unknown or unsupported mechanism, none enabled, PLAIN without a
                JAAS config or without users, a JAAS syntax error, a bad number.
        """
        out = {}
        for spec in specs:
            if spec.security_protocol in SASL_PROTOCOLS:
                out[spec.name] = listener_settings(config, spec.name)
        return cls(out)

    def listener(self, name: str) -> ListenerSasl | None:
        """The settings of listener ``name``; None when it is not a SASL listener."""
        return self._listeners.get(name)

    def max_receive_size(self, name: str) -> int:
        """``sasl.server.max.receive.size`` of listener ``name`` (Kafka's default for a
        listener that is not SASL)."""
        found = self._listeners.get(name)
        return found.max_receive_size if found is not None else DEFAULT_MAX_RECEIVE_SIZE


def _given(config: Any, listener: str, key: str) -> tuple[str, Any]:
    """``(the key that gave it, value)`` of ``key`` for ``listener``."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    originals: Mapping[str, Any] = getattr(config, "originals", {})
    if originals.get(prefixed) is not None:
        return prefixed, listener_value(config, listener, key)
    return key, listener_value(config, listener, key)


def _int(config: Any, listener: str, key: str, default: int, minimum: int) -> int:
    name, value = _given(config, listener, key)
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ConfigError(f"invalid value {str(value)!r} for {name}: expected an integer >= "
                          f"{minimum}", key=name, value=str(value),
                          expected=f"an integer >= {minimum}")
    return number


def listener_settings(config: Any, listener: str) -> ListenerSasl:
    """The SASL settings of one SASL listener (see :meth:`SaslSettings.of`)."""
    key, value = _given(config, listener, "sasl.enabled.mechanisms")
    names = [str(v).strip() for v in (value.split(",") if isinstance(value, str)
                                       else (value or ["GSSAPI"]))]
    names = [n for n in names if n]
    if not names:
        raise ConfigError(f"{key}: no SASL mechanism enabled for listener {listener}; give "
                          f"some of {', '.join(SERVED)}", key=key)
    for name in names:
        if name in NOT_SERVED:
            default = " (Kafka's default)" if key == "sasl.enabled.mechanisms" and \
                "sasl.enabled.mechanisms" not in getattr(config, "originals", {}) else ""
            raise ConfigError(f"{key}: {name}{default} is enabled for SASL listener "
                              f"{listener}, but {NOT_SERVED[name]}; set {key} to some of "
                              f"{', '.join(SERVED)}", key=key, value=",".join(names),
                              expected=f"some of {', '.join(SERVED)}")
        if name not in SERVED:
            raise ConfigError(f"{key}: {name!r} is not a SASL mechanism this broker serves "
                              f"(mechanism names are case-sensitive: {', '.join(SERVED)})",
                              key=key, value=",".join(names),
                              expected=f"some of {', '.join(SERVED)}")
    mechanisms = tuple(dict.fromkeys(names))
    users: dict[str, Secret] = {}
    if "PLAIN" in mechanisms:
        jaas_key, jaas = _given(config, listener, "plain.sasl.jaas.config")
        if jaas is None:
            jaas_key, jaas = _given(config, listener, "sasl.jaas.config")
        if jaas is None:
            raise ConfigError(
                f"listener {listener} enables PLAIN but no JAAS config gives its users: set "
                f"listener.name.{listener.lower()}.plain.sasl.jaas.config (or "
                "sasl.jaas.config) to org.apache.kafka.common.security.plain.PlainLoginModule "
                'required user_<name>="<password>" ...;', key="sasl.jaas.config")
        users = parse_jaas_config(jaas, jaas_key).users()
        if not users:
            raise ConfigError(f"{jaas_key}: no user_<name>=\"<password>\" option, so no "
                              f"client could authenticate with PLAIN on listener {listener}",
                              key=jaas_key)
    return ListenerSasl(
        listener, mechanisms, users,
        _int(config, listener, "sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE_SIZE, 1),
        _int(config, listener, "connections.max.reauth.ms", 0, 0))


__all__ = ["DEFAULT_MAX_RECEIVE_SIZE", "NOT_SERVED", "SERVED", "ListenerSasl", "SaslSettings",
           "listener_settings"]
