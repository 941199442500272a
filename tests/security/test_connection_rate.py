"""What a client opening connections fast costs the others: ``max.connection.creation.rate``
(KIP-612) makes a listener stop accepting beyond its rate (new connections wait in the listen
backlog, open ones are served as usual; ``listener.name.<l>.`` overrides per listener), and
TLS handshakes run after the established connections' reads, at most
``HANDSHAKE_STEPS_PER_ROUND`` per select round."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka import server as server_module
from kafka_tiers.kafka.server import KafkaServer, creation_rate
from tests.security.certs import TestCerts
from tests.security.test_sasl import RawClient

TWO = {"listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
       "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"}


def _server(broker: Broker) -> KafkaServer:
    assert broker.kafka_server is not None
    return broker.kafka_server


def _bootstrap(broker: Broker, listener: str) -> str:
    host, port = _server(broker).advertised()[listener]
    return f"{host}:{port}"


def _answered_after(bootstrap: str, n: int) -> list[float]:
    """``n`` connections opened at once (the kernel completes them, accepted or not), then
    an ApiVersions on each: the seconds from the start until each was answered."""
    started = time.monotonic()
    clients = [RawClient(bootstrap) for _ in range(n)]
    try:
        for c in clients:
            c.sock.settimeout(10)
            c.send(18, 0)
        out = []
        for c in clients:
            c.sock.recv(4)  # the response's length prefix: the broker accepted and answered
            out.append(time.monotonic() - started)
        return out
    finally:
        for c in clients:
            c.sock.close()


def test_a_listener_over_its_creation_rate_accepts_later_and_serves_open_connections(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Rate 4/s on OTHER: 12 connections at once are all served (none refused), the first
    four at once, the rest no faster than the rate (8 more: about 2 s); an open connection
    on that listener and the unbounded PLAINTEXT listener answer at once meanwhile."""
    broker = make_kafka_broker(**TWO, **{"listener.name.other.max.connection.creation.rate":
                                         "4"})
    other = _bootstrap(broker, "OTHER")
    opened = RawClient(other)
    try:
        assert opened.call(18, 0).error_code == 0
        time.sleep(1.1)  # its token back: the bucket is full again
        results: list[list[float]] = []
        flood = threading.Thread(target=lambda: results.append(_answered_after(other, 12)))
        flood.start()
        time.sleep(0.3)  # the flood is being throttled now
        for _ in range(3):
            started = time.monotonic()
            assert opened.call(18, 0).error_code == 0
            assert time.monotonic() - started < 0.3
        started = time.monotonic()
        assert _answered_after(_bootstrap(broker, "PLAINTEXT"), 12)[-1] < 0.8
        flood.join(15)
        (answered,) = results
        assert len(answered) == 12
        assert sorted(answered)[3] < 0.6  # a second's worth (4) at once
        assert max(answered) >= 1.6  # 8 more at 4/s: no sooner than 2 s (timer slack)
    finally:
        opened.sock.close()


def test_creation_rate_broker_wide_applies_to_each_listener(
        make_kafka_broker: Callable[..., Broker]) -> None:
    broker = make_kafka_broker(**TWO, **{"max.connection.creation.rate": "3",
                                         "listener.name.plaintext.max.connection.creation."
                                         "rate": "1000"})
    assert max(_answered_after(_bootstrap(broker, "PLAINTEXT"), 9)) < 0.8
    assert max(_answered_after(_bootstrap(broker, "OTHER"), 9)) >= 1.5  # 6 beyond 3 at 3/s


def test_creation_rate_values(tmp_path: Path) -> None:
    """Declared with Kafka's default (unbounded); below 1 is refused at start, broker-wide
    or per listener, with the key named."""
    from kafka_tiers.kafka.config import KAFKA_LISTENER_KEYS

    (key,) = [k for k in KAFKA_LISTENER_KEYS if k.name == "max.connection.creation.rate"]
    assert key.default == 2147483647
    assert creation_rate({"max.connection.creation.rate": 2147483647}, "PLAINTEXT") is None
    assert creation_rate({"max.connection.creation.rate": 7}, "PLAINTEXT") == 7
    base = {"broker.id": "1", "log.dirs": str(tmp_path / "d"), **TWO}
    with pytest.raises(ConfigError, match=r"max\.connection\.creation\.rate"):
        Broker({**base, "max.connection.creation.rate": "0"}).start()
    with pytest.raises(ConfigError, match=r"listener\.name\.other\.max\.connection\.creation"
                                          r"\.rate is '0'"):
        Broker({**base, "listener.name.other.max.connection.creation.rate": "0"}).start()


def _client_hello(host: str) -> bytes:
    """A TLS ClientHello's bytes (made in memory: nothing is sent by OpenSSL itself)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=host)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_tls_handshakes_wait_behind_established_reads_and_are_bounded_per_round(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> None:
    """Twenty ClientHellos arrive at once while an established connection sends requests:
    no select round runs more than HANDSHAKE_STEPS_PER_ROUND handshake steps, and in a
    round with both, the established connection's read comes first; every handshake still
    completes."""
    broker = make_kafka_broker(**{
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore)})
    server = _server(broker)
    events: list[str] = []
    handshake, read_frame, take_returned = (server._handshake, server._read_frame,
                                            server._take_returned)

    def on_handshake(c: object) -> None:
        events.append("handshake")
        handshake(c)  # type: ignore[arg-type]

    def on_read_frame(c: object) -> None:
        events.append("read")
        read_frame(c)  # type: ignore[arg-type]

    def on_round() -> None:
        events.append("round")
        take_returned()

    server._handshake = on_handshake  # type: ignore[method-assign]
    server._read_frame = on_read_frame  # type: ignore[method-assign]
    server._take_returned = on_round  # type: ignore[method-assign]
    host, port = server.advertised()["SSL"]
    plain = RawClient(_bootstrap(broker, "PLAINTEXT"))
    socks = [socket.create_connection((host, int(port)), timeout=5) for _ in range(20)]
    try:
        hellos = [_client_hello(host) for _ in socks]
        time.sleep(0.2)  # accepted: their handshakes wait for the hellos
        events.clear()
        for s, hello in zip(socks, hellos, strict=True):
            s.sendall(hello)
        plain.send(18, 0)
        for s in socks:  # each gets the server's first flight: its handshake step ran
            assert s.recv(5)[:1] == b"\x16"
        plain.sock.recv(4)
        rounds: list[list[str]] = [[]]
        for e in events:
            if e == "round":
                rounds.append([])
            else:
                rounds[-1].append(e)
        assert sum(r.count("handshake") for r in rounds) >= 20
        limit = server_module.HANDSHAKE_STEPS_PER_ROUND
        assert max(r.count("handshake") for r in rounds) <= limit
        for r in rounds:
            if "read" in r and "handshake" in r:
                assert r.index("read") < r.index("handshake"), r
    finally:
        for s in socks:
            s.close()
        plain.sock.close()


def test_requests_before_authentication_run_on_their_own_few_threads(
        make_kafka_broker: Callable[..., Broker]) -> None:
    """Twelve clients at once failing PLAIN (and one succeeding): every request of a
    connection not yet authenticated runs on at most PREAUTH_HANDLER_THREADS threads of their
    own, the authenticated client's Metadata on a handler thread."""
    from tests.security.test_preauth_limits import SASL

    broker = make_kafka_broker(**SASL, **{"request.handler.threads.max": "50",
                                          "connection.failed.authentication.delay.ms": "300"})
    server = _server(broker)
    served: list[tuple[str, bool]] = []
    serve = server._serve

    def on_serve(c: server_module._Conn, frame: bytearray) -> None:
        served.append((threading.current_thread().name, c.session.authenticated))
        serve(c, frame)

    server._serve = on_serve  # type: ignore[method-assign]
    host, port = server.advertised()["SASL_PLAINTEXT"]

    def guess() -> None:
        raw = RawClient(f"{host}:{port}")
        try:
            assert raw.plain("alice", "a-guess").error_code == 58
        finally:
            raw.sock.close()

    guessers = [threading.Thread(target=guess) for _ in range(12)]
    for t in guessers:
        t.start()
    good = RawClient(f"{host}:{port}")
    try:
        assert good.plain("alice", "alice-secret").error_code == 0
        assert good.metadata().brokers
    finally:
        good.sock.close()
    for t in guessers:
        t.join(10)
    before = {name for name, authenticated in served if not authenticated}
    after = {name for name, authenticated in served if authenticated}
    assert len([1 for _n, a in served if not a]) >= 12 * 2 + 2
    assert all(n.startswith("kafka-preauth-handler-") for n in before), before
    assert len(before) <= server_module.PREAUTH_HANDLER_THREADS
    assert after and all(n.startswith("kafka-handler-") for n in after), after
