"""TLS on the Kafka listener (``SSL`` listeners), with real clients and real certificates.

- confluent-kafka (``ssl.ca.location``, a client certificate), kafka-python 3.x
  (``ssl_cafile``/``ssl_certfile``/``ssl_keyfile``) and kcat produce and consume over SSL, on
  a standalone broker and a 3-broker in-process cluster;
- ``ssl.client.auth=required``: no, expired and foreign-CA certificates are refused with the
  TLS alert the client reports, and the broker goes on serving others;
- the principal: the subject by the DEFAULT rule, and by a RULE;
- a plaintext client on the TLS port, and a client that never completes the handshake, are
  closed; others go on;
- certificate reload (a new connection sees the new certificate's serial; a broken file keeps
  the old one with one WARN);
- a Fetch of several MB over TLS (segment bytes read with pread, not sendfile);
- PLAINTEXT and SSL listeners at once, per-listener overrides;
- configuration errors at broker start, naming the key and never the password.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from kafka_tiers.api.authorizer import ANONYMOUS
from kafka_tiers.api.errors import ConfigError
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.config import BrokerConfig
from kafka_tiers.kafka import listeners_config
from kafka_tiers.kafka.security.tls import (
    ListenerTls,
    NoMatchingRule,
    PrincipalMapper,
    tls_settings,
)
from tests.kafka.clients import (
    confluent_consumer,
    confluent_producer,
    kafka_python_consumer_conf,
    kafka_python_producer_conf,
)
from tests.kafka.processes import wait_until
from tests.kafka.targets import KafkaTarget
from tests.security.certs import (
    BROKER_KEY_PASSWORD,
    CLIENT_SUBJECT,
    TestCerts,
    cert_pem,
    key_pem,
    write_broker_cert,
    write_pem,
)

SSL_LISTENER = "SSL://127.0.0.1:0"


def ssl_broker_config(certs: TestCerts, **extra: str) -> dict[str, str]:
    """A broker's TLS keys: one SSL listener with the test broker certificate, trusting the
    test CA for client certificates."""
    return {"listeners": SSL_LISTENER, "ssl.keystore.location": str(certs.broker_keystore),
            "ssl.truststore.location": str(certs.ca_cert), **extra}


def confluent_ssl(certs: TestCerts, cert: Path | None = None, key: Path | None = None
                  ) -> dict[str, Any]:
    """confluent-kafka's TLS settings (the ``**extra`` of tests.kafka.clients)."""
    conf: dict[str, Any] = {"security_protocol": "ssl", "ssl_ca_location": str(certs.ca_cert)}
    if cert is not None:
        conf["ssl_certificate_location"] = str(cert)
        conf["ssl_key_location"] = str(key)
    return conf


def confluent_roundtrip(bootstrap: str, topic: str, values: list[bytes],
                        **extra: Any) -> list[bytes]:
    """Produce ``values`` to partition 0 of ``topic`` and read them back (confluent-kafka)."""
    from confluent_kafka import TopicPartition

    with confluent_producer(bootstrap, **extra) as producer:
        for v in values:
            producer.produce(topic, value=v, partition=0)
        assert producer.flush(15) == 0
    got: list[bytes] = []
    with confluent_consumer(bootstrap, **extra) as consumer:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 15
        while len(got) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    return got


def confluent_error(bootstrap: str, **extra: Any) -> str:
    """What librdkafka reports when it cannot reach the cluster (its error callback's first
    transport error), after a bounded metadata request."""
    from confluent_kafka.admin import AdminClient

    errors: list[str] = []
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                            "reconnect.backoff.ms": 200, "reconnect.backoff.max.ms": 500,
                            "log_level": 0, "error_cb": lambda e: errors.append(e.str())}
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    admin = AdminClient(conf)
    with pytest.raises(Exception, match=r"transport|timed out|Timed out"):
        admin.list_topics(timeout=1.0)  # the refusal comes within milliseconds
    admin.poll(0.2)
    return " | ".join(errors)


def python_tls_peer(address: tuple[str, int], certs: TestCerts, **ctx_opts: Any
                    ) -> ssl.SSLSocket:
    """A plain Python TLS client connected to ``address`` (trusting the test CA)."""
    ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
    for name, value in ctx_opts.items():
        setattr(ctx, name, value)
    sock = socket.create_connection(address, timeout=5)
    return ctx.wrap_socket(sock, server_hostname="127.0.0.1")


def listener_address(broker: Broker, name: str) -> tuple[str, int]:
    assert broker.kafka_server is not None
    return broker.kafka_server.advertised()[name]


def principals(broker: Broker) -> list[tuple[str, str | None]]:
    assert broker.kafka_server is not None
    return [(str(s.principal), s.tls_subject) for s in broker.kafka_server.sessions()]


# ---------------------------------------------------------------------- real clients
@pytest.fixture(params=["standalone", "cluster"])
def ssl_target(request: pytest.FixtureRequest, certs: TestCerts,
               make_kafka_broker: Callable[..., Broker],
               make_kafka_cluster: Callable[..., LocalCluster]) -> KafkaTarget:
    """A standalone broker, then a 3-broker in-process cluster, each with only an SSL
    listener (so Metadata advertises the SSL listener)."""
    if request.param == "standalone":
        return KafkaTarget("standalone", make_kafka_broker(**ssl_broker_config(certs)))
    # the brokers' internal transport left PLAINTEXT explicitly (refused by default beside an
    # SSL listener): this test is about the Kafka listener
    return KafkaTarget("cluster", make_kafka_cluster(overrides=ssl_broker_config(
        certs, **{"security.inter.broker.protocol": "PLAINTEXT"})))


def test_confluent_kafka_produces_and_consumes_over_ssl(ssl_target: KafkaTarget,
                                                        certs: TestCerts) -> None:
    ssl_target.create_topic("tls-confluent")
    values = [b"record-%d" % i for i in range(5)]
    got = confluent_roundtrip(ssl_target.bootstrap_servers, "tls-confluent", values,
                              **confluent_ssl(certs))
    assert got == values


def test_kafka_python_produces_and_consumes_over_ssl(ssl_target: KafkaTarget,
                                                     certs: TestCerts) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    ssl_target.create_topic("tls-kpy")
    tls = {"security_protocol": "SSL", "ssl_cafile": str(certs.ca_cert),
           "ssl_certfile": str(certs.client_cert), "ssl_keyfile": str(certs.client_key)}
    producer = KafkaProducer(**kafka_python_producer_conf(ssl_target.bootstrap_servers, **tls))
    try:
        for i in range(4):
            producer.send("tls-kpy", b"kp-%d" % i, partition=0).get(timeout=10)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(**kafka_python_consumer_conf(ssl_target.bootstrap_servers, **tls))
    try:
        consumer.assign([TopicPartition("tls-kpy", 0)])
        consumer.seek(TopicPartition("tls-kpy", 0), 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 4 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    assert got == [b"kp-%d" % i for i in range(4)]


def test_kcat_produces_and_consumes_over_ssl(ssl_target: KafkaTarget, certs: TestCerts,
                                             kcat: str) -> None:
    ssl_target.create_topic("tls-kcat")
    tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={certs.ca_cert}"]
    base = [kcat, "-b", ssl_target.bootstrap_servers, *tls, "-t", "tls-kcat", "-p", "0"]
    subprocess.run([*base, "-P"], input=b"a\nb\nc\n", check=True, timeout=30,
                   capture_output=True)
    out = subprocess.run([*base, "-C", "-o", "beginning", "-e", "-c", "3", "-q"],
                         check=True, timeout=30, capture_output=True).stdout
    assert out.split() == [b"a", b"b", b"c"]


# ---------------------------------------------------------------------- client authentication
def test_required_client_auth_refuses_missing_expired_and_foreign_certificates(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts,
        caplog: pytest.LogCaptureFixture) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{"ssl.client.auth": "required"}))
    broker.create_topic("mtls", 1, {})
    bs = broker.bootstrap_servers
    caplog.set_level(logging.WARNING, logger="kafka_tiers.kafka.server")
    refused = {
        "no certificate": (confluent_error(bs, **confluent_ssl(certs)), "certificate required"),
        "expired": (confluent_error(bs, **confluent_ssl(certs, certs.expired_cert,
                                                        certs.expired_key)),
                    "certificate expired"),
        "foreign CA": (confluent_error(bs, **confluent_ssl(certs, certs.foreign_cert,
                                                           certs.foreign_key)),
                       "unknown ca"),
    }
    for case, (reported, alert) in refused.items():
        assert "SSL" in reported and alert in reported, (case, reported)
    # the broker logged the refusals (rate limited) and serves a good client
    assert "TLS handshake with" in caplog.text
    values = [b"ok-%d" % i for i in range(3)]
    assert confluent_roundtrip(bs, "mtls", values, **confluent_ssl(
        certs, certs.client_cert, certs.client_key)) == values


def test_kafka_python_without_a_certificate_is_refused_when_required(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    broker = make_kafka_broker(**ssl_broker_config(certs, **{"ssl.client.auth": "required"}))
    with pytest.raises(KafkaError):  # NoBrokersAvailable: the handshake was refused
        KafkaProducer(**kafka_python_producer_conf(
            broker.bootstrap_servers, security_protocol="SSL", ssl_cafile=str(certs.ca_cert),
            bootstrap_timeout_ms=3000, max_block_ms=3000))
    # the alert under kafka-python's EOF: Python's TLS layer reads it
    sock = python_tls_peer(listener_address(broker, "SSL"), certs)
    with sock, pytest.raises(ssl.SSLError, match=r"CERTIFICATE_REQUIRED|certificate required"):
        sock.recv(1)


def test_principal_is_the_certificate_subject_by_default(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{"ssl.client.auth": "requested"}))
    address = listener_address(broker, "SSL")
    ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
    ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    with ctx.wrap_socket(socket.create_connection(address, timeout=5),
                         server_hostname="127.0.0.1"):
        wait_until(lambda: (f"User:{CLIENT_SUBJECT}", CLIENT_SUBJECT) in principals(broker),
                   5, "the connection's principal is its certificate's subject")
    # requested, not required: a client without a certificate is User:ANONYMOUS
    with python_tls_peer(address, certs):
        wait_until(lambda: (str(ANONYMOUS), None) in principals(broker), 5,
                   "a client without a certificate is ANONYMOUS")


def test_principal_mapping_rule_on_a_listener(make_kafka_broker: Callable[..., Broker],
                                              certs: TestCerts) -> None:
    rules = r"RULE:^CN=([^,]*),OU=([^,]*),.*$/$1@$2/U,DEFAULT"
    broker = make_kafka_broker(**ssl_broker_config(certs, **{
        "ssl.client.auth": "required", "listener.name.ssl.ssl.principal.mapping.rules": rules}))
    broker.create_topic("mapped", 1, {})
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                         **{k.replace("_", "."): v for k, v in confluent_ssl(
                             certs, certs.client_cert, certs.client_key).items()}})
    assert "mapped" in admin.list_topics(timeout=10).topics
    wait_until(lambda: ("User:CLIENT@ENG", CLIENT_SUBJECT) in principals(broker), 5,
               "the RULE maps the subject to CLIENT@ENG")


def test_principal_mapper_follows_kafka_rules() -> None:
    mapper = PrincipalMapper.parse(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, "
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT")
    assert mapper.name("CN=kafka1,OU=ServiceUsers,O=Org,C=US") == "kafka1"
    assert mapper.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US") == \
        "duke@javasoft"
    assert mapper.name("OU=x,CN=adminUser,O=y") == "ADMINUSER"
    assert mapper.name("OU=JavaSoft,O=Sun") == "OU=JavaSoft,O=Sun"  # DEFAULT
    assert PrincipalMapper.parse(None).name(CLIENT_SUBJECT) == CLIENT_SUBJECT
    # a $n beyond the groups stays literal, as Kafka escapes it
    assert PrincipalMapper.parse("RULE:^CN=(.*)$/$1$2/").name("CN=x") == "x$2"
    with pytest.raises(NoMatchingRule, match=r"no rule of ssl\.principal\.mapping\.rules"):
        PrincipalMapper.parse("RULE:^CN=(.*)$/$1/").name("O=nobody")
    for bad in ("RULE:abc", "RULE:^CN=(.*$/$1/", "NOTARULE"):
        with pytest.raises(ValueError):
            PrincipalMapper.parse(bad)
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
        BrokerConfig({"ssl.principal.mapping.rules": "RULE:abc"})


def test_no_matching_rule_refuses_the_connection(make_kafka_broker: Callable[..., Broker],
                                                 certs: TestCerts,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=admin,.*$/admin/"}))
    caplog.set_level(logging.WARNING, logger="kafka_tiers.kafka.server")
    ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
    ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    with ctx.wrap_socket(socket.create_connection(listener_address(broker, "SSL"), timeout=5),
                         server_hostname="127.0.0.1") as sock:
        assert sock.recv(1) == b""  # closed by the broker
    assert "no rule of ssl.principal.mapping.rules" in caplog.text


# ---------------------------------------------------------------------- refused clients
def test_plaintext_client_on_the_tls_port_is_refused_and_the_broker_goes_on(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts,
        caplog: pytest.LogCaptureFixture) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs))
    broker.create_topic("goes-on", 1, {})
    caplog.set_level(logging.WARNING, logger="kafka_tiers.kafka.server")
    # a raw Kafka ApiVersions v0 request in plaintext: closed, no Kafka answer
    frame = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00"
    with socket.create_connection(listener_address(broker, "SSL"), timeout=5) as raw:
        raw.sendall(len(frame).to_bytes(4, "big") + frame)
        try:
            answer = raw.recv(64)
        except ConnectionResetError:
            answer = b""
        # at most a TLS alert record (content type 21), never a Kafka response
        assert answer == b"" or answer[:1] == b"\x15"
    assert "not a TLS client" in caplog.text
    # librdkafka in plaintext cannot get metadata
    confluent_error(broker.bootstrap_servers)
    values = [b"still-%d" % i for i in range(3)]
    assert confluent_roundtrip(broker.bootstrap_servers, "goes-on", values,
                               **confluent_ssl(certs)) == values


def test_a_handshake_not_completed_within_request_timeout_is_closed(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{"request.timeout.ms": "600"}))
    assert broker.kafka_server is not None
    with socket.create_connection(listener_address(broker, "SSL"), timeout=5) as raw:
        wait_until(lambda: broker.kafka_server is not None
                   and broker.kafka_server.connection_count() == 1, 5, "accepted")
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert raw.recv(1) == b""
        assert 0.4 < time.monotonic() - started < 4
    wait_until(lambda: broker.kafka_server is not None
               and broker.kafka_server.connection_count() == 0, 5, "closed")


def test_max_connections_counts_tls_connections(make_kafka_broker: Callable[..., Broker],
                                                certs: TestCerts) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{"max.connections": "1"}))
    address = listener_address(broker, "SSL")
    with python_tls_peer(address, certs):
        wait_until(lambda: broker.kafka_server is not None
                   and broker.kafka_server.connection_count() == 1, 5, "one connection")
        with socket.create_connection(address, timeout=5) as second, \
                contextlib.suppress(ConnectionResetError):
            assert second.recv(1) == b""  # closed at once, no handshake


# ---------------------------------------------------------------------- protocols, ciphers
def test_tls_versions_and_ciphers_follow_the_config(make_kafka_broker: Callable[..., Broker],
                                                    certs: TestCerts) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{
        "ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"}))
    address = listener_address(broker, "SSL")
    with python_tls_peer(address, certs) as sock:
        assert sock.version() == "TLSv1.2"
        cipher = sock.cipher()
        assert cipher is not None and cipher[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
    only13 = make_kafka_broker(**ssl_broker_config(certs, **{
        "ssl.enabled.protocols": "TLSv1.3"}))
    with pytest.raises(ssl.SSLError):
        python_tls_peer(listener_address(only13, "SSL"), certs,
                        maximum_version=ssl.TLSVersion.TLSv1_2)
    with python_tls_peer(listener_address(only13, "SSL"), certs) as sock:
        assert sock.version() == "TLSv1.3"
    for bad in ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, {"ssl.protocol": "TLSv1"},
                {"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
                {"ssl.client.auth": "sometimes"}):
        with pytest.raises(ConfigError):
            BrokerConfig(bad)


# ---------------------------------------------------------------------- reload
def _peer_serial(address: tuple[str, int], certs: TestCerts) -> int:
    with python_tls_peer(address, certs) as sock:
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_certificate_files_are_reloaded_for_new_connections(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    keystore = tmp_path / "keystore.pem"
    keystore.write_bytes(certs.broker_keystore.read_bytes())
    broker = make_kafka_broker(**ssl_broker_config(
        certs, **{"ssl.keystore.location": str(keystore)}))
    address = listener_address(broker, "SSL")
    first = _peer_serial(address, certs)
    with python_tls_peer(address, certs) as old_conn:  # stays open across the reload
        write_broker_cert(tmp_path, certs.ca, stem="renewed", serial=424242)
        os.replace(tmp_path / "renewed-keystore.pem", keystore)
        wait_until(lambda: _peer_serial(address, certs) == 424242, 5,
                   "a new connection sees the renewed certificate")
        old_conn.sendall(b"")  # the old connection is untouched
    assert first != 424242
    # a broken file keeps the last good certificate, with one WARN
    caplog.set_level(logging.WARNING, logger="kafka_tiers.kafka.security.tls")
    write_pem(keystore, b"-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert _peer_serial(address, certs) == 424242
        time.sleep(0.3)
    warnings = [r for r in caplog.records if "not usable" in r.getMessage()]
    assert len(warnings) == 1


def test_reload_checks_the_files_at_most_once_a_second(certs: TestCerts, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    keystore = tmp_path / "keystore.pem"
    keystore.write_bytes(certs.broker_keystore.read_bytes())
    tls = ListenerTls(BrokerConfig({"ssl.keystore.location": str(keystore)}), "SSL")
    stats: list[str] = []
    real_stat = os.stat

    def counting_stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        stats.append(str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr("kafka_tiers.kafka.security.tls.os.stat", counting_stat)
    now = time.monotonic() + 5
    for i in range(100):
        tls.context(now + i / 1000)  # 100 accepts within 0.1 s
    assert len(stats) == 1
    write_broker_cert(tmp_path, certs.ca, stem="next")
    os.replace(tmp_path / "next-keystore.pem", keystore)
    tls.context(now + 2)
    assert tls.generation == 2


# ---------------------------------------------------------------------- large fetch
def test_a_fetch_of_several_megabytes_over_tls_returns_the_right_bytes(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> None:
    from confluent_kafka import TopicPartition

    broker = make_kafka_broker(**ssl_broker_config(certs))
    broker.create_topic("big", 1, {})
    values = [os.urandom(256 * 1024) for _ in range(24)]  # 6 MiB, incompressible
    with confluent_producer(broker.bootstrap_servers, linger_ms=50,
                            **confluent_ssl(certs)) as producer:
        for v in values:
            producer.produce("big", value=v, partition=0)
        assert producer.flush(30) == 0
    got: list[bytes] = []
    with confluent_consumer(broker.bootstrap_servers, max_partition_fetch_bytes=32 << 20,
                            fetch_max_bytes=64 << 20, **confluent_ssl(certs)) as consumer:
        consumer.assign([TopicPartition("big", 0, 0)])
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    assert [hashlib.sha256(v).digest() for v in got] == \
        [hashlib.sha256(v).digest() for v in values]


# ---------------------------------------------------------------------- listeners
def test_plaintext_and_ssl_listeners_at_once_with_per_listener_overrides(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> None:
    from confluent_kafka.admin import AdminClient

    broker = make_kafka_broker(**{
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "listener.name.ssl.ssl.keystore.location": str(certs.broker_keystore),
        "listener.name.mtls.ssl.keystore.certificate.chain":
            (cert_pem(x509.load_pem_x509_certificate(certs.broker_cert.read_bytes()))
             + certs.ca_cert.read_bytes()).decode(),
        "listener.name.mtls.ssl.keystore.key": certs.broker_key.read_text(),
        "listener.name.mtls.ssl.truststore.certificates": certs.ca_cert.read_text(),
        "listener.name.mtls.ssl.client.auth": "required"})
    broker.create_topic("both", 1, {})
    plain, tls, mtls = ("{}:{}".format(*listener_address(broker, name))
                        for name in ("PLAINTEXT", "SSL", "MTLS"))
    from confluent_kafka import TopicPartition

    with confluent_producer(plain) as producer:
        for i in range(3):
            producer.produce("both", value=b"p-%d" % i, partition=0)
        assert producer.flush(10) == 0
    # Metadata over SSL advertises the SSL listener
    admin = AdminClient({"bootstrap.servers": tls, "security.protocol": "ssl",
                         "ssl.ca.location": str(certs.ca_cert)})
    md = admin.list_topics(timeout=10)
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [tls]
    got: list[bytes] = []
    with confluent_consumer(tls, **confluent_ssl(certs)) as consumer:
        consumer.assign([TopicPartition("both", 0, 0)])
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    assert got == [b"p-%d" % i for i in range(3)]
    # only the MTLS listener requires a client certificate
    assert "certificate required" in confluent_error(mtls, **confluent_ssl(certs))
    admin = AdminClient({"bootstrap.servers": mtls, **{
        k.replace("_", "."): v for k, v in confluent_ssl(
            certs, certs.client_cert, certs.client_key).items()}})
    assert [f"{b.host}:{b.port}" for b in admin.list_topics(timeout=10).brokers.values()] \
        == [mtls]


def test_a_protocol_the_broker_does_not_serve_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule that was in tests/test_config_validation.py while SSL was not served."""
    monkeypatch.setattr(listeners_config, "SUPPORTED_PROTOCOLS", frozenset({"PLAINTEXT"}))
    with pytest.raises(ConfigError, match="uses SSL, which this broker does not serve"):
        listeners_config.listener_specs({"listeners": "SSL://127.0.0.1:9093"})
    monkeypatch.undo()
    assert "SSL" in listeners_config.SUPPORTED_PROTOCOLS
    assert listeners_config.listener_specs({"listeners": "SSL://127.0.0.1:9093"})[0] \
        .security_protocol == "SSL"


# ---------------------------------------------------------------------- configuration errors
def _tls(certs: TestCerts, **values: str) -> ListenerTls:
    return ListenerTls(BrokerConfig(values), "SSL")


def test_configuration_errors_name_the_key_and_never_the_password(
        certs: TestCerts, tmp_path: Path, make_kafka_broker: Callable[..., Broker]) -> None:
    cases: list[tuple[dict[str, str], str, str]] = [
        ({}, "ssl.keystore.location", "has no certificate"),
        ({"ssl.keystore.location": str(tmp_path / "missing.pem")}, "ssl.keystore.location",
         "cannot read"),
        ({"ssl.keystore.location": str(certs.broker_cert)}, "ssl.keystore.location",
         "expected one PEM private key, found 0"),
        ({"ssl.keystore.location": str(certs.broker_key_encrypted)}, "ssl.keystore.location",
         "no PEM certificate"),
        ({"ssl.keystore.certificate.chain": certs.broker_cert.read_text(),
          "ssl.keystore.key": certs.broker_key_encrypted.read_text(),
          "ssl.key.password": "not-the-password"}, "ssl.key.password", "does not decrypt"),
        ({"ssl.keystore.certificate.chain": certs.broker_cert.read_text(),
          "ssl.keystore.key": certs.broker_key_encrypted.read_text()}, "ssl.key.password",
         "is encrypted"),
        ({"ssl.keystore.certificate.chain": certs.client_cert.read_text(),
          "ssl.keystore.key": certs.broker_key.read_text()}, "ssl.keystore.certificate.chain",
         "does not belong to the private key"),
        ({"ssl.keystore.certificate.chain": certs.broker_cert.read_text()}, "ssl.keystore.key",
         "go together"),
        ({"ssl.keystore.location": str(certs.broker_keystore), "ssl.client.auth": "required"},
         "ssl.client.auth", "needs the CAs"),
        ({"ssl.keystore.location": str(certs.broker_keystore),
          "listener.name.ssl.ssl.enabled.protocols": "TLSv1.1"},
         "listener.name.ssl.ssl.enabled.protocols", "not safe"),
        ({"ssl.keystore.location": str(certs.broker_keystore),
          "listener.name.ssl.ssl.keystore.type": "PKCS12"},
         "listener.name.ssl.ssl.keystore.type", "openssl pkcs12"),
    ]
    for values, key, fragment in cases:
        with pytest.raises(ConfigError) as err:
            _tls(certs, **values)
        assert err.value.key == key, (values, err.value)
        assert fragment in str(err.value), (values, str(err.value))
        assert "not-the-password" not in str(err.value)
        assert BROKER_KEY_PASSWORD not in str(err.value)
        assert "PRIVATE KEY" not in str(err.value)
    # a Java keystore file is recognised and the conversion command given
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + os.urandom(64))
    with pytest.raises(ConfigError, match=r"JKS keystore, not PEM.*keytool -importkeystore"):
        _tls(certs, **{"ssl.keystore.location": str(jks)})
    with pytest.raises(ConfigError, match="JKS is a Java store"):
        BrokerConfig({"ssl.keystore.type": "JKS"})
    # the right password works, and the error comes at broker start
    _tls(certs, **{"ssl.keystore.location": str(certs.broker_keystore)})
    ok = _tls(certs, **{"ssl.keystore.certificate.chain": certs.broker_cert.read_text(),
                        "ssl.keystore.key": certs.broker_key_encrypted.read_text(),
                        "ssl.key.password": BROKER_KEY_PASSWORD})
    assert ok.settings.keystore_key is not None and BROKER_KEY_PASSWORD not in repr(ok.settings)
    with pytest.raises(ConfigError, match="listener SSL is a TLS listener but has no "
                       "certificate"):
        make_kafka_broker(listeners=SSL_LISTENER)


def test_pem_text_on_one_line_is_accepted(certs: TestCerts) -> None:
    """A properties file may hold a PEM block on one line (Kafka accepts it)."""
    one_line = " ".join(certs.broker_cert.read_text().split("\n"))
    key = " ".join(key_pem(certs.ca.key).decode().split("\n"))  # any key: checked to match
    with pytest.raises(ConfigError, match="does not belong to the private key"):
        _tls(certs, **{"ssl.keystore.certificate.chain": one_line, "ssl.keystore.key": key})
    broker_key = " ".join(certs.broker_key.read_text().split("\n"))
    tls = _tls(certs, **{"ssl.keystore.certificate.chain": one_line,
                         "ssl.keystore.key": broker_key})
    assert tls.context().get_ca_certs() == []  # built, with no truststore
    settings = tls_settings(BrokerConfig({
        "listener.name.ssl.ssl.keystore.key": broker_key}), "SSL")
    assert settings.keys["ssl.keystore.key"] == "listener.name.ssl.ssl.keystore.key"
    assert settings.keystore_key is not None and "PRIVATE" not in repr(settings)


def test_a_per_listener_tls_key_is_not_reported_as_ignored() -> None:
    cfg = BrokerConfig({"listener.name.ssl.ssl.client.auth": "required",
                        "listener.name.ssl.ssl.keymanager.algorithm": "SunX509"})
    assert cfg.warnings == ["Kafka broker keys kafka-tiers does not implement, ignored: "
                            "listener.name.ssl.ssl.keymanager.algorithm"]


def _framed(api_key: int, version: int, corr: int, client_id: str, **fields: Any) -> bytes:
    from kafka_tiers.kafka.codec import REQUESTS

    req = REQUESTS[api_key][version](**fields)
    req.with_header(correlation_id=corr, client_id=client_id)
    return bytes(req.encode(header=True, framed=True))


def test_a_frame_that_waited_for_memory_is_read_from_the_tls_buffer(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> None:
    """A frame whose bytes OpenSSL already decrypted while it waited for
    ``queued.max.request.bytes`` is read as soon as memory frees: the selector would never
    report them (the connection would stall until request.timeout.ms)."""
    from tests.kafka.request_builder import request_fields

    broker = make_kafka_broker(**ssl_broker_config(certs, **{
        "queued.max.request.bytes": "16000", "request.timeout.ms": "8000"}))
    broker.create_topic("idle", 1, {})
    address = listener_address(broker, "SSL")
    fields = request_fields(1, 4, "idle", 0)
    # A: a long-polling Fetch of 8000 bytes holds its memory for about 1.5 s
    fetch = _framed(1, 4, 1, "a" * 7950, replica_id=-1, max_wait_ms=1500, min_bytes=1,
                    max_bytes=1 << 20, isolation_level=0, **fields)
    assert 8000 <= len(fetch) < 9000
    # B: an ApiVersions of 8000 bytes, whole in one TLS record, that must wait for A's memory
    versions = _framed(18, 0, 2, "b" * 7990)
    with python_tls_peer(address, certs) as a, python_tls_peer(address, certs) as b:
        a.sendall(fetch)
        time.sleep(0.3)  # A's frame is reserved and in flight
        started = time.monotonic()
        b.sendall(versions)
        b.settimeout(6)
        head = b.recv(4)
        assert len(head) == 4, "B stalled: its decrypted bytes were never read"
        waited = time.monotonic() - started
        assert 0.5 < waited < 4, waited  # it waited for A's memory, then was served
        a.settimeout(6)
        assert len(a.recv(4)) == 4


def test_kcat_with_and_without_a_client_certificate(make_kafka_broker: Callable[..., Broker],
                                                    certs: TestCerts, kcat: str) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{"ssl.client.auth": "required"}))
    broker.create_topic("kcat-mtls", 1, {})
    base = [kcat, "-b", broker.bootstrap_servers, "-X", "security.protocol=ssl",
            "-X", f"ssl.ca.location={certs.ca_cert}", "-m", "3"]
    refused = subprocess.run([*base, "-L"], capture_output=True, timeout=30)
    assert refused.returncode != 0
    assert b"certificate required" in refused.stderr
    mtls = [*base, "-X", f"ssl.certificate.location={certs.client_cert}",
            "-X", f"ssl.key.location={certs.client_key}"]
    listed = subprocess.run([*mtls, "-L"], capture_output=True, timeout=30, check=True)
    assert b"kcat-mtls" in listed.stdout


def test_frame_timeout_and_idle_bounds_hold_over_tls(make_kafka_broker: Callable[..., Broker],
                                                     certs: TestCerts) -> None:
    broker = make_kafka_broker(**ssl_broker_config(certs, **{
        "request.timeout.ms": "600", "connections.max.idle.ms": "800"}))
    address = listener_address(broker, "SSL")
    for partial in (b"\x00\x00", b""):  # half a length prefix (stalled frame), then nothing
        with python_tls_peer(address, certs) as sock:
            sock.sendall(partial)
            started = time.monotonic()
            sock.settimeout(5)
            with contextlib.suppress(ConnectionResetError, ssl.SSLError):
                assert sock.recv(1) == b""
            assert 0.4 < time.monotonic() - started < 4, partial


def test_a_port_probe_is_not_a_warning(make_kafka_broker: Callable[..., Broker],
                                       certs: TestCerts,
                                       caplog: pytest.LogCaptureFixture) -> None:
    """A load balancer's TCP check (connect, close) is logged at DEBUG only; a client that
    speaks something else than TLS is a WARN."""
    broker = make_kafka_broker(**ssl_broker_config(certs))
    caplog.set_level(logging.DEBUG, logger="kafka_tiers.kafka.server")
    address = listener_address(broker, "SSL")
    for _ in range(3):
        socket.create_connection(address, timeout=5).close()
    assert broker.kafka_server is not None
    wait_until(lambda: "TLS handshake failed" in caplog.text, 5, "the probes were seen")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    with socket.create_connection(address, timeout=5) as raw:
        raw.sendall(b"GET / HTTP/1.0\r\n\r\n")
        with contextlib.suppress(ConnectionResetError):
            raw.recv(64)
    wait_until(lambda: any(r.levelno >= logging.WARNING for r in caplog.records), 5,
               "one WARN for a client that is not TLS")


def test_an_admin_request_to_a_non_controller_is_forwarded_over_tls(
        make_kafka_cluster: Callable[..., LocalCluster], certs: TestCerts) -> None:
    """A non-controller forwards CreateTopics to the controller's SSL listener as a TLS
    client with its own certificate (client certificates required there)."""
    import struct

    from kafka_tiers.kafka.codec import REQUESTS, RESPONSES
    from tests.kafka.admin_helpers import recv_exact

    cluster = make_kafka_cluster(overrides=ssl_broker_config(
        certs, **{"ssl.client.auth": "required", "security.inter.broker.protocol": "PLAINTEXT"}))
    wait_until(lambda: any(b.controller is not None and b.controller.active
                           for b in cluster.brokers.values()), 15, "a controller")
    other = next(b for b in cluster.brokers.values()
                 if b.controller is not None and not b.controller.active)
    cls = REQUESTS[19][4]
    req = cls(topics=[cls.CreatableTopic(name="forwarded", num_partitions=1,
                                         replication_factor=3, assignments=[], configs=[])],
              timeout_ms=10000, validate_only=False)
    req.with_header(correlation_id=5, client_id="tls-admin")
    ctx = ssl.create_default_context(cafile=str(certs.ca_cert))
    ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    with ctx.wrap_socket(socket.create_connection(listener_address(other, "SSL"), timeout=15),
                         server_hostname="127.0.0.1") as sock:
        sock.sendall(bytes(req.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        body = recv_exact(sock, size)
    resp = RESPONSES[19].decode(body, version=4, header=True)
    assert [(t.name, t.error_code) for t in resp.topics] == [("forwarded", 0)]
