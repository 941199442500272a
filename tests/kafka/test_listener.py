"""The Kafka listener itself: listeners config, ApiVersions per Kafka's rules, frames bounded,
one bad connection never disturbs another, and what a cluster member registers."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.config import BrokerConfig
from kafka_tiers.kafka.listeners_config import advertised, listener_specs
from kafka_tiers.kafka.registry import apis
from tests.kafka.admin_helpers import recv_exact


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker({"broker.id": "1", "log.dirs": str(tmp_path / "d"),
                "listeners": "PLAINTEXT://127.0.0.1:0", "max.connections": "4"},
               background=False).start()
    try:
        yield b
    finally:
        b.shutdown()


def _connect(broker: Broker) -> socket.socket:
    host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    return s


def _roundtrip(s: socket.socket, frame: bytes) -> bytes:
    s.sendall(frame)
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, size)


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionError, TimeoutError):
        return True


def _versions_request(version: int, corr: int = 1) -> bytes:
    fields = ({"client_software_name": "t", "client_software_version": "1"}
              if version >= 3 else {})
    r = ApiVersionsRequest[version](**fields)
    r.with_header(correlation_id=corr, client_id="test")
    return bytes(r.encode(header=True, framed=True))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version_advertises_the_registry(broker: Broker,
                                                             version: int) -> None:
    with _connect(broker) as s:
        body = _roundtrip(s, _versions_request(version, corr=41))
    # the response header is never flexible, even for v3+ (Kafka's rule)
    assert struct.unpack(">i", body[:4])[0] == 41
    resp = ApiVersionsResponse.decode(body, version=version, header=True)
    assert resp.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == {a.key: (a.min_version, a.max_version) for a in apis().values()}


def test_unsupported_api_versions_version_gets_v0_answer_with_our_ranges(
        broker: Broker) -> None:
    frame = bytearray(_versions_request(3, corr=9))
    frame[6:8] = struct.pack(">h", 99)  # a version from the future
    with _connect(broker) as s:
        body = _roundtrip(s, bytes(frame))
        resp = ApiVersionsResponse.decode(body, version=0, header=True)
        assert resp.error_code == 35  # UNSUPPORTED_VERSION
        assert {k.api_key for k in resp.api_keys} == set(apis())
        # the connection stays usable: the client retries with a version we serve
        again = ApiVersionsResponse.decode(_roundtrip(s, _versions_request(2, corr=10)),
                                           version=2, header=True)
        assert again.error_code == 0


def test_bad_frames_close_only_their_connection(broker: Broker,
                                                caplog: pytest.LogCaptureFixture) -> None:
    good = _connect(broker)
    try:
        bad_cases = [
            struct.pack(">i", 1 << 30),  # above socket.request.max.bytes
            struct.pack(">i", -5),  # negative size
            struct.pack(">i", 4) + b"\x00\x12\x00",  # too short for a header
            struct.pack(">ihhi", 8, 9999, 0, 1),  # an API nobody serves
            struct.pack(">ihhi", 12, 18, 3, 1) + b"\xff\xff\xff\xff",  # garbage body
        ]
        for frame in bad_cases:
            with _connect(broker) as bad:
                bad.sendall(frame)
                assert _closed(bad)
            body = _roundtrip(good, _versions_request(1))
            assert ApiVersionsResponse.decode(body, version=1, header=True).error_code == 0
    finally:
        good.close()
    warnings = [r for r in caplog.records if r.name == "kafka_tiers.kafka.server"
                and r.levelname == "WARNING"]
    assert len(warnings) >= 4 and not any(r.exc_info for r in caplog.records)


def test_max_connections_refuses_extra_connections(broker: Broker) -> None:
    conns = [_connect(broker) for _ in range(4)]
    try:
        for c in conns:  # every accepted connection is served
            assert ApiVersionsResponse.decode(_roundtrip(c, _versions_request(0)),
                                              version=0, header=True).error_code == 0
        with _connect(broker) as extra:
            assert _closed(extra)
    finally:
        for c in conns:
            c.close()


def test_listener_specs_and_advertised() -> None:
    cfg = {"listeners": "PLAINTEXT://:9092,INTERNAL://127.0.0.1:0",
           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
           "advertised.listeners": "PLAINTEXT://kafka.example:19092"}
    specs = listener_specs(cfg)
    assert [(s.name, s.host, s.port) for s in specs] == [("PLAINTEXT", "", 9092),
                                                         ("INTERNAL", "127.0.0.1", 0)]
    adv = advertised(cfg, {"PLAINTEXT": ("", 9092), "INTERNAL": ("127.0.0.1", 40001)})
    assert adv == {"PLAINTEXT": ("kafka.example", 19092), "INTERNAL": ("127.0.0.1", 40001)}
    with pytest.raises(ConfigError, match="INTERNAL has no security protocol"):
        listener_specs({"listeners": "INTERNAL://:1"})
    with pytest.raises(ConfigError, match="OTHER is not a listener"):
        advertised({"advertised.listeners": "OTHER://h:1"}, {"PLAINTEXT": ("", 1)})
    with pytest.raises(ConfigError, match="listeners"):
        BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:99999"})


def test_port_in_use_is_one_clear_error(tmp_path: Path, broker: Broker) -> None:
    port = broker.bootstrap_servers.rsplit(":", 1)[1]
    other = Broker({"broker.id": "2", "log.dirs": str(tmp_path / "other"),
                    "listeners": f"PLAINTEXT://127.0.0.1:{port}"}, background=False)
    with pytest.raises(OSError, match=f"listener PLAINTEXT cannot bind 127.0.0.1:{port}"):
        other.start()
    assert not other.started


def test_cluster_members_register_their_advertised_listeners(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 3, overrides={"listeners": "PLAINTEXT://127.0.0.1:0"}) as c:
        boots = c.bootstrap_servers.split(",")
        assert len(boots) == 3
        md = c.broker(1).member.metadata
        regs = md.live_brokers()
        assert sorted(f"{r.endpoint('PLAINTEXT')[0]}:{r.endpoint('PLAINTEXT')[1]}"
                      for r in regs.values()) == sorted(boots)


def test_importing_the_listener_and_the_cli_raises_no_warning() -> None:
    """kafka-python's schema loader warns once per message class on import: a plugin
    author's conformance run or a user's test run must not see those warnings."""
    import subprocess
    import sys
    code = ("import kafka_tiers.kafka.registry as r; r.apis(); "
            "import kafka_tiers.cli.kafka_admin; import kafka_tiers.broker.broker")
    run = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
