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

import re
from collections.abc import Mapping
from typing import Any

from kafka_tiers.api.secret import Secret
from kafka_tiers.config import Bool, Choice, ConfigKey, Int, List, String


def _tls_check(key: str) -> Any:
    """The check of a TLS key's broker-wide value (the parser lives in security.tls)."""

    def check(value: str) -> str | None:
        from kafka_tiers.kafka.security import tls
        if key.endswith(".type"):
            return tls.store_type_problem(key, value)
        if key == "ssl.principal.mapping.rules":
            return tls.mapping_rules_problem(value)
        parse = {"ssl.enabled.protocols": tls.parse_protocols,
                 "ssl.protocol": tls.parse_protocol,
                 "ssl.cipher.suites": tls.parse_cipher_suites}[key]
        try:
            parse(value)
        except ValueError as exc:
            return str(exc)
        return None

    return check


#: ssl.* keys (the TLS listeners' certificates, trust, client authentication, protocols);
#: each may be given per listener as listener.name.<listener>.ssl.* (kafka.security.tls)
TLS_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("ssl.keystore.type", String(), "PEM",
              "The format of the broker's key and certificate: PEM only (Kafka's default is "
              "JKS; a JKS or PKCS12 store is refused with the command converting it).",
              check=_tls_check("ssl.keystore.type")),
    ConfigKey("ssl.keystore.location", String(), None,
              "A PEM file holding the listener's private key and its certificate chain (the "
              "broker's certificate first); reloaded for new connections when it changes."),
    ConfigKey("ssl.keystore.certificate.chain", String(), None,
              "The certificate chain in PEM, in the config itself (with ssl.keystore.key; "
              "instead of ssl.keystore.location)."),
    ConfigKey("ssl.keystore.key", String(), None,
              "The private key in PEM, in the config itself (with "
              "ssl.keystore.certificate.chain).", secret=True),
    ConfigKey("ssl.key.password", String(), None,
              "The password of an encrypted private key (ssl.keystore.location or "
              "ssl.keystore.key).", secret=True),
    ConfigKey("ssl.keystore.password", String(), None,
              "Not used: PEM keystores have no store password (as in Kafka); the key's own "
              "password is ssl.key.password.", secret=True),
    ConfigKey("ssl.truststore.type", String(), "PEM",
              "The format of the trusted CA certificates: PEM only (Kafka's default is JKS).",
              check=_tls_check("ssl.truststore.type")),
    ConfigKey("ssl.truststore.location", String(), None,
              "A PEM file of the CA certificates that sign client certificates (needed with "
              "ssl.client.auth=requested or required); reloaded when it changes."),
    ConfigKey("ssl.truststore.certificates", String(), None,
              "The trusted CA certificates in PEM, in the config itself (instead of "
              "ssl.truststore.location)."),
    ConfigKey("ssl.truststore.password", String(), None,
              "Not used: PEM truststores have no password (as in Kafka).", secret=True),
    ConfigKey("ssl.client.auth", Choice("none", "requested", "required"), "none",
              "Client certificates on SSL listeners: none, requested (verified when given) or "
              "required (a client without a valid one is refused in the handshake)."),
    ConfigKey("ssl.enabled.protocols", String(), "TLSv1.2,TLSv1.3",
              "The TLS versions a listener accepts: TLSv1.2 and/or TLSv1.3 (older ones are "
              "refused).", check=_tls_check("ssl.enabled.protocols")),
    ConfigKey("ssl.protocol", String(), "TLSv1.3",
              "The newest TLS version spoken: TLSv1.3 (or TLS) or TLSv1.2.",
              check=_tls_check("ssl.protocol")),
    ConfigKey("ssl.cipher.suites", String(allow_empty=True), "",
              "TLS 1.2 cipher suites by OpenSSL name, comma-separated (empty: OpenSSL's "
              "secure defaults); TLS 1.3 suites are always those of OpenSSL.",
              check=_tls_check("ssl.cipher.suites")),
    ConfigKey("ssl.principal.mapping.rules", String(), "DEFAULT",
              "How a client certificate's subject (RFC 2253, CN=client,OU=eng,O=example) "
              "becomes the principal's name: DEFAULT (the subject) and "
              "RULE:pattern/replacement/[L|U] rules, first match wins (Kafka's syntax).",
              check=_tls_check("ssl.principal.mapping.rules")),
)
#: sasl.* keys (mechanisms, JAAS users, re-authentication, the unauthenticated byte bound)
SASL_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("sasl.enabled.mechanisms", List(), ["GSSAPI"],
              "The SASL mechanisms SASL listeners offer (listener.name.<l>.sasl.enabled."
              "mechanisms per listener): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. Kafka's default "
              "GSSAPI is not served: a SASL listener must set this key."),
    ConfigKey("sasl.jaas.config", String(), None,
              "A JAAS login module entry (Kafka's syntax); PLAIN's users are its "
              'user_<name>="<password>" options. listener.name.<l>.plain.sasl.jaas.config '
              "wins for one listener.", secret=True),
    ConfigKey("sasl.server.max.receive.size", Int(min=1, bits=32), 524288,
              "The largest request frame read on a SASL listener before the connection "
              "authenticated; a larger one closes the connection."),
    ConfigKey("connections.max.reauth.ms", Int(min=0), 0,
              "The lifetime of a SASL session (KIP-368): the client re-authenticates within "
              "it, else its next request closes the connection. 0: sessions never expire."),
    ConfigKey("connection.failed.authentication.delay.ms", Int(min=0), 100,
              "After a failed SASL authentication the broker holds the failure response and "
              "closes the connection only once this delay passed (the connection is not read "
              "meanwhile), so passwords cannot be guessed quickly. Must be below "
              "connections.max.idle.ms; 0: answer and close at once."),
)


def _authorizer_name(value: str) -> str | None:
    """``authorizer.class.name``: empty, an entry-point name, ``pkg.module:Class`` or one of
    Kafka's class names (aliases of the built-in ``acl``)."""
    if not value or re.fullmatch(r"[A-Za-z0-9_.-]+(:[A-Za-z_][A-Za-z0-9_.]*)?", value):
        return None
    return ("an entry-point name of group kafka_tiers.authorizer (acl), pkg.module:Class, "
            "or empty for no authorizer")


def _super_users(value: str) -> str | None:
    """``super.users``: principals ``TYPE:NAME`` separated by semicolons."""
    for item in value.split(";"):
        kind, sep, name = item.strip().partition(":")
        if item.strip() and (not sep or not kind or not name):
            return (f"principals TYPE:NAME separated by ';' (User:admin;User:CN=broker,O=x); "
                    f"{item.strip()!r} has no TYPE:")
    return None


#: authorizer.class.name, super.users, allow.everyone.if.no.acl.found
AUTHORIZER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("authorizer.class.name", String(allow_empty=True), "",
              "The authorizer: an entry-point name of group kafka_tiers.authorizer (acl, the "
              "built-in ACL authorizer; Kafka's kafka.security.authorizer.AclAuthorizer and "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer mean acl too) or "
              "pkg.module:Class; empty: no authorizer, every request is allowed.",
              check=_authorizer_name),
    ConfigKey("super.users", String(allow_empty=True), "",
              "Principals allowed everything, separated by ';' (User:admin;User:CN=broker).",
              check=_super_users),
    ConfigKey("allow.everyone.if.no.acl.found", Bool(), False,
              "With an authorizer: whether a resource no ACL names is open to everyone "
              "(Kafka's default false: it is closed to all but super users)."),
)
#: inter.broker.listener.name, security.inter.broker.protocol: the security of the brokers'
#: internal transport (:mod:`kafka_tiers.cluster.transport_security`)
INTER_BROKER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("inter.broker.listener.name", String(pattern=r"[A-Za-z][A-Za-z0-9_]*",
                                                   expected="a listener name of listeners"),
              None,
              "The listener whose security the brokers' internal transport takes (TLS with "
              "the listener's keystore and truststore on SSL and SASL_SSL); default: the "
              "listener of security.inter.broker.protocol. Give this or "
              "security.inter.broker.protocol, not both."),
    ConfigKey("security.inter.broker.protocol",
              Choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "PLAINTEXT",
              "The security protocol between brokers: PLAINTEXT (the internal transport is "
              "open to whoever reaches 127.0.0.1), SSL or SASL_SSL (TLS with mutual "
              "authentication; only principals in super.users are served). SASL_PLAINTEXT "
              "is refused: the internal transport needs TLS to authenticate brokers. A "
              "broker with a secured Kafka listener or an authorizer refuses to start on the "
              "PLAINTEXT default: give this key (PLAINTEXT, an isolated network) or "
              "inter.broker.listener.name explicitly."),
)

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
