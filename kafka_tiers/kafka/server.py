"""The Kafka protocol server of one broker: its listeners' sockets and connections.

Per connection, one request is read, handled and answered at a time, in order (Kafka mutes a
channel while a request is in flight; clients that pipeline simply wait). A frame whose size
is negative or above ``socket.request.max.bytes``, or that does not decode, closes that
connection only, with one WARN line; every other connection goes on. Connections beyond
``max.connections`` are closed at once; a connection idle for ``connections.max.idle.ms`` is
closed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_tiers.kafka import codec
from kafka_tiers.kafka.context import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    FileRegion,
    RawBody,
    RequestContext,
)
from kafka_tiers.kafka.listeners_config import ListenerSpec, advertised, listener_specs
from kafka_tiers.kafka.registry import Api, apis

if TYPE_CHECKING:
    from kafka_tiers.broker.broker import Broker

log = logging.getLogger(__name__)
T = TypeVar("T")
_SIZE = struct.Struct(">i")
UNSUPPORTED_VERSION = 35


class _Listener:
    def __init__(self, spec: ListenerSpec, sock: socket.socket) -> None:
        self.spec = spec
        self.sock = sock
        _host, port = sock.getsockname()[:2]
        self.bound = (spec.host or "", int(port))
        self.thread: threading.Thread | None = None


class KafkaServer:
    """The Kafka listeners of ``broker`` (see the module docstring).

    :meth:`bind` opens the sockets (so the ports are known before the broker registers),
    :meth:`serve` starts accepting, :meth:`stop` closes everything and waits for the
    connection threads (bounded). Handlers come from :func:`kafka_tiers.kafka.registry.apis`.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.specs = listener_specs(cfg)
        self.max_request_bytes = int(cfg["socket.request.max.bytes"])
        self.max_connections = int(cfg["max.connections"])
        self.idle_s = int(cfg["connections.max.idle.ms"]) / 1000.0
        self.apis: dict[int, Api] = dict(apis())
        self._listeners: list[_Listener] = []
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()
        self._components: dict[str, Any] = {}
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    def bind(self) -> dict[str, tuple[str, int]]:
        """Open every listener's socket; returns the advertised ``(host, port)`` per listener
        name (Metadata's answer).

        Raises:
            ConfigError: a malformed ``listeners``/``advertised.listeners``.
            OSError: a port is in use (the message names the listener).
        """
        for spec in self.specs:
            family = socket.AF_INET6 if ":" in spec.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((spec.host, spec.port))
            except OSError as exc:
                sock.close()
                self.close_sockets()
                raise OSError(exc.errno, f"listener {spec.name} cannot bind "
                              f"{spec.host or '0.0.0.0'}:{spec.port}: {exc.strerror}") from None
            sock.listen(int(self.broker.config["socket.listen.backlog.size"]))
            self._listeners.append(_Listener(spec, sock))
        return self.advertised()

    def advertised(self) -> dict[str, tuple[str, int]]:
        """The advertised ``(host, port)`` of each bound listener, by name."""
        return advertised(self.broker.config, {lst.spec.name: lst.bound
                                               for lst in self._listeners})

    def bootstrap(self) -> str:
        """``host:port,...`` of the advertised listeners (what a client is given)."""
        return ",".join(f"{h}:{p}" for h, p in self.advertised().values())

    def serve(self) -> None:
        """Start accepting connections on every bound listener."""
        for lst in self._listeners:
            t = threading.Thread(target=self._accept_loop, args=(lst,), daemon=True,
                                 name=f"kafka-listener-{lst.spec.name}-{lst.bound[1]}")
            lst.thread = t
            t.start()

    def close_sockets(self) -> None:
        for lst in self._listeners:
            with contextlib.suppress(OSError):
                lst.sock.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listeners and every connection, wait for their threads (at most
        ``timeout`` seconds in all) and close the shared components. Idempotent."""
        self._stopping.set()
        for lst in self._listeners:
            with contextlib.suppress(OSError):
                lst.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                lst.sock.close()
        with self._lock:
            conns = dict(self._conns)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for t in [lst.thread for lst in self._listeners] + list(conns.values()):
            if t is not None and t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            comps, self._components = dict(self._components), {}
        for comp in comps.values():
            close = getattr(comp, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.exception("kafka server: closing %r failed", comp)

    def component(self, key: str, factory: Callable[[KafkaServer], T]) -> T:
        """The shared component ``key``, made by ``factory(self)`` on first use."""
        with self._lock:
            comp = self._components.get(key)
            if comp is None:
                if self._stopping.is_set():
                    raise RuntimeError("the Kafka server is stopping")
                comp = factory(self)
                self._components[key] = comp
            return comp

    # ------------------------------------------------------------------ connections
    def _accept_loop(self, lst: _Listener) -> None:
        warned = 0.0
        while not self._stopping.is_set():
            try:
                conn, addr = lst.sock.accept()
            except OSError:
                return
            with self._lock:
                full = len(self._conns) >= self.max_connections
            if full or self._stopping.is_set():
                now = time.monotonic()
                if now - warned > 60:
                    warned = now
                    log.warning("kafka listener %s: max.connections (%d) reached; closing new "
                                "connections", lst.spec.name, self.max_connections)
                conn.close()
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(target=self._connection, args=(lst, conn, addr), daemon=True,
                                 name=f"kafka-conn-{addr[1]}")
            with self._lock:
                self._conns[conn] = t
            t.start()

    def _connection(self, lst: _Listener, conn: socket.socket, addr: Any) -> None:
        peer = f"{addr[0]}:{addr[1]}"
        try:
            conn.settimeout(self.idle_s)
            while not self._stopping.is_set():
                frame = self._read_frame(conn, peer, lst)
                if frame is None:
                    return
                if not self._handle(lst, conn, peer, frame):
                    return
        except TimeoutError:
            log.debug("kafka connection %s idle for connections.max.idle.ms; closed", peer)
        except OSError as exc:
            log.debug("kafka connection %s: %s", peer, exc)
        finally:
            with self._lock:
                self._conns.pop(conn, None)
            with contextlib.suppress(OSError):
                conn.close()

    def _read_exact(self, conn: socket.socket, n: int) -> bytearray | None:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = conn.recv_into(view[got:], n - got)
            if k == 0:
                return None
            got += k
        return buf

    def _read_frame(self, conn: socket.socket, peer: str, lst: _Listener) -> bytearray | None:
        head = self._read_exact(conn, 4)
        if head is None:
            return None
        (size,) = _SIZE.unpack(head)
        if size < 0 or size > self.max_request_bytes:
            log.warning("kafka listener %s: %s sent a frame of %d bytes (socket.request.max."
                        "bytes is %d); connection closed", lst.spec.name, peer, size,
                        self.max_request_bytes)
            return None
        return self._read_exact(conn, size)

    def _handle(self, lst: _Listener, conn: socket.socket, peer: str, frame: bytearray
                ) -> bool:
        """Handle one request; False when the connection is to be closed."""
        try:
            key, version, corr = codec.peek_header(frame)
        except codec.FrameError as exc:
            log.warning("kafka listener %s: %s: %s; connection closed", lst.spec.name, peer,
                        exc)
            return False
        api = self.apis.get(key)
        if api is None or not api.min_version <= version <= api.max_version:
            if key == codec.API_VERSIONS_KEY:  # Kafka's rule: v0 body, our ranges
                self._send(conn, codec.response_header(key, 0, corr)
                           + self._versions_v0(UNSUPPORTED_VERSION), None)
                return True
            name = api.name if api is not None else f"API key {key}"
            log.warning("kafka listener %s: %s sent %s v%d, which this broker does not serve "
                        "(see ApiVersions); connection closed", lst.spec.name, peer, name,
                        version)
            return False
        try:
            header, request = codec.decode_request(frame, key, version)
        except codec.FrameError as exc:
            log.warning("kafka listener %s: %s: %s; connection closed", lst.spec.name, peer,
                        exc)
            return False
        ctx = RequestContext(self, header, lst.spec.name, lst.spec.security_protocol, peer)
        try:
            reply = api.handler(ctx, request)
        except Exception:
            log.exception("kafka listener %s: %s v%d from %s failed; connection closed",
                          lst.spec.name, api.name, version, peer)
            return False
        if reply is CLOSE_CONNECTION:
            return False
        if reply is NO_RESPONSE:
            return True
        head = codec.response_header(key, version, corr)
        if isinstance(reply, RawBody):
            self._send(conn, head, reply)
        else:
            self._send(conn, head + bytes(reply.encode(version=version)), None)
        return True

    def _versions_v0(self, error: int) -> bytes:
        resp = codec.response_class(codec.API_VERSIONS_KEY, 0)(
            error_code=error, api_keys=[(a.key, a.min_version, a.max_version)
                                        for a in sorted(self.apis.values(),
                                                        key=lambda a: a.key)])
        return bytes(resp.encode(version=0))

    def _send(self, conn: socket.socket, head: bytes, body: RawBody | None) -> None:
        try:
            size = len(head) + (len(body) if body is not None else 0)
            if body is None:
                conn.sendall(_SIZE.pack(size) + head)
                return
            pending = bytearray(_SIZE.pack(size) + head)
            for part in body.parts:
                if isinstance(part, FileRegion):
                    if pending:
                        conn.sendall(pending)
                        pending = bytearray()
                    _send_region(conn, part)
                else:
                    pending += part
            if pending:
                conn.sendall(pending)
        finally:
            if body is not None:
                body.close()


def _send_region(conn: socket.socket, region: FileRegion) -> None:
    """``region``'s bytes to the socket: ``os.sendfile`` (zero copy), else read and send."""
    offset, left = region.offset, region.count
    try:
        while left > 0:
            try:
                sent = os.sendfile(conn.fileno(), region.fd, offset, left)
            except BlockingIOError:  # a socket timeout makes the fd non-blocking: wait
                _wait_writable(conn)
                continue
            except OSError as exc:
                if exc.errno not in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: copy
                    raise
                data = os.pread(region.fd, left, offset)
                if len(data) != left:
                    raise OSError(f"segment shorter than announced ({len(data)} of {left} "
                                  "bytes)") from None
                conn.sendall(data)
                return
            if sent == 0:
                raise OSError("segment shorter than announced: the file ended early")
            offset += sent
            left -= sent
    finally:
        region.close()


def _wait_writable(conn: socket.socket) -> None:
    import select
    timeout = conn.gettimeout()
    _, w, _ = select.select([], [conn], [], timeout)
    if not w:
        raise TimeoutError("the client does not read its response")


__all__ = ["KafkaServer"]
