"""One Kafka request on a raw socket, encoded and decoded with kafka-python's message classes:
exactly the version asked for (a real client picks its own), for the version-by-version tests
of Metadata, Produce and ListOffsets; and connections held open with a first few bytes sent
(:func:`held_connections`), for the limits tests.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from typing import Any

from kafka_tiers.kafka.codec import REQUESTS, RESPONSES


@contextlib.contextmanager
def held_connections(addr: tuple[str, int], n: int, first: bytes = b""
                     ) -> Iterator[list[socket.socket]]:
    """``n`` raw connections to ``addr``, each having sent ``first`` (nothing by default);
    all closed on exit."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.create_connection(addr, timeout=5)
            if first:
                s.sendall(first)
            socks.append(s)
        yield socks
    finally:
        for s in socks:
            s.close()


class RawConnection:
    """A connection to a Kafka listener (``host:port``, the first of a bootstrap list)."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, **fields: Any) -> None:
        """Send a request without waiting for an answer."""
        self.corr += 1
        req = REQUESTS[api_key][version](**fields)
        req.with_header(correlation_id=self.corr, client_id="kt-raw")
        self.sock.sendall(bytes(req.encode(header=True, framed=True)))

    def receive(self, api_key: int, version: int) -> Any:
        """Read one response and decode it."""
        (size,) = struct.unpack(">i", self._exact(4))
        body = self._exact(size)
        return RESPONSES[api_key].decode(body, version=version, header=True)

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """Send a request and return its decoded response."""
        self.send(api_key, version, **fields)
        resp = self.receive(api_key, version)
        assert resp.header.correlation_id == self.corr
        return resp

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            got = self.sock.recv(n - len(out))
            if not got:
                raise ConnectionError("the broker closed the connection")
            out += got
        return bytes(out)


def request_class(api_key: int, version: int) -> Any:
    """The request message class of an API at a version (its nested classes build fields)."""
    return REQUESTS[api_key][version]


__all__ = ["RawConnection", "request_class"]
