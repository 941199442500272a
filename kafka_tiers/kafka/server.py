"""The Kafka protocol server of one broker: its listeners' sockets and connections.

Threads (Kafka's network and request-handler split):

- one *network* thread runs a selector over every listener and connection: it accepts,
  reads each connection's frames incrementally (non-blocking, the buffer grown as bytes
  arrive: never preallocated from the announced size), and closes idle and stalled
  connections. An idle or slow connection holds a descriptor and a few hundred bytes, no
  thread.
- a complete request goes to a *handler* thread (made on demand, at most
  ``request.handler.threads.max``, queued in order beyond), which decodes it, runs its
  handler and writes the response. While a request is in flight its connection is muted (not
  read), as Kafka does, so responses go out in request order; clients that pipeline wait.

Bounds, each checked before it costs anything:

- ``max.connections`` and ``max.connections.per.ip``: a connection beyond either is closed at
  once (one WARN a minute).
- ``max.connection.creation.rate`` (KIP-612, per listener: ``listener.name.<l>.`` overrides):
  a listener that accepted its rate's worth of connections stops accepting until the rate
  allows (:class:`_CreationRate`, a bucket of one second's worth); new connections wait in
  the listen backlog, open ones are served as usual.
- TLS handshakes never starve established connections: each select round reads the
  established connections first, then accepts, then runs at most
  :data:`HANDSHAKE_STEPS_PER_ROUND` handshake steps (the rest stay ready for the next round).
- ``socket.request.max.bytes``: a frame whose length prefix is negative or larger closes that
  connection only, with one WARN line.
- ``queued.max.request.bytes``: a frame's announced size is reserved from one pool when its
  length prefix arrives; a connection whose frame does not fit is not read until memory frees
  (in arrival order; a frame larger than the pool is read when the pool is empty). An eighth
  of the pool is kept for frames of at most 64 KiB, so large frames sent slowly never keep
  small requests (Metadata, heartbeats, commits, fetches) waiting.
- ``request.timeout.ms``: a frame must arrive whole within this time of its first byte (of
  its reservation, once it waited for memory), else the connection is closed (slow-loris
  clients cannot pin memory or a connection slot); a response the client does not read for
  this long closes the connection too.
- ``connections.max.idle.ms``: a connection with no request under way for this long is
  closed.
- before authentication (a SASL listener's connection until SaslAuthenticate succeeded, and
  every TLS handshake) a connection never holds what authenticated ones need: its frames are
  not reserved from ``queued.max.request.bytes`` but from a separate budget
  (:class:`_PreauthBudget`: a sixteenth of ``queued.max.request.bytes`` beside it, at least
  the largest ``sasl.server.max.receive.size``), taken as body bytes arrive (a length prefix
  alone holds nothing); a frame that would overrun the budget closes its connection (one
  WARN a minute). A pre-authentication frame, a TLS handshake, and an unauthenticated
  connection's wait for its next step are each bounded by
  ``min(request.timeout.ms, 10 s)`` (:data:`PREAUTH_TIMEOUT_S`), else the connection is
  closed; ``max.connections.per.ip`` applies as to any connection.
- requests before authentication (ApiVersions, SaslHandshake, SaslAuthenticate of a
  connection not yet authenticated) run on at most :data:`PREAUTH_HANDLER_THREADS` threads of
  their own, never on the handler threads (as Kafka authenticates on its network threads):
  password guessers queue behind each other, not in front of authenticated requests.
- ``connection.failed.authentication.delay.ms`` (Kafka's key, default 100 ms): a failed SASL
  authentication's response is held, the connection muted (not read), and the network
  thread sends it and closes the connection only once the delay passed (no handler thread
  waits), so a password guesser learns each answer no faster than that; the connections so
  held are among ``max.connections``.
- counts before cost: a request whose arrays declare more elements in all than
  ``max.request.topics + max.request.partitions * (max.replication.factor + 2)`` is refused
  (one WARN, connection closed) by a pre-pass that reads only lengths, before it is decoded
  (:mod:`kafka_tiers.kafka.request_counts`).

A frame that does not decode closes its connection only, with one WARN line; every other
connection goes on.

TLS (``SSL`` and ``SASL_SSL`` listeners, :mod:`kafka_tiers.kafka.security.tls`): an accepted
socket is wrapped non-blocking and its handshake runs in the network thread, bounded by
``request.timeout.ms``; a failed handshake (a plaintext client, a refused client certificate)
closes that connection only, with one WARN line a minute. Bytes OpenSSL already decrypted are
read before waiting on the selector again (it cannot see them). Responses over TLS copy
segment bytes with ``os.pread`` in chunks (no ``os.sendfile``); plaintext keeps zero copy.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import resource
import select
import selectors
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.kafka import codec
from kafka_tiers.kafka.apis import sasl as sasl_api
from kafka_tiers.kafka.context import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    FileRegion,
    RawBody,
    RequestContext,
)
from kafka_tiers.kafka.listeners_config import ListenerSpec, advertised, listener_specs
from kafka_tiers.kafka.registry import Api, apis
from kafka_tiers.kafka.security import gate
from kafka_tiers.kafka.security.config import listener_value
from kafka_tiers.kafka.security.sasl.mechanisms import SaslSettings
from kafka_tiers.kafka.security.session import TLS_PROTOCOLS, ConnectionSession
from kafka_tiers.kafka.security.tls import ListenerTls, NoMatchingRule

if TYPE_CHECKING:
    from kafka_tiers.api.authorizer import Authorizer
    from kafka_tiers.broker.broker import Broker

log = logging.getLogger(__name__)
T = TypeVar("T")
_SIZE = struct.Struct(">i")
UNSUPPORTED_VERSION = 35
#: bytes read from one connection per readiness event (fairness between connections)
READ_CHUNK = 256 * 1024
#: a response part at least this large is sent as it is, not copied into the send buffer
_SEND_DIRECT = 64 * 1024
#: segment bytes read with os.pread per TLS write (no sendfile over TLS)
TLS_SEND_CHUNK = 256 * 1024
#: TLS reads in a row for one readiness event (each at most one TLS record, 16 KiB)
TLS_READS_PER_EVENT = 64
#: body bytes read from one authenticated connection per readiness event: reads go on while
#: the socket (or OpenSSL) has bytes, up to this, so others get their turn
READ_BYTES_PER_EVENT = 1024 * 1024
#: TLS handshake steps (each may sign: a millisecond of CPU) run per select round, after the
#: established connections' reads, so handshakes never delay a request more than one step
HANDSHAKE_STEPS_PER_ROUND = 1
#: descriptors kept for everything but Kafka connections when max.connections is derived
FD_RESERVE = 256
#: frames up to this size may use the eighth of queued.max.request.bytes kept for them
SMALL_FRAME = 64 * 1024
#: a handler thread with nothing to do for this long ends
HANDLER_IDLE_S = 60.0
#: the longest a frame before authentication, a TLS handshake, or an unauthenticated
#: connection's wait between steps may take (request.timeout.ms when that is shorter)
PREAUTH_TIMEOUT_S = 10.0
#: frames before authentication hold at most queued.max.request.bytes / PREAUTH_SHARE in all,
#: a budget of their own beside the pool
PREAUTH_SHARE = 16
#: threads serving requests before authentication (a pool of their own: clients that have
#: not authenticated never take, nor crowd with runnable threads, the handler threads)
PREAUTH_HANDLER_THREADS = 2
#: queued.max.request.bytes' default, the pre-authentication budget's base when it is unbounded
_DEFAULT_QUEUED_BYTES = 100 * 1024 * 1024
#: max.connection.creation.rate's default (Kafka's Int.MaxValue): unbounded
MAX_CREATION_RATE = 2147483647


def default_max_connections(log_open_files_max: int) -> int:
    """``max.connections`` when unset: the soft open-file limit less the log's descriptors
    (``log.open.files.max``) and :data:`FD_RESERVE`, at least 16."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(16, int(soft) - log_open_files_max - FD_RESERVE)


def _failed_authentication_delay(config: Any) -> int:
    """``connection.failed.authentication.delay.ms``, checked against
    ``connections.max.idle.ms`` (Kafka's rule: the delay must be shorter).

    Raises:
        ConfigError: the delay is not below ``connections.max.idle.ms``.
    """
    delay = int(config["connection.failed.authentication.delay.ms"])
    idle = int(config["connections.max.idle.ms"])
    if delay >= idle:
        raise ConfigError(
            f"connection.failed.authentication.delay.ms ({delay}) must be below "
            f"connections.max.idle.ms ({idle}); lower the delay (0 turns it off)",
            key="connection.failed.authentication.delay.ms", value=str(delay),
            expected=f"an integer from 0 to {idle - 1}")
    return delay


def creation_rate(config: Any, listener: str) -> int | None:
    """``max.connection.creation.rate`` of ``listener`` (its ``listener.name.<l>.`` override,
    else the broker-wide value), None when unbounded (Kafka's default, 2147483647).

    Raises:
        ConfigError: the value is not an integer of at least 1.
    """
    key = "max.connection.creation.rate"
    given = listener_value(config, listener, key, MAX_CREATION_RATE)
    try:
        rate = int(str(given).strip())
    except ValueError:
        rate = 0
    if rate < 1:
        raise ConfigError(f"listener.name.{listener.lower()}.{key} is {given!r}: connections "
                          "per second must be an integer of at least 1",
                          key=f"listener.name.{listener.lower()}.{key}", value=str(given),
                          expected="an integer from 1 to 2147483647")
    return None if rate >= MAX_CREATION_RATE else rate


def max_request_elements(config: Any) -> int:
    """The most array elements one request may declare in all: the largest request the
    per-API bounds admit (a CreateTopics of ``max.request.partitions`` partitions, each
    with a manual assignment of ``max.replication.factor`` replicas, in
    ``max.request.topics`` topics) with room to spare."""
    return (int(config["max.request.topics"]) + int(config["max.request.partitions"])
            * (int(config["max.replication.factor"]) + 2))


class _CreationRate:
    """``max.connection.creation.rate`` of one listener: a bucket of ``rate`` tokens (one
    second's worth), refilled at ``rate`` a second; each accepted connection takes one."""

    def __init__(self, rate: int, now: float) -> None:
        self.rate = float(rate)
        self.tokens = float(rate)
        self.stamp = now

    def take(self, now: float) -> float:
        """Take a token: 0.0 when one was there, else the seconds until one is (nothing
        taken)."""
        self.tokens = min(self.rate, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class _Listener:
    def __init__(self, spec: ListenerSpec, sock: socket.socket,
                 tls: ListenerTls | None = None, rate: int | None = None) -> None:
        self.spec = spec
        self.sock = sock
        self.tls = tls  # SSL and SASL_SSL listeners
        _host, port = sock.getsockname()[:2]
        self.bound = (spec.host or "", int(port))
        #: max.connection.creation.rate (None: unbounded); accepting resumes at throttled
        self.rate = _CreationRate(rate, time.monotonic()) if rate is not None else None
        self.throttled = 0.0


class _Conn:
    """One connection's state, owned by the network thread (a handler thread holds it only
    while its request is in flight, the connection muted)."""

    __slots__ = ("body", "got", "handshaking", "head", "ip", "last", "lst", "peer", "preauth",
                 "reserved", "session", "size", "sock", "started", "tls")

    def __init__(self, sock: socket.socket, lst: _Listener, ip: str, peer: str,
                 now: float) -> None:
        self.sock = sock
        self.lst = lst
        self.ip = ip
        self.peer = peer
        self.head = b""  # the length prefix read so far
        self.size = -1  # the frame's announced size, once its prefix is read
        #: the frame's body, grown as bytes arrive (before authentication each byte is taken
        #: from the pre-authentication budget; after, read with recv_into, _recv_body)
        self.body = bytearray()
        self.got = 0  # body bytes read so far
        self.reserved: tuple[bool, int] | None = None  # queued.max.request.bytes held
        self.preauth = 0  # bytes of the pre-authentication budget held (_PreauthBudget)
        self.started = 0.0  # when the frame under way started (0: none)
        self.last = now  # the last request or response
        self.session = ConnectionSession.new(lst.spec.name, lst.spec.security_protocol, peer,
                                             ip)
        self.tls = lst.tls is not None  # sock is an ssl.SSLSocket
        self.handshaking = self.tls  # the TLS handshake is under way (started: its start)
        if self.tls:
            self.started = now


class _MemoryPool:
    """``queued.max.request.bytes``: reservations of announced frame sizes, thread-safe.

    An eighth of the bound is kept for frames of at most :data:`SMALL_FRAME` bytes (Metadata,
    heartbeats, commits, fetch requests), so a few large frames sent slowly cannot keep every
    small request waiting; the rest serves any frame, in arrival order (the network thread
    queues those that do not fit). A frame larger than the rest is admitted when the rest is
    unused. The two parts never hold more than the bound in all.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity if capacity > 0 else None
        self.small_share = capacity // 8 if capacity > 0 else 0
        self.main_share = capacity - self.small_share
        self.small_used = 0
        self.main_used = 0
        self.freed = False  # memory was released since the waiters were last tried
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self.small_used + self.main_used

    def try_reserve(self, n: int, main: bool = True) -> tuple[bool, int] | None:
        """A reservation of ``n`` bytes, ``(small, n)``, or None when it does not fit;
        ``main=False``: only the small frames' share may be used (an earlier frame waits
        for the rest)."""
        with self._lock:
            if self.capacity is None:
                self.main_used += n
                return (False, n)
            if n <= SMALL_FRAME and self.small_used + n <= self.small_share:
                self.small_used += n
                return (True, n)
            if main and (self.main_used == 0 or self.main_used + n <= self.main_share):
                self.main_used += n
                return (False, n)
            return None

    def release(self, ticket: tuple[bool, int] | None) -> None:
        if ticket is None:
            return
        small, n = ticket
        with self._lock:
            if small:
                self.small_used -= n
            else:
                self.main_used -= n
            self.freed = True


class _PreauthBudget:
    """The bytes frames read before authentication may hold in all, thread-safe: a budget of
    its own, never ``queued.max.request.bytes`` (so unauthenticated clients cannot keep
    authenticated requests waiting). Bytes are taken as they arrive, not when a length
    prefix announces them; a take that does not fit is refused (the connection is closed)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        """Hold ``n`` more bytes; False (nothing held) when they do not fit."""
        with self._lock:
            if self.used + n > self.capacity:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        """Release ``n`` bytes taken before."""
        if n:
            with self._lock:
                self.used -= n


def preauth_budget(queued_max_request_bytes: int, largest_receive_size: int) -> int:
    """The pre-authentication budget: ``queued.max.request.bytes`` / :data:`PREAUTH_SHARE`
    (of its default when unbounded), at least one frame of the largest
    ``sasl.server.max.receive.size``."""
    base = queued_max_request_bytes if queued_max_request_bytes > 0 else _DEFAULT_QUEUED_BYTES
    return max(base // PREAUTH_SHARE, largest_receive_size)


#: how long an answered failed authentication's connection stays open before it is closed
FAREWELL_LINGER_S = 0.2


class _Farewell:
    """A failed authentication's last response (empty: none, SaslHandshake v0's tokens),
    sent by the network thread after ``connection.failed.authentication.delay.ms``, then
    the connection is closed."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes) -> None:
        self.frame = frame


class _Handlers:
    """Handler threads made on demand up to ``limit``; jobs beyond wait in order. Threads
    idle for :data:`HANDLER_IDLE_S` end."""

    def __init__(self, limit: int, name: str = "kafka-handler") -> None:
        self.limit = limit
        self.name = name
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._cond = threading.Condition()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._stopping = False
        self._made = 0

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._idle >= len(self._jobs):
                self._cond.notify()
            elif len(self._threads) < self.limit:
                self._made += 1
                t = threading.Thread(target=self._run, daemon=True,
                                     name=f"{self.name}-{self._made}")
                self._threads.add(t)
                t.start()

    def busy(self) -> int:
        """Threads running a job now."""
        with self._cond:
            return len(self._threads) - self._idle

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while not self._jobs:
                    if self._stopping:
                        self._threads.discard(me)
                        return
                    self._idle += 1
                    woke = self._cond.wait(HANDLER_IDLE_S)
                    self._idle -= 1
                    if not woke and not self._jobs:
                        self._threads.discard(me)
                        return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a job logs its own failures; never lose the thread
                log.exception("kafka handler thread: a job failed")

    def stop(self, deadline: float) -> None:
        """Drop the jobs not started (their connections are closing) and wait for the
        running ones until ``deadline``."""
        with self._cond:
            self._stopping = True
            self._jobs.clear()
            self._cond.notify_all()
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))


class _RateLimitedWarning:
    """One WARN line a minute for a repeated event, with the count since the last line."""

    def __init__(self) -> None:
        self._last = -1e9
        self._count = 0
        self._lock = threading.Lock()

    def __call__(self, msg: str, *args: Any) -> None:
        with self._lock:
            self._count += 1
            now = time.monotonic()
            if now - self._last < 60:
                return
            self._last, count, self._count = now, self._count, 0
        log.warning(msg + " (%d time(s) in the last minute)", *args, count)


class KafkaServer:
    """The Kafka listeners of ``broker`` (see the module docstring).

    :meth:`bind` opens the sockets (so the ports are known before the broker registers),
    :meth:`serve` starts the network thread, :meth:`stop` closes everything and waits for
    the threads (bounded). Handlers come from :func:`kafka_tiers.kafka.registry.apis`.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.specs = listener_specs(cfg)
        #: the TLS side of each SSL/SASL_SSL listener, by name (ConfigError here, at start)
        self.tls: dict[str, ListenerTls] = {
            spec.name: ListenerTls(cfg, spec.name) for spec in self.specs
            if spec.security_protocol in TLS_PROTOCOLS}
        #: the SASL settings of each SASL_PLAINTEXT/SASL_SSL listener (ConfigError here)
        self.sasl = SaslSettings.of(cfg, self.specs)
        self.max_request_bytes = int(cfg["socket.request.max.bytes"])
        given = cfg["max.connections"]
        self.max_connections = (int(given) if given is not None
                                else default_max_connections(int(cfg["log.open.files.max"])))
        per_ip = cfg["max.connections.per.ip"]
        self.max_connections_per_ip = int(per_ip) if per_ip is not None \
            else self.max_connections
        self.idle_s = int(cfg["connections.max.idle.ms"]) / 1000.0
        self.frame_timeout_s = int(cfg["request.timeout.ms"]) / 1000.0
        self.max_elements = max_request_elements(cfg)
        self.memory = _MemoryPool(int(cfg["queued.max.request.bytes"]))
        #: before authentication: a budget of its own, a shorter time bound
        self.preauth = _PreauthBudget(preauth_budget(
            int(cfg["queued.max.request.bytes"]),
            max((self.sasl.max_receive_size(spec.name) for spec in self.specs), default=0)))
        self.preauth_timeout_s = min(self.frame_timeout_s, PREAUTH_TIMEOUT_S)
        self.auth_failure_delay_s = _failed_authentication_delay(cfg) / 1000.0
        #: failed authentications' connections, muted, by when they are answered and closed
        #: (in that order: one delay for all); at most max.connections of them
        self._farewells: collections.deque[tuple[float, _Conn, _Farewell]] = \
            collections.deque()
        #: answered failed authentications, closed FAREWELL_LINGER_S later (in that order)
        self._lingering: collections.deque[tuple[float, _Conn]] = collections.deque()
        self.apis: dict[int, Api] = dict(apis())
        self._listeners: list[_Listener] = []
        self._conns: dict[int, _Conn] = {}  # by descriptor; the network thread's
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._waiting: collections.deque[_Conn] = collections.deque()  # for memory
        self._returned: collections.deque[tuple[_Conn, bool | _Farewell]] = \
            collections.deque()
        self._handlers = _Handlers(int(cfg["request.handler.threads.max"]))
        #: requests of connections not yet authenticated (ApiVersions, SaslHandshake,
        #: SaslAuthenticate): a few threads of their own, never the handler threads
        self._preauth_handlers = _Handlers(
            min(PREAUTH_HANDLER_THREADS, int(cfg["request.handler.threads.max"])),
            "kafka-preauth-handler")
        self._lock = threading.Lock()
        self._components: dict[str, Any] = {}
        #: the authorizer (``authorizer.class.name``), None when every request is allowed
        self.authorizer: Authorizer | None = None
        self._stopping = threading.Event()
        self._selector: selectors.BaseSelector | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._thread: threading.Thread | None = None
        self._accept_paused_until = 0.0
        self._warn_full = _RateLimitedWarning()
        self._warn_stalled = _RateLimitedWarning()
        self._warn_accept = _RateLimitedWarning()
        self._warn_handshake = _RateLimitedWarning()
        self._warn_preauth = _RateLimitedWarning()
        self._warn_throttled = _RateLimitedWarning()

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
            sock.setblocking(False)
            self._listeners.append(_Listener(spec, sock, self.tls.get(spec.name),
                                             creation_rate(self.broker.config, spec.name)))
        return self.advertised()

    def advertised(self) -> dict[str, tuple[str, int]]:
        """The advertised ``(host, port)`` of each bound listener, by name."""
        return advertised(self.broker.config, {lst.spec.name: lst.bound
                                               for lst in self._listeners})

    def bootstrap(self) -> str:
        """``host:port,...`` of the advertised listeners (what a client is given)."""
        return ",".join(f"{h}:{p}" for h, p in self.advertised().values())

    def serve(self) -> None:
        """Start the network thread: accepting and reading on every bound listener."""
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        for lst in self._listeners:
            sel.register(lst.sock, selectors.EVENT_READ, lst)
        self._selector = sel
        ports = ",".join(str(lst.bound[1]) for lst in self._listeners)
        self._thread = threading.Thread(target=self._network_loop, daemon=True,
                                        name=f"kafka-network-{ports}")
        self._thread.start()

    def close_sockets(self) -> None:
        for lst in self._listeners:
            with contextlib.suppress(OSError):
                lst.sock.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listeners and every connection, wait for the network and handler
        threads (at most ``timeout`` seconds in all) and close the shared components.
        Idempotent."""
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(max(0.0, deadline - time.monotonic()))
        self.close_sockets()
        conns = list(self._conns.values())
        for c in conns:  # in-flight handlers see their writes fail and return
            with contextlib.suppress(OSError):
                # the plain socket's shutdown: SSLSocket.shutdown would drop the SSL object
                # under a handler thread writing on it
                socket.socket.shutdown(c.sock, socket.SHUT_RDWR)
        self._handlers.stop(deadline)
        self._preauth_handlers.stop(deadline)
        for c in conns:
            with contextlib.suppress(OSError):
                c.sock.close()
        self._conns.clear()
        if self._selector is not None:
            with contextlib.suppress(Exception):
                self._selector.close()
        for s in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                s.close()
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

    def connection_count(self) -> int:
        """Connections open now (accepted, not yet closed)."""
        return len(self._conns)

    def sessions(self) -> list[ConnectionSession]:
        """The security sessions of the connections open now (listener, principal, TLS
        subject), a snapshot."""
        return [c.session for c in list(self._conns.values())]

    def queued_request_bytes(self) -> int:
        """Bytes of ``queued.max.request.bytes`` reserved now."""
        return self.memory.used

    # ------------------------------------------------------------------ the network thread
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _tick(self) -> float:
        return max(0.01, min(1.0, self.frame_timeout_s / 4, self.idle_s / 4))

    def _network_loop(self) -> None:
        sel = self._selector
        assert sel is not None
        tick = self._tick()
        next_sweep = time.monotonic() + tick
        try:
            while not self._stopping.is_set():
                due = min(next_sweep, self._farewells[0][0]) if self._farewells \
                    else next_sweep
                if self._lingering:
                    due = min(due, self._lingering[0][0])
                for lst in self._listeners:
                    if lst.throttled:
                        due = min(due, lst.throttled)
                timeout = max(0.0, due - time.monotonic())
                # established connections first, then accepts, then a bounded number of
                # TLS handshake steps: handshakes never keep a request waiting long
                listeners: list[_Listener] = []
                handshakes: list[_Conn] = []
                for key, _mask in sel.select(timeout):
                    data = key.data
                    if data is None:
                        with contextlib.suppress(OSError):
                            while self._wake_r.recv(4096):
                                pass
                    elif isinstance(data, _Listener):
                        listeners.append(data)
                    elif data.handshaking:
                        handshakes.append(data)
                    else:
                        self._read_safely(data)
                    if self._stopping.is_set():
                        return
                for lst in listeners:
                    self._accept(lst)
                for c in handshakes[:HANDSHAKE_STEPS_PER_ROUND]:
                    self._read_safely(c)  # the rest are still ready at the next select
                if self._stopping.is_set():
                    return
                self._resume_throttled(time.monotonic())
                self._take_returned()
                self._admit_waiting()
                now = time.monotonic()
                self._say_farewells(now)
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + tick
        except Exception:
            log.exception("kafka network thread failed; the listener stops serving")

    def _read_safely(self, c: _Conn) -> None:
        try:
            self._read(c)
        except Exception:  # one connection's bug never stops the others
            log.exception("kafka connection %s: reading failed; closed", c.peer)
            self._close(c)

    def _accept(self, lst: _Listener) -> None:
        for _ in range(64):  # then let the others run
            if lst.rate is not None and self._throttle(lst):
                return
            try:
                sock, addr = lst.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and the like: pause accepting a moment
                self._warn_accept("kafka listener %s cannot accept connections: %s",
                                  lst.spec.name, exc)
                self._pause_accepting()
                return
            ip = str(addr[0])
            if len(self._conns) >= self.max_connections:
                self._warn_full("kafka listener %s: max.connections (%d) reached; closing new "
                                "connections", lst.spec.name, self.max_connections)
                sock.close()
                continue
            if self._per_ip[ip] >= self.max_connections_per_ip:
                self._warn_full("kafka listener %s: max.connections.per.ip (%d) reached for "
                                "%s; closing its new connections", lst.spec.name,
                                self.max_connections_per_ip, ip)
                sock.close()
                continue
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if lst.tls is not None:
                try:
                    sock = lst.tls.context().wrap_socket(sock, server_side=True,
                                                         do_handshake_on_connect=False)
                except (OSError, ValueError) as exc:
                    log.debug("kafka listener %s: %s: TLS setup failed: %s", lst.spec.name,
                              addr, exc)
                    sock.close()
                    continue
            conn = _Conn(sock, lst, ip, f"{addr[0]}:{addr[1]}", time.monotonic())
            self._conns[sock.fileno()] = conn
            self._per_ip[ip] += 1
            assert self._selector is not None
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _throttle(self, lst: _Listener) -> bool:
        """Whether ``lst`` is over ``max.connection.creation.rate``: then it is not accepted
        from (unregistered) until a token is there; else a token is taken."""
        assert lst.rate is not None and self._selector is not None
        now = time.monotonic()
        wait = lst.rate.take(now)
        if not wait:
            return False
        lst.throttled = now + wait
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(lst.sock)
        self._warn_throttled("kafka listener %s: max.connection.creation.rate (%d/s) reached; "
                             "new connections wait in the listen backlog", lst.spec.name,
                             int(lst.rate.rate))
        return True

    def _resume_throttled(self, now: float) -> None:
        """Accept again on listeners whose creation-rate wait is over (unless accepting is
        paused for every listener: :meth:`_sweep` resumes them all)."""
        assert self._selector is not None
        for lst in self._listeners:
            if lst.throttled and now >= lst.throttled:
                lst.throttled = 0.0
                if not self._accept_paused_until:
                    with contextlib.suppress(KeyError, ValueError, OSError):
                        self._selector.register(lst.sock, selectors.EVENT_READ, lst)

    def _pause_accepting(self) -> None:
        assert self._selector is not None
        self._accept_paused_until = time.monotonic() + 0.1
        for lst in self._listeners:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(lst.sock)

    def _resume_accepting(self) -> None:
        assert self._selector is not None
        self._accept_paused_until = 0.0
        for lst in self._listeners:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.register(lst.sock, selectors.EVENT_READ, lst)

    def _close(self, c: _Conn, registered: bool = True) -> None:
        if registered and self._selector is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(c.sock)
        if self._conns.pop(c.sock.fileno(), None) is None:
            return  # closed already
        self._per_ip[c.ip] -= 1
        if self._per_ip[c.ip] <= 0:
            del self._per_ip[c.ip]
        self.memory.release(c.reserved)
        c.reserved = None
        self.preauth.give(c.preauth)
        c.preauth = 0
        c.body = bytearray()
        c.got = 0
        with contextlib.suppress(OSError):
            c.sock.close()

    def _read(self, c: _Conn) -> None:
        """Read what the connection has now (a TLS connection: its handshake first, then
        also what OpenSSL holds already decrypted, which the selector cannot see)."""
        if not c.tls:
            self._read_frame(c)
            return
        if c.handshaking:
            self._handshake(c)
            return
        sock = c.sock
        assert isinstance(sock, ssl.SSLSocket)
        for _ in range(TLS_READS_PER_EVENT):
            before = (len(c.head), c.got, c.size)
            self._read_frame(c)
            if not self._is_registered(c):  # dispatched, closed or waiting for memory
                return
            if sock.pending():
                continue  # OpenSSL holds decrypted bytes the selector cannot see
            if (c.got and c.session.authenticated) or (len(c.head), c.got, c.size) == before:
                # nothing more now (or this turn's READ_BYTES_PER_EVENT read): the selector
                # tells when there is
                return

    def _handshake(self, c: _Conn) -> None:
        """Go on with ``c``'s TLS handshake; once done, the session learns its client
        certificate (the principal on an SSL listener) and requests are read."""
        sock = c.sock
        assert isinstance(sock, ssl.SSLSocket) and self._selector is not None
        tls = c.lst.tls
        assert tls is not None
        try:
            sock.do_handshake()
            if c.session.security_protocol == "SSL":
                principal, subject = tls.principal(sock)
            else:  # SASL_SSL: SASL names the principal; the subject is only kept
                principal, subject = c.session.principal, tls.subject(sock)
        except ssl.SSLWantReadError:
            self._selector.modify(sock, selectors.EVENT_READ, c)
            return
        except ssl.SSLWantWriteError:
            self._selector.modify(sock, selectors.EVENT_WRITE, c)
            return
        except (OSError, ValueError) as exc:  # SSLError is an OSError; NoMatchingRule a ValueError
            why = _handshake_failure(exc)
            if not _closed_early(exc):  # a port probe (connect, close) is not worth a WARN
                self._warn_handshake("kafka listener %s: TLS handshake with %s failed (%s); "
                                     "connection closed, others go on", c.lst.spec.name,
                                     c.peer, why)
            log.debug("kafka connection %s: TLS handshake failed: %s", c.peer, why)
            self._close(c)
            return
        c.session.tls_subject = subject
        c.session.principal = principal
        c.handshaking = False
        c.started = 0.0
        c.last = time.monotonic()
        self._selector.modify(sock, selectors.EVENT_READ, c)
        self._read(c)  # the first request may be decrypted already

    def _read_frame(self, c: _Conn) -> None:
        try:
            if c.size < 0:
                data = c.sock.recv(4 - len(c.head))
                if not data:
                    self._close(c)
                    return
                if not c.head:
                    c.started = time.monotonic()
                c.head += data
                if len(c.head) < 4:
                    return
                (size,) = _SIZE.unpack(c.head)
                c.head = b""
                if size < 0 or size > self.max_request_bytes:
                    log.warning("kafka listener %s: %s sent a frame of %d bytes (socket."
                                "request.max.bytes is %d); connection closed",
                                c.lst.spec.name, c.peer, size, self.max_request_bytes)
                    self._close(c)
                    return
                if not c.session.authenticated and \
                        size > self.sasl.max_receive_size(c.lst.spec.name):
                    log.info("kafka listener %s: %s sent a frame of %d bytes before SASL "
                             "authentication completed (sasl.server.max.receive.size is %d); "
                             "connection closed", c.lst.spec.name, c.peer, size,
                             self.sasl.max_receive_size(c.lst.spec.name))
                    self._close(c)
                    return
                c.size = size
                if c.session.authenticated:
                    ticket = self.memory.try_reserve(size, main=not self._waiting)
                    if ticket is None:
                        assert self._selector is not None
                        self._selector.unregister(c.sock)  # not read until memory frees
                        c.started = 0.0
                        self._waiting.append(c)
                        return
                    c.reserved = ticket
                # else: before authentication, the pre-authentication budget as bytes arrive
                if size == 0:
                    self._dispatch(c)
                    return
                # the body usually came with its prefix: read it now, not a select later
            if c.session.authenticated:
                if not self._recv_body(c):
                    return  # closed
            else:
                chunk = self._recv_preauth(c, min(READ_CHUNK, c.size - c.got))
                if chunk is None:
                    return  # closed: the pre-authentication budget is spent
                if not chunk:
                    self._close(c)
                    return
                c.body += chunk
                c.got += len(chunk)
            if c.got >= c.size:
                self._dispatch(c)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as exc:
            log.debug("kafka connection %s: %s", c.peer, exc)
            self._close(c)

    def _recv_body(self, c: _Conn) -> bool:
        """An authenticated connection's frame body, read with ``recv_into`` straight into
        its buffer while the socket (over TLS: OpenSSL, a record of at most 16 KiB a read)
        has bytes, up to :data:`READ_BYTES_PER_EVENT` a turn. The buffer grows with the bytes
        received (doubled when full, from :data:`READ_CHUNK`, never past the announced
        size): an announced frame holds its reservation, not its memory. False: the peer
        closed (the connection is closed). Nothing to read raises as ``recv`` does
        (BlockingIOError, SSLWantReadError), what was read kept."""
        sock, size = c.sock, c.size
        budget = READ_BYTES_PER_EVENT
        while c.got < size:
            if c.got == len(c.body):
                grown = bytearray(min(size, max(2 * c.got, READ_CHUNK)))
                grown[:c.got] = c.body
                c.body = grown
            with memoryview(c.body) as view:
                n = sock.recv_into(view[c.got:])
            if not n:
                self._close(c)
                return False
            c.got += n
            budget -= n
            if budget <= 0 and c.got < size and not (
                    isinstance(sock, ssl.SSLSocket) and sock.pending()):
                break  # the rest at the next turn (OpenSSL's bytes first: unseen)
        return True

    def _recv_preauth(self, c: _Conn, want: int) -> bytes | None:
        """At most ``want`` bytes of a frame before authentication, held in the
        pre-authentication budget (:class:`_PreauthBudget`); None: the budget is spent and
        the connection was closed."""
        if not self.preauth.take(want):
            self._warn_preauth(
                "kafka listener %s: frames before authentication hold the pre-authentication "
                "budget (%d bytes: queued.max.request.bytes / %d); closed connections whose "
                "next bytes did not fit (the last: %s)", c.lst.spec.name,
                self.preauth.capacity, PREAUTH_SHARE, c.peer)
            self._close(c)
            return None
        got = 0
        try:
            data = c.sock.recv(want)
            got = len(data)
            return data
        finally:
            self.preauth.give(want - got)
            c.preauth += got

    def _admit_waiting(self) -> None:
        """Connections waiting for memory, in arrival order, once memory was freed: the
        first that does not fit keeps every later one from the shared part (small frames
        may still take the part kept for them)."""
        if not self._waiting or not self.memory.freed:
            return
        self.memory.freed = False
        still: collections.deque[_Conn] = collections.deque()
        main = True
        decrypted: list[_Conn] = []  # TLS bytes already read by OpenSSL: read them now
        for c in self._waiting:
            ticket = self.memory.try_reserve(c.size, main=main)
            if ticket is None:
                main = False
                still.append(c)
                continue
            c.reserved = ticket
            c.started = time.monotonic()
            if c.size == 0:
                self._dispatch(c, registered=False)
                continue
            assert self._selector is not None
            self._selector.register(c.sock, selectors.EVENT_READ, c)
            if c.tls:
                decrypted.append(c)
        self._waiting = still
        for c in decrypted:
            self._read(c)

    def _dispatch(self, c: _Conn, registered: bool = True) -> None:
        """Mute the connection and hand its complete frame to a handler thread."""
        if registered:
            assert self._selector is not None
            self._selector.unregister(c.sock)
        frame, c.body = c.body, bytearray()
        c.got = 0
        c.size = -1
        c.started = 0.0
        pool = self._handlers if c.session.authenticated else self._preauth_handlers
        pool.submit(lambda: self._serve(c, frame))

    def _take_returned(self) -> None:
        """Connections whose request is done: unmuted, closed, or (a failed authentication)
        kept muted until ``connection.failed.authentication.delay.ms`` passed."""
        while self._returned:
            c, keep = self._returned.popleft()
            if isinstance(keep, _Farewell) and not self._stopping.is_set():
                self._farewells.append((time.monotonic() + self.auth_failure_delay_s, c, keep))
                continue
            if not keep or self._stopping.is_set():
                self._close(c, registered=False)
                continue
            c.last = time.monotonic()
            assert self._selector is not None
            try:
                self._selector.register(c.sock, selectors.EVENT_READ, c)
            except (ValueError, OSError):
                self._close(c, registered=False)
                continue
            self._read(c)  # a pipelined next request is often there already

    def _say_farewells(self, now: float) -> None:
        """Failed authentications whose delay passed: their response (one non-blocking
        send: a few hundred bytes), then the connection is closed :data:`FAREWELL_LINGER_S`
        later (or at once when there was nothing to send). The close comes apart from the
        answer because a client that reads the answer and the end of the stream in one turn
        may report the lost connection instead of the authentication failure (kafka-python
        3.x does); it keeps the connection muted, so nothing more is read from it."""
        while self._farewells and self._farewells[0][0] <= now:
            _due, c, farewell = self._farewells.popleft()
            sent = False
            if farewell.frame:
                with contextlib.suppress(OSError, ValueError):
                    sent = c.sock.send(farewell.frame) == len(farewell.frame)
            if sent:
                self._lingering.append((now + FAREWELL_LINGER_S, c))
            else:
                self._close(c, registered=False)
        while self._lingering and (self._lingering[0][0] <= now or self._stopping.is_set()):
            _due, c = self._lingering.popleft()
            self._close(c, registered=False)

    def _sweep(self, now: float) -> None:
        """Close stalled frames (``request.timeout.ms``) and idle connections."""
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._resume_accepting()
        waiting = {id(c) for c in self._waiting}
        preauth_ms = int(self.preauth_timeout_s * 1000)
        for c in list(self._conns.values()):
            preauth = c.handshaking or not c.session.authenticated
            limit = self.preauth_timeout_s if preauth else self.frame_timeout_s
            if c.started:
                if now - c.started > limit and c.handshaking:
                    self._warn_handshake(
                        "kafka listener %s: closed connections that did not complete the TLS "
                        "handshake within min(request.timeout.ms, 10 s) (%d ms; the last: %s)",
                        c.lst.spec.name, preauth_ms, c.peer)
                    self._close(c)
                elif now - c.started > limit:
                    self._warn_stalled(
                        "kafka listener %s: closed connections that did not send a whole "
                        "request within %s (%d ms; the last: %s)", c.lst.spec.name,
                        "min(request.timeout.ms, 10 s) before authentication" if preauth
                        else "request.timeout.ms", int(limit * 1000), c.peer)
                    log.debug("kafka connection %s: frame incomplete after %d ms; closed",
                              c.peer, int(limit * 1000))
                    self._close(c)
            elif preauth and c.size < 0 and now - c.last > limit and self._is_registered(c):
                self._warn_stalled(
                    "kafka listener %s: closed unauthenticated connections that sent no next "
                    "authentication step within min(request.timeout.ms, 10 s) (%d ms; the "
                    "last: %s)", c.lst.spec.name, preauth_ms, c.peer)
                self._close(c)
            elif c.size < 0 and id(c) not in waiting and now - c.last > self.idle_s \
                    and self._is_registered(c):
                log.debug("kafka connection %s idle for connections.max.idle.ms; closed",
                          c.peer)
                self._close(c)

    def _is_registered(self, c: _Conn) -> bool:
        """Whether ``c`` is in the selector. Looked up by descriptor (-1 once closed): a miss
        by socket would format the socket's repr (two system calls) into the KeyError, at
        every frame."""
        assert self._selector is not None
        try:
            return self._selector.get_key(c.sock.fileno()).data is c
        except (KeyError, ValueError):
            return False

    # ------------------------------------------------------------------ handler threads
    def _serve(self, c: _Conn, frame: bytearray) -> None:
        keep: bool | _Farewell = False
        try:
            keep = self._handle(c.lst, c.sock, c.session, frame)
        except (OSError, TimeoutError) as exc:
            log.debug("kafka connection %s: %s", c.peer, exc)
        except Exception:
            log.exception("kafka connection %s: serving a request failed; connection closed",
                          c.peer)
        finally:
            del frame
            self.memory.release(c.reserved)
            c.reserved = None
            self.preauth.give(c.preauth)
            c.preauth = 0
            self._returned.append((c, keep))
            self._wake()

    def _handle(self, lst: _Listener, conn: socket.socket, session: ConnectionSession,
                frame: bytearray) -> bool | _Farewell:
        """Handle one request; False when the connection is to be closed, a
        :class:`_Farewell` when an authentication failed and its response waits for
        ``connection.failed.authentication.delay.ms``."""
        peer = session.peer
        if gate.raw_sasl_token(session):  # after SaslHandshake v0: a bare SASL token
            token = sasl_api.raw_token(self, session, bytes(frame))
            if token is None:
                return _Farewell(b"") if self.auth_failure_delay_s else False
            self._send(conn, token, None)
            return not gate.closes_after_response(session)
        try:
            key, version, corr = codec.peek_header(frame)
        except codec.FrameError as exc:
            log.warning("kafka listener %s: %s: %s; connection closed", lst.spec.name, peer,
                        exc)
            return False
        refused = gate.refusal(session, key, time.monotonic())
        if refused is not None:
            log.info("kafka listener %s: %s (%s): %s; connection closed", lst.spec.name, peer,
                     session.principal, refused)
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
            header, request = codec.decode_request(frame, key, version, self.max_elements)
        except codec.TooManyElements as exc:
            log.warning("kafka listener %s: %s: %s (max.request.topics + "
                        "max.request.partitions * (max.replication.factor + 2)); refused "
                        "before decoding, connection closed", lst.spec.name, peer, exc)
            return False
        except codec.FrameError as exc:
            log.warning("kafka listener %s: %s: %s; connection closed", lst.spec.name, peer,
                        exc)
            return False
        ctx = RequestContext(self, header, session)
        try:
            reply = api.handler(ctx, request)
        except Exception:
            log.exception("kafka listener %s: %s v%d from %s failed; connection closed",
                          lst.spec.name, api.name, version, peer)
            return False
        finally:
            ctx.audit_denials()  # one audit line for the request's denials
        if reply is CLOSE_CONNECTION:
            return False
        if reply is NO_RESPONSE:
            return True
        head = codec.response_header(key, version, corr)
        if isinstance(reply, RawBody):
            self._send(conn, head, reply)
            return not gate.closes_after_response(session)
        message = head + bytes(reply.encode(version=version))
        if gate.closes_after_response(session) and self.auth_failure_delay_s:
            return _Farewell(_SIZE.pack(len(message)) + message)  # sent after the delay
        self._send(conn, message, None)
        return not gate.closes_after_response(session)

    def _versions_v0(self, error: int) -> bytes:
        resp = codec.response_class(codec.API_VERSIONS_KEY, 0)(
            error_code=error, api_keys=[(a.key, a.min_version, a.max_version)
                                        for a in sorted(self.apis.values(),
                                                        key=lambda a: a.key)])
        return bytes(resp.encode(version=0))

    def _send(self, conn: socket.socket, head: bytes, body: RawBody | None) -> None:
        """The response frame on the (non-blocking) socket; a client that reads nothing
        for ``request.timeout.ms`` gets :class:`TimeoutError`."""
        wait = self.frame_timeout_s
        send_region = _send_region_copy if isinstance(conn, ssl.SSLSocket) else _send_region
        try:
            size = len(head) + (len(body) if body is not None else 0)
            if body is None:
                _send_all(conn, _SIZE.pack(size) + head, wait)
                return
            pending = bytearray(_SIZE.pack(size) + head)
            for part in body.parts:
                if isinstance(part, FileRegion):
                    if pending:
                        _send_all(conn, pending, wait)
                        pending = bytearray()
                    send_region(conn, part, wait)
                elif len(part) >= _SEND_DIRECT:  # large bytes (remote records): not copied
                    if pending:
                        _send_all(conn, pending, wait)
                        pending = bytearray()
                    _send_all(conn, part, wait)
                else:
                    pending += part
            if pending:
                _send_all(conn, pending, wait)
        finally:
            if body is not None:
                body.close()


def _send_all(conn: socket.socket, data: bytes | bytearray | memoryview, wait: float) -> None:
    """All of ``data`` on a non-blocking socket, waiting at most ``wait`` seconds for each
    chance to write."""
    view = memoryview(data)
    while view:
        try:
            sent = conn.send(view)
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
            _wait_writable(conn, wait)  # TLS: the same bytes are offered again, as it needs
            continue
        except ssl.SSLWantReadError:
            _wait_readable(conn, wait)
            continue
        view = view[sent:]


def _send_region(conn: socket.socket, region: FileRegion, wait: float) -> None:
    """``region``'s bytes to the socket: ``os.sendfile`` (zero copy), else read and send."""
    offset, left = region.offset, region.count
    try:
        while left > 0:
            try:
                sent = os.sendfile(conn.fileno(), region.fd, offset, left)
            except (BlockingIOError, InterruptedError):
                _wait_writable(conn, wait)
                continue
            except OSError as exc:
                if exc.errno not in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: copy
                    raise
                data = os.pread(region.fd, left, offset)
                if len(data) != left:
                    raise OSError(f"segment shorter than announced ({len(data)} of {left} "
                                  "bytes)") from None
                _send_all(conn, data, wait)
                return
            if sent == 0:
                raise OSError("segment shorter than announced: the file ended early")
            offset += sent
            left -= sent
    finally:
        region.close()


def _send_region_copy(conn: socket.socket, region: FileRegion, wait: float) -> None:
    """``region``'s bytes over TLS: read with ``os.pread`` in :data:`TLS_SEND_CHUNK` pieces
    and written through OpenSSL (``os.sendfile`` would bypass the encryption)."""
    offset, left = region.offset, region.count
    try:
        while left > 0:
            data = os.pread(region.fd, min(left, TLS_SEND_CHUNK), offset)
            if not data:
                raise OSError("segment shorter than announced: the file ended early")
            _send_all(conn, data, wait)
            offset += len(data)
            left -= len(data)
    finally:
        region.close()


def _handshake_failure(exc: BaseException) -> str:
    """Why a TLS handshake failed, in a few words (OpenSSL's reason, the certificate check's
    message, or the principal mapping's refusal)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"client certificate refused: {exc.verify_message}"
    if isinstance(exc, NoMatchingRule):
        return str(exc)
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or exc.strerror or type(exc).__name__
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNEXPECTED_RECORD",
                      "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
            return f"{reason}: not a TLS client (a plaintext client on a TLS listener?)"
        return str(reason)
    return str(exc) or type(exc).__name__


def _closed_early(exc: BaseException) -> bool:
    """Whether a handshake failed only because the client went away (EOF, reset)."""
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError,
                        BrokenPipeError)):
        return True
    return isinstance(exc, ssl.SSLError) and exc.reason == "UNEXPECTED_EOF_WHILE_READING"


def _wait_readable(conn: socket.socket, wait: float) -> None:
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if not poller.poll(wait * 1000):
        raise TimeoutError(f"the client sent nothing the TLS layer needed for {wait:g} s "
                           "(request.timeout.ms)")


def _wait_writable(conn: socket.socket, wait: float) -> None:
    poller = select.poll()  # not select(): descriptors above 1024 are usual here
    poller.register(conn.fileno(), select.POLLOUT)
    if not poller.poll(wait * 1000):
        raise TimeoutError(f"the client read nothing of its response for {wait:g} s "
                           "(request.timeout.ms)")


__all__ = ["KafkaServer", "default_max_connections", "max_request_elements"]
