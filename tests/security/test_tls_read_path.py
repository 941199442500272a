"""The Kafka listener's read path over TLS: frame bodies read with ``recv_into`` while OpenSSL
has bytes (records of at most 16 KiB), into a buffer grown with the bytes received, at most
``READ_BYTES_PER_EVENT`` a turn (:meth:`KafkaServer._recv_body`)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka import server as kafka_server
from kafka_tiers.kafka.codec import REQUESTS
from tests.kafka.raw_requests import RawConnection
from tests.security.certs import TestCerts
from tests.security.test_tls import listener_address, python_tls_peer, ssl_broker_config

PRODUCE = 0
MiB = 1 << 20


def _produce_frame(corr: int, records: bytes) -> bytes:
    req = REQUESTS[PRODUCE][3](transactional_id=None, acks=1, timeout_ms=2000,
                               topic_data=[("reads", [(0, records)])])
    req.with_header(correlation_id=corr, client_id="tls-reads")
    return bytes(req.encode(header=True, framed=True))


def test_pipelined_frames_across_buffer_growth_and_turns_arrive_whole(
        make_kafka_broker: Callable[..., Broker], certs: TestCerts,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Produce frames of sizes around the buffer's growth steps and beyond one turn's
    READ_BYTES_PER_EVENT, sent back to back in one write over TLS, are each read whole and
    answered in order; and no frame formats a socket's repr (a selector miss by socket did,
    two system calls a frame)."""
    broker = make_kafka_broker(**ssl_broker_config(certs))
    broker.create_topic("reads")
    chunk, turn = kafka_server.READ_CHUNK, kafka_server.READ_BYTES_PER_EVENT
    sizes = [10, chunk - 100, chunk + 1, 2 * chunk + 7, turn + 3, 3 * turn, 10]
    frames = b"".join(_produce_frame(i + 1, bytes([i]) * n) for i, n in enumerate(sizes))
    reprs: list[str] = []
    plain_repr = socket.socket.__repr__

    def counted(self: socket.socket) -> str:
        reprs.append(type(self).__name__)
        return plain_repr(self)

    monkeypatch.setattr(socket.socket, "__repr__", counted)
    with RawConnection(":".join(map(str, listener_address(broker, "SSL"))), 10.0) as conn:
        conn.sock.close()
        tls: ssl.SSLSocket = python_tls_peer(listener_address(broker, "SSL"), certs)
        conn.sock = tls
        tls.sendall(frames)
        answered: list[Any] = [conn.receive(PRODUCE, 3) for _ in sizes]
    assert [r.header.correlation_id for r in answered] == list(range(1, len(sizes) + 1))
    for r in answered:
        assert [t[0] for t in r.responses] == ["reads"] or \
            [getattr(t, "name", None) for t in r.responses] == ["reads"]
    assert reprs == [], f"socket repr formatted {len(reprs)} times while reading frames"
