"""TLS on a Kafka listener: the server's ``ssl.SSLContext`` from Kafka's ``ssl.*`` keys, the
principal of a client certificate, and certificate reload without restart.

Kafka's counterparts: ``DefaultSslEngineFactory`` (keystore, truststore, protocols, ciphers,
client authentication), ``SslPrincipalMapper`` (``ssl.principal.mapping.rules``) and the SSL
part of ``DefaultKafkaPrincipalBuilder``. Where we differ:

- Keystores and truststores are PEM only (``ssl.keystore.type=PEM``, the default here; Kafka's
  default is JKS). A JKS or PKCS12 store is refused with one :class:`ConfigError` that gives
  the ``keytool``/``openssl`` command converting it. ``ssl.keystore.password`` and
  ``ssl.truststore.password`` do not apply to PEM (as in Kafka); ``ssl.key.password``
  decrypts an encrypted private key.
- ``ssl.cipher.suites`` takes OpenSSL names (``ECDHE-RSA-AES128-GCM-SHA256``); TLS 1.3 suites
  (``TLS_AES_128_GCM_SHA256``) are accepted but always enabled with TLS 1.3 (Python's ``ssl``
  cannot narrow them).
- ``ssl.enabled.protocols`` accepts TLSv1.2 and TLSv1.3 only: older versions are refused.
- A client certificate's subject is written as RFC 4514 (``CN=client,OU=eng,O=example``), as
  Java's ``X500Principal.getName()`` writes the usual attributes; attributes without a short
  name (``emailAddress``) are written ``<oid>=<value>`` where Java writes ``<oid>=#<DER hex>``.

What this module promises:

- every configuration problem is one :class:`ConfigError` raised while the context is built
  (at broker start), naming the key (the per-listener key when the override was given) and
  never a password or a private key;
- :meth:`ListenerTls.context` looks at the keystore and truststore files at most once a second
  (modification time, size, inode); when they changed it builds a new context for new
  connections; a broken new file keeps the old context and logs one WARN per change.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kafka_tiers.api.authorizer import ANONYMOUS, KafkaPrincipal
from kafka_tiers.api.errors import ConfigError
from kafka_tiers.api.secret import Secret
from kafka_tiers.kafka.security.config import listener_value

log = logging.getLogger(__name__)

#: how often (seconds, at most) the keystore and truststore files are looked at
RELOAD_CHECK_S = 1.0
#: the versions ssl.enabled.protocols may name, oldest first
SAFE_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
#: what ssl.protocol may be (the newest version a listener speaks)
CONTEXT_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")
#: versions named only to be refused (Kafka's older defaults)
UNSAFE_PROTOCOLS = ("SSLv2", "SSLv3", "TLSv1", "TLSv1.1", "SSL")
CLIENT_AUTH = ("none", "requested", "required")
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

_CONVERT_KEYSTORE = (
    "convert it to PEM (key and certificate chain in one file) and set "
    "ssl.keystore.type=PEM: for PKCS12, `openssl pkcs12 -in keystore.p12 -out keystore.pem` "
    "(the key stays encrypted: give its pass phrase as ssl.key.password); for JKS first "
    "`keytool -importkeystore -srckeystore keystore.jks -destkeystore keystore.p12 "
    "-deststoretype PKCS12`")
_CONVERT_TRUSTSTORE = (
    "convert it to PEM certificates and set ssl.truststore.type=PEM: for PKCS12, `openssl "
    "pkcs12 -in truststore.p12 -nokeys -out truststore.pem`; for JKS, `keytool -exportcert "
    "-rfc -alias <ca alias> -keystore truststore.jks -file truststore.pem`")

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


# ---------------------------------------------------------------------- value parsing
def store_type_problem(key: str, value: str) -> str | None:
    """Why ``value`` cannot be the store type ``key`` (``ssl.keystore.type`` or
    ``ssl.truststore.type``), or None for PEM."""
    kind = value.strip().upper()
    if kind == "PEM":
        return None
    how = _CONVERT_TRUSTSTORE if "truststore" in key else _CONVERT_KEYSTORE
    if kind in ("JKS", "PKCS12", "JCEKS", "BCFKS"):
        return f"PEM ({kind} is a Java store this broker does not read: {how})"
    return f"PEM (the only store type this broker reads; {how})"


def parse_protocols(text: str) -> tuple[str, ...]:
    """``ssl.enabled.protocols``: the TLS versions, each TLSv1.2 or TLSv1.3.

    Raises:
        ValueError: an empty list, an unknown or an unsafe version (the message says which).
    """
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise ValueError("at least one of TLSv1.2, TLSv1.3")
    for p in items:
        if p in UNSAFE_PROTOCOLS:
            raise ValueError(f"TLSv1.2 and/or TLSv1.3 ({p} is not safe and is refused)")
        if p not in SAFE_PROTOCOLS:
            raise ValueError(f"TLSv1.2 and/or TLSv1.3 (unknown protocol {p!r})")
    return tuple(sorted(set(items), key=SAFE_PROTOCOLS.index))


def parse_protocol(text: str) -> str:
    """``ssl.protocol``: TLS, TLSv1.2 or TLSv1.3 (the newest version spoken).

    Raises:
        ValueError: another value (SSL, TLSv1.1 and older are refused as unsafe).
    """
    value = text.strip()
    if value not in CONTEXT_PROTOCOLS:
        why = " is not safe" if value in UNSAFE_PROTOCOLS else " is unknown"
        raise ValueError(f"TLSv1.3, TLSv1.2 or TLS ({value!r}{why})")
    return value


def parse_cipher_suites(text: str) -> tuple[str, ...]:
    """``ssl.cipher.suites``: OpenSSL cipher names, comma-separated (empty: the defaults).

    Raises:
        ValueError: a name OpenSSL does not know (Java's IANA names included).
    """
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    if not names:
        return names
    known13 = {c["name"] for c in ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).get_ciphers()
               if c.get("protocol") == "TLSv1.3"}
    for name in names:
        if name in known13:
            continue
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            probe.set_ciphers(name)
        except ssl.SSLError:
            raise ValueError(f"OpenSSL cipher names such as ECDHE-RSA-AES128-GCM-SHA256 "
                             f"({name!r} is not one OpenSSL knows; `openssl ciphers -v` "
                             "lists them)") from None
    return names


# ---------------------------------------------------------------------- principal mapping
class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a certificate subject."""


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        if self.case == "L":
            return out.lower()
        if self.case == "U":
            return out.upper()
        return out


def _java_replacement(text: str, groups: int) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` function doing what Java's ``Matcher.replaceAll(text)`` does with Kafka's
    handling of back references: ``\\x`` is ``x``, ``$n`` is group ``n`` (more digits taken
    while the number stays a group), ``${name}`` a named group, and a ``$n`` beyond the
    groups stays literal."""
    parts: list[tuple[bool, str | int]] = []  # (is a group, literal text or group)
    i, lit = 0, []
    while i < len(text):
        ch = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if ch == "\\" and nxt:
            lit.append(nxt)
            i += 2
            continue
        if ch == "$" and nxt == "{" and text.find("}", i + 2) > 0:
            end = text.find("}", i + 2)
            parts += [(False, "".join(lit)), (True, text[i + 2:end])]
            lit, i = [], end + 1
            continue
        if ch == "$" and nxt.isdigit() and int(nxt) <= groups:
            num, j = int(nxt), i + 2
            while j < len(text) and text[j].isdigit() and num * 10 + int(text[j]) <= groups:
                num, j = num * 10 + int(text[j]), j + 1
            parts += [(False, "".join(lit)), (True, num)]
            lit, i = [], j
            continue
        lit.append(ch)
        i += 1
    parts.append((False, "".join(lit)))

    def replace(m: re.Match[str]) -> str:
        return "".join((m.group(v) or "") if is_group else str(v) for is_group, v in parts)

    return replace


class PrincipalMapper:
    """``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``): rules separated by
    commas, tried in order; ``DEFAULT`` gives the subject as it is;
    ``RULE:pattern/replacement/[L|U]`` applies when ``pattern`` (a regular expression) matches
    the whole subject and gives ``replacement`` (``$1`` for a group), lower- or upper-cased
    with ``L`` or ``U``."""

    def __init__(self, rules: tuple[_Rule, ...], text: str) -> None:
        self.rules = rules
        self.text = text

    @classmethod
    def parse(cls, text: str | None) -> PrincipalMapper:
        """The mapper of ``text`` (None or empty: ``DEFAULT``).

        Raises:
            ValueError: a rule that is not ``DEFAULT`` nor ``RULE:pattern/replacement/[LU]``,
                or a pattern that does not compile (the message names the rule).
        """
        text = (text or "DEFAULT").strip()
        rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text):
            rule = m.group(1)
            if rule is None:
                continue
            p = _RULE_PARSER.match(rule)
            if p is None or p.end() != len(rule):
                raise ValueError(f"a rule {rule!r} that is neither DEFAULT nor "
                                 "RULE:pattern/replacement/[L|U]")
            if p.group(1):
                rules.append(_Rule(None))
            elif p.group(2) is not None:
                try:
                    pattern = re.compile(p.group(2))
                except re.error as exc:
                    raise ValueError(f"rule {rule!r}: its pattern does not compile "
                                     f"({exc})") from None
                rules.append(_Rule(pattern, p.group(3), p.group(4)))
            # an empty rule is ignored, as Kafka does
        return cls(tuple(rules), text)

    def name(self, subject: str) -> str:
        """The principal name of certificate subject ``subject`` (RFC 2253).

        Raises:
            NoMatchingRule: no rule applies (the connection is refused).
        """
        for rule in self.rules:
            out = rule.apply(subject)
            if out is not None:
                return out
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules ({self.text}) applies "
                             f"to the certificate subject {subject!r}")


def mapping_rules_problem(text: str) -> str | None:
    """Why ``text`` is not a valid ``ssl.principal.mapping.rules``, or None."""
    try:
        PrincipalMapper.parse(text)
    except ValueError as exc:
        return f"DEFAULT and RULE:pattern/replacement/[L|U] rules, comma-separated ({exc})"
    return None


def certificate_subject(der: bytes) -> str:
    """The subject of a DER certificate as Kafka writes it (RFC 2253/4514:
    ``CN=client,OU=eng,O=example``)."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


# ---------------------------------------------------------------------- settings
@dataclass(frozen=True)
class TlsSettings:
    """One listener's TLS keys, resolved (a ``listener.name.<l>.`` override wins).

    ``keys`` maps each setting to the key it came from (shown in errors)."""

    listener: str
    keystore_location: str | None
    keystore_chain: str | None
    keystore_key: Secret | None
    key_password: Secret | None
    truststore_location: str | None
    truststore_certificates: str | None
    client_auth: str
    enabled_protocols: tuple[str, ...]
    protocol: str
    cipher_suites: tuple[str, ...]
    mapping_rules: str
    keys: dict[str, str]

    def watched_files(self) -> tuple[str, ...]:
        """The files whose change triggers a reload."""
        return tuple(p for p in (self.keystore_location, self.truststore_location) if p)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Secret):
        return value.reveal()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def tls_settings(config: Any, listener: str) -> TlsSettings:
    """The TLS settings of ``listener`` from a broker config (Kafka's ``ssl.*`` keys, each
    overridable as ``listener.name.<listener lower case>.ssl.*``).

    Raises:
        ConfigError: a bad value (naming the key actually given).
    """
    originals = getattr(config, "originals", {})
    keys: dict[str, str] = {}

    def get(key: str, default: str | None = None) -> Any:
        over = f"listener.name.{listener.lower()}.{key}"
        keys[key] = over if originals.get(over) is not None else key
        value = listener_value(config, listener, key, default)
        if isinstance(value, Secret):
            return value if value.reveal().strip() else None
        text = _text(value)
        return text.strip() if text is not None and text.strip() else default

    def fail(key: str, problem: str, value: str | None = None) -> ConfigError:
        shown = "" if value is None else f"invalid value {value!r} for "
        return ConfigError(f"{shown}{keys[key]}: expected {problem}" if shown else
                           f"{keys[key]}: {problem}", key=keys[key], value=value,
                           expected=problem)

    for store in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = get(store, "PEM")
        problem = store_type_problem(store, kind)
        if problem:
            raise fail(store, problem, kind)
    client_auth = str(get("ssl.client.auth", "none")).lower()
    if client_auth not in CLIENT_AUTH:
        raise fail("ssl.client.auth", "none, requested or required", client_auth)
    parsed: dict[str, Any] = {}
    for key, parse, default in (("ssl.enabled.protocols", parse_protocols, "TLSv1.2,TLSv1.3"),
                                ("ssl.protocol", parse_protocol, "TLSv1.3"),
                                ("ssl.cipher.suites", parse_cipher_suites, "")):
        raw = get(key, default)
        try:
            parsed[key] = parse(raw)
        except ValueError as exc:
            raise fail(key, str(exc), raw) from None
    rules = get("ssl.principal.mapping.rules", "DEFAULT")
    problem = mapping_rules_problem(rules)
    if problem:
        raise fail("ssl.principal.mapping.rules", problem, rules)
    key_secret = get("ssl.keystore.key")
    password = get("ssl.key.password")
    return TlsSettings(
        listener=listener,
        keystore_location=get("ssl.keystore.location"),
        keystore_chain=get("ssl.keystore.certificate.chain"),
        keystore_key=key_secret if isinstance(key_secret, Secret) or key_secret is None
        else Secret(str(key_secret)),
        key_password=password if isinstance(password, Secret) or password is None
        else Secret(str(password)),
        truststore_location=get("ssl.truststore.location"),
        truststore_certificates=get("ssl.truststore.certificates"),
        client_auth=client_auth,
        enabled_protocols=parsed["ssl.enabled.protocols"],
        protocol=parsed["ssl.protocol"],
        cipher_suites=parsed["ssl.cipher.suites"],
        mapping_rules=rules,
        keys=keys,
    )


# ---------------------------------------------------------------------- PEM material
def _pem_blocks(text: bytes) -> list[tuple[str, bytes]]:
    """The PEM blocks of ``text`` as (label, normalised PEM bytes). Whitespace inside a block
    may be anything (a properties file may put a block on one line, as Kafka allows)."""
    out = []
    for m in _PEM_BLOCK.finditer(text.decode("ascii", "replace")):
        label, body = m.group(1), re.sub(r"\s+", "", m.group(2))
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        pem = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"
        out.append((label, pem.encode("ascii")))
    return out


def _read_file(key: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}", key=key,
                          value=path, expected="a readable PEM file") from None


def _looks_like_java_store(data: bytes) -> str | None:
    if data[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    if data[:1] == b"\x30" and b"-----BEGIN" not in data[:4096]:
        return "PKCS12"
    return None


def _read_pem_store(key: str, location: str, store: str, convert: str) -> bytes:
    """The bytes of the PEM ``store`` file (``keystore`` or ``truststore``) that config key
    ``key`` names; a Java store (JKS, PKCS12) is refused with ``convert``, how to make PEM
    of it.

    Raises:
        ConfigError: the file cannot be read, or is a Java store.
    """
    data = _read_file(key, location)
    java = _looks_like_java_store(data)
    if java:
        raise ConfigError(f"{key}: {location} is a {java} {store}, not PEM; {convert}",
                          key=key, value=location)
    return data


@dataclass(frozen=True)
class _KeyStore:
    key: Any  # a cryptography private key
    chain: tuple[x509.Certificate, ...]


def _load_keystore(s: TlsSettings) -> _KeyStore:
    """The private key and certificate chain of ``s``, checked: present, readable, the key
    decrypted by ``ssl.key.password``, the leaf certificate matching the key."""
    pw = s.key_password.reveal().encode() if s.key_password is not None else None
    if s.keystore_location:
        cert_key = key_key = s.keys["ssl.keystore.location"]
        if s.keystore_chain or s.keystore_key:
            raise ConfigError(f"{cert_key} and ssl.keystore.certificate.chain/ssl.keystore.key "
                              "are both given; give one", key=cert_key)
        data = _read_pem_store(cert_key, s.keystore_location, "keystore", _CONVERT_KEYSTORE)
        blocks = _pem_blocks(data)
        cert_where = key_where = f"{cert_key} ({s.keystore_location})"
    elif s.keystore_chain or s.keystore_key:
        cert_key = s.keys["ssl.keystore.certificate.chain"]
        key_key = s.keys["ssl.keystore.key"]
        if not s.keystore_chain or not s.keystore_key:
            missing = cert_key if not s.keystore_chain else key_key
            raise ConfigError(f"{missing} is missing: ssl.keystore.certificate.chain and "
                              "ssl.keystore.key go together", key=missing)
        blocks = [b for b in _pem_blocks(s.keystore_chain.encode()) if b[0] == "CERTIFICATE"]
        blocks += [b for b in _pem_blocks(s.keystore_key.reveal().encode())
                   if b[0].endswith("PRIVATE KEY")]
        cert_where, key_where = cert_key, key_key
    else:
        name = s.keys["ssl.keystore.location"]
        raise ConfigError(
            f"listener {s.listener} is a TLS listener but has no certificate: set {name} (a "
            "PEM file with the private key and the certificate chain) or "
            "ssl.keystore.certificate.chain and ssl.keystore.key (with ssl.keystore.type=PEM)",
            key=name)
    key_blocks = [b for label, b in blocks if label.endswith("PRIVATE KEY")]
    certs = [b for label, b in blocks if label == "CERTIFICATE"]
    if len(key_blocks) != 1:
        raise ConfigError(f"{key_where}: expected one PEM private key, found "
                          f"{len(key_blocks)}", key=key_key)
    if not certs:
        raise ConfigError(f"{cert_where}: no PEM certificate found", key=cert_key)
    pw_key = s.keys["ssl.key.password"]
    try:
        key = serialization.load_pem_private_key(key_blocks[0], password=pw)
    except TypeError:
        if pw is None:
            raise ConfigError(f"{key_where}: the private key is encrypted; give its password "
                              f"as {pw_key}", key=pw_key) from None
        raise ConfigError(f"{pw_key} is given but the private key of {key_where} is not "
                          f"encrypted; remove {pw_key}", key=pw_key) from None
    except ValueError:
        if pw is not None:
            raise ConfigError(f"{pw_key} does not decrypt the private key of {key_where} "
                              "(wrong password, or not a key)", key=pw_key) from None
        raise ConfigError(f"{key_where}: the private key cannot be read (not a PEM key this "
                          "broker supports)", key=key_key) from None
    try:
        chain = tuple(x509.load_pem_x509_certificate(c) for c in certs)
    except ValueError:
        raise ConfigError(f"{cert_where}: a certificate cannot be read", key=cert_key
                          ) from None
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    if chain[0].public_key().public_bytes(enc, pub) != key.public_key().public_bytes(enc, pub):
        raise ConfigError(f"{cert_where}: the first certificate does not belong to the private "
                          "key (put the broker's own certificate first, then its issuers)",
                          key=cert_key)
    return _KeyStore(key, chain)


def _load_truststore(s: TlsSettings) -> str | None:
    """The trusted certificates of ``s`` as PEM text (None when no truststore is given)."""
    if s.truststore_location:
        key = s.keys["ssl.truststore.location"]
        if s.truststore_certificates:
            raise ConfigError(f"{key} and ssl.truststore.certificates are both given; give "
                              "one", key=key)
        data = _read_pem_store(key, s.truststore_location, "truststore", _CONVERT_TRUSTSTORE)
        where = f"{key} ({s.truststore_location})"
    elif s.truststore_certificates:
        key = s.keys["ssl.truststore.certificates"]
        data, where = s.truststore_certificates.encode(), key
    else:
        return None
    certs = [b for label, b in _pem_blocks(data) if label == "CERTIFICATE"]
    if not certs:
        raise ConfigError(f"{where}: no PEM certificate found", key=key)
    try:
        for c in certs:
            x509.load_pem_x509_certificate(c)
    except ValueError:
        raise ConfigError(f"{where}: a certificate cannot be read", key=key) from None
    return b"".join(certs).decode("ascii")


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path OpenSSL can open holding ``data``: an anonymous in-memory file (Linux), else a
    private temporary file removed at once after use."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd("kafka-tiers-keystore", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="kafka-tiers-keystore-")
    try:
        os.write(fd, data)
        os.close(fd)
        fd = -1
        yield path
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)


def _load_cert_chain(ctx: ssl.SSLContext, s: TlsSettings, store: _KeyStore) -> None:
    """Give ``ctx`` the key and certificate chain of ``store`` (the keystore of ``s``),
    through :func:`_memory_file`.

    Raises:
        ConfigError: OpenSSL refuses the certificate or the key (naming the keystore key).
    """
    pem = b"".join(
        [store.key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())]
        + [c.public_bytes(serialization.Encoding.PEM) for c in store.chain])
    with _memory_file(pem) as path:
        try:
            ctx.load_cert_chain(path)
        except ssl.SSLError as exc:
            where = s.keys["ssl.keystore.location"] if s.keystore_location \
                else s.keys["ssl.keystore.certificate.chain"]
            raise ConfigError(f"{where}: OpenSSL refused the certificate or key "
                              f"({exc.reason or exc})", key=where) from None


def build_server_context(s: TlsSettings) -> ssl.SSLContext:
    """The server ``SSLContext`` of ``s``: its certificate and key, the trusted CAs, client
    authentication, protocol versions and ciphers.

    Raises:
        ConfigError: a missing, unreadable or broken keystore or truststore, a wrong key
            password, client authentication without a truststore, or ciphers that leave
            nothing to negotiate.
    """
    store = _load_keystore(s)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.options |= getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    ctx.minimum_version = _VERSIONS[s.enabled_protocols[0]]
    newest = s.enabled_protocols[-1]
    if s.protocol == "TLSv1.2":
        if "TLSv1.2" not in s.enabled_protocols:
            key = s.keys["ssl.protocol"]
            raise ConfigError(f"{key}=TLSv1.2 but ssl.enabled.protocols has only TLSv1.3; "
                              "set ssl.protocol=TLSv1.3", key=key)
        newest = "TLSv1.2"
    ctx.maximum_version = _VERSIONS[newest]
    tls12 = [c for c in s.cipher_suites if not c.startswith("TLS_")]
    if s.cipher_suites:
        key = s.keys["ssl.cipher.suites"]
        if tls12:
            ctx.set_ciphers(":".join(tls12))
        elif newest == "TLSv1.2" or s.enabled_protocols[0] == "TLSv1.2":
            raise ConfigError(f"{key} names only TLS 1.3 suites, which TLS 1.2 cannot use; "
                              "add TLS 1.2 suites or set ssl.enabled.protocols=TLSv1.3",
                              key=key)
    _load_cert_chain(ctx, s, store)
    if tls12 and s.enabled_protocols == ("TLSv1.2",) and not ctx.get_ciphers():
        raise ConfigError(f"{s.keys['ssl.cipher.suites']}: no cipher left to negotiate",
                          key=s.keys["ssl.cipher.suites"])
    trusted = _load_truststore(s)
    if trusted is not None:
        ctx.load_verify_locations(cadata=trusted)
    if s.client_auth != "none":
        if trusted is None:
            key = s.keys["ssl.client.auth"]
            raise ConfigError(f"{key}={s.client_auth} needs the CAs that sign client "
                              "certificates: set ssl.truststore.location or "
                              "ssl.truststore.certificates (PEM)", key=key)
        ctx.verify_mode = ssl.CERT_REQUIRED if s.client_auth == "required" \
            else ssl.CERT_OPTIONAL
    leaf = store.chain[0]
    if leaf.not_valid_after_utc.timestamp() < time.time():
        log.warning("kafka listener %s: the broker certificate expired on %s; clients will "
                    "refuse it", s.listener, leaf.not_valid_after_utc.isoformat())
    return ctx


def build_client_context(s: TlsSettings, *, check_hostname: bool = True) -> ssl.SSLContext:
    """The connecting side's ``SSLContext`` of ``s`` (a broker connecting to another broker's
    internal transport, :mod:`kafka_tiers.cluster.transport_security`): the certificate and
    key of ``s`` presented, loaded and checked as :func:`build_server_context` loads them;
    the server's certificate always verified against the truststore of ``s``, its name
    checked against the address when ``check_hostname``; the protocol versions and TLS 1.2
    ciphers of ``s``.

    Raises:
        ConfigError: as :func:`build_server_context`.
    """
    store = _load_keystore(s)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.options |= ssl.OP_NO_COMPRESSION
    ctx.minimum_version = _VERSIONS[s.enabled_protocols[0]]
    newest = "TLSv1.2" if s.protocol == "TLSv1.2" else s.enabled_protocols[-1]
    ctx.maximum_version = _VERSIONS[newest]
    tls12 = [c for c in s.cipher_suites if not c.startswith("TLS_")]
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    _load_cert_chain(ctx, s, store)
    trusted = _load_truststore(s)
    if trusted is not None:
        ctx.load_verify_locations(cadata=trusted)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def keystore_certificate(s: TlsSettings) -> x509.Certificate:
    """The certificate ``s`` presents: the first of its keystore's chain.

    Raises:
        ConfigError: as :func:`build_server_context`.
    """
    return _load_keystore(s).chain[0]


# ---------------------------------------------------------------------- one listener
def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ListenerTls:
    """The TLS side of one SSL or SASL_SSL listener: its current context (reloaded when the
    keystore or truststore files change) and the principal of a client certificate.

    Thread-safe; :meth:`context` is meant to be called by the network thread on accept.

    Raises (constructor):
        ConfigError: see :func:`tls_settings` and :func:`build_server_context`.
    """

    def __init__(self, config: Any, listener: str) -> None:
        self.listener = listener
        self.settings = tls_settings(config, listener)
        self.mapper = PrincipalMapper.parse(self.settings.mapping_rules)
        self._files = self.settings.watched_files()
        self._stamps = tuple(_stamp(p) for p in self._files)
        self._context = build_server_context(self.settings)
        self._next_check = time.monotonic() + RELOAD_CHECK_S
        self._lock = threading.Lock()
        self._clients: dict[tuple[int, bool], ssl.SSLContext] = {}
        #: contexts built since start (1: the first); for tests and metrics
        self.generation = 1

    def context(self, now: float | None = None) -> ssl.SSLContext:
        """The context for a new connection; looks at the files when a second has passed
        since the last look and rebuilds the context if they changed."""
        now = time.monotonic() if now is None else now
        if now >= self._next_check and self._files:
            with self._lock:
                if now >= self._next_check:
                    self._next_check = now + RELOAD_CHECK_S
                    self._reload_if_changed()
        return self._context

    def _reload_if_changed(self) -> None:
        stamps = tuple(_stamp(p) for p in self._files)
        if stamps == self._stamps:
            return
        self._stamps = stamps  # a broken file is reported once, until it changes again
        try:
            ctx = build_server_context(self.settings)
        except ConfigError as exc:
            log.warning("kafka listener %s: the changed certificate files are not usable, "
                        "new connections keep the previous certificate: %s", self.listener, exc)
            return
        except Exception as exc:  # an OpenSSL surprise: never lose the working context
            log.warning("kafka listener %s: reloading the certificate files failed, new "
                        "connections keep the previous certificate: %s", self.listener,
                        type(exc).__name__)
            return
        self._context = ctx
        self.generation += 1
        log.info("kafka listener %s: certificate files changed; new connections use the "
                 "reloaded certificates", self.listener)

    def client_context(self, check_hostname: bool = True) -> ssl.SSLContext:
        """The context of this broker connecting to the same listener of another broker (an
        admin request forwarded to the controller): :func:`build_client_context` of this
        listener's settings, rebuilt after the files were reloaded.

        Raises:
            ConfigError: as :func:`build_client_context`.
        """
        self.context()  # looks at the files (at most once a second)
        key = (self.generation, check_hostname)
        with self._lock:
            ctx = self._clients.get(key)
            if ctx is None:
                ctx = build_client_context(self.settings, check_hostname=check_hostname)
                self._clients = {key: ctx}
            return ctx

    @staticmethod
    def subject(sock: ssl.SSLSocket) -> str | None:
        """The client certificate's subject (RFC 2253) of a connection whose handshake is
        done, or None when the client sent no certificate."""
        der = sock.getpeercert(binary_form=True)
        return certificate_subject(der) if der else None

    def principal(self, sock: ssl.SSLSocket) -> tuple[KafkaPrincipal, str | None]:
        """The principal and subject of a connection whose handshake is done:
        ``User:<mapped subject>`` with a client certificate, ``User:ANONYMOUS`` without.

        Raises:
            NoMatchingRule: no mapping rule applies to the certificate's subject.
        """
        subject = self.subject(sock)
        if subject is None:
            return ANONYMOUS, None
        return KafkaPrincipal("User", self.mapper.name(subject)), subject


__all__ = ["CLIENT_AUTH", "ListenerTls", "NoMatchingRule", "PrincipalMapper", "TlsSettings",
           "build_client_context", "build_server_context", "certificate_subject",
           "keystore_certificate", "mapping_rules_problem", "parse_cipher_suites",
           "parse_protocol", "parse_protocols", "store_type_problem", "tls_settings"]
