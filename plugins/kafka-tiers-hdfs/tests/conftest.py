"""Fixtures of the HDFS plugin's tests.

The WebHDFS server comes from the repository's ``webhdfs_server`` fixture: the emulator of the
public WebHDFS REST spec in ``tests/servers/webhdfs`` (not Hadoop), or the real cluster named by
``KT_HDFS_URL`` / ``KT_HDFS_USER``. Fault tests take a private emulator from ``server_factory``
and skip on a real cluster (``restartable`` is false).
"""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kafka_tiers_hdfs.store import HdfsObjectStore

from kafka_tiers.conformance.storage import SegmentBuilder
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager

#: the storage manager kafka-tiers builds around the store (what ``hdfs`` loads)
HdfsStorage = ObjectStoreRemoteStorageManager.for_store(HdfsObjectStore)


def plugin_config(server: Any, base_dir: str | None = None, **extra: str) -> dict[str, str]:
    """The plugin's keys for a server handle, over a fresh base directory under its
    ``base_path`` (or ``base_dir``)."""
    return {"hdfs.namenode.url": server.url, "hdfs.user": server.user,
            "hdfs.base.dir": base_dir or f"{server.base_path}/kt-{uuid.uuid4().hex[:12]}",
            "hdfs.timeout.ms": "20000", **extra}


@pytest.fixture
def config_for() -> Callable[..., dict[str, str]]:
    """:func:`plugin_config` (test modules cannot import this conftest by name)."""
    return plugin_config


@pytest.fixture(scope="session")
def hdfs_run_dir(webhdfs_server: Any) -> Iterator[str]:
    """A fresh HDFS directory for this test run, removed at its end."""
    path = f"{webhdfs_server.base_path}/kt-run-{uuid.uuid4().hex[:12]}"
    yield path
    webhdfs_server.client().delete(path, recursive=True)


@pytest.fixture
def hdfs_config(webhdfs_server: Any, hdfs_run_dir: str) -> dict[str, str]:
    """The plugin's keys for the shared server, over a fresh base directory."""
    return plugin_config(webhdfs_server, f"{hdfs_run_dir}/{uuid.uuid4().hex[:12]}")


@pytest.fixture
def make_plugin() -> Iterator[Callable[[dict[str, str]], ObjectStoreRemoteStorageManager]]:
    """Creates configured plugin instances; all are closed after the test."""
    made: list[ObjectStoreRemoteStorageManager] = []

    def make(config: dict[str, str]) -> ObjectStoreRemoteStorageManager:
        plugin = HdfsStorage()
        made.append(plugin)
        plugin.configure(config)
        return plugin

    yield make
    for plugin in made:
        plugin.close()


@pytest.fixture
def segments(tmp_path: Any) -> SegmentBuilder:
    """Makes segments (random content, local files) for a random topic."""
    return SegmentBuilder(tmp_path / "segments", f"kth-{uuid.uuid4().hex[:10]}",
                          seed=uuid.uuid4().int & 0xFFFF)


class FakeNamenode:
    """An HTTP server on 127.0.0.1 answering every request with one fixed response (a standby
    namenode, a failing gateway), counting the requests it saw."""

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        owner = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                owner.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ClosingListener:
    """Accepts TCP connections on 127.0.0.1 and closes them at once (a namenode that is not
    serving), counting them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def fake_servers() -> Iterator[dict[str, Callable[..., Any]]]:
    """``fake_servers["namenode"](status, body, content_type)`` -> :class:`FakeNamenode`
    (a dict body is sent as JSON),
    ``fake_servers["closing"]()`` -> :class:`ClosingListener`; all closed after the test."""
    made: list[Any] = []

    def namenode(status: int, body: bytes | dict[str, Any],
                 content_type: str = "application/json") -> FakeNamenode:
        raw = json.dumps(body).encode() if isinstance(body, dict) else body
        made.append(FakeNamenode(status, raw, content_type))
        return made[-1]

    def closing() -> ClosingListener:
        made.append(ClosingListener())
        return made[-1]

    yield {"namenode": namenode, "closing": closing}
    for server in made:
        server.close()


__all__ = ["ClosingListener", "FakeNamenode", "plugin_config"]
