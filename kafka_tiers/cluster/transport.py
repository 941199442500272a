"""One request/response layer between brokers, the controller and clients.

A request is an API key, an API version, a correlation id, a JSON body and an optional binary
payload (record batches travel as their Kafka bytes). A response carries the correlation id,
an error code, a JSON body and a payload. Frames on TCP::

    request:  int32 size | int16 api_key | int16 api_version | int32 correlation_id |
              int32 body_size | body (JSON) | payload
    response: int32 size | int32 correlation_id | int16 error_code | int32 body_size |
              body (JSON) | payload

API keys are Kafka's where Kafka has the API (0 Produce, 1 Fetch, 3 Metadata, 4 LeaderAndIsr,
5 StopReplica, 7 ControlledShutdown, 19 CreateTopics, 20 DeleteTopics, 23
OffsetForLeaderEpoch, 34 AlterReplicaLogDirs, 35 DescribeLogDirs, 43 ElectLeaders, 45
AlterPartitionReassignments, 46 ListPartitionReassignments, 68 CreateReplicaPlacement from
document 001). A handler table maps each key to its supported version range and a function;
an unsupported key or version is answered with ``UNSUPPORTED_VERSION``.

Two transports share the handlers: :class:`TcpServer` / :class:`TcpClient` on 127.0.0.1 (one
reused connection per address, one request in flight on it, a timeout per request), and
:class:`LoopbackNetwork` for several brokers in one process (the handler runs in the caller's
thread; an endpoint can be stopped, or paused like a SIGSTOPped process).

Security: a :class:`TcpServer` / :class:`TcpClient` given a :class:`ChannelSecurity` (the
inter-broker listener's TLS with mutual authentication,
:mod:`kafka_tiers.cluster.transport_security`) secures every connection before its first
frame; each request then carries its peer's :attr:`Request.principal`. A table that
:meth:`HandlerTable.require_authentication` answers a request without one
``CLUSTER_AUTHORIZATION_FAILED`` before any handler runs. Without a ``ChannelSecurity`` the
plaintext path is exactly what it was (no wrapping, no extra work per request).
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka_tiers.api.authorizer import KafkaPrincipal
from kafka_tiers.api.errors import KafkaTiersError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
#: the largest response frame a client reads (fetch answers are bounded by the fetch size).
MAX_FRAME = 256 << 20
#: Kafka's ``socket.request.max.bytes`` default: the largest request frame a server reads.
SOCKET_REQUEST_MAX_BYTES = 104857600


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    CONTROLLED_SHUTDOWN = 7
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    OFFSET_FOR_LEADER_EPOCH = 23
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    CREATE_REPLICA_PLACEMENT = 68


class ErrorCode(enum.IntEnum):
    """Kafka's error codes where they exist."""

    NONE = 0
    UNKNOWN = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    NETWORK_EXCEPTION = 13
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    KAFKA_STORAGE_ERROR = 56
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85


#: errors after which the same request may be sent again (nothing was done, or the state
#: it depends on is moving).
RETRIABLE = frozenset({
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NOT_CONTROLLER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    # Kafka's KafkaStorageException is retriable: another replica may lead, or (out of
    # descriptors, memory or space, never a disk failure here) the resource comes back
    ErrorCode.KAFKA_STORAGE_ERROR,
})


class TransportError(KafkaTiersError):
    """A request failed: an error code from the other side, a timeout or a broken connection.

    Attributes:
        code: the :class:`ErrorCode`.
        retriable: whether sending again may succeed.
    """

    def __init__(self, message: str, code: ErrorCode = ErrorCode.UNKNOWN, *,
                 sent: bool = True, nothing_done: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = code in RETRIABLE
        #: False when the request certainly never reached the other side (no connection)
        self.sent = sent
        #: True when the other side refused before acting (a produce appended nothing), so
        #: sending the same request again cannot do it twice
        self.nothing_done = nothing_done or not sent


class ApiError(TransportError):
    """Raised by a handler to answer with an error code (the message goes to the caller)."""


@dataclass
class Request:
    """A request as a handler sees it."""

    api_key: int
    api_version: int
    body: dict[str, Any]
    payload: bytes = b""
    correlation_id: int = 0
    #: who sent it (``host:port`` of a TCP peer, ``loopback`` in-process), for log lines
    peer: str = "loopback"
    #: the authenticated sender: the principal of a TLS peer's certificate (a super user),
    #: or :data:`IN_PROCESS` on a loopback network; None when the connection did not
    #: authenticate (a plaintext TCP peer)
    principal: KafkaPrincipal | None = None


@dataclass
class Response:
    """A handler's answer (``error`` NONE for success)."""

    body: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""
    error: ErrorCode = ErrorCode.NONE


#: the principal of requests made inside this process (a :class:`LoopbackNetwork`)
IN_PROCESS = KafkaPrincipal("User", "kafka-tiers-in-process")


class ChannelSecurity(Protocol):
    """How a :class:`TcpServer` and a :class:`TcpClient` secure their connections
    (:class:`kafka_tiers.cluster.transport_security.TlsChannel`)."""

    def wrap(self, sock: socket.socket) -> socket.socket:
        """The socket to use for an accepted connection ``sock`` (which it takes over); no
        byte is read or written yet (:meth:`accept` does the handshake).

        Raises:
            OSError: the connection is already gone.
        """
        ...

    def accept(self, sock: socket.socket, peer: str) -> KafkaPrincipal:
        """Secure the connection :meth:`wrap` gave (the handshake) and authenticate its peer
        (``peer``: ``host:port`` for log lines); return the peer's principal.

        Raises:
            PeerRefusedError: the handshake failed or the peer may not use this channel
                (the caller closes the connection; the refusal is already logged).
        """
        ...

    def connect(self, sock: socket.socket, host: str) -> socket.socket:
        """Secure a connection this side opened to ``host``; return the socket to use.

        Raises:
            TransportError: the handshake failed, or the other side is not a peer this
                channel trusts (``sent`` False: no request went out).
        """
        ...


class PeerRefusedError(ConnectionError):
    """An accepted connection whose peer did not authenticate as an allowed principal."""


Handler = Callable[[Request], Response]
#: checks a request body's shape; raises ``ApiError`` (``INVALID_REQUEST``) when malformed
BodyValidator = Callable[[Mapping[str, Any]], None]


class HandlerTable:
    """API key -> (min version, max version, handler)."""

    def __init__(self) -> None:
        self._table: dict[int, tuple[int, int, Handler]] = {}
        self._validators: dict[int, BodyValidator] = {}
        #: answer requests without a principal CLUSTER_AUTHORIZATION_FAILED
        self.authenticated_only = False
        self._refusals = LogRateLimit(60.0)

    def require_authentication(self) -> None:
        """From now on, refuse every request whose :attr:`Request.principal` is None
        (``CLUSTER_AUTHORIZATION_FAILED``, nothing done, one WARN line per peer host a
        minute): the check in the dispatcher behind the channel's own (defence in depth).
        Idempotent."""
        self.authenticated_only = True

    def register(self, api_key: int, handler: Handler, *, min_version: int = 0,
                 max_version: int = 0, validate: BodyValidator | None = None) -> None:
        """Serve ``api_key`` with ``handler``; ``validate`` (when given) checks the body's
        shape first (:mod:`kafka_tiers.cluster.request_schemas`)."""
        self._table[int(api_key)] = (min_version, max_version, handler)
        if validate is not None:
            self._validators[int(api_key)] = validate
        else:
            self._validators.pop(int(api_key), None)

    def validated(self) -> frozenset[int]:
        """The api keys whose bodies are checked before their handler runs."""
        return frozenset(self._validators)

    def versions(self) -> dict[int, tuple[int, int]]:
        return {k: (lo, hi) for k, (lo, hi, _) in self._table.items()}

    def handle(self, req: Request) -> Response:
        """Check the body's shape (the validator registered with the key), then run the
        handler; a malformed body is ``INVALID_REQUEST`` with one WARN line naming the peer and
        the field. An ``ApiError`` becomes its code, a library error the code of its
        kind (:func:`error_code_for`), a missing or mistyped field (``KeyError``,
        ``TypeError``, ``ValueError``) ``INVALID_REQUEST`` (one WARN line); anything else is
        a bug: ``UNKNOWN`` with one ERROR line (the traceback at DEBUG). On a table that
        :meth:`require_authentication`, a request without a principal is
        ``CLUSTER_AUTHORIZATION_FAILED`` before anything else."""
        if self.authenticated_only and req.principal is None:
            host = req.peer.rpartition(":")[0] or req.peer
            if self._refusals.allow(host):
                log.warning("refused a %s request from %s: the peer did not authenticate "
                            "(the internal transport serves only brokers authenticated by "
                            "TLS; at most one such line per peer a minute)",
                            _api_name(req.api_key), req.peer)
            return Response({"message": "the internal transport serves only authenticated "
                                        "brokers", "nothing_done": True},
                            error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        entry = self._table.get(req.api_key)
        if entry is None or not entry[0] <= req.api_version <= entry[1]:
            return Response({"message": f"unsupported api {req.api_key} "
                                        f"v{req.api_version}"},
                            error=ErrorCode.UNSUPPORTED_VERSION)
        validate = self._validators.get(req.api_key)
        if validate is not None:
            try:
                validate(req.body)
            except TransportError as exc:
                log.warning("refused a malformed %s request from %s: %s",
                            _api_name(req.api_key), req.peer, exc)
                return Response({"message": f"malformed request: {exc}",
                                 "nothing_done": True}, error=exc.code)
        try:
            return entry[2](req)
        except TransportError as exc:
            return Response({"message": str(exc), "nothing_done": exc.nothing_done},
                            error=exc.code)
        except KafkaTiersError as exc:
            return Response({"message": f"{type(exc).__name__}: {exc}"},
                            error=error_code_for(exc))
        except (KeyError, TypeError, ValueError) as exc:  # a field missing or mistyped
            log.warning("refused a malformed %s request from %s: %s: %s",
                        _api_name(req.api_key), req.peer, type(exc).__name__, exc)
            log.debug("api %s: malformed request", req.api_key, exc_info=True)
            return Response({"message": f"malformed request: {type(exc).__name__}: {exc}"},
                            error=ErrorCode.INVALID_REQUEST)
        except Exception as exc:  # a bug: answer, one ERROR line, keep serving
            log.error("the %s handler failed on a request from %s: %s: %s (a bug; the "
                      "traceback is logged at DEBUG)", _api_name(req.api_key), req.peer,
                      type(exc).__name__, exc)
            log.debug("the %s handler failed", _api_name(req.api_key), exc_info=True)
            return Response({"message": f"{type(exc).__name__}: {exc}"},
                            error=ErrorCode.UNKNOWN)


class LogRateLimit:
    """Whether to log about a key (a peer host, a principal) now: at most once per
    ``interval`` seconds per key (keys forgotten after their interval; at most 4096 kept)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                return False
            if len(self._last) >= 4096:
                self._last = {k: t for k, t in self._last.items() if now - t < self.interval}
            self._last[key] = now
            return True


def _api_name(api_key: int) -> str:
    """``ApiKey`` name of a key, or the number of an unknown one."""
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


def error_code_for(exc: BaseException) -> ErrorCode:
    """Map a library error to an error code: its ``error_code`` attribute when it names a
    code (:class:`~kafka_tiers.placement.limits.LimitExceededError`), else by its kind."""
    named = getattr(exc, "error_code", None)
    if isinstance(named, str) and named in ErrorCode.__members__:
        return ErrorCode[named]
    name = type(exc).__name__
    table = {
        "NotLeaderError": ErrorCode.NOT_LEADER_OR_FOLLOWER,
        "UnknownTopicError": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "TopicExistsError": ErrorCode.TOPIC_ALREADY_EXISTS,
        "OffsetOutOfRangeError": ErrorCode.OFFSET_OUT_OF_RANGE,
        "InvalidReplicationFactorError": ErrorCode.INVALID_REPLICATION_FACTOR,
        "InvalidReplicaAssignmentError": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "ConfigError": ErrorCode.INVALID_CONFIG,
        "InvalidTopicError": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "RecordTooLargeError": ErrorCode.MESSAGE_TOO_LARGE,
        "InvalidRecordError": ErrorCode.CORRUPT_MESSAGE,
    }
    return table.get(name, ErrorCode.UNKNOWN)


# ---------------------------------------------------------------------- framing

_REQ = struct.Struct(">hhii")
_RESP = struct.Struct(">ihi")


def encode_request(api_key: int, version: int, corr: int, body: Mapping[str, Any],
                   payload: bytes = b"") -> bytes:
    raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
    frame = _REQ.pack(api_key, version, corr, len(raw)) + raw + payload
    return struct.pack(">i", len(frame)) + frame


class FrameError(ValueError):
    """A frame that does not parse: a size out of range, a header cut short, a body that is
    not a JSON object. The connection it came on cannot be trusted any more: the server logs
    one WARN line naming the peer and this problem, and closes that connection."""


def decode_request(frame: bytes) -> Request:
    """Parse a request frame (without its size prefix).

    Raises:
        FrameError: the frame is shorter than the header, its body size is out of range, or
            its body is not a UTF-8 JSON object.
    """
    api_key, version, corr, n = _unpack_header(frame, _REQ, "request")
    body, payload = _body_and_payload(frame, _REQ.size, n)
    return Request(api_key, version, body, payload, corr)


def _unpack_header(frame: bytes, header: struct.Struct, what: str) -> tuple[Any, ...]:
    if len(frame) < header.size:
        raise FrameError(f"a {len(frame)}-byte frame is shorter than the {header.size}-byte "
                         f"{what} header")
    return header.unpack_from(frame)


def _body_and_payload(frame: bytes, start: int, n: int) -> tuple[dict[str, Any], bytes]:
    """The JSON object of ``n`` bytes at ``start`` and the raw payload after it."""
    if n < 0 or start + n > len(frame):
        raise FrameError(f"body size {n} does not fit the {len(frame)}-byte frame")
    try:
        body = json.loads(frame[start:start + n]) if n else {}
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise FrameError(f"the body is not JSON: {str(exc)[:200]}") from None
    if not isinstance(body, dict):
        raise FrameError(f"the body is a JSON {type(body).__name__}, not an object")
    return body, bytes(frame[start + n:])


def encode_response(corr: int, resp: Response) -> bytes:
    raw = json.dumps(resp.body, separators=(",", ":")).encode("utf-8")
    frame = _RESP.pack(corr, int(resp.error), len(raw)) + raw + resp.payload
    return struct.pack(">i", len(frame)) + frame


def decode_response(frame: bytes) -> tuple[int, Response]:
    """Parse a response frame (without its size prefix).

    Raises:
        FrameError: the header is cut short, the body size does not fit the frame, or the
            body is not a JSON object (a server that is not a kafka-tiers broker, or a
            damaged connection).
    """
    corr, code, n = _unpack_header(frame, _RESP, "response")
    body, payload = _body_and_payload(frame, _RESP.size, n)
    try:
        err = ErrorCode(code)
    except ValueError:
        err = ErrorCode.UNKNOWN
    return corr, Response(body, payload, err)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    if size < 0 or size > MAX_FRAME:
        raise FrameError(f"bad frame size {size}")
    return _recv_exact(sock, size)


class FrameTooLargeError(FrameError):
    """A request's length prefix exceeds ``socket.request.max.bytes``.

    Attributes:
        size: the announced size.
        limit: ``socket.request.max.bytes``.
        header: the request header (api key, version, correlation id) when it could be read.
    """

    def __init__(self, size: int, limit: int,
                 header: tuple[int, int, int] | None) -> None:
        super().__init__(f"request of {size} bytes exceeds socket.request.max.bytes {limit}")
        self.size = size
        self.limit = limit
        self.header = header


#: bytes of an oversized request read (and dropped) at a time.
_DRAIN_CHUNK = 1 << 16


def read_request_frame(sock: socket.socket, max_size: int) -> bytes:
    """One request frame, its length prefix checked against ``max_size`` (Kafka's
    ``socket.request.max.bytes``) before any of the body is kept.

    An oversized request's header is read, the rest of it is read and dropped in small chunks
    (memory stays bounded, the connection stays in step), then :class:`FrameTooLargeError`
    is raised so the server can answer it.

    Raises:
        FrameTooLargeError: the prefix is above ``max_size``.
        FrameError: the prefix is negative.
        ConnectionError: the connection closed.
    """
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    if size < 0:
        raise FrameError(f"bad frame size {size}")
    if size <= max_size:
        return _recv_exact(sock, size)
    header = None
    left = size
    if size >= _REQ.size:
        api_key, version, corr, _ = _REQ.unpack(_recv_exact(sock, _REQ.size))
        header = (api_key, version, corr)
        left -= _REQ.size
    while left > 0:
        chunk = sock.recv(min(left, _DRAIN_CHUNK))
        if not chunk:
            raise ConnectionError("connection closed")
        left -= len(chunk)
    raise FrameTooLargeError(size, max_size, header)


# ---------------------------------------------------------------------- client interface

class Client:
    """Sends requests to an address (``host:port`` or a loopback name)."""

    def send(self, address: str, api_key: int, body: Mapping[str, Any], *,
             payload: bytes = b"", version: int = 0, timeout: float = 30.0) -> Response:
        """Send and wait for the answer.

        Raises:
            TransportError: ``NETWORK_EXCEPTION`` (cannot connect, connection broken),
                ``REQUEST_TIMED_OUT`` (no answer in ``timeout`` seconds; the request may have
                been acted on), or the error code of the answer.
        """
        resp = self.send_raw(address, api_key, body, payload=payload, version=version,
                             timeout=timeout)
        if resp.error != ErrorCode.NONE:
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else api_key
            raise TransportError(f"{name} to {address}: {resp.error.name}: "
                                 f"{resp.body.get('message', '')}", resp.error,
                                 nothing_done=bool(resp.body.get("nothing_done")))
        return resp

    def send_raw(self, address: str, api_key: int, body: Mapping[str, Any], *,
                 payload: bytes = b"", version: int = 0, timeout: float = 30.0) -> Response:
        """Send and return the answer whatever its error code (transport failures raise)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close every connection. Idempotent."""


# ---------------------------------------------------------------------- TCP

class TcpServer:
    """A threaded TCP server on 127.0.0.1 serving a :class:`HandlerTable`.

    Args:
        handlers: the table.
        port: 0 picks a free port (see :attr:`port`).
        max_request_bytes: ``socket.request.max.bytes``: a request frame above it is read
            and dropped in small chunks and answered ``INVALID_REQUEST`` (the connection stays
            usable); its body is never held in memory.
        security: secures and authenticates every accepted connection before its first
            frame (a refused peer is closed unserved); None: plaintext, each request's
            principal None.

    Raises:
        TransportError: the port cannot be listened on (in use, or not permitted); the
            message names the address and the reason.
    """

    def __init__(self, handlers: HandlerTable, port: int = 0, host: str = LOOPBACK, *,
                 max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES,
                 security: ChannelSecurity | None = None) -> None:
        if host not in (LOOPBACK, "localhost"):
            raise ValueError("kafka-tiers listens on 127.0.0.1 only")
        self.handlers = handlers
        self.max_request_bytes = max_request_bytes
        self.security = security
        server = self
        table = handlers
        conns: set[socket.socket] = set()
        self._conns = conns
        lock = threading.Lock()
        self._conn_lock = lock

        class _Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                principal: KafkaPrincipal | None = None
                with lock:
                    conns.add(sock)
                try:
                    if server.security is not None:
                        raw = sock
                        try:
                            sock = server.security.wrap(raw)
                            with lock:  # close() interrupts a handshake in progress too
                                conns.discard(raw)
                                conns.add(sock)
                            principal = server.security.accept(sock, _peer(self.client_address))
                        except (PeerRefusedError, OSError, ValueError):
                            return  # refused (logged by the channel); closed below
                    while True:
                        try:
                            req = decode_request(read_request_frame(
                                sock, server.max_request_bytes))
                            req.peer = _peer(self.client_address)
                            req.principal = principal
                        except FrameTooLargeError as exc:
                            log.warning("refused a request from %s: %s",
                                        _peer(self.client_address), exc)
                            if exc.header is None:
                                return
                            refused = Response({"message": str(exc), "nothing_done": True},
                                               error=ErrorCode.INVALID_REQUEST)
                            try:
                                sock.sendall(encode_response(exc.header[2], refused))
                            except OSError:
                                return
                            continue
                        except FrameError as exc:
                            # one line per connection, no traceback; the connection closes
                            log.warning("closing the connection from %s: unreadable request "
                                        "frame: %s", _peer(self.client_address), exc)
                            return
                        except (ConnectionError, OSError):
                            return
                        resp = table.handle(req)
                        try:
                            sock.sendall(encode_response(req.correlation_id, resp))
                        except OSError:
                            return
                finally:
                    with lock:
                        conns.discard(sock)
                    if sock is not self.request:  # the secured socket owns the descriptor
                        with contextlib.suppress(OSError):
                            sock.close()

        class _Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request: Any, client_address: Any) -> None:
                # socketserver prints a traceback to stderr: one WARN line instead (the
                # traceback at DEBUG), and the connection closes
                exc = sys.exc_info()[1]
                log.warning("closing the connection from %s: %s: %s", _peer(client_address),
                            type(exc).__name__, exc)
                log.debug("connection from %s failed", _peer(client_address), exc_info=True)

        try:
            self._server = _Server((LOOPBACK, port), _Handler)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise TransportError(f"cannot listen on {LOOPBACK}:{port}: {reason.lower()}",
                                 ErrorCode.NETWORK_EXCEPTION, sent=False) from None
        self.port: int = self._server.server_address[1]
        self.address = f"{LOOPBACK}:{self.port}"
        self._thread: threading.Thread | None = None

    def start(self) -> TcpServer:
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name=f"tcp-server-{self.port}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting, close every open connection, join the accept thread."""
        if self._thread is None:
            self._server.server_close()
            return
        self._server.shutdown()
        self._server.server_close()
        with self._conn_lock:
            for sock in list(self._conns):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self._thread = None


def _peer(address: Any) -> str:
    """``host:port`` of a peer address as socketserver gives it."""
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


class TcpClient(Client):
    """Connections to ``host:port`` addresses, one per address, reused; one request in
    flight per connection (callers for the same address take turns).

    Args:
        connect_timeout: seconds to connect (a secured handshake has the channel's bound).
        security: secures every connection it opens (TLS with this side's certificate);
            None: plaintext.
    """

    def __init__(self, connect_timeout: float = 5.0, *,
                 security: ChannelSecurity | None = None) -> None:
        self.connect_timeout = connect_timeout
        self.security = security
        #: address -> (its connection, None until the first send connects; its lock)
        self._conns: dict[str, tuple[socket.socket | None, threading.Lock]] = {}
        self._lock = threading.Lock()
        self._corr = 0
        self._closed = False

    def _conn(self, address: str) -> tuple[socket.socket | None, threading.Lock]:
        with self._lock:
            if self._closed:
                raise TransportError("client closed", ErrorCode.NETWORK_EXCEPTION)
            entry = self._conns.get(address)
            if entry is None:
                entry = (None, threading.Lock())
                self._conns[address] = entry
            return entry

    def send_raw(self, address: str, api_key: int, body: Mapping[str, Any], *,
                 payload: bytes = b"", version: int = 0, timeout: float = 30.0) -> Response:
        host, _, port = address.rpartition(":")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise TransportError(f"{address!r} is not host:port with a port from 1 to 65535",
                                 ErrorCode.INVALID_REQUEST, sent=False)
        _, lock = self._conn(address)
        if not lock.acquire(timeout=timeout):
            raise TransportError(f"{address}: request timed out waiting for the connection",
                                 ErrorCode.REQUEST_TIMED_OUT)
        try:
            sock = self._conns.get(address, (None, lock))[0]
            with self._lock:
                self._corr += 1
                corr = self._corr
            if sock is None:
                try:
                    sock = socket.create_connection((host or LOOPBACK, int(port)),
                                                    timeout=min(self.connect_timeout, timeout))
                except OSError as exc:
                    raise TransportError(f"cannot connect to {address}: {exc}",
                                         ErrorCode.NETWORK_EXCEPTION, sent=False) from None
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.security is not None:
                    try:
                        sock = self.security.connect(sock, host or LOOPBACK)
                    except BaseException:
                        with contextlib.suppress(OSError):
                            sock.close()
                        raise
                with self._lock:
                    self._conns[address] = (sock, lock)
            try:
                sock.settimeout(timeout)
                sock.sendall(encode_request(api_key, version, corr, body, payload))
                while True:
                    got, resp = decode_response(read_frame(sock))
                    if got == corr:
                        return resp
            except TimeoutError:
                self._drop(address, sock, lock)
                raise TransportError(f"{address}: no answer within {timeout:.1f}s",
                                     ErrorCode.REQUEST_TIMED_OUT) from None
            except (OSError, ConnectionError, struct.error, ValueError) as exc:
                self._drop(address, sock, lock)
                raise TransportError(f"{address}: connection failed: {exc}",
                                     ErrorCode.NETWORK_EXCEPTION) from None
        finally:
            lock.release()

    def _drop(self, address: str, sock: socket.socket, lock: threading.Lock) -> None:
        with contextlib.suppress(OSError):
            sock.close()
        with self._lock:
            self._conns[address] = (None, lock)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, {}
        for sock, _ in conns.values():
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


# ---------------------------------------------------------------------- loopback

class LoopbackNetwork:
    """Endpoints of several brokers in one process, called directly (same handlers as TCP).

    :meth:`pause` makes an endpoint hang like a stopped process (calls wait, up to their
    timeout, until :meth:`resume`); :meth:`unbind` makes it refuse connections like a dead one.
    """

    def __init__(self) -> None:
        self._endpoints: dict[str, HandlerTable] = {}
        self._paused: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def bind(self, address: str, handlers: HandlerTable) -> None:
        with self._lock:
            self._endpoints[address] = handlers
            self._paused.setdefault(address, threading.Event()).set()

    def unbind(self, address: str) -> None:
        with self._lock:
            self._endpoints.pop(address, None)
            gate = self._paused.get(address)
        if gate is not None:
            gate.set()

    def pause(self, address: str) -> None:
        with self._lock:
            self._paused.setdefault(address, threading.Event()).clear()

    def resume(self, address: str) -> None:
        with self._lock:
            gate = self._paused.setdefault(address, threading.Event())
        gate.set()

    def call(self, address: str, req: Request, timeout: float) -> Response:
        with self._lock:
            gate = self._paused.get(address)
        if gate is not None and not gate.wait(timeout):
            raise TransportError(f"{address}: no answer within {timeout:.1f}s",
                                 ErrorCode.REQUEST_TIMED_OUT)
        with self._lock:
            table = self._endpoints.get(address)
        if table is None:
            raise TransportError(f"cannot connect to {address}: nothing listens there",
                                 ErrorCode.NETWORK_EXCEPTION, sent=False)
        # round-trip the body through JSON so handlers see what TCP would give them
        body = json.loads(json.dumps(req.body))
        resp = table.handle(Request(req.api_key, req.api_version, body, req.payload,
                                    req.correlation_id, principal=IN_PROCESS))
        # paused while handling: never answered
        if gate is not None and not gate.is_set() and not gate.wait(timeout):
            raise TransportError(f"{address}: no answer within {timeout:.1f}s",
                                 ErrorCode.REQUEST_TIMED_OUT)
        return Response(json.loads(json.dumps(resp.body)), resp.payload, resp.error)


class LoopbackClient(Client):
    """A client of a :class:`LoopbackNetwork`."""

    def __init__(self, network: LoopbackNetwork) -> None:
        self.network = network
        self._corr = 0

    def send_raw(self, address: str, api_key: int, body: Mapping[str, Any], *,
                 payload: bytes = b"", version: int = 0, timeout: float = 30.0) -> Response:
        self._corr += 1
        return self.network.call(address, Request(int(api_key), version, dict(body), payload,
                                                  self._corr), timeout)


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


__all__ = [
    "IN_PROCESS",
    "LOOPBACK",
    "RETRIABLE",
    "ApiError",
    "ApiKey",
    "ChannelSecurity",
    "Client",
    "ErrorCode",
    "FrameError",
    "FrameTooLargeError",
    "HandlerTable",
    "LogRateLimit",
    "LoopbackClient",
    "LoopbackNetwork",
    "PeerRefusedError",
    "Request",
    "Response",
    "TcpClient",
    "TcpServer",
    "TransportError",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "error_code_for",
    "read_request_frame",
    "wait_for",
]
