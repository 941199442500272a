"""The WebHDFS server (the emulator, or a real cluster with ``KT_HDFS_URL``) through the
``hdfs`` package's ``InsecureClient`` (the plugin's client) and through raw HTTP, where the
spec's redirects, status codes and RemoteException bodies are visible.

Tests marked "emulator only" use what a real cluster does not give a test (its superuser,
other users' home directories, stopping it); they skip when ``KT_HDFS_URL`` is set.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

pytestmark = pytest.mark.servers


def emulator_only(server: Any) -> None:
    """Skip unless the handle is the emulator (restartable, superuser known)."""
    if not server.restartable or server.superuser is None:
        pytest.skip("needs the WebHDFS emulator (KT_HDFS_URL points at a real cluster)")


@pytest.fixture
def base(webhdfs_server: Any) -> Iterator[str]:
    """A fresh directory of the test user's, removed afterwards."""
    path = f"{webhdfs_server.base_path}/{uuid.uuid4().hex[:10]}"
    client = webhdfs_server.client()
    client.makedirs(path)
    yield path
    if webhdfs_server.running:
        client.delete(path, recursive=True)


class Raw:
    """Plain ``http.client`` requests, no redirect following."""

    def __init__(self, url: str, user: str):
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.user = user

    def request(self, method: str, path: str, body: bytes | None = None,
                url: str | None = None, **params: Any) -> tuple[int, dict[str, str], bytes]:
        """``method`` on the namenode (``path`` + ``params``) or on a full ``url``."""
        if url is None:
            query = {"user.name": self.user, **{k: str(v) for k, v in params.items()}}
            host, port, target = self.host, self.port, f"/webhdfs/v1{path}?{urlencode(query)}"
        else:
            parts = urlsplit(url)
            host, port = parts.hostname or "", parts.port or 80
            target = f"{parts.path}?{parts.query}"
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            conn.request(method, target, body=body)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()


@pytest.fixture
def raw(webhdfs_server: Any) -> Raw:
    """Raw HTTP as the test user."""
    return Raw(webhdfs_server.url, webhdfs_server.user)


def remote_exception(body: bytes) -> dict[str, str]:
    """The RemoteException object of an error body (asserting its shape)."""
    doc = json.loads(body)
    assert set(doc) == {"RemoteException"}
    exc = doc["RemoteException"]
    assert {"exception", "javaClassName", "message"} <= set(exc)
    return exc


# ----------------------------------------------------------------------------------------------
# Through the hdfs package
# ----------------------------------------------------------------------------------------------
def test_client_write_read_list_status(webhdfs_server: Any, base: str) -> None:
    client = webhdfs_server.client()
    data = os.urandom(300_000)
    client.write(f"{base}/seg/00000000000000000000.log", data)  # parents are created
    client.write(f"{base}/seg/00000000000000000000.index", b"\0" * 16)
    with client.read(f"{base}/seg/00000000000000000000.log", offset=1000, length=5000) as r:
        assert r.read() == data[1000:6000]
    with client.read(f"{base}/seg/00000000000000000000.log", offset=299_990) as r:
        assert r.read() == data[299_990:]
    assert client.list(f"{base}/seg") == ["00000000000000000000.index",
                                          "00000000000000000000.log"]
    listing = dict(client.list(f"{base}/seg", status=True))
    assert listing["00000000000000000000.log"]["length"] == len(data)
    status = client.status(f"{base}/seg/00000000000000000000.log")
    assert status["type"] == "FILE" and status["length"] == len(data)
    assert status["owner"] == webhdfs_server.user and status["permission"] == "644"
    assert status["pathSuffix"] == ""
    assert client.status(f"{base}/seg")["type"] == "DIRECTORY"
    assert client.status(f"{base}/nope", strict=False) is None
    summary = client.content(f"{base}")
    assert (summary["fileCount"], summary["directoryCount"]) == (2, 2)
    assert summary["length"] == len(data) + 16


def test_client_streamed_write_append_overwrite(webhdfs_server: Any, base: str) -> None:
    client = webhdfs_server.client()
    path = f"{base}/stream.bin"
    pieces = [os.urandom(70_000) for _ in range(20)]
    with client.write(path) as writer:  # a generator body: chunked transfer encoding
        for piece in pieces:
            writer.write(piece)
    client.write(path, b"appended", append=True)
    with client.read(path) as r:
        assert r.read() == b"".join(pieces) + b"appended"
    client.write(path, b"replaced", overwrite=True)
    with client.read(path) as r:
        assert r.read() == b"replaced"


def test_client_rename_delete_makedirs(webhdfs_server: Any, base: str) -> None:
    from hdfs.util import HdfsError

    client = webhdfs_server.client()
    client.write(f"{base}/a.tmp", b"payload")
    client.rename(f"{base}/a.tmp", f"{base}/a.log")
    assert client.list(base) == ["a.log"]
    client.makedirs(f"{base}/x/y/z", permission="750")
    assert client.status(f"{base}/x/y/z")["permission"] == "750"
    client.rename(f"{base}/a.log", f"{base}/x")  # into an existing directory
    with client.read(f"{base}/x/a.log") as r:
        assert r.read() == b"payload"
    with pytest.raises(HdfsError, match="Unable to rename"):
        client.rename(f"{base}/missing", f"{base}/other")  # HDFS answers boolean false
    with pytest.raises(HdfsError) as err:
        client.delete(f"{base}/x")
    assert err.value.exception == "PathIsNotEmptyDirectoryException"
    assert f"{base}/x is non empty" in str(err.value)
    assert client.delete(f"{base}/x/y/z") is True  # empty directory, not recursive
    assert client.delete(f"{base}/x", recursive=True) is True
    assert client.delete(f"{base}/x", recursive=True) is False  # already gone
    assert client.list(base) == []


def test_client_errors_are_hdfs_errors_with_the_message(webhdfs_server: Any,
                                                        base: str) -> None:
    from hdfs.util import HdfsError

    client = webhdfs_server.client()
    with pytest.raises(HdfsError, match=f"File does not exist: {base}/missing") as err:
        client.status(f"{base}/missing")
    assert err.value.exception == "FileNotFoundException"
    client.write(f"{base}/f", b"1")
    with pytest.raises(HdfsError, match="already exists") as err:
        client.write(f"{base}/f", b"2")
    assert err.value.exception == "FileAlreadyExistsException"
    with pytest.raises(HdfsError) as err:
        client.write(f"{base}/f/child", b"x")  # a file is no directory
    assert err.value.exception in ("ParentNotDirectoryException", "FileAlreadyExistsException")
    with pytest.raises(HdfsError) as err:
        client.makedirs(f"{base}/f")
    assert err.value.exception == "FileAlreadyExistsException"
    with pytest.raises(HdfsError) as err, client.read(f"{base}/missing") as r:
        r.read()
    assert err.value.exception == "FileNotFoundException"
    with pytest.raises(HdfsError, match="not a directory"):
        client.list(f"{base}/f")


def test_client_replication_blocksize_and_limits(webhdfs_server: Any, base: str) -> None:
    from hdfs.util import HdfsError

    client = webhdfs_server.client()
    client.write(f"{base}/r", b"x" * 10, replication=2, blocksize=2 * 1024 * 1024,
                 buffersize=8192, permission="600")
    status = client.status(f"{base}/r")
    assert (status["replication"], status["blockSize"], status["permission"]) == (
        2, 2 * 1024 * 1024, "600")
    with pytest.raises(HdfsError, match="block size is less than configured minimum"):
        client.write(f"{base}/small-blocks", b"x", blocksize=1024)


# ----------------------------------------------------------------------------------------------
# Raw HTTP: redirects, status codes, RemoteException bodies
# ----------------------------------------------------------------------------------------------
def test_raw_create_open_append_redirect_to_the_datanode(webhdfs_server: Any, raw: Raw,
                                                         base: str) -> None:
    path = f"{base}/raw.log"
    status, headers, body = raw.request("PUT", path, op="CREATE", overwrite="false",
                                        permission="640", replication=1)
    assert status == 307 and body == b""
    location = headers["location"]
    loc = urlsplit(location)
    query = parse_qs(loc.query)
    assert loc.path == f"/webhdfs/v1{path}"
    assert query["op"] == ["CREATE"] and query["user.name"] == [webhdfs_server.user]
    assert query["permission"] == ["640"] and query["overwrite"] == ["false"]
    if webhdfs_server.restartable:  # the emulator's datanode is its second port
        assert (loc.hostname, loc.port) == ("127.0.0.1", webhdfs_server.data_port)
        assert query["namenoderpcaddress"] == [f"127.0.0.1:{webhdfs_server.port}"]

    status, headers, body = raw.request("PUT", "", body=b"0123456789", url=location)
    assert status == 201
    assert headers["location"].endswith(path)
    if webhdfs_server.restartable:
        assert headers["location"] == f"webhdfs://127.0.0.1:{webhdfs_server.port}{path}"

    status, headers, _ = raw.request("POST", path, op="APPEND")
    assert status == 307
    status, _, _ = raw.request("POST", "", body=b"abc", url=headers["location"])
    assert status == 200

    status, headers, body = raw.request("GET", path, op="OPEN", offset=3, length=9)
    assert status == 307 and parse_qs(urlsplit(headers["location"]).query)["offset"] == ["3"]
    status, headers, body = raw.request("GET", "", url=headers["location"])
    assert status == 200 and body == b"3456789ab"
    assert headers["content-type"] == "application/octet-stream"

    status, headers, body = raw.request("GET", path, op="GETFILESTATUS")
    assert status == 200 and headers["content-type"].startswith("application/json")
    file_status = json.loads(body)["FileStatus"]
    assert (file_status["length"], file_status["permission"], file_status["replication"]) == (
        13, "640", 1)


def test_raw_remote_exceptions_and_status_codes(webhdfs_server: Any, raw: Raw,
                                                base: str) -> None:
    status, _, body = raw.request("GET", f"{base}/missing", op="GETFILESTATUS")
    assert status == 404
    assert remote_exception(body) == {
        "exception": "FileNotFoundException", "javaClassName": "java.io.FileNotFoundException",
        "message": f"File does not exist: {base}/missing"}

    status, _, body = raw.request("GET", f"{base}/missing", op="LISTSTATUS")
    assert status == 404 and remote_exception(body)["exception"] == "FileNotFoundException"

    status, _, body = raw.request("GET", f"{base}/missing", op="OPEN")
    assert status == 404 and remote_exception(body)["exception"] == "FileNotFoundException"

    status, _, body = raw.request("GET", base, op="NOSUCHOP")
    exc = remote_exception(body)
    assert status == 400 and exc["exception"] == "IllegalArgumentException"
    assert exc["javaClassName"] == "java.lang.IllegalArgumentException"
    assert 'Invalid value for webhdfs parameter "op"' in exc["message"]

    status, _, body = raw.request("GET", f"{base}/x", op="OPEN", offset=-1)
    assert status == 400 and 'webhdfs parameter "offset"' in remote_exception(body)["message"]

    status, _, body = raw.request("PUT", f"{base}/d", op="MKDIRS", permission="999")
    assert status == 400 and remote_exception(body)["exception"] == "IllegalArgumentException"

    status, _, body = raw.request("DELETE", base, op="DELETE", recursive="maybe")
    assert status == 400 and 'parameter "recursive"' in remote_exception(body)["message"]

    webhdfs_server.client().write(f"{base}/f", b"12345")
    status, headers, _ = raw.request("PUT", f"{base}/f", op="CREATE")  # overwrite=false
    status, _, body = raw.request("PUT", "", body=b"again", url=headers["location"])
    exc = remote_exception(body)
    assert status == 403 and exc["exception"] == "FileAlreadyExistsException"
    assert exc["javaClassName"] == "org.apache.hadoop.fs.FileAlreadyExistsException"

    status, headers, _ = raw.request("GET", f"{base}/f", op="OPEN", offset=6)
    status, _, body = raw.request("GET", "", url=headers["location"])
    assert status == 403  # seeking past the end is an IOException
    status, headers, _ = raw.request("GET", f"{base}/f", op="OPEN", offset=5)
    assert raw.request("GET", "", url=headers["location"])[::2] == (200, b"")

    status, _, body = raw.request("PUT", f"{base}/f", op="RENAME", destination="relative")
    assert status == 400

    status, _, body = raw.request("DELETE", f"{base}/missing", op="DELETE")
    assert (status, json.loads(body)) == (200, {"boolean": False})
    status, _, body = raw.request("PUT", f"{base}/f", op="RENAME", destination=f"{base}/g")
    assert (status, json.loads(body)) == (200, {"boolean": True})


def test_raw_lease_blocks_a_second_writer(webhdfs_server: Any, raw: Raw, base: str) -> None:
    from hdfs.util import HdfsError

    path = f"{base}/leased"
    _, headers, _ = raw.request("PUT", path, op="CREATE")
    loc = urlsplit(headers["location"])
    # a writer that sent half its chunked body and is still writing
    sock = socket.create_connection((loc.hostname, loc.port), timeout=30)
    try:
        sock.sendall(
            f"PUT {loc.path}?{loc.query} HTTP/1.1\r\nHost: {loc.hostname}:{loc.port}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".encode())
        client = webhdfs_server.client()
        for _ in range(100):  # until the datanode has opened the file
            if client.status(path, strict=False) is not None:
                break
            time.sleep(0.05)
        with pytest.raises(HdfsError) as err:
            client.write(path, b"other", append=True)
        assert err.value.exception == "AlreadyBeingCreatedException"
        sock.sendall(b"6\r\n world\r\n0\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 201")
    finally:
        sock.close()
    client.write(path, b"!", append=True)
    with client.read(path) as r:
        assert r.read() == b"hello world!"


# ----------------------------------------------------------------------------------------------
# Permissions
# ----------------------------------------------------------------------------------------------
def test_permissions_are_enforced(webhdfs_server: Any, base: str) -> None:
    from hdfs.util import HdfsError

    owner = webhdfs_server.client()
    other = webhdfs_server.client(user="kt-other")
    owner.makedirs(f"{base}/private", permission="700")
    owner.write(f"{base}/shared.txt", b"readable", permission="644")
    owner.write(f"{base}/secret.txt", b"not for you", permission="600")

    with other.read(f"{base}/shared.txt") as r:
        assert r.read() == b"readable"
    with pytest.raises(HdfsError) as err:
        other.write(f"{base}/intruder.txt", b"x")  # base is 755, owned by the test user
    assert err.value.exception == "AccessControlException"
    assert "Permission denied: user=kt-other, access=WRITE" in str(err.value)
    with pytest.raises(HdfsError) as err, other.read(f"{base}/secret.txt") as r:
        r.read()
    assert err.value.exception == "AccessControlException"
    assert "access=READ" in str(err.value)
    with pytest.raises(HdfsError) as err:
        other.list(f"{base}/private")
    assert err.value.exception == "AccessControlException"
    with pytest.raises(HdfsError) as err:
        other.delete(f"{base}/shared.txt")
    assert err.value.exception == "AccessControlException"
    with pytest.raises(HdfsError) as err:
        other.set_permission(f"{base}/shared.txt", "777")
    assert err.value.exception == "AccessControlException"

    owner.set_permission(base, "777")
    other.write(f"{base}/now-allowed.txt", b"ok")
    assert owner.status(f"{base}/now-allowed.txt")["owner"] == "kt-other"
    assert owner.status(f"{base}/now-allowed.txt")["group"] == owner.status(base)["group"]


def test_superuser_and_sticky_bit(webhdfs_server: Any, base: str) -> None:
    from hdfs.util import HdfsError

    emulator_only(webhdfs_server)
    superuser = webhdfs_server.client(user=webhdfs_server.superuser)
    alice = webhdfs_server.client(user="alice")
    bob = webhdfs_server.client(user="bob")
    name = f"/tmp/{uuid.uuid4().hex[:8]}"
    assert superuser.status("/tmp")["permission"] == "1777"
    alice.write(name, b"alice's", permission="666")
    with pytest.raises(HdfsError, match="sticky bit") as err:
        bob.delete(name)
    assert err.value.exception == "AccessControlException"
    with pytest.raises(HdfsError, match="sticky bit"):
        bob.rename(name, name + ".moved")
    bob.write(name, b"bob may overwrite a 666 file", overwrite=True)
    assert superuser.status(name)["owner"] == "bob"  # overwriting makes a new file
    with pytest.raises(HdfsError, match="not the owner"):
        alice.set_owner(name, group="staff")
    with pytest.raises(HdfsError, match="not a super user"):
        bob.set_owner(name, owner="alice")
    superuser.set_owner(name, owner="bob", group="staff")
    assert (superuser.status(name)["owner"], superuser.status(name)["group"]) == ("bob", "staff")
    assert bob.delete(name) is True

    superuser.makedirs("/locked", permission="700")
    try:
        with pytest.raises(HdfsError, match="access=EXECUTE"):
            alice.status("/locked/anything")
        assert superuser.status("/locked")["owner"] == webhdfs_server.superuser
    finally:
        superuser.delete("/locked", recursive=True)


# ----------------------------------------------------------------------------------------------
# Stop and restart (emulator only)
# ----------------------------------------------------------------------------------------------
def test_restart_keeps_data_on_the_same_ports(server_factory: Callable[..., Any]) -> None:
    import requests

    from tests.servers.webhdfs import WebHdfsServer

    server = server_factory(WebHdfsServer)
    client = server.client()
    path = f"{server.base_path}/kept/data.bin"
    client.write(path, b"survives restarts", replication=1)
    assert (server.namespace_dir / path.lstrip("/")).read_bytes() == b"survives restarts"
    ports = (server.port, server.data_port)
    server.stop()
    with pytest.raises(requests.exceptions.ConnectionError):
        client.status(path)
    server.start()
    assert (server.port, server.data_port) == ports
    with client.read(path) as r:
        assert r.read() == b"survives restarts"
    status = client.status(path)
    assert (status["owner"], status["replication"]) == (server.user, 1)

    server.kill()  # a crash: no clean shutdown
    server.start()
    client.write(path, b"!", append=True)
    with client.read(path) as r:
        assert r.read() == b"survives restarts!"


def test_datanode_refuses_requests_without_the_namenode_address(webhdfs_server: Any,
                                                                base: str) -> None:
    emulator_only(webhdfs_server)
    url = (f"http://127.0.0.1:{webhdfs_server.data_port}/webhdfs/v1{base}/x?op=CREATE"
           f"&user.name={webhdfs_server.user}")
    status, _, body = Raw(webhdfs_server.url, webhdfs_server.user).request(
        "PUT", "", body=b"data", url=url)
    assert status == 400
    assert remote_exception(body)["message"] == "namenoderpcaddress is not specified."
    assert webhdfs_server.client().status(f"{base}/x", strict=False) is None
