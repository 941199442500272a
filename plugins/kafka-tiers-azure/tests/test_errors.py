"""SDK errors mapped to kafka-tiers' types: not found, a missing container, refused credentials
(non-retriable), an unreachable endpoint and throttling / 5xx answers (retriable), with the
configured number of retries."""

from __future__ import annotations

import http.server
import io
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_tiers.api import (
    ByteRange,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
)
from kafka_tiers.plugins import load_remote_storage

ACCOUNT = "devstoreaccount1"
WRONG_KEY = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="


def _store(config: dict[str, str]) -> Any:
    return load_remote_storage("azure", config)


class _AnswerServer(http.server.ThreadingHTTPServer):
    """Answers every request with one status and Azure error code, counting requests."""

    daemon_threads = True

    def __init__(self, status: int, code: str) -> None:
        self.status, self.code, self.requests = status, code, 0
        super().__init__(("127.0.0.1", 0), _AnswerHandler)


class _AnswerHandler(http.server.BaseHTTPRequestHandler):
    server: _AnswerServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.requests += 1
        body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{self.server.code}</Code>'
                "<Message>Injected by the test server.</Message></Error>").encode()
        self.send_response(self.server.status)
        self.send_header("x-ms-error-code", self.server.code)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[Callable[[int, str], _AnswerServer]]:
    servers: list[_AnswerServer] = []

    def start(status: int, code: str) -> _AnswerServer:
        server = _AnswerServer(status, code)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _endpoint_config(url: str, **extra: str) -> dict[str, str]:
    return {"azure.container.name": "tier", "azure.endpoint.url": url,
            "azure.account.name": ACCOUNT, "azure.account.key": WRONG_KEY,
            "azure.retry.total": "2", "azure.retry.backoff.ms": "10",
            "azure.retry.backoff.max.ms": "20", **extra}


@pytest.mark.parametrize(("status", "code"), [(503, "ServerBusy"), (500, "InternalError"),
                                              (502, "BadGateway"), (504, "GatewayTimeout")])
def test_throttling_and_5xx_are_retriable_after_the_configured_retries(
        answering: Callable[[int, str], _AnswerServer], status: int, code: str) -> None:
    server = answering(status, code)
    with _store(_endpoint_config(f"http://127.0.0.1:{server.server_port}/{ACCOUNT}")) as rsm:
        with pytest.raises(RetriableRemoteStorageError) as info:
            rsm.object_store.put_object("a/b", b"data")
        assert server.requests == 3  # the first attempt and azure.retry.total=2 retries
        assert str(status) in str(info.value) and code in str(info.value)
        assert info.value.retriable and info.value.resource == "a/b"
        assert WRONG_KEY not in str(info.value)


def test_429_is_retriable_and_other_4xx_are_not(
        answering: Callable[[int, str], _AnswerServer]) -> None:
    busy = answering(429, "TooManyRequests")
    with (_store(_endpoint_config(f"http://127.0.0.1:{busy.server_port}/{ACCOUNT}")) as rsm,
          pytest.raises(RetriableRemoteStorageError)):
        list(rsm.object_store.list("p/"))
    conflict = answering(409, "LeaseIdMissing")
    with _store(_endpoint_config(f"http://127.0.0.1:{conflict.server_port}/{ACCOUNT}")) as rsm:
        with pytest.raises(RemoteStorageError) as info:
            rsm.object_store.put_object("a/b", b"x")
        assert not info.value.retriable and "409 LeaseIdMissing" in str(info.value)
        assert conflict.requests == 1


def test_a_403_from_the_service_is_a_non_retriable_credential_error(
        answering: Callable[[int, str], _AnswerServer]) -> None:
    server = answering(403, "AuthorizationPermissionMismatch")
    with _store(_endpoint_config(f"http://127.0.0.1:{server.server_port}/{ACCOUNT}")) as rsm:
        with pytest.raises(RemoteStorageError) as info, rsm.object_store.get("a/b"):
            pass
        assert not info.value.retriable
        assert "refused the credentials" in str(info.value)


def test_an_unreachable_endpoint_is_retriable_and_fails_fast() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with _store(_endpoint_config(f"http://127.0.0.1:{port}/{ACCOUNT}")) as rsm:
        start = time.monotonic()
        with pytest.raises(RetriableRemoteStorageError) as info:
            rsm.object_store.put("a/b", io.BytesIO(b"x" * 200_000), 200_000)
        assert time.monotonic() - start < 5
        assert "unreachable" in str(info.value)
        assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.servers
def test_missing_blobs_are_not_found(azurite_server: Any, plugin_config: dict[str, str]) -> None:
    with _store(plugin_config) as rsm:
        store = rsm.object_store
        with pytest.raises(RemoteResourceNotFoundError) as info:
            store.get("no/such/blob")
        assert info.value.resource == "no/such/blob"
        with pytest.raises(RemoteResourceNotFoundError):
            store.get("no/such/blob", ByteRange(0, 9))
        store.delete_many(["no/such/blob", "nor/this"])  # missing keys are ignored


@pytest.mark.servers
def test_a_missing_container_is_not_a_missing_segment(
        azurite_server: Any, config_for: Callable[..., dict[str, str]]) -> None:
    with _store(config_for(azurite_server, "kt-never-created")) as rsm:
        for call in (lambda: rsm.object_store.get("a"), lambda: list(rsm.object_store.list(""))):
            with pytest.raises(RemoteStorageError) as info:
                call()
            assert not isinstance(info.value, RemoteResourceNotFoundError)
            assert not info.value.retriable
            assert "container 'kt-never-created' does not exist" in str(info.value)


@pytest.mark.servers
def test_a_wrong_account_key_is_a_non_retriable_credential_error(
        azurite_server: Any, fresh_container: str) -> None:
    config = {"azure.container.name": fresh_container, "azure.endpoint.url": azurite_server.url,
              "azure.account.name": ACCOUNT, "azure.account.key": WRONG_KEY,
              "azure.retry.total": "1", "azure.retry.backoff.ms": "10"}
    with _store(config) as rsm:
        with pytest.raises(RemoteStorageError) as info:
            rsm.object_store.put_object("a/b", b"data")
        assert not info.value.retriable
        assert "refused the credentials" in str(info.value) and "403" in str(info.value)
        assert WRONG_KEY not in str(info.value)
