"""The brokers' own channel: the internal transport secured by the inter-broker listener (TLS
with mutual authentication, super.users only), the dispatcher's own check, the config rules,
and the CLI's admin channel through ``--dir`` (the brokers' key, for their user only)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api.authorizer import KafkaPrincipal
from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import ConfigError
from kafka_tiers.cli.admin_channel import CHANNEL_FILE, write_channel_file
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.transport import (
    ApiKey,
    ErrorCode,
    HandlerTable,
    Request,
    Response,
    TcpClient,
    TcpServer,
    TransportError,
)
from kafka_tiers.cluster.transport_security import (
    SASL_PLAINTEXT_REFUSED,
    TlsChannel,
    channel_security,
    inter_broker_channel,
)
from kafka_tiers.config import BrokerConfig
from kafka_tiers.kafka.security.acl_authorizer import parse_super_users
from kafka_tiers.log.records import ProducerRecord, build_batch
from tests.cli_run import kt
from tests.security.certs import (
    BROKER_KEY_PASSWORD,
    TestCerts,
    cert_pem,
    key_pem,
    make_cert,
    subject,
    write_broker_cert,
    write_pem,
)

BROKER = "User:CN=broker,O=example"
SECURITY_LOG = "kafka_tiers.cluster.transport_security"


def tls_overrides(certs: TestCerts, keystore: Path | None = None) -> dict[str, str]:
    """An SSL Kafka listener that is the inter-broker listener; the brokers' certificate
    principal is the one super user."""
    return {"listeners": "SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL",
            "ssl.keystore.location": str(keystore or certs.broker_keystore),
            "ssl.truststore.location": str(certs.ca_cert), "super.users": BROKER}


def identity(tmp: Path, cert: Path, key: Path, ca: Path, name: str) -> TlsChannel:
    """A TLS channel presenting ``cert``/``key`` and trusting ``ca`` (brokers are the super
    users it accepts on the other side)."""
    from kafka_tiers.kafka.security.tls import ListenerTls

    keystore = write_pem(tmp / f"{name}-keystore.pem", key.read_bytes(), cert.read_bytes())
    # built directly: channel_security refuses a broker whose own principal is no super user
    return TlsChannel(ListenerTls(BrokerConfig({
        "ssl.keystore.location": str(keystore), "ssl.truststore.location": str(ca),
        "ssl.client.auth": "required"}), "SSL"), parse_super_users(BROKER))


@pytest.fixture
def secured(tmp_path: Path, certs: TestCerts) -> Iterator[LocalCluster]:
    """Three brokers over TCP whose internal transport is TLS (inter-broker listener SSL)."""
    c = LocalCluster(tmp_path / "c", 3, transport="tcp", overrides=tls_overrides(certs))
    c.start()
    yield c
    c.close()


def _records(*values: bytes) -> bytes:
    return build_batch([ProducerRecord(value=v) for v in values])


def _wait(predicate: Callable[[], Any], timeout: float = 10.0) -> None:
    LocalCluster.wait_until(lambda: bool(predicate()), timeout, "condition")


# ---------------------------------------------------------------------- the secured cluster

def test_brokers_replicate_and_fail_over_over_tls(secured: LocalCluster) -> None:
    c = secured
    assert all(c.broker(b).member.security is not None for b in c.live)
    client = c.client()
    client.create_topic("orders", partitions=1, replication_factor=3)
    _wait(lambda: len(client.metadata(["orders"])["topics"][0]["partitions"][0]["isr"]) == 3)
    client.produce("orders", 0, [b"a", b"b"], acks=-1)
    leader = client.metadata(["orders"])["topics"][0]["partitions"][0]["leader"]
    c.kill(leader)
    _wait(lambda: client.metadata(["orders"])["topics"][0]["partitions"][0]["leader"]
          not in (leader, -1, None))
    client.produce("orders", 0, [b"c"], acks=-1)
    got = [r.value for r in client.fetch("orders", 0, 0)[0]]
    assert got == [b"a", b"b", b"c"]


def test_a_principal_not_in_super_users_cannot_command_a_broker(
        secured: LocalCluster, certs: TestCerts, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    c = secured
    client = c.client()
    client.create_topic("keep", partitions=1, replication_factor=3)
    client.produce("keep", 0, [b"x"], acks=-1)
    tp = TopicPartition("keep", 0)
    target = c.broker(1)
    epoch = target.member.replicas.controller_epoch
    stranger = TcpClient(security=identity(tmp_path, certs.client_cert, certs.client_key,
                                           certs.ca_cert, "client"))
    controller = {"controller_id": 1, "controller_epoch": epoch, "brokers": {}, "fenced": []}
    attacks = [
        (ApiKey.STOP_REPLICA, {**controller, "delete": True,
                               "partitions": [{"topic": "keep", "partition": 0,
                                               "delete": True}]}, b""),
        (ApiKey.LEADER_AND_ISR, {**controller, "partitions": [
            {"topic": "keep", "partition": 0, "leader": 1, "leader_epoch": 999,
             "isr": [1], "replicas": [1]}]}, b""),
        (ApiKey.PRODUCE, {"topic": "keep", "partition": 0, "acks": 1}, _records(b"evil")),
    ]
    try:
        with caplog.at_level(logging.WARNING, logger=SECURITY_LOG):
            for key, body, payload in attacks:
                with pytest.raises(TransportError) as err:
                    stranger.send(target.address, key, body, payload=payload, timeout=5)
                assert err.value.code == ErrorCode.NETWORK_EXCEPTION
    finally:
        stranger.close()
    refusals = [r.getMessage() for r in caplog.records if r.name == SECURITY_LOG]
    assert len(refusals) == 1  # one WARN per peer and reason, not one per attempt
    assert "User:CN=client,OU=eng,O=example is not in super.users" in refusals[0]
    assert tp in target.member.replicas.partitions
    state = client.metadata(["keep"])["topics"][0]["partitions"][0]
    assert state["leader_epoch"] < 999 and sorted(state["isr"]) == [1, 2, 3]
    assert [r.value for r in client.fetch("keep", 0, 0)[0]] == [b"x"]


def test_a_plaintext_connection_to_the_tls_port_is_refused(
        secured: LocalCluster, caplog: pytest.LogCaptureFixture) -> None:
    plain = TcpClient()
    try:
        with caplog.at_level(logging.WARNING, logger=SECURITY_LOG), \
                pytest.raises(TransportError) as err:
            plain.send(secured.broker(2).address, ApiKey.METADATA, {}, timeout=5)
    finally:
        plain.close()
    assert err.value.code == ErrorCode.NETWORK_EXCEPTION
    _wait(lambda: any("TLS handshake failed" in r.getMessage() for r in caplog.records), 5)


def test_a_foreign_ca_certificate_is_refused(secured: LocalCluster, certs: TestCerts,
                                              tmp_path: Path) -> None:
    # it trusts our CA (the brokers' certificate checks out), its own is another CA's
    foreign = TcpClient(security=identity(tmp_path, certs.foreign_cert, certs.foreign_key,
                                          certs.ca_cert, "foreign"))
    try:
        with pytest.raises(TransportError) as err:
            foreign.send(secured.broker(1).address, ApiKey.METADATA, {}, timeout=5)
    finally:
        foreign.close()
    assert err.value.code == ErrorCode.NETWORK_EXCEPTION


def test_a_broker_does_not_talk_to_a_server_that_is_not_a_super_user(
        certs: TestCerts, tmp_path: Path) -> None:
    # a server with a certificate of the right CA but a client's principal: the connecting
    # broker refuses it before sending anything
    issued = make_cert(certs.ca, subject("impostor", o="example"), hosts=("127.0.0.1",))
    cert = write_pem(tmp_path / "impostor.pem", cert_pem(issued.cert))
    key = write_pem(tmp_path / "impostor.key", key_pem(issued.key))
    impostor = identity(tmp_path, cert, key, certs.ca_cert, "imp")
    called: list[Request] = []
    table = HandlerTable()
    table.register(ApiKey.METADATA, lambda r: called.append(r) or Response({}))
    server = TcpServer(table, security=impostor).start()
    broker = TcpClient(security=identity(tmp_path, certs.broker_cert, certs.broker_key,
                                         certs.ca_cert, "broker"))
    try:
        with pytest.raises(TransportError) as err:
            broker.send(server.address, ApiKey.METADATA, {}, timeout=5)
    finally:
        broker.close()
        server.close()
    assert err.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and not err.value.sent
    assert called == []


def test_the_dispatcher_refuses_requests_without_a_principal(secured: LocalCluster) -> None:
    # defence in depth: whatever reaches the handler table without an authenticated peer
    # is refused before any handler runs
    member = secured.broker(1).member
    assert member.handlers.authenticated_only
    resp = member.handlers.handle(Request(ApiKey.STOP_REPLICA, 0, {"delete": True,
                                                                   "partitions": []},
                                          peer="127.0.0.1:1"))
    assert resp.error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert resp.body["nothing_done"] is True
    served = member.handlers.handle(Request(ApiKey.METADATA, 0, {}, peer="127.0.0.1:1",
                                            principal=KafkaPrincipal.parse(BROKER)))
    assert served.error == ErrorCode.NONE and served.body["brokers"]


def test_a_table_without_required_authentication_serves_as_before() -> None:
    table = HandlerTable()
    table.register(ApiKey.METADATA, lambda r: Response({"ok": True}))
    assert table.handle(Request(ApiKey.METADATA, 0, {})).body == {"ok": True}
    table.require_authentication()
    assert table.handle(Request(ApiKey.METADATA, 0, {})).error == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED


# ---------------------------------------------------------------------- configuration

def test_the_inter_broker_listener_is_chosen_as_kafka_does() -> None:
    both = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}
    assert inter_broker_channel(BrokerConfig({
        **both, "security.inter.broker.protocol": "PLAINTEXT"})).protocol == "PLAINTEXT"
    named = inter_broker_channel(BrokerConfig({**both, "inter.broker.listener.name": "SSL"}))
    assert (named.protocol, named.listener) == ("SSL", "SSL")
    mapped = inter_broker_channel(BrokerConfig({
        "listeners": "CLIENT://127.0.0.1:0,BROKERS://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,BROKERS:SSL",
        "security.inter.broker.protocol": "SSL"}))
    assert (mapped.protocol, mapped.listener) == ("SSL", "BROKERS")
    no_listener = inter_broker_channel(BrokerConfig({"security.inter.broker.protocol": "SSL"}))
    assert (no_listener.protocol, no_listener.listener) == ("SSL", "SSL")


@pytest.mark.parametrize("config, words", [
    ({"listeners": "SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL",
      "security.inter.broker.protocol": "SSL"}, "give only one of them"),
    ({"listeners": "SSL://127.0.0.1:0", "inter.broker.listener.name": "BROKERS"},
     "is not a listener of listeners (SSL)"),
    ({"listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
      "listener.security.protocol.map": "A:SSL,B:SSL",
      "security.inter.broker.protocol": "SSL"}, "name the brokers' one"),
    ({"security.inter.broker.protocol": "SASL_PLAINTEXT"}, SASL_PLAINTEXT_REFUSED),
])
def test_inter_broker_settings_refused_at_start(config: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError) as err:
        inter_broker_channel(BrokerConfig(config))
    assert words in str(err.value)


def test_a_secured_channel_needs_the_brokers_in_super_users_and_a_truststore(
        certs: TestCerts) -> None:
    base = {"security.inter.broker.protocol": "SSL",
            "ssl.keystore.location": str(certs.broker_keystore)}
    with pytest.raises(ConfigError, match=r"super\.users is empty"):
        channel_security(BrokerConfig(base))
    with pytest.raises(ConfigError, match="no truststore"):
        channel_security(BrokerConfig({**base, "super.users": BROKER}))
    trusted = {**base, "ssl.truststore.location": str(certs.ca_cert)}
    with pytest.raises(ConfigError) as err:  # the brokers could not talk to each other
        channel_security(BrokerConfig({**trusted, "super.users": "User:admin"}))
    assert f"own certificate principal {BROKER} is not in super.users" in str(err.value)
    assert channel_security(BrokerConfig({**trusted, "super.users": BROKER})) is not None


def test_a_broker_certificate_without_client_authentication_is_refused_at_start(
        certs: TestCerts, tmp_path: Path) -> None:
    # each broker is the TLS client of the others: a serverAuth-only certificate would fail
    # every connection between brokers; the start says so instead
    issued = make_cert(certs.ca, subject("broker", o="example"), server=True,
                       hosts=("127.0.0.1",))
    keystore = write_pem(tmp_path / "server-only.pem", key_pem(issued.key),
                         cert_pem(issued.cert))
    with pytest.raises(ConfigError) as err:
        channel_security(BrokerConfig({
            "security.inter.broker.protocol": "SSL", "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(certs.ca_cert), "super.users": BROKER}))
    assert "does not allow TLS client authentication" in str(err.value)
    assert "serverAuth,clientAuth" in str(err.value)


def test_a_sasl_plaintext_inter_broker_listener_stops_the_broker(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path / "c", 1, transport="tcp", overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(ConfigError) as err:
        c.start(timeout=10)
    assert "the internal transport needs TLS to authenticate brokers" in str(err.value)


def test_plaintext_between_brokers_beside_a_secured_listener_is_warned(
        certs: TestCerts, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=SECURITY_LOG):
        assert channel_security(BrokerConfig({
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "security.inter.broker.protocol": "PLAINTEXT"})) is None
        assert channel_security(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})) is None
    warned = [r.getMessage() for r in caplog.records if r.name == SECURITY_LOG]
    assert len(warned) == 1 and "internal transport is PLAINTEXT" in warned[0]


SECURED_BY_DEFAULT = [
    {"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
    {"listeners": "SSL://127.0.0.1:0"},
    {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"},
    # a PLAINTEXT listener beside a secured one is the default inter-broker listener
    {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"},
    {"listeners": "CLIENTS://127.0.0.1:0,LOCAL://127.0.0.1:0",
     "listener.security.protocol.map": "CLIENTS:SASL_SSL,LOCAL:PLAINTEXT",
     "sasl.enabled.mechanisms": "PLAIN"},
    # no secured listener, but an authorizer: the internal transport would bypass the ACLs
    {"listeners": "PLAINTEXT://127.0.0.1:0", "authorizer.class.name": "acl",
     "super.users": "User:admin"},
    {"authorizer.class.name": "acl"},
]


@pytest.mark.parametrize("config", SECURED_BY_DEFAULT)
def test_a_secured_broker_refuses_a_plaintext_internal_transport_by_default(
        config: dict[str, str]) -> None:
    # the rule: the internal transport is never less protected than the Kafka listeners
    # unless the operator says so (Kafka refuses such a broker too)
    with pytest.raises(ConfigError) as err:
        inter_broker_channel(BrokerConfig(config))
    message = str(err.value)
    assert "internal transport would be PLAINTEXT by default" in message
    assert "set inter.broker.listener.name to an SSL or SASL_SSL listener" in message
    assert "security.inter.broker.protocol=PLAINTEXT" in message
    assert "\n" not in message and err.value.key == "security.inter.broker.protocol"
    # the same refusal through channel_security (a broker's start) and the admin channel
    # file of `cluster start`
    with pytest.raises(ConfigError, match="would be PLAINTEXT by default"):
        channel_security(BrokerConfig(config))
    with pytest.raises(ConfigError, match="would be PLAINTEXT by default"):
        write_channel_file("/nonexistent-dir", BrokerConfig(config))


@pytest.mark.parametrize("config", SECURED_BY_DEFAULT)
def test_an_explicit_plaintext_internal_transport_is_served_and_warned(
        config: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=SECURITY_LOG):
        explicit = BrokerConfig({**config, "security.inter.broker.protocol": "PLAINTEXT"})
        channel = inter_broker_channel(explicit)
        assert channel.protocol == "PLAINTEXT" and not channel.open_kafka_listeners
        assert channel_security(explicit) is None
    warned = [r.getMessage() for r in caplog.records if r.name == SECURITY_LOG]
    assert len(warned) == 1 and "PLAINTEXT (as configured)" in warned[0]
    assert "without a credential" in warned[0]


def test_naming_a_plaintext_listener_for_the_brokers_is_explicit_too() -> None:
    named = inter_broker_channel(BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT"}))
    assert (named.protocol, named.listener) == ("PLAINTEXT", "PLAINTEXT")
    # an open broker (no secured listener, no authorizer) keeps its plaintext default
    # without a word: the quick start and `cluster start`
    for config in ({"listeners": "PLAINTEXT://127.0.0.1:0"}, {}):
        plain = inter_broker_channel(BrokerConfig(config))
        assert plain.protocol == "PLAINTEXT" and plain.open_kafka_listeners


def test_a_secured_cluster_without_inter_broker_keys_does_not_start(tmp_path: Path) -> None:
    # the reviewer's case: only a SASL listener, ACLs, neither key: the broker used to start
    # with an open internal port (anyone local created and deleted topics through it)
    c = LocalCluster(tmp_path / "c", 1, transport="tcp", overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "authorizer.class.name": "acl", "super.users": "User:admin"})
    try:
        with pytest.raises(ConfigError, match="would be PLAINTEXT by default"):
            c.start(timeout=10)
        assert c.live == []
    finally:
        c.close()


def test_every_broker_block_of_the_security_page_resolves_its_internal_transport() -> None:
    # the page's examples start as written: a secured listener names the brokers' listener
    from tests.security.test_docs_security import blocks, is_client_block, properties

    broker_blocks = [p for p in map(properties, blocks("properties")) if not is_client_block(p)]
    assert len(broker_blocks) >= 2
    for props in broker_blocks:
        config = BrokerConfig({"broker.id": "1", "log.dirs": "/tmp/kafka-tiers-docs", **props})
        assert inter_broker_channel(config).protocol in ("SSL", "SASL_SSL"), props


# ---------------------------------------------------------------------- the CLI's --dir

@pytest.fixture
def cli_cluster(tmp_path: Path, certs: TestCerts) -> Iterator[tuple[LocalCluster, Path, Path]]:
    """A secured cluster as ``cluster start`` leaves it in its directory (cluster.json and
    the admin channel's file), its brokers' key encrypted with a password, in a 0600 file of
    its own."""
    from kafka_tiers.api.cluster import BrokerInfo, ClusterView
    from kafka_tiers.placement.cluster_file import ClusterFile, write_cluster_file

    keys = tmp_path / "keys"
    keys.mkdir()
    write_broker_cert(keys, certs.ca, password=BROKER_KEY_PASSWORD)
    keystore = keys / "broker-keystore.pem"
    keystore.chmod(0o600)
    d = tmp_path / "cluster"
    c = LocalCluster(d, 3, transport="tcp", overrides={
        **tls_overrides(certs, keystore), "ssl.key.password": BROKER_KEY_PASSWORD})
    c.start()
    write_cluster_file(d / "cluster.json", ClusterFile(
        ClusterView([BrokerInfo(b, None) for b in c.live]),
        addresses={b: c.broker(b).address for b in c.live}, metadata_store="embedded"))
    written = write_channel_file(d, c.broker(1).config)
    assert written == d / CHANNEL_FILE
    yield c, d, keystore
    c.close()


def cli(*args: str) -> tuple[int, str, str]:
    """``kafka-tiers ARGS`` (:func:`tests.cli_run.kt`): exit status, stdout, stderr."""
    ran = kt(*args)
    return ran.code, ran.out, ran.err


def test_the_cli_reaches_a_secured_cluster_through_dir_as_the_brokers_user(
        cli_cluster: tuple[LocalCluster, Path, Path]) -> None:
    _, d, _ = cli_cluster
    channel = d / CHANNEL_FILE
    assert channel.stat().st_mode & 0o777 == 0o600
    assert BROKER_KEY_PASSWORD in channel.read_text()  # what the brokers use, 0600
    code, out, err = cli("topics", "create", "orders", "--partitions", "1",
                         "--replication-factor", "3", "--dir", str(d))
    assert code == 0, err
    code, out, err = cli("topics", "list", "--dir", str(d))
    assert code == 0 and "orders" in out


def test_the_cli_refuses_a_brokers_key_open_to_the_group(
        cli_cluster: tuple[LocalCluster, Path, Path]) -> None:
    _, d, keystore = cli_cluster
    keystore.chmod(0o640)
    code, out, err = cli("topics", "list", "--dir", str(d))
    assert code != 0 and out == ""
    assert f"{keystore}" in err and "mode 0640" in err and f"chmod 600 {keystore}" in err
    assert "--bootstrap-server" in err and "--command-config" in err
    assert BROKER_KEY_PASSWORD not in err


def test_the_cli_refuses_a_channel_file_with_secrets_open_to_others(
        cli_cluster: tuple[LocalCluster, Path, Path]) -> None:
    _, d, _ = cli_cluster
    (d / CHANNEL_FILE).chmod(0o644)
    code, _, err = cli("cluster", "describe", "--dir", str(d))
    assert code != 0 and "mode 0644" in err and CHANNEL_FILE in err


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_the_cli_refuses_a_brokers_key_of_another_user(
        cli_cluster: tuple[LocalCluster, Path, Path]) -> None:
    _, d, keystore = cli_cluster
    os.chown(keystore, 4242, -1)
    code, _, err = cli("topics", "list", "--dir", str(d))
    assert code != 0 and "belongs to uid 4242, not to you (uid 0)" in err


def test_a_plaintext_cluster_writes_no_channel_file(tmp_path: Path) -> None:
    (tmp_path / CHANNEL_FILE).write_text("stale")
    assert write_channel_file(tmp_path, BrokerConfig({})) is None
    assert not (tmp_path / CHANNEL_FILE).exists()


def test_inline_keys_are_written_to_the_channel_file_as_one_private_file(
        tmp_path: Path, certs: TestCerts) -> None:
    cert = certs.broker_cert.read_bytes().decode()
    key = certs.broker_key.read_bytes().decode()
    config = BrokerConfig({"security.inter.broker.protocol": "SSL",
                           "ssl.keystore.certificate.chain": cert, "ssl.keystore.key": key,
                           "ssl.truststore.location": str(certs.ca_cert),
                           "ssl.endpoint.identification.algorithm": "",
                           "super.users": BROKER})
    path = write_channel_file(tmp_path, config)
    assert path is not None and path.stat().st_mode & 0o777 == 0o600
    from kafka_tiers.cli.admin_channel import admin_security

    security = admin_security(tmp_path)
    assert isinstance(security, TlsChannel)
    assert security.client_context().check_hostname is False  # "" kept: hostnames unchecked
    path.chmod(0o640)  # it holds the key itself
    from kafka_tiers.cli.admin_channel import AdminChannelError

    with pytest.raises(AdminChannelError, match="mode 0640"):
        admin_security(tmp_path)


def test_other_users_go_through_the_kafka_listener_with_command_config(
        make_kafka_broker: Callable[..., Any], certs: TestCerts, tmp_path: Path) -> None:
    broker = make_kafka_broker(**{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.location": str(certs.ca_cert)})
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.location={certs.ca_cert}\n")
    boot = broker.bootstrap_servers
    code, out, err = cli("topics", "create", "tls-topic", "--partitions", "1",
                         "--bootstrap-server", boot, "--command-config", str(props))
    assert code == 0, err
    code, out, err = cli("topics", "list", "--bootstrap-server", boot,
                         "--command-config", str(props))
    assert code == 0 and "tls-topic" in out
    from kafka_tiers.api.cluster import BrokerInfo, ClusterView
    from kafka_tiers.placement.cluster_file import ClusterFile, write_cluster_file

    d = tmp_path / "started"
    d.mkdir()
    write_cluster_file(d / "cluster.json", ClusterFile(ClusterView([BrokerInfo(1, None)]),
                                                       addresses={1: "127.0.0.1:1"}))
    code, _, err = cli("topics", "list", "--dir", str(d),
                       "--command-config", str(props))
    assert code != 0 and "--command-config is for Kafka listeners" in err


def test_cluster_start_with_tls_between_brokers_serves_its_user_through_dir(
        tmp_path: Path, certs: TestCerts) -> None:
    # the real `cluster start` process: its brokers talk TLS, it writes the admin channel's
    # file, and a command given --dir reaches it with the brokers' identity
    import shutil

    from tests.cluster.processes import cluster_start

    keystore = shutil.copy(certs.broker_keystore, tmp_path / "broker-keystore.pem")
    Path(keystore).chmod(0o600)
    d = tmp_path / "c"
    settings = {"security.inter.broker.protocol": "SSL", "ssl.keystore.location": keystore,
                "ssl.truststore.location": certs.ca_cert, "super.users": BROKER}
    args = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    with cluster_start(d, racks=None, status_interval=30, brokers=2, extra_args=args):
        channel = d / CHANNEL_FILE
        assert channel.exists() and channel.stat().st_mode & 0o777 == 0o600
        code, out, err = cli("topics", "create", "secured", "--partitions", "1",
                             "--replication-factor", "2", "--dir", str(d))
        assert code == 0, err
        code, out, err = cli("topics", "list", "--dir", str(d))
        assert code == 0 and "secured" in out
        plain = TcpClient()  # the brokers' internal ports refuse a plaintext peer
        try:
            from kafka_tiers.placement.cluster_file import read_cluster_file

            with pytest.raises(TransportError):
                plain.send(read_cluster_file(d / "cluster.json").bootstrap[0],
                           ApiKey.METADATA, {}, timeout=5)
        finally:
            plain.close()


def test_closing_a_tls_server_ends_a_handshake_in_progress(certs: TestCerts,
                                                            tmp_path: Path) -> None:
    import socket

    server = TcpServer(HandlerTable(), security=identity(
        tmp_path, certs.broker_cert, certs.broker_key, certs.ca_cert, "broker")).start()
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        time.sleep(0.2)  # the server's thread now waits for a ClientHello
        started = time.monotonic()
        server.close()
        assert silent.recv(1) == b""  # closed at once, not after the handshake timeout
        assert time.monotonic() - started < 3
    finally:
        silent.close()
