"""SASL on the Kafka listener: PLAIN and SCRAM-SHA-256/512 with real clients
(confluent-kafka, kafka-python, kcat) on SASL_PLAINTEXT and SASL_SSL, failures each client
reports as an authentication failure, the pre-authentication gate and byte bound,
re-authentication (KIP-368); and unit tests of the SCRAM state machine (RFC 7677's test
vector), PLAIN, the JAAS parser and the configuration checks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.api.secret import Secret
from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.apis import sasl as sasl_api
from kafka_tiers.kafka.codec import REQUESTS, RESPONSES
from kafka_tiers.kafka.security import gate
from kafka_tiers.kafka.security.sasl.exchange import AuthenticationFailed, SaslExchange
from kafka_tiers.kafka.security.sasl.jaas import parse_jaas, parse_jaas_config
from kafka_tiers.kafka.security.sasl.plain import PlainServer
from kafka_tiers.kafka.security.sasl.scram import FAKE_ITERATIONS, FAKE_SALT_BYTES, ScramServer
from kafka_tiers.kafka.security.scram_credentials import (
    SALT_BYTES,
    ScramMechanism,
    credentials_of,
    derive,
)
from kafka_tiers.kafka.security.session import ConnectionSession
from tests.kafka.admin_helpers import recv_exact, wait_for
from tests.security.certs import TestCerts

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: user and password per mechanism (PLAIN from the JAAS config, SCRAM from the store)
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret-256"),
         "SCRAM-SHA-512": ("carol", "carol-secret-512")}


# ---------------------------------------------------------------------- client-side helpers
@dataclass(frozen=True)
class Credential:
    """A SCRAM credential as the server keeps it (the store's shape)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted(password: str, salt: bytes, iterations: int, hash_name: str) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def credential(password: str, salt: bytes, iterations: int, hash_name: str) -> Credential:
    sp = salted(password, salt, iterations, hash_name)
    client_key = hmac.new(sp, b"Client Key", hash_name).digest()
    return Credential(salt, hashlib.new(hash_name, client_key).digest(),
                      hmac.new(sp, b"Server Key", hash_name).digest(), iterations)


class DictLookup:
    """A credential lookup over a dict (the store's ``lookup`` method)."""

    def __init__(self, creds: dict[tuple[str, str], Credential]) -> None:
        self.creds = creds

    def lookup(self, user: str, mechanism: str) -> Credential | None:
        return self.creds.get((user, mechanism))


def scram_client_final(password: str, client_first_bare: str, server_first: str,
                       hash_name: str, gs2: str = "n,,") -> tuple[str, bytes]:
    """The client-final message and the ServerSignature the client expects (RFC 5802)."""
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    sp = salted(password, base64.b64decode(attrs["s"]), int(attrs["i"]), hash_name)
    client_key = hmac.new(sp, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.new(sp, b"Server Key", hash_name).digest()
    return (f"{without_proof},p={base64.b64encode(proof).decode()}",
            hmac.new(server_key, auth_message, hash_name).digest())


# ---------------------------------------------------------------------- SCRAM state machine
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def test_scram_sha256_rfc7677_test_vector() -> None:
    """RFC 7677 section 3: user "user", password "pencil", the RFC's nonces and salt give the
    RFC's server-first, client-final and server-final messages exactly."""
    creds = DictLookup({("user", "SCRAM-SHA-256"):
                        credential("pencil", RFC7677_SALT, 4096, "sha256")})
    server = ScramServer("SCRAM-SHA-256", creds, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert not server.complete
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.user == "user"


@pytest.mark.parametrize("mechanism,hash_name", [("SCRAM-SHA-256", "sha256"),
                                                 ("SCRAM-SHA-512", "sha512")])
def test_scram_round_trip_and_wrong_password(mechanism: str, hash_name: str) -> None:
    creds = DictLookup({("u,=x", mechanism): credential("pw", b"salt", 4096, hash_name)})
    for password, ok in (("pw", True), ("wrong", False)):
        server = ScramServer(mechanism, creds)
        bare = "n=u=2C=3Dx,r=abc"
        first = server.evaluate(f"n,,{bare}".encode()).decode()
        assert first.startswith("r=abc") and len(first.split(",")[0]) > len("r=abc") + 16
        final, expected_sig = scram_client_final(password, bare, first, hash_name)
        if ok:
            answer = server.evaluate(final.encode())
            assert answer == b"v=" + base64.b64encode(expected_sig)
            assert server.complete and server.user == "u,=x"
        else:
            with pytest.raises(AuthenticationFailed) as err:
                server.evaluate(final.encode())
            assert err.value.reason == "invalid-proof" and err.value.client_message is None
            assert not server.complete


def test_scram_unknown_user_looks_like_a_wrong_password() -> None:
    """An unknown user gets a server-first of the usual shape, the same salt on every probe
    (and another user another salt), and fails at the proof with the same client message as
    a wrong password."""
    creds = DictLookup({})

    def first_of(user: str) -> str:
        return ScramServer("SCRAM-SHA-512", creds).evaluate(
            f"n,,n={user},r=nonce1".encode()).decode()

    a1, a2, b1 = first_of("ghost"), first_of("ghost"), first_of("phantom")
    salt_a = a1.split(",")[1]
    assert salt_a == a2.split(",")[1] != b1.split(",")[1]
    assert a1.endswith(f",i={FAKE_ITERATIONS}")
    assert len(base64.b64decode(salt_a[2:])) == FAKE_SALT_BYTES == SALT_BYTES
    server = ScramServer("SCRAM-SHA-512", creds)
    first = server.evaluate(b"n,,n=ghost,r=nonce1").decode()
    final, _ = scram_client_final("any", "n=ghost,r=nonce1", first, "sha512")
    with pytest.raises(AuthenticationFailed) as err:
        server.evaluate(final.encode())
    assert err.value.client_message is None and err.value.reason == "unknown-user"


@pytest.mark.parametrize("client_first,reason", [
    (b"p=tls-unique,,n=user,r=abc", "channel-binding-not-supported"),
    (b"y,,n=user,r=abc", "server-does-support-channel-binding"),
    (b"n,,n=user,r=abc,tokenauth=true", "extensions-not-supported"),
    (b"n,,m=ext,n=user,r=abc", "extensions-not-supported"),
    (b"n,a=other,n=user,r=abc", "invalid-encoding"),
    (b"n,,n=us=er,r=abc", "invalid-username-encoding"),
    (b"n,,r=abc", "invalid-encoding"),
    (b"n,,n=user,r=a,b", "invalid-encoding"),
    (b"\xff\xfe", "invalid-encoding"),
])
def test_scram_client_first_refusals(client_first: bytes, reason: str) -> None:
    creds = DictLookup({("user", "SCRAM-SHA-256"): credential("pw", b"s", 4096, "sha256")})
    with pytest.raises(AuthenticationFailed) as err:
        ScramServer("SCRAM-SHA-256", creds).evaluate(client_first)
    assert err.value.reason.startswith(reason)


def test_scram_authzid_equal_to_the_user_is_accepted() -> None:
    creds = DictLookup({("user", "SCRAM-SHA-256"): credential("pw", b"s", 4096, "sha256")})
    server = ScramServer("SCRAM-SHA-256", creds)
    first = server.evaluate(b"n,a=user,n=user,r=abc").decode()
    final, _ = scram_client_final("pw", "n=user,r=abc", first, "sha256", gs2="n,a=user,")
    server.evaluate(final.encode())
    assert server.complete


@pytest.mark.parametrize("tamper,reason", [
    (lambda f: f.replace("c=biws", "c=eSws"), "channel-bindings-dont-match"),
    (lambda f: f.replace("r=abc", "r=abd", 1), "other-error"),
    (lambda f: f.split(",p=")[0], "invalid-encoding"),
    (lambda f: f.split(",p=")[0] + ",p=!!", "invalid-encoding"),
    (lambda f: f.split(",p=")[0] + ",p=AAAA", "invalid-proof"),
])
def test_scram_client_final_refusals(tamper: Callable[[str], str], reason: str) -> None:
    creds = DictLookup({("user", "SCRAM-SHA-256"): credential("pw", b"s", 4096, "sha256")})
    server = ScramServer("SCRAM-SHA-256", creds)
    first = server.evaluate(b"n,,n=user,r=abc").decode()
    final, _ = scram_client_final("pw", "n=user,r=abc", first, "sha256")
    with pytest.raises(AuthenticationFailed) as err:
        server.evaluate(tamper(final).encode())
    assert err.value.reason.startswith(reason)
    assert not server.complete


def test_scram_message_after_the_end_is_refused() -> None:
    creds = DictLookup({("user", "SCRAM-SHA-256"): credential("pw", b"s", 4096, "sha256")})
    server = ScramServer("SCRAM-SHA-256", creds)
    first = server.evaluate(b"n,,n=user,r=abc").decode()
    server.evaluate(scram_client_final("pw", "n=user,r=abc", first, "sha256")[0].encode())
    with pytest.raises(AuthenticationFailed):
        server.evaluate(b"c=biws")


# ---------------------------------------------------------------------- PLAIN
@pytest.mark.parametrize("token,reason", [
    (b"\0alice\0alice-secret", None),
    (b"alice\0alice\0alice-secret", None),
    (b"admin\0alice\0alice-secret", "the authorization id differs"),
    (b"\0alice\0wrong", "wrong password"),
    (b"\0mallory\0alice-secret", "unknown user"),
    (b"\0alice", "malformed"),
    (b"\0\0pw", "without a user name"),
    (b"\0alice\0", "without a password"),
])
def test_plain(token: bytes, reason: str | None) -> None:
    server = PlainServer({"alice": Secret("alice-secret")})
    if reason is None:
        assert server.evaluate(token) == b"" and server.complete and server.user == "alice"
        with pytest.raises(AuthenticationFailed):
            server.evaluate(token)  # one token only
        return
    with pytest.raises(AuthenticationFailed) as err:
        server.evaluate(token)
    assert reason in err.value.reason and not server.complete
    assert err.value.client_message == "Authentication failed: Invalid username or password"


# ---------------------------------------------------------------------- JAAS
def test_jaas_kafka_example() -> None:
    module = parse_jaas_config(Secret(PLAIN_JAAS), "sasl.jaas.config")
    assert module.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.control_flag == "required"
    assert module.options["username"] == "admin"  # not a secret: logs keep "admin"
    assert isinstance(module.options["password"], Secret)
    assert module.options["password"].reveal() == "admin-secret"
    users = module.users()
    assert sorted(users) == ["admin", "alice"]
    assert users["alice"].reveal() == "alice-secret"
    assert "alice-secret" not in repr(module)


def test_jaas_quoting_escapes_comments_and_words() -> None:
    text = ('// a comment\n x.Y Optional /* inline */ user_a="q\\"uo\\\\te;=" '
            'user_b=bare_word\n\tuser_c = "tab\\there" ;')
    module = parse_jaas_config(text, "k")
    assert module.control_flag == "optional"
    assert {u: p.reveal() for u, p in module.users().items()} == {
        "a": 'q"uo\\te;=', "b": "bare_word", "c": "tab\there"}
    two = parse_jaas("a.B required; c.D sufficient serviceName=\"kafka\" tokenKey=\"t0k\";",
                     "k")
    assert [m.login_module for m in two] == ["a.B", "c.D"]
    assert two[1].options["serviceName"] == "kafka"  # text: "kafka" stays in log lines
    assert isinstance(two[1].options["tokenKey"], Secret)


@pytest.mark.parametrize("text,position", [
    ('a.B required user_x="secret-value"', 35),
    ('a.B required user_x="secret-value;', 21),
    ('a.B maybe user_x="secret-value";', 5),
    ('a.B required user_x "secret-value";', 21),
    ('a.B required user_x="secret-value" user_x="secret-value";', 36),
    ('', 1),
    ('a.B required /* x', 14),
])
def test_jaas_errors_name_key_and_position_never_the_value(text: str, position: int) -> None:
    key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    with pytest.raises(ConfigError) as err:
        parse_jaas_config(Secret(text), key)
    message = str(err.value)
    assert err.value.key == key and message.startswith(key)
    assert f"character {position}:" in message
    assert "secret-value" not in message and err.value.value is None


def test_jaas_config_holds_one_module() -> None:
    with pytest.raises(ConfigError, match="2 login modules"):
        parse_jaas_config('a.B required; c.D required;', "sasl.jaas.config")


# ---------------------------------------------------------------------- gate (unit)
def test_gate_states() -> None:
    s = ConnectionSession.new("SASL_PLAINTEXT", "SASL_PLAINTEXT", "1.2.3.4:5", "1.2.3.4")
    assert not s.authenticated
    assert gate.refusal(s, 18, 0.0) is None and gate.refusal(s, 17, 0.0) is None
    assert "before SASL authentication" in (gate.refusal(s, 3, 0.0) or "")
    s.sasl = SaslExchange("PLAIN", None)
    assert gate.refusal(s, 36, 0.0) is None
    assert "during a SASL exchange" in (gate.refusal(s, 18, 0.0) or "")
    assert not gate.closes_after_response(s)
    s.sasl.failed = True
    assert gate.closes_after_response(s) and gate.refusal(s, 36, 0.0)
    s.sasl, s.authenticated, s.reauth_deadline = None, True, 10.0
    assert gate.refusal(s, 3, 9.0) is None
    assert "expired" in (gate.refusal(s, 3, 11.0) or "")
    assert gate.refusal(s, 17, 11.0) is None  # the start of a re-authentication


# ---------------------------------------------------------------------- configuration
def _start(tmp_path: Any, **config: str) -> Broker:
    cfg = {"broker.id": "1", "log.dirs": str(tmp_path / "data"),
           "listeners": "SASL_PLAINTEXT://127.0.0.1:0", **config}
    return Broker(cfg).start()


@pytest.mark.parametrize("config,match", [
    ({}, r"sasl.enabled.mechanisms: GSSAPI \(Kafka's default\) is enabled for SASL listener "
         r"SASL_PLAINTEXT, but Kerberos \(GSSAPI\) is not supported"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER"}, "OAUTHBEARER"),
    ({"sasl.enabled.mechanisms": "scram-sha-256"}, "case-sensitive"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "enables PLAIN but no JAAS config"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": 'x.Plain required username="a" password="pw-123";'},
     "no user_<name>"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x.P required user_a="pw-123"'},
     r"listener.name.sasl_plaintext.plain.sasl.jaas.config: JAAS syntax error at character"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256",
      "listener.name.sasl_plaintext.sasl.server.max.receive.size": "0"},
     "listener.name.sasl_plaintext.sasl.server.max.receive.size"),
])
def test_config_refusals(tmp_path: Any, config: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        _start(tmp_path, **config)
    assert "pw-123" not in str(err.value)


def test_listener_keys_read_are_not_reported_as_ignored() -> None:
    from kafka_tiers.config import BrokerConfig
    cfg = BrokerConfig({"listener.name.a.plain.sasl.jaas.config": PLAIN_JAAS,
                        "listener.name.a.sasl.enabled.mechanisms": "PLAIN",
                        "listener.name.a.connections.max.reauth.ms": "1000",
                        "listener.name.a.scram-sha-256.sasl.jaas.config": "x.S required;"})
    assert cfg.warnings == ["Kafka broker keys kafka-tiers does not implement, ignored: "
                            "listener.name.a.scram-sha-256.sasl.jaas.config"]
    assert "admin-secret" not in repr(cfg)


def test_plaintext_listener_ignores_the_gssapi_default(tmp_path: Any) -> None:
    broker = Broker({"broker.id": "1", "log.dirs": str(tmp_path / "d"),
                     "listeners": "PLAINTEXT://127.0.0.1:0"}).start()
    broker.shutdown()


# ---------------------------------------------------------------------- raw client
class RawClient:
    """A Kafka connection driven by hand (kafka-python's message classes)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.corr = 0

    def send(self, api_key: int, version: int, **fields: Any) -> None:
        self.corr += 1
        req = REQUESTS[api_key][version](**fields)
        req.with_header(correlation_id=self.corr, client_id="raw-sasl")
        self.sock.sendall(bytes(req.encode(header=True, framed=True)))

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        self.send(api_key, version, **fields)
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        resp = RESPONSES[api_key].decode(recv_exact(self.sock, size), version=version,
                                         header=True)
        assert resp.header.correlation_id == self.corr
        return resp

    def closed(self, within: float = 3.0) -> bool:
        """Whether the broker closed the connection (EOF) within ``within`` seconds."""
        self.sock.settimeout(within)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def metadata(self) -> Any:
        return self.call(3, 4, topics=[], allow_auto_topic_creation=False)

    def plain(self, user: str, password: str, version: int = 1) -> Any:
        hs = self.call(17, 1, mechanism="PLAIN")
        assert hs.error_code == 0, hs
        return self.call(36, version, auth_bytes=f"\0{user}\0{password}".encode())

    def scram(self, mechanism: str, user: str, password: str) -> Any:
        hash_name = "sha256" if mechanism.endswith("256") else "sha512"
        hs = self.call(17, 1, mechanism=mechanism)
        assert hs.error_code == 0, hs
        bare = f"n={user},r={uuid.uuid4().hex}"
        first = self.call(36, 2, auth_bytes=f"n,,{bare}".encode())
        assert first.error_code == 0, first
        final, sig = scram_client_final(password, bare, first.auth_bytes.decode(), hash_name)
        resp = self.call(36, 2, auth_bytes=final.encode())
        if resp.error_code == 0:
            assert resp.auth_bytes == b"v=" + base64.b64encode(sig)
        return resp

    def close(self) -> None:
        self.sock.close()


# ---------------------------------------------------------------------- brokers
def _add_scram_users(broker: Broker) -> None:
    """The SCRAM users of :data:`USERS`, through the SCRAM credential store's API."""
    assert broker.kafka_server is not None
    creds = credentials_of(broker.kafka_server)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        user, password = USERS[mechanism]
        creds.alter({(user, ScramMechanism.of(mechanism)): derive(password, mechanism)})


@pytest.fixture
def sasl_broker(make_kafka_broker: Callable[..., Broker]) -> Callable[..., Broker]:
    """``make(**config)``: a started broker with one SASL_PLAINTEXT listener serving PLAIN
    (alice, admin) and SCRAM-SHA-256/512 (bob, carol)."""
    def make(**config: str) -> Broker:
        cfg = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
               "sasl.enabled.mechanisms": ",".join(MECHANISMS),
               "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS, **config}
        broker = make_kafka_broker(**cfg)
        _add_scram_users(broker)
        return broker
    return make


def _ck_conf(broker: Broker, mechanism: str, user: str | None = None,
             password: str | None = None, protocol: str = "SASL_PLAINTEXT",
             **extra: Any) -> dict[str, Any]:
    u, p = USERS[mechanism]
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": user or u,
            "sasl.password": password or p, "socket.timeout.ms": 5000,
            "message.timeout.ms": 8000, **extra}


def _create_topic(conf: dict[str, Any], topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({k: v for k, v in conf.items() if k != "message.timeout.ms"})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)


def _ck_produce_consume(conf: dict[str, Any], topic: str, n: int = 3) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    producer = Producer(conf)
    for i in range(n):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(10) == 0
    consumer = Consumer({k: v for k, v in conf.items() if k != "message.timeout.ms"}
                        | {"group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        consumer.close()


# ---------------------------------------------------------------------- real clients
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produce_consume(sasl_broker: Callable[..., Broker],
                                         mechanism: str) -> None:
    broker = sasl_broker()
    conf = _ck_conf(broker, mechanism)
    topic = f"ck-{mechanism.lower()}"
    _create_topic(conf, topic)
    assert _ck_produce_consume(conf, topic) == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produce_consume(sasl_broker: Callable[..., Broker],
                                      mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    broker = sasl_broker()
    user, password = USERS[mechanism]
    sec = {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
           "sasl_mechanism": mechanism, "sasl_plain_username": user,
           "sasl_plain_password": password, "request_timeout_ms": 8000}
    topic = f"kp-{mechanism.lower()}"
    admin = KafkaAdminClient(**sec)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**sec, max_block_ms=8000)
    try:
        for i in range(3):
            producer.send(topic, f"m{i}".encode()).get(timeout=10)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, **sec, group_id="kp", auto_offset_reset="earliest",
                             consumer_timeout_ms=8000)
    try:
        got = [m.value for _, m in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == [b"m0", b"m1", b"m2"]


def _kcat_args(broker: Broker, mechanism: str, password: str | None = None,
               protocol: str = "SASL_PLAINTEXT", extra: tuple[str, ...] = ()) -> list[str]:
    user, pw = USERS[mechanism]
    return ["-b", broker.bootstrap_servers, "-X", f"security.protocol={protocol}",
            "-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={password or pw}", "-X", "socket.timeout.ms=5000", *extra]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_produce_consume(sasl_broker: Callable[..., Broker], kcat: str,
                              mechanism: str) -> None:
    broker = sasl_broker()
    topic = f"kcat-{mechanism.lower()}"
    _create_topic(_ck_conf(broker, mechanism), topic)
    args = _kcat_args(broker, mechanism)
    subprocess.run([kcat, *args, "-P", "-t", topic], input=b"k1\nk2\n", check=True,
                   timeout=30, capture_output=True)
    out = subprocess.run([kcat, *args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         check=True, timeout=30, capture_output=True)
    assert out.stdout.split() == [b"k1", b"k2"]


def test_sasl_ssl_with_every_client(sasl_broker: Callable[..., Broker], certs: TestCerts,
                                    kcat: str) -> None:
    """SASL_SSL: confluent-kafka with SCRAM-SHA-512, kafka-python with SCRAM-SHA-256 and kcat
    with PLAIN, over TLS (the broker certificate of tests/security/certs.py)."""
    from kafka import KafkaProducer
    broker = sasl_broker(**{
        "listeners": "SASL_SSL://127.0.0.1:0",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore)})
    conf = _ck_conf(broker, "SCRAM-SHA-512", protocol="SASL_SSL",
                    **{"ssl.ca.location": str(certs.ca_cert)})
    _create_topic(conf, "tls")
    assert _ck_produce_consume(conf, "tls") == [b"m0", b"m1", b"m2"]
    user, password = USERS["SCRAM-SHA-256"]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                             security_protocol="SASL_SSL", ssl_cafile=str(certs.ca_cert),
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user,
                             sasl_plain_password=password, max_block_ms=8000)
    try:
        producer.send("tls", b"kp").get(timeout=10)
    finally:
        producer.close()
    args = _kcat_args(broker, "PLAIN", protocol="SASL_SSL",
                      extra=("-X", f"ssl.ca.location={certs.ca_cert}"))
    out = subprocess.run([kcat, *args, "-C", "-t", "tls", "-o", "beginning", "-e", "-q"],
                         check=True, timeout=30, capture_output=True)
    assert out.stdout.split() == [b"m0", b"m1", b"m2", b"kp"]


def test_aiokafka_produce_with_scram(sasl_broker: Callable[..., Broker]) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    broker = sasl_broker()
    _create_topic(_ck_conf(broker, "PLAIN"), "aio")
    user, password = USERS["SCRAM-SHA-256"]

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                    security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="SCRAM-SHA-256",
                                    sasl_plain_username=user, sasl_plain_password=password,
                                    request_timeout_ms=8000)
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait("aio", b"a"), 10)
        finally:
            await producer.stop()

    asyncio.run(produce())
    assert _ck_produce_consume(_ck_conf(broker, "PLAIN"), "aio", n=1)[0] == b"a"


def test_per_listener_mechanisms(make_kafka_broker: Callable[..., Broker]) -> None:
    """listener.name.<l>.sasl.enabled.mechanisms and .plain.sasl.jaas.config: each listener
    offers its own mechanisms and users; a PLAINTEXT listener beside them stays open."""
    broker = make_kafka_broker(**{
        "listeners": "A://127.0.0.1:0,B://127.0.0.1:0,OPEN://127.0.0.1:0",
        "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT,OPEN:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.a.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.a.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.jaas.config": 'x.P required user_zed="zed-secret";'})
    _add_scram_users(broker)
    assert broker.kafka_server is not None
    address = {name: f"{h}:{p}" for name, (h, p) in broker.kafka_server.advertised().items()}
    raw = RawClient(address["A"])
    try:
        hs = raw.call(17, 1, mechanism="SCRAM-SHA-512")
        assert hs.error_code == 33 and list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    finally:
        raw.close()
    raw = RawClient(address["A"])
    try:
        assert raw.plain("alice", "alice-secret").error_code == 0
    finally:
        raw.close()
    raw = RawClient(address["B"])
    try:
        assert list(raw.call(17, 1, mechanism="PLAIN").mechanisms) == ["SCRAM-SHA-512"]
    finally:
        raw.close()
    raw = RawClient(address["B"])
    try:
        assert raw.scram("SCRAM-SHA-512", *USERS["SCRAM-SHA-512"]).error_code == 0
        assert raw.metadata().brokers
    finally:
        raw.close()
    raw = RawClient(address["OPEN"])
    try:
        assert raw.metadata().brokers
    finally:
        raw.close()


# ---------------------------------------------------------------------- failures
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("who", ["wrong password", "unknown user"])
def test_confluent_kafka_reports_authentication_failure_others_go_on(
        sasl_broker: Callable[..., Broker], mechanism: str, who: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka reports _AUTHENTICATION (and the broker's message); an authenticated client
    keeps producing meanwhile; the broker logs the attempt without the password."""
    from confluent_kafka import KafkaError, Producer
    broker = sasl_broker()
    good = _ck_conf(broker, "SCRAM-SHA-256")
    _create_topic(good, "busy")
    stop = threading.Event()
    delivered: list[int] = []

    def keep_producing() -> None:
        producer = Producer(good)
        while not stop.is_set():
            producer.produce("busy", b"x", on_delivery=lambda err, _m: delivered.append(
                0 if err is None else 1))
            producer.flush(5)
        producer.flush(5)

    worker = threading.Thread(target=keep_producing)
    worker.start()
    errors: list[Any] = []
    user = "mallory" if who == "unknown user" else None
    bad = Producer(_ck_conf(broker, mechanism, user=user, password="not-the-password",
                            error_cb=errors.append))
    caplog.set_level(logging.INFO, logger="kafka_tiers.audit")
    sasl_api._failures.clear()  # the log's rate limit starts afresh (earlier tests failed too)
    try:
        def reported() -> bool:
            bad.poll(0.1)  # error_cb is served by poll
            return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

        wait_for(reported, 15, "an authentication error from librdkafka")
        before = len(delivered)
        wait_for(lambda: len(delivered) > before + 3, 10, "the good producer going on")
    finally:
        stop.set()
        worker.join(15)
        bad.flush(0)
    assert delivered and not any(delivered)
    message = next(e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "Authentication failed" in message and "not-the-password" not in message
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_tiers.audit"]
    assert any("failed authentication" in line and f"mechanism={mechanism}" in line
               for line in lines)
    assert not any("not-the-password" in line for line in lines)


@pytest.mark.parametrize("who", ["wrong password", "unknown user"])
def test_kafka_python_reports_authentication_failure(sasl_broker: Callable[..., Broker],
                                                     who: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python 3.x fails its connection with SaslAuthenticationFailedError (and the
    broker's message), logs it, and gives up bootstrapping."""
    import kafka.errors
    from kafka.admin import KafkaAdminClient
    broker = sasl_broker()
    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                         sasl_plain_username="mallory" if who == "unknown user" else "carol",
                         sasl_plain_password="not-the-password", request_timeout_ms=3000,
                         bootstrap_timeout_ms=3000)
    failures = [r.getMessage() for r in caplog.records
                if "SaslAuthenticationFailedError" in r.getMessage()]
    assert failures, [r.getMessage() for r in caplog.records]
    assert all("not-the-password" not in f for f in failures)
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-512" in f for f in failures)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kcat_reports_authentication_failure(sasl_broker: Callable[..., Broker], kcat: str,
                                             mechanism: str) -> None:
    broker = sasl_broker()
    out = subprocess.run([kcat, *_kcat_args(broker, mechanism, password="not-the-password"),
                          "-L", "-m", "5"], timeout=30, capture_output=True)
    assert out.returncode != 0
    assert b"Authentication failed" in out.stderr, out.stderr


# ---------------------------------------------------------------------- the protocol
def test_requests_before_authentication_disconnect(sasl_broker: Callable[..., Broker]
                                                   ) -> None:
    broker = sasl_broker()
    raw = RawClient(broker.bootstrap_servers)
    try:
        assert raw.call(18, 3, client_software_name="t", client_software_version="1"
                        ).error_code == 0
        raw.send(3, 4, topics=[], allow_auto_topic_creation=False)
        assert raw.closed()
    finally:
        raw.close()


def test_handshake_answers(sasl_broker: Callable[..., Broker]) -> None:
    broker = sasl_broker()
    raw = RawClient(broker.bootstrap_servers)
    try:
        hs = raw.call(17, 1, mechanism="GSSAPI")
        assert hs.error_code == 33 and list(hs.mechanisms) == list(MECHANISMS)
        assert raw.closed()
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # SaslAuthenticate before SaslHandshake
        resp = raw.call(36, 1, auth_bytes=b"\0alice\0alice-secret")
        assert resp.error_code == 34
        assert raw.closed()
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # a second SaslHandshake during the exchange
        assert raw.call(17, 1, mechanism="SCRAM-SHA-256").error_code == 0
        assert raw.call(17, 1, mechanism="SCRAM-SHA-256").error_code == 34
        assert raw.closed()
    finally:
        raw.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_authenticate_versions_and_failure_closes(sasl_broker: Callable[..., Broker],
                                                  version: int) -> None:
    broker = sasl_broker(**{"connections.max.reauth.ms": "60000"})
    raw = RawClient(broker.bootstrap_servers)
    try:
        resp = raw.plain("alice", "alice-secret", version)
        assert resp.error_code == 0 and resp.error_message is None
        if version >= 1:
            assert resp.session_lifetime_ms == 60000
        assert raw.metadata().brokers
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:
        resp = raw.plain("alice", "wrong", version)
        assert resp.error_code == 58
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert raw.closed()
    finally:
        raw.close()


def _raw_frame(raw: RawClient, token: bytes) -> None:
    raw.sock.sendall(struct.pack(">i", len(token)) + token)


def _raw_answer(raw: RawClient) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(raw.sock, 4))
    return recv_exact(raw.sock, size)


def test_handshake_v0_then_bare_tokens(sasl_broker: Callable[..., Broker]) -> None:
    """After SaslHandshake v0 the tokens go both ways as bare length-prefixed frames (Kafka's
    framing before KIP-152); a failure there closes the connection without an answer."""
    broker = sasl_broker()
    raw = RawClient(broker.bootstrap_servers)
    try:  # PLAIN: one token, an empty answer
        assert raw.call(17, 0, mechanism="PLAIN").error_code == 0
        _raw_frame(raw, b"\0alice\0alice-secret")
        assert _raw_answer(raw) == b""
        assert raw.metadata().brokers
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # SCRAM: server-first, then server-final
        user, password = USERS["SCRAM-SHA-512"]
        assert raw.call(17, 0, mechanism="SCRAM-SHA-512").error_code == 0
        bare = f"n={user},r=v0nonce"
        _raw_frame(raw, f"n,,{bare}".encode())
        first = _raw_answer(raw).decode()
        final, sig = scram_client_final(password, bare, first, "sha512")
        _raw_frame(raw, final.encode())
        assert _raw_answer(raw) == b"v=" + base64.b64encode(sig)
        assert raw.metadata().brokers
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # a wrong password: closed, no answer
        assert raw.call(17, 0, mechanism="PLAIN").error_code == 0
        _raw_frame(raw, b"\0alice\0wrong")
        assert raw.closed()
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # v0's exchange has no SaslAuthenticate: a Kafka request there is not a token
        assert raw.call(17, 0, mechanism="PLAIN").error_code == 0
        _raw_frame(raw, b"not a PLAIN token")
        assert raw.closed()
    finally:
        raw.close()


def test_scram_failure_message_is_kafkas(sasl_broker: Callable[..., Broker]) -> None:
    broker = sasl_broker()
    for user in ("bob", "nobody"):
        raw = RawClient(broker.bootstrap_servers)
        try:
            resp = raw.scram("SCRAM-SHA-256", user, "not-the-password")
            assert resp.error_code == 58
            assert resp.error_message == ("Authentication failed during authentication due "
                                          "to invalid credentials with SASL mechanism "
                                          "SCRAM-SHA-256")
            assert raw.closed()
        finally:
            raw.close()


def test_oversized_frame_before_authentication_closes(sasl_broker: Callable[..., Broker]
                                                      ) -> None:
    broker = sasl_broker(**{"sasl.server.max.receive.size": "4096"})
    raw = RawClient(broker.bootstrap_servers)
    try:
        raw.sock.sendall(struct.pack(">i", 4097) + b"\0" * 64)
        assert raw.closed()
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # once authenticated the bound is socket.request.max.bytes'
        assert raw.scram("SCRAM-SHA-512", *USERS["SCRAM-SHA-512"]).error_code == 0
        resp = raw.call(3, 4, topics=[{"name": "t" * 200} for _ in range(30)],
                        allow_auto_topic_creation=False)
        assert len(resp.topics) == 1  # the same name 30 times
    finally:
        raw.close()


def test_plaintext_listener_answers_illegal_sasl_state(make_kafka_broker: Callable[..., Broker]
                                                       ) -> None:
    broker = make_kafka_broker()
    raw = RawClient(broker.bootstrap_servers)
    try:
        assert raw.call(17, 1, mechanism="PLAIN").error_code == 34
        assert raw.call(36, 1, auth_bytes=b"x").error_code == 34
        assert raw.metadata().brokers  # the connection stays open
    finally:
        raw.close()


# ---------------------------------------------------------------------- re-authentication
def test_raw_connection_that_does_not_reauthenticate_is_closed(
        sasl_broker: Callable[..., Broker]) -> None:
    broker = sasl_broker(**{"connections.max.reauth.ms": "1000"})
    raw = RawClient(broker.bootstrap_servers)
    try:
        resp = raw.plain("alice", "alice-secret")
        assert resp.error_code == 0 and resp.session_lifetime_ms == 1000
        assert raw.metadata().brokers
        time.sleep(1.2)
        raw.send(3, 4, topics=[], allow_auto_topic_creation=False)
        assert raw.closed()
    finally:
        raw.close()


def test_reauthentication_same_principal_goes_on_other_principal_closes(
        sasl_broker: Callable[..., Broker]) -> None:
    broker = sasl_broker(**{"connections.max.reauth.ms": "1000"})
    raw = RawClient(broker.bootstrap_servers)
    try:
        assert raw.scram("SCRAM-SHA-256", *USERS["SCRAM-SHA-256"]).error_code == 0
        time.sleep(0.6)
        resp = raw.scram("SCRAM-SHA-256", *USERS["SCRAM-SHA-256"])
        assert resp.error_code == 0 and resp.session_lifetime_ms == 1000
        time.sleep(0.6)  # past the first session's end, inside the second's
        assert raw.metadata().brokers
        hs = raw.call(17, 1, mechanism="SCRAM-SHA-256")
        assert hs.error_code == 0
        bare = "n=carol,r=abc"  # carol is not bob: another principal
        first = raw.call(36, 2, auth_bytes=f"n,,{bare}".encode())
        final, _ = scram_client_final(USERS["SCRAM-SHA-512"][1], bare,
                                      first.auth_bytes.decode(), "sha256")
        resp = raw.call(36, 2, auth_bytes=final.encode())
        assert resp.error_code == 58  # carol has no SCRAM-SHA-256 credential
        assert raw.closed()
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # PLAIN users alice and admin: a valid login as someone else
        assert raw.plain("alice", "alice-secret").error_code == 0
        resp = raw.plain("admin", "admin-secret")
        assert resp.error_code == 58 and "Cannot change principals" in resp.error_message
        assert raw.closed()
    finally:
        raw.close()
    raw = RawClient(broker.bootstrap_servers)
    try:  # another mechanism on re-authentication
        assert raw.plain("alice", "alice-secret").error_code == 0
        assert raw.call(17, 1, mechanism="SCRAM-SHA-256").error_code == 0
        resp = raw.call(36, 2, auth_bytes=b"n,,n=alice,r=abc")
        assert resp.error_code == 58 and "re-authentication of mechanism" in resp.error_message
        assert raw.closed()
    finally:
        raw.close()


def test_no_reauthentication_without_a_session_lifetime(sasl_broker: Callable[..., Broker]
                                                        ) -> None:
    broker = sasl_broker()
    raw = RawClient(broker.bootstrap_servers)
    try:
        resp = raw.plain("alice", "alice-secret")
        assert resp.error_code == 0 and resp.session_lifetime_ms == 0
        assert raw.call(17, 1, mechanism="PLAIN").error_code == 34
        assert raw.metadata().brokers
    finally:
        raw.close()


@pytest.mark.slow
def test_librdkafka_reauthenticates_a_long_running_consumer(
        sasl_broker: Callable[..., Broker], caplog: pytest.LogCaptureFixture) -> None:
    """connections.max.reauth.ms=1000: a consumer polling for ~4 s keeps receiving; its
    connections re-authenticate (logged at DEBUG) and none is closed for expiry."""
    from confluent_kafka import Consumer, Producer
    caplog.set_level(logging.INFO, logger="kafka_tiers.kafka.server")
    caplog.set_level(logging.DEBUG, logger="kafka_tiers.kafka.apis.sasl")  # last: the handler's
    broker = sasl_broker(**{"connections.max.reauth.ms": "1000"})
    conf = _ck_conf(broker, "SCRAM-SHA-512")
    _create_topic(conf, "long")
    producer = Producer(conf)
    consumer = Consumer({k: v for k, v in conf.items() if k != "message.timeout.ms"}
                        | {"group.id": "long", "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.subscribe(["long"])
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < 4.5:
            producer.produce("long", f"m{i}".encode())
            producer.poll(0)
            i += 1
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 10
        while len(got) < i and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == [f"m{n}".encode() for n in range(i)]
    text = [r.getMessage() for r in caplog.records]
    assert sum("re-authenticated with SCRAM-SHA-512" in t for t in text) >= 2
    assert not any("SASL session expired" in t for t in text)


@pytest.mark.slow
def test_kafka_python_reauthenticates(sasl_broker: Callable[..., Broker],
                                      caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python 3.x re-authenticates too (KIP-368): a producer sending for ~3.5 s with
    connections.max.reauth.ms=1000 keeps its connection."""
    from kafka import KafkaProducer
    caplog.set_level(logging.INFO, logger="kafka_tiers.kafka.server")
    caplog.set_level(logging.DEBUG, logger="kafka_tiers.kafka.apis.sasl")  # last: the handler's
    broker = sasl_broker(**{"connections.max.reauth.ms": "1000"})
    _create_topic(_ck_conf(broker, "PLAIN"), "kp-long")
    user, password = USERS["SCRAM-SHA-256"]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                             sasl_plain_username=user, sasl_plain_password=password,
                             max_block_ms=8000, request_timeout_ms=8000)
    try:
        start = time.monotonic()
        while time.monotonic() - start < 3.5:
            producer.send("kp-long", b"x").get(timeout=10)
            time.sleep(0.05)
    finally:
        producer.close()
    text = [r.getMessage() for r in caplog.records]
    assert sum("re-authenticated with SCRAM-SHA-256" in t for t in text) >= 2
    assert not any("SASL session expired" in t for t in text)


def test_secret_jaas_is_hidden_in_config_errors_and_repr(tmp_path: Any) -> None:
    broker_cfg_key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    with pytest.raises(ConfigError) as err:
        _start(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN",
                            broker_cfg_key: 'x.P required user_a="hunter2-xyz" oops'})
    assert "hunter2-xyz" not in str(err.value)
