"""Protocol frames that fail to parse: one WARN line per connection naming the peer and the
problem, no traceback, that connection closed, every other client served (issue 13: 361
tracebacks on a broker's stderr)."""

from __future__ import annotations

import json
import signal
import socket
import struct
from pathlib import Path

from kafka_tiers.cluster.transport import ApiKey, TcpClient
from tests.broker.broker_process import BrokerProcess, broker_process

__all__ = ["broker_process"]


def _frame(body: bytes, header: bytes | None = None) -> bytes:
    head = header if header is not None else struct.pack(">hhii", 3, 0, 7, len(body))
    frame = head + body
    return struct.pack(">i", len(frame)) + frame


#: one unparsable frame per connection, each a different problem
GARBAGE = {
    "random bytes": b"\x00\x00\x00\x10" + bytes(range(200, 216)),
    "shorter than the header": struct.pack(">i", 4) + b"abcd",
    "negative size": b"\xff\xff\xff\xf0junk",
    "body not JSON": _frame(b"{not json"),
    "body a JSON list": _frame(b"[1, 2, 3]"),
    "body not UTF-8": _frame(b"\xff\xfe\xfd"),
    "body nested too deep": _frame(b"[" * 200_000),
    "body size past the frame": _frame(b"{}", struct.pack(">hhii", 3, 0, 7, 1 << 30)),
}


def _send_and_wait_closed(address: str, data: bytes) -> tuple[str, bool]:
    """Send ``data`` on a new connection; (this end's host:port, whether the broker closed
    the connection within 10 s)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        host, port = sock.getsockname()[:2]
        me = f"{host}:{port}"
        sock.sendall(data)
        try:
            closed = sock.recv(1) == b""
        except (TimeoutError, ConnectionResetError):
            closed = False
    return me, closed


def test_unparsable_frames_log_one_warn_line_per_connection_and_no_traceback(
        tmp_path: Path, broker_process: type[BrokerProcess]) -> None:
    broker = broker_process(tmp_path / "b").start("--log-level", "INFO")
    client = TcpClient()
    try:
        assert client.send(broker.address, ApiKey.METADATA, {}).body["brokers"]
        peers = {}
        for what, data in GARBAGE.items():
            peer, closed = _send_and_wait_closed(broker.address, data)
            assert closed, f"the broker kept the connection of a frame with {what} open"
            peers[what] = peer
        # the good client still works, on its old connection and on a new one
        assert client.send(broker.address, ApiKey.METADATA, {}).body["brokers"]
        assert TcpClient().send(broker.address, ApiKey.METADATA, {}).body["brokers"]
    finally:
        client.close()
    broker.signal(signal.SIGTERM)
    assert broker.wait(30) == 0
    err = broker.stderr()
    assert "Traceback" not in err, err[-3000:]
    warns = [line for line in err.splitlines() if "unreadable request frame" in line]
    assert len(warns) == len(GARBAGE), "\n".join(warns)
    for what, peer in peers.items():
        mine = [line for line in warns if peer in line]
        assert len(mine) == 1 and " WARNING " in mine[0], (what, peer, warns)


def test_a_good_request_still_works_after_a_bad_one_on_another_connection(
        tmp_path: Path) -> None:
    """In-process: the same server, bad JSON then a good request from another client."""
    from kafka_tiers.cluster.transport import HandlerTable, Response, TcpServer

    table = HandlerTable()
    table.register(ApiKey.METADATA, lambda req: Response({"echo": req.body}))
    server = TcpServer(table).start()
    client = TcpClient()
    try:
        _, closed = _send_and_wait_closed(server.address, _frame(json.dumps([1]).encode()))
        assert closed
        assert client.send(server.address, ApiKey.METADATA, {"a": 1}).body == {"echo": {"a": 1}}
    finally:
        client.close()
        server.close()
