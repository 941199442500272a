"""What unauthenticated clients may cost a broker: frames before authentication never take
``queued.max.request.bytes`` (a budget of their own, taken as bytes arrive), they and TLS
handshakes are bounded by ``min(request.timeout.ms, 10 s)``; a failed authentication is
answered and closed only after ``connection.failed.authentication.delay.ms`` (no handler
thread waits); an unknown SCRAM user's stand-in looks like the most common stored
credential, with a salt keyed by a cluster-wide key from the security state store."""

from __future__ import annotations

import base64
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka import server as server_module
from kafka_tiers.kafka.security.sasl.scram import ScramServer
from kafka_tiers.kafka.security.scram_credentials import ScramCredentials, ScramMechanism, derive
from kafka_tiers.kafka.security.state_store import FileStateStore
from tests.kafka.admin_helpers import wait_for
from tests.kafka.raw_requests import held_connections
from tests.security.certs import TestCerts
from tests.security.test_sasl import MECHANISMS, PLAIN_JAAS, RawClient

SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}


def _address(broker: Broker) -> tuple[str, int]:
    """The SASL_PLAINTEXT listener's address."""
    assert broker.kafka_server is not None
    host, port = broker.kafka_server.advertised()["SASL_PLAINTEXT"]
    return host, int(port)


def _bootstrap(broker: Broker) -> str:
    host, port = _address(broker)
    return f"{host}:{port}"


@contextmanager
def _sockets(broker: Broker, n: int, first: bytes = b"") -> Iterator[list[socket.socket]]:
    """``n`` raw connections to the broker's SASL_PLAINTEXT listener, each having sent
    ``first``."""
    with held_connections(_address(broker), n, first) as socks:
        yield socks


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the broker closed ``sock`` (EOF or reset) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


# ---------------------------------------------------------------------- memory (H1)
def test_unauthenticated_length_prefixes_reserve_nothing(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Announcing the largest pre-authentication frame and sending nothing more holds neither
    the shared pool nor the pre-authentication budget."""
    broker = make_kafka_broker(**SASL)
    server = broker.kafka_server
    assert server is not None
    with _sockets(broker, 50, struct.pack(">i", 524288)):
        time.sleep(0.5)
        assert server.queued_request_bytes() == 0
        assert server.preauth.used == 0


def test_unauthenticated_frames_never_keep_a_produce_waiting(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Unauthenticated sockets announcing frames as large as the whole pool: an
    authenticated 600 KB produce is served at once (before: it waited request.timeout.ms)."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    broker = make_kafka_broker(**SASL, **{"queued.max.request.bytes": str(4 << 20),
                                          "request.timeout.ms": "20000"})
    auth: dict[str, Any] = {"bootstrap_servers": broker.bootstrap_servers,
                            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                            "sasl_plain_username": "alice",
                            "sasl_plain_password": "alice-secret"}
    admin = KafkaAdminClient(**auth, request_timeout_ms=5000)
    try:
        admin.create_topics([NewTopic("t1", 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**auth, max_request_size=2 << 20, linger_ms=0,
                             request_timeout_ms=30000, max_block_ms=5000)
    try:
        producer.send("t1", b"x" * 600_000).get(10)
        with _sockets(broker, 8, struct.pack(">i", 524288)):  # 8 x 512 KiB: the pool
            time.sleep(0.3)
            started = time.monotonic()
            producer.send("t1", b"x" * 600_000).get(5)
            assert time.monotonic() - started < 3
    finally:
        producer.close(timeout=2)


def test_unauthenticated_bytes_are_bounded_by_their_own_budget(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Bytes of frames before authentication are held from a budget of their own (here
    1 MiB / 16 = 64 KiB); a connection whose bytes do not fit is closed, others go on, and
    the shared pool is never used."""
    broker = make_kafka_broker(**SASL, **{"queued.max.request.bytes": str(1 << 20),
                                          "sasl.server.max.receive.size": "65536"})
    server = broker.kafka_server
    assert server is not None
    assert server.preauth.capacity == 65536
    with _sockets(broker, 1, struct.pack(">i", 60000) + b"\0" * 50000) as (first,):
        wait_for(lambda: server.preauth.used == 50000, timeout=3)
        with _sockets(broker, 1, struct.pack(">i", 60000) + b"\0" * 30000) as (second,):
            assert _closed(second, 3)
        assert not _closed(first, 0.3)
        assert server.preauth.used == 50000 and server.queued_request_bytes() == 0
    wait_for(lambda: server.preauth.used == 0, timeout=3)
    raw = RawClient(_bootstrap(broker))  # an honest client still authenticates
    try:
        assert raw.plain("alice", "alice-secret").error_code == 0
        assert raw.metadata().brokers
    finally:
        raw.close()


# ---------------------------------------------------------------------- time (H1)
def test_preauthentication_is_bounded_by_its_own_short_timeout(
        monkeypatch: pytest.MonkeyPatch, make_kafka_broker: Callable[..., Broker],
        certs: TestCerts) -> None:
    """With request.timeout.ms 30 s, an unauthenticated partial frame, an unauthenticated
    connection that sends nothing and a TLS handshake that stalls are closed after the
    pre-authentication bound (10 s, 1 s here); an authenticated partial frame keeps
    request.timeout.ms. A handshake under way holds no memory."""
    monkeypatch.setattr(server_module, "PREAUTH_TIMEOUT_S", 1.0)
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore)}
    broker = make_kafka_broker(**{
        **SASL, "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS, **tls,
        "request.timeout.ms": "30000"})
    server = broker.kafka_server
    assert server is not None
    ssl_host, ssl_port = server.advertised()["SASL_SSL"]
    authed = RawClient(_bootstrap(broker))
    try:
        assert authed.plain("alice", "alice-secret").error_code == 0
        authed.sock.sendall(struct.pack(">i", 100) + b"\0" * 10)  # authenticated, partial
        with _sockets(broker, 1, struct.pack(">i", 100) + b"\0" * 10) as (partial,), \
                _sockets(broker, 1) as (silent,):
            handshakes = [socket.create_connection((ssl_host, ssl_port), timeout=5)
                          for _ in range(5)]
            try:
                for s in handshakes:
                    s.sendall(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello's first bytes
                time.sleep(0.3)
                # the authenticated partial frame's 100 bytes only
                assert server.queued_request_bytes() == 100 and server.preauth.used == 10
                started = time.monotonic()
                assert _closed(partial, 4) and _closed(silent, 4)
                assert all(_closed(s, 4) for s in handshakes)
                assert time.monotonic() - started < 4
            finally:
                for s in handshakes:
                    s.close()
        assert not _closed(authed.sock, 1.0)  # request.timeout.ms (30 s) still applies
    finally:
        authed.close()


# ---------------------------------------------------------------------- guessing (M1)
def _failed_plain(broker: Broker) -> tuple[float, float]:
    """A wrong PLAIN password: (seconds until the answer, seconds until the close after)."""
    raw = RawClient(_bootstrap(broker))
    try:
        assert raw.call(17, 1, mechanism="PLAIN").error_code == 0
        started = time.monotonic()
        resp = raw.call(36, 1, auth_bytes=b"\0alice\0guess")
        answered = time.monotonic() - started
        assert resp.error_code == 58
        assert raw.closed(3)
        return answered, time.monotonic() - started
    finally:
        raw.close()


def test_failed_authentication_is_answered_after_the_delay(
        make_kafka_broker: Callable[..., Broker]) -> None:
    broker = make_kafka_broker(**SASL, **{"connection.failed.authentication.delay.ms": "600"})
    answered, closed = _failed_plain(broker)
    assert answered >= 0.55 and closed < 1.5
    raw = RawClient(_bootstrap(broker))  # a success is not delayed
    try:
        started = time.monotonic()
        assert raw.plain("alice", "alice-secret").error_code == 0
        assert time.monotonic() - started < 0.4
    finally:
        raw.close()
    raw = RawClient(_bootstrap(broker))  # SaslHandshake v0, then a bad bare token
    try:
        assert raw.call(17, 0, mechanism="PLAIN").error_code == 0
        started = time.monotonic()
        token = b"\0alice\0guess"
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert raw.closed(3)
        assert time.monotonic() - started >= 0.55
    finally:
        raw.close()


def test_failed_authentication_delay_zero_answers_at_once(
        make_kafka_broker: Callable[..., Broker]) -> None:
    broker = make_kafka_broker(**SASL, **{"connection.failed.authentication.delay.ms": "0"})
    answered, closed = _failed_plain(broker)
    assert answered < 0.3 and closed < 0.5


def test_delayed_failures_hold_no_handler_thread(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Twenty failures waiting out a 1.5 s delay with two handler threads: another client
    authenticates and is served meanwhile, and none is answered before the delay."""
    broker = make_kafka_broker(**SASL, **{"connection.failed.authentication.delay.ms": "1500",
                                          "request.handler.threads.max": "2"})
    results: list[float] = []

    def fail() -> None:
        results.append(_failed_plain(broker)[0])

    threads = [threading.Thread(target=fail) for _ in range(20)]
    for t in threads:
        t.start()
    time.sleep(0.4)
    raw = RawClient(_bootstrap(broker))
    try:
        started = time.monotonic()
        assert raw.plain("alice", "alice-secret").error_code == 0
        assert raw.metadata().brokers
        assert time.monotonic() - started < 0.8
    finally:
        raw.close()
    for t in threads:
        t.join(10)
    assert len(results) == 20 and min(results) >= 1.4


def test_failed_authentication_delay_is_declared_and_below_the_idle_time(
        tmp_path: Path) -> None:
    from kafka_tiers.kafka.security.config import SASL_KEYS

    assert "connection.failed.authentication.delay.ms" in {k.name for k in SASL_KEYS}
    cfg = {"broker.id": "1", "log.dirs": str(tmp_path / "d"), **SASL,
           "connection.failed.authentication.delay.ms": "5000",
           "connections.max.idle.ms": "5000"}
    with pytest.raises(ConfigError, match=r"connection\.failed\.authentication\.delay\.ms "
                                          r"\(5000\) must be below connections\.max\.idle\.ms"):
        Broker(cfg).start()


# ---------------------------------------------------------------------- SCRAM (L1)
def _server_first(creds: Any, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    first = ScramServer(mechanism, creds).evaluate(f"n,,n={user},r=abc".encode()).decode()
    return dict(part.split("=", 1) for part in first.split(","))


def test_unknown_scram_user_looks_like_the_most_common_credential(tmp_path: Path) -> None:
    creds = ScramCredentials(FileStateStore(tmp_path, poll_s=0))
    empty = _server_first(creds, "ghost")
    assert (empty["i"], len(base64.b64decode(empty["s"]))) == ("4096", 24)
    sha512 = ScramMechanism.SCRAM_SHA_512
    creds.alter({("dave", sha512): derive("pw", sha512, 8192, bytes(range(64))),
                 ("erin", sha512): derive("pw", sha512, 8192, bytes(range(1, 65))),
                 ("fred", sha512): derive("pw", sha512, 4096)})
    real, ghost = _server_first(creds, "dave"), _server_first(creds, "ghost")
    assert (ghost["i"], len(base64.b64decode(ghost["s"]))) == \
        (real["i"], len(base64.b64decode(real["s"]))) == ("8192", 64)
    other = _server_first(creds, "ghost", "SCRAM-SHA-256")  # per mechanism
    assert (other["i"], len(base64.b64decode(other["s"]))) == ("4096", 24)


def test_unknown_scram_user_salt_is_the_same_on_every_broker_of_a_cluster(
        tmp_path: Path) -> None:
    """Two brokers over one security state store (and a restarted one) show an unknown user
    the same salt; another cluster's store shows another."""
    (tmp_path / "cluster").mkdir()
    (tmp_path / "elsewhere").mkdir()
    one = ScramCredentials(FileStateStore(tmp_path / "cluster", poll_s=0))
    two = ScramCredentials(FileStateStore(tmp_path / "cluster", poll_s=0))
    salt = _server_first(one, "ghost")["s"]
    assert _server_first(one, "ghost")["s"] == salt
    assert _server_first(two, "ghost")["s"] == salt
    assert _server_first(two, "ghost2")["s"] != salt
    other = ScramCredentials(FileStateStore(tmp_path / "elsewhere", poll_s=0))
    assert _server_first(other, "ghost")["s"] != salt


def test_unknown_scram_user_is_answered_when_the_store_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No stand-in key from the store (here: its directory is missing): the unknown user is
    still answered like a known one (a key of this broker), and the store is not asked at
    every login."""
    store = FileStateStore(tmp_path / "missing", poll_s=0)
    creds = ScramCredentials(store)
    first = _server_first(creds, "ghost")
    assert first["i"] == "4096" and len(base64.b64decode(first["s"])) == 24
    asked: list[str] = []
    real_update = store.update

    def update(name: str, fn: Any) -> Any:
        asked.append(name)
        return real_update(name, fn)

    monkeypatch.setattr(store, "update", update)
    assert _server_first(creds, "ghost")["s"] == first["s"]
    assert asked == []
