"""The request layer: framing, versions, error codes, timeouts, connection reuse, loopback."""

from __future__ import annotations

import threading
import time

import pytest

from kafka_tiers.cluster.transport import (
    ApiError,
    ApiKey,
    ErrorCode,
    HandlerTable,
    LoopbackClient,
    LoopbackNetwork,
    Request,
    Response,
    TcpClient,
    TcpServer,
    decode_request,
    encode_request,
)


def table() -> HandlerTable:
    t = HandlerTable()
    t.register(ApiKey.METADATA, lambda r: Response({"echo": r.body, "v": r.api_version},
                                                   r.payload[::-1]), max_version=2)
    t.register(ApiKey.PRODUCE, lambda r: (_ for _ in ()).throw(
        ApiError("not me", ErrorCode.NOT_LEADER_OR_FOLLOWER)))
    t.register(ApiKey.FETCH, lambda r: (time.sleep(float(r.body["sleep"])), Response())[1])
    t.register(ApiKey.DELETE_TOPICS, lambda r: 1 / 0)
    return t


def test_frames_round_trip() -> None:
    frame = encode_request(ApiKey.FETCH, 3, 77, {"a": [1, "x"]}, b"\x00\x01")
    req = decode_request(frame[4:])
    assert (req.api_key, req.api_version, req.correlation_id, req.body, req.payload) == \
        (1, 3, 77, {"a": [1, "x"]}, b"\x00\x01")


@pytest.fixture(params=["tcp", "loopback"])
def endpoint(request: pytest.FixtureRequest):
    if request.param == "tcp":
        server = TcpServer(table()).start()
        client = TcpClient()
        yield client, server.address
        client.close()
        server.close()
    else:
        net = LoopbackNetwork()
        net.bind("inproc:1", table())
        yield LoopbackClient(net), "inproc:1"


def test_requests_versions_and_errors(endpoint) -> None:
    client, address = endpoint
    resp = client.send(address, ApiKey.METADATA, {"x": 1}, payload=b"abc", version=2)
    assert resp.body == {"echo": {"x": 1}, "v": 2} and resp.payload == b"cba"
    with pytest.raises(Exception) as err:
        client.send(address, ApiKey.METADATA, {}, version=3)
    assert err.value.code == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(Exception) as err:
        client.send(address, ApiKey.PRODUCE, {})
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and err.value.retriable
    assert "not me" in str(err.value)
    with pytest.raises(Exception) as err:
        client.send(address, ApiKey.DELETE_TOPICS, {})
    assert err.value.code == ErrorCode.UNKNOWN and "ZeroDivisionError" in str(err.value)
    # still usable after errors
    assert client.send(address, ApiKey.METADATA, {}).body["v"] == 0


def test_tcp_timeout_reconnects_and_concurrent_callers() -> None:
    server = TcpServer(table()).start()
    client = TcpClient()
    try:
        with pytest.raises(Exception) as err:
            client.send(server.address, ApiKey.FETCH, {"sleep": 1.0}, timeout=0.2)
        assert err.value.code == ErrorCode.REQUEST_TIMED_OUT
        results: list[int] = []

        def call(i: int) -> None:
            results.append(client.send(server.address, ApiKey.METADATA, {"i": i})
                           .body["echo"]["i"])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert sorted(results) == list(range(8))
    finally:
        client.close()
        server.close()
    with pytest.raises(Exception) as err:
        TcpClient().send(server.address, ApiKey.METADATA, {}, timeout=1)
    assert err.value.code == ErrorCode.NETWORK_EXCEPTION and not err.value.sent


def test_loopback_pause_and_unbind() -> None:
    net = LoopbackNetwork()
    net.bind("inproc:2", table())
    client = LoopbackClient(net)
    net.pause("inproc:2")
    with pytest.raises(Exception) as err:
        client.send("inproc:2", ApiKey.METADATA, {}, timeout=0.1)
    assert err.value.code == ErrorCode.REQUEST_TIMED_OUT
    net.resume("inproc:2")
    assert client.send("inproc:2", ApiKey.METADATA, {}).body["v"] == 0
    net.unbind("inproc:2")
    with pytest.raises(Exception) as err:
        client.send("inproc:2", ApiKey.METADATA, {})
    assert err.value.code == ErrorCode.NETWORK_EXCEPTION


def test_only_loopback_addresses() -> None:
    with pytest.raises(ValueError):
        TcpServer(HandlerTable(), host="0.0.0.0")
    assert Request(0, 0, {}).payload == b""
