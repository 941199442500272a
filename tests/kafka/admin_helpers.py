"""Helpers of the admin tests (leaders, reassignments, log dirs, DeleteRecords): one raw
request/response round trip through kafka-python's protocol classes (the client side of the
codec the broker uses), for every version a handler registers, and small waits."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from kafka_tiers.kafka.codec import REQUESTS, RESPONSES


def recv_exact(s: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``s`` (ConnectionError when it closes first)."""
    out = b""
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise ConnectionError("the broker closed the connection")
        out += got
    return out


def roundtrip(bootstrap: str, api_key: int, version: int, **fields: Any) -> Any:
    """Send one request (``fields`` of kafka-python's request class at ``version``) to the
    first address of ``bootstrap`` and return the decoded response."""
    req = REQUESTS[api_key][version](**fields)
    req.with_header(correlation_id=77, client_id="admin-test")
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(bytes(req.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        body = recv_exact(s, size)
    resp = RESPONSES[api_key].decode(body, version=version, header=True)
    assert resp.header.correlation_id == 77
    return resp


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition"
             ) -> Any:
    """Poll ``predicate`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


__all__ = ["roundtrip", "wait_for"]
