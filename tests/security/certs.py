"""Test certificates made with ``cryptography``: PEM files in a directory.

:func:`write_test_certs` writes the whole set every security test uses and returns their paths
as a :class:`TestCerts`:

- a CA (``ca.pem``, ``ca.key``) that signs everything below except the foreign certificate;
- the broker's certificate (SAN ``127.0.0.1`` and ``localhost``): ``broker.pem`` (certificate),
  ``broker.key`` (unencrypted key), ``broker.key.enc`` (the key encrypted with
  :data:`BROKER_KEY_PASSWORD`), and ``broker-keystore.pem`` (key followed by the certificate
  chain: what ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` takes);
- a client certificate with subject ``CN=client,OU=eng,O=example`` (``client.pem``,
  ``client.key``);
- an expired client certificate from the same CA (``expired.pem``, ``expired.key``);
- another CA (``foreign-ca.pem``) and a client certificate it signed (``foreign.pem``,
  ``foreign.key``).

The lower-level :func:`make_ca`, :func:`make_cert` and :func:`write_pem` let a test make more
(a second broker certificate with a new serial for a reload test, a client with another
subject). Keys are EC P-256: fast to generate. Every function only writes inside the directory
it is given; writing the same names again replaces the files.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

BROKER_KEY_PASSWORD = "broker-key-secret"
"""The password of ``broker.key.enc`` (``ssl.key.password`` in a test)."""

CLIENT_SUBJECT = "CN=client,OU=eng,O=example"
"""The client certificate's subject as Kafka writes it (RFC 2253)."""

PrivateKey = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: PrivateKey


@dataclass(frozen=True)
class TestCerts:
    """Paths of the PEM files :func:`write_test_certs` wrote (all inside ``directory``)."""

    __test__ = False  # not a pytest test class

    directory: Path
    ca_cert: Path
    ca_key: Path
    broker_cert: Path
    broker_key: Path
    broker_key_encrypted: Path
    broker_keystore: Path
    client_cert: Path
    client_key: Path
    expired_cert: Path
    expired_key: Path
    foreign_ca_cert: Path
    foreign_cert: Path
    foreign_key: Path
    ca: Issued
    foreign_ca: Issued


def _name(rfc_order: list[tuple[x509.ObjectIdentifier, str]]) -> x509.Name:
    # RFC 2253 writes the last RDN first: build the Name in reverse so that
    # rfc4514_string() gives back the order the caller wrote
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in reversed(rfc_order)])


def subject(cn: str, ou: str | None = None, o: str | None = None) -> x509.Name:
    """The name ``CN=<cn>[,OU=<ou>][,O=<o>]`` in that RFC 2253 order."""
    parts: list[tuple[x509.ObjectIdentifier, str]] = [(NameOID.COMMON_NAME, cn)]
    if ou is not None:
        parts.append((NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    if o is not None:
        parts.append((NameOID.ORGANIZATION_NAME, o))
    return _name(parts)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def make_ca(common_name: str = "kafka-tiers test CA") -> Issued:
    """A self-signed CA certificate (valid from yesterday for 10 years) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = subject(common_name, o="example")
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(days=1))
        .not_valid_after(now + _dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def make_cert(ca: Issued, name: x509.Name, *, server: bool = False, client: bool = False,
              hosts: tuple[str, ...] = (), expired: bool = False,
              serial: int | None = None) -> Issued:
    """A leaf certificate for ``name`` signed by ``ca``.

    ``server``/``client`` set the extended key usages (both when neither is given); ``hosts``
    become subject alternative names (IP addresses where they parse as one, DNS names
    otherwise). ``expired`` makes one that ended yesterday. ``serial`` fixes the serial number
    (random otherwise)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    if expired:
        start, end = now - _dt.timedelta(days=30), now - _dt.timedelta(days=1)
    else:
        start, end = now - _dt.timedelta(days=1), now + _dt.timedelta(days=365)
    usages = []
    if server or not client:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client or not server:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(serial if serial is not None else x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                       critical=False)
    )
    if hosts:
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def cert_pem(cert: x509.Certificate) -> bytes:
    """The certificate in PEM."""
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: PrivateKey, password: str | None = None) -> bytes:
    """The private key in PKCS#8 PEM, encrypted with ``password`` when given."""
    enc: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def write_pem(path: Path, *parts: bytes) -> Path:
    """Write the PEM blocks ``parts`` one after another to ``path`` (replaced atomically: a
    reader never sees half a file) and return ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(parts))
    tmp.replace(path)
    return path


def write_broker_cert(directory: Path, ca: Issued, *, stem: str = "broker",
                      serial: int | None = None, password: str | None = None) -> Issued:
    """Write a broker certificate signed by ``ca`` (SAN ``127.0.0.1``, ``localhost``) as
    ``<stem>.pem``, ``<stem>.key`` (encrypted with ``password`` when given) and
    ``<stem>-keystore.pem`` (key then certificate then the CA: a PEM keystore). Returns it."""
    # both usages: a broker is the client of another broker on the internal transport
    issued = make_cert(ca, subject("broker", o="example"), server=True, client=True,
                       hosts=("127.0.0.1", "localhost"), serial=serial)
    write_pem(directory / f"{stem}.pem", cert_pem(issued.cert))
    write_pem(directory / f"{stem}.key", key_pem(issued.key, password))
    write_pem(directory / f"{stem}-keystore.pem", key_pem(issued.key, password),
              cert_pem(issued.cert), cert_pem(ca.cert))
    return issued


def write_test_certs(directory: Path) -> TestCerts:
    """Write the standard set (see the module docstring) into ``directory`` (created if
    missing) and return the paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca = make_ca()
    write_pem(d / "ca.pem", cert_pem(ca.cert))
    write_pem(d / "ca.key", key_pem(ca.key))
    broker = write_broker_cert(d, ca)
    write_pem(d / "broker.key.enc", key_pem(broker.key, BROKER_KEY_PASSWORD))
    client = make_cert(ca, subject("client", ou="eng", o="example"), client=True)
    write_pem(d / "client.pem", cert_pem(client.cert))
    write_pem(d / "client.key", key_pem(client.key))
    expired = make_cert(ca, subject("expired", ou="eng", o="example"), client=True,
                        expired=True)
    write_pem(d / "expired.pem", cert_pem(expired.cert))
    write_pem(d / "expired.key", key_pem(expired.key))
    foreign_ca = make_ca("another CA")
    write_pem(d / "foreign-ca.pem", cert_pem(foreign_ca.cert))
    foreign = make_cert(foreign_ca, subject("client", ou="eng", o="example"), client=True)
    write_pem(d / "foreign.pem", cert_pem(foreign.cert))
    write_pem(d / "foreign.key", key_pem(foreign.key))
    return TestCerts(
        directory=d, ca_cert=d / "ca.pem", ca_key=d / "ca.key",
        broker_cert=d / "broker.pem", broker_key=d / "broker.key",
        broker_key_encrypted=d / "broker.key.enc", broker_keystore=d / "broker-keystore.pem",
        client_cert=d / "client.pem", client_key=d / "client.key",
        expired_cert=d / "expired.pem", expired_key=d / "expired.key",
        foreign_ca_cert=d / "foreign-ca.pem", foreign_cert=d / "foreign.pem",
        foreign_key=d / "foreign.key", ca=ca, foreign_ca=foreign_ca)


__all__ = ["BROKER_KEY_PASSWORD", "CLIENT_SUBJECT", "Issued", "TestCerts", "cert_pem",
           "key_pem", "make_ca", "make_cert", "subject", "write_broker_cert", "write_pem",
           "write_test_certs"]
