"""Fixtures of the S3 plugin's tests.

- Every test runs with the AWS environment isolated: no profile, no shared config or credential
  files, no instance-metadata lookups, so nothing ever reaches a real AWS account or address.
- ``bucket`` / ``s3_config``: a fresh bucket on the repository's moto server (``s3_server``,
  ``tests/servers/moto_s3.py``) and the plugin config reaching it.
- ``fault_server``: a tiny HTTP server on 127.0.0.1 answering every request with a chosen S3
  error (or hanging, or dropping the connection), counting requests: botocore's retries and our
  error mapping are checked against real HTTP exchanges.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

#: Distinctive credentials (moto accepts any): tests assert they never appear anywhere.
ACCESS_KEY_ID = "AKIAKTS3TESTKEY7Q2Z"
SECRET_ACCESS_KEY = "kt/s3+SECRET-never-shown-9f8e7d6c5b4a"
SESSION_TOKEN = "kt-session-TOKEN-never-shown-0a1b2c3d"
SECRETS = (ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN)

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def _isolated_aws(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                  ) -> None:
    empty = tmp_path_factory.mktemp("aws")
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "credentials"))


def plugin_config(url: str, bucket: str, **extra: str) -> dict[str, str]:
    """The plugin's keys (as after ``rsm.config.``) for a bucket on a server at ``url``."""
    config = {
        "s3.bucket.name": bucket,
        "s3.endpoint.url": url,
        "s3.region": "us-east-1",
        "s3.path.style.access.enabled": "true",
        "aws.access.key.id": ACCESS_KEY_ID,
        "aws.secret.access.key": SECRET_ACCESS_KEY,
        "s3.multipart.upload.part.size": str(5 * MiB),
        "s3.retry.max.attempts": "2",
    }
    config.update(extra)
    return config


@pytest.fixture
def bucket(s3_server: Any) -> str:
    """A fresh, empty bucket on the moto server."""
    return str(s3_server.create_bucket())


@pytest.fixture
def s3_config(s3_server: Any, bucket: str) -> dict[str, str]:
    """The plugin config for :func:`bucket` (5 MiB parts, 2 attempts)."""
    return plugin_config(s3_server.url, bucket)


class FaultServer:
    """An HTTP server on 127.0.0.1 that answers every request the same way.

    Modes: ``error`` (``status`` with an S3 error document of ``code``), ``hang`` (sleeps
    ``hang_seconds`` before answering 200), ``drop`` (closes the connection unanswered) and
    ``short`` (200 announcing 1,000 bytes, then closing after 10).

    Attributes:
        requests: ``(method, path)`` of every request received.
        authorizations: the ``Authorization`` header of each.
    """

    def __init__(self) -> None:
        self.mode = "error"
        self.status = 503
        self.code = "SlowDown"
        self.message = "Please reduce your request rate."
        self.hang_seconds = 5.0
        self.requests: list[tuple[str, str]] = []
        self.authorizations: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                with server._lock:
                    server.requests.append((self.command, self.path))
                    server.authorizations.append(self.headers.get("Authorization", ""))
                if server.mode == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if server.mode == "short":
                    self.send_response(200)
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b"0123456789")
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if server.mode == "hang":
                    time.sleep(server.hang_seconds)
                    body = b""
                    status = 200
                else:
                    body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error>"
                            f"<Code>{server.code}</Code><Message>{server.message}</Message>"
                            "<RequestId>kt0001</RequestId></Error>").encode()
                    status = server.status
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # a client that timed out leaves a broken pipe behind: not worth a traceback
        self._httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        daemon=True,
                                        name="kt-fault-server")
        self._thread.start()

    def answer(self, status: int, code: str, message: str = "injected") -> None:
        """Answer every request with ``status`` and this S3 error code."""
        self.mode, self.status, self.code, self.message = "error", status, code, message

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A :class:`FaultServer`, stopped after the test."""
    server = FaultServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def make_config() -> Any:
    """:func:`plugin_config`: ``make_config(url, bucket, **extra)``."""
    return plugin_config


@pytest.fixture
def credentials() -> dict[str, str]:
    """The distinctive credentials the configs use (values never to be shown anywhere)."""
    return {"access_key_id": ACCESS_KEY_ID, "secret_access_key": SECRET_ACCESS_KEY,
            "session_token": SESSION_TOKEN}


@pytest.fixture
def topic() -> str:
    """A random topic name."""
    return f"kts3-{uuid.uuid4().hex[:10]}"


class TcpProxy:
    """A TCP proxy on 127.0.0.1 in front of ``target_port``: :meth:`cut` makes the target
    unreachable (refuses new connections, resets open ones) without stopping it, so its data
    survives; :meth:`restore` brings it back on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True,
                         name="kt-proxy-accept").start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True,
                                 name="kt-proxy-pump").start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with self._lock:
                    self._sockets.discard(s)
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def cut(self) -> None:
        """Refuse new connections and reset every open one."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            open_sockets, self._sockets = list(self._sockets), set()
        for s in open_sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.cut()


@pytest.fixture
def tcp_proxy(s3_server: Any) -> Iterator[TcpProxy]:
    """A :class:`TcpProxy` in front of the shared moto server."""
    proxy = TcpProxy(s3_server.port)
    try:
        yield proxy
    finally:
        proxy.close()
