"""The test servers really work through the real client libraries, and survive (or, for moto,
document not surviving) a stop and restart on the same port and data directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.servers.base import ServerError, port_open

pytestmark = pytest.mark.servers


def _name(prefix: str = "kt") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# ----------------------------------------------------------------------------------------------
# moto S3
# ----------------------------------------------------------------------------------------------
def test_s3_put_get_range_and_errors(s3_server: Any) -> None:
    from botocore.exceptions import ClientError

    s3 = s3_server.client()
    bucket = s3_server.create_bucket()
    body = bytes(range(256)) * 40
    s3.put_object(Bucket=bucket, Key="seg/00000000000000000000.log", Body=body)
    got = s3.get_object(Bucket=bucket, Key="seg/00000000000000000000.log",
                        Range="bytes=100-355")
    assert got["Body"].read() == body[100:356]
    assert got["ContentRange"] == f"bytes 100-355/{len(body)}"
    head = s3.head_object(Bucket=bucket, Key="seg/00000000000000000000.log")
    assert head["ContentLength"] == len(body)
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key="missing")
    assert err.value.response["Error"]["Code"] == "NoSuchKey"
    assert s3_server.url.startswith("http://127.0.0.1:")


def test_s3_multipart_upload(s3_server: Any) -> None:
    s3 = s3_server.client()
    bucket = s3_server.create_bucket()
    parts_data = [os.urandom(5 * 1024 * 1024), os.urandom(5 * 1024 * 1024), b"last part"]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="big")
    parts = []
    for number, data in enumerate(parts_data, start=1):
        part = s3.upload_part(Bucket=bucket, Key="big", PartNumber=number,
                              UploadId=upload["UploadId"], Body=data)
        parts.append({"PartNumber": number, "ETag": part["ETag"]})
    s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": parts})
    whole = b"".join(parts_data)
    assert s3.head_object(Bucket=bucket, Key="big")["ContentLength"] == len(whole)
    tail = s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={len(whole) - 20}-")
    assert tail["Body"].read() == whole[-20:]


def test_s3_list_pagination_and_delete_objects(s3_server: Any) -> None:
    s3 = s3_server.client()
    bucket = s3_server.create_bucket()
    keys = [f"topic-0/{i:05d}.log" for i in range(25)] + ["other/x"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    pages = list(s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="topic-0/", PaginationConfig={"PageSize": 10}))
    assert [len(p.get("Contents", [])) for p in pages] == [10, 10, 5]
    listed = [o["Key"] for p in pages for o in p["Contents"]]
    assert listed == sorted(k for k in keys if k.startswith("topic-0/"))
    deleted = s3.delete_objects(Bucket=bucket, Delete={
        "Objects": [{"Key": k} for k in listed[:20]], "Quiet": False})
    assert sorted(d["Key"] for d in deleted["Deleted"]) == listed[:20]
    rest = s3.list_objects_v2(Bucket=bucket)
    assert sorted(o["Key"] for o in rest["Contents"]) == sorted([*listed[20:], "other/x"])


def test_s3_stop_and_restart(server_factory: Callable[..., Any]) -> None:
    from botocore.exceptions import EndpointConnectionError

    from tests.servers.moto_s3 import MotoS3Server

    server = server_factory(MotoS3Server)
    s3 = server.client()
    bucket = server.create_bucket()
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    port, url = server.port, server.url
    server.stop()
    assert not server.running and not port_open(port)
    with pytest.raises(EndpointConnectionError):
        s3.list_buckets()
    server.start()
    assert (server.port, server.url) == (port, url)
    # moto keeps everything in memory: a restarted server is empty (documented)
    assert s3.list_buckets()["Buckets"] == []
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"again")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"again"


# ----------------------------------------------------------------------------------------------
# Azurite
# ----------------------------------------------------------------------------------------------
def test_azure_blocks_ranges_prefix_listing_delete(azurite_server: Any) -> None:
    from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
    from azure.storage.blob import BlobBlock

    container = azurite_server.create_container()
    blob = container.get_blob_client("topic-0/00000000000000000000.log")
    chunks = [os.urandom(100_000), os.urandom(100_000), os.urandom(1234)]
    ids = [f"{i:08d}" for i in range(len(chunks))]
    for block_id, chunk in zip(ids, chunks, strict=True):
        blob.stage_block(block_id=block_id, data=chunk)
    blob.commit_block_list([BlobBlock(block_id=b) for b in ids])
    whole = b"".join(chunks)
    assert blob.get_blob_properties().size == len(whole)
    assert blob.download_blob(offset=99_990, length=30).readall() == whole[99_990:100_020]
    committed, _ = blob.get_block_list("committed")
    assert [b.id for b in committed] == ids

    for name in ("topic-0/a.index", "topic-1/b.log"):
        container.upload_blob(name, name.encode())
    assert sorted(b.name for b in container.list_blobs(name_starts_with="topic-0/")) == [
        "topic-0/00000000000000000000.log", "topic-0/a.index"]
    with pytest.raises(ResourceExistsError):
        container.upload_blob("topic-1/b.log", b"again")  # overwrite=False by default
    container.delete_blob("topic-1/b.log")
    with pytest.raises(ResourceNotFoundError):
        container.get_blob_client("topic-1/b.log").download_blob().readall()
    assert azurite_server.url.startswith("http://127.0.0.1:")


def test_azure_stop_and_restart_keeps_data(server_factory: Callable[..., Any]) -> None:
    from azure.core.exceptions import ServiceRequestError

    from tests.servers.azurite import AzuriteServer

    server = server_factory(AzuriteServer)
    container = server.create_container()
    container.upload_blob("kept", b"still here")
    port = server.port
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 8, "SIGTERM should stop Azurite promptly"
    assert not port_open(port)
    with pytest.raises(ServiceRequestError):
        container.get_blob_client("kept").download_blob().readall()
    server.start()
    assert server.port == port
    assert container.get_blob_client("kept").download_blob().readall() == b"still here"
    assert any(server.data_dir.iterdir()), "Azurite keeps its data in --location"


# ----------------------------------------------------------------------------------------------
# ZooKeeper
# ----------------------------------------------------------------------------------------------
def test_zookeeper_ephemeral_nodes_and_versions(zookeeper_server: Any) -> None:
    from kazoo.exceptions import BadVersionError, NodeExistsError

    from tests.servers.zookeeper import four_letter_word

    assert four_letter_word(zookeeper_server.port, "ruok") == "imok"
    base = f"/{_name('t')}"
    owner = zookeeper_server.client()
    watcher = zookeeper_server.client()
    try:
        owner.create(f"{base}/brokers/ids/1", b'{"host": "b1"}', ephemeral=True, makepath=True)
        assert watcher.get(f"{base}/brokers/ids/1")[0] == b'{"host": "b1"}'
        with pytest.raises(NodeExistsError):
            watcher.create(f"{base}/brokers/ids/1", b"", ephemeral=True)
        owner.stop()  # closes the session: its ephemeral nodes go
        owner.close()
        assert watcher.exists(f"{base}/brokers/ids/1") is None

        watcher.create(f"{base}/controller_epoch", b"1")
        _, stat = watcher.get(f"{base}/controller_epoch")
        watcher.set(f"{base}/controller_epoch", b"2", version=stat.version)
        with pytest.raises(BadVersionError):
            watcher.set(f"{base}/controller_epoch", b"3", version=stat.version)
        assert watcher.get(f"{base}/controller_epoch")[0] == b"2"
        watcher.delete(base, recursive=True)
    finally:
        for client in (owner, watcher):
            client.stop()
            client.close()


def test_zookeeper_stop_and_restart_keeps_data(server_factory: Callable[..., Any]) -> None:
    from kazoo.handlers.threading import KazooTimeoutError

    from tests.servers.zookeeper import ZooKeeperServer

    server = server_factory(ZooKeeperServer)
    client = server.client()
    client.create("/kept", b"data", makepath=True)
    client.stop()
    client.close()
    port = server.port
    server.stop()
    assert not port_open(port)
    with pytest.raises(KazooTimeoutError):
        server.client(timeout=1.5)
    server.start()
    assert server.port == port
    client = server.client()
    try:
        assert client.get("/kept")[0] == b"data"
    finally:
        client.stop()
        client.close()


# ----------------------------------------------------------------------------------------------
# The process layer itself
# ----------------------------------------------------------------------------------------------
def test_start_failure_reports_the_log_tail(tmp_path: Any) -> None:
    from tests.servers.base import ServerProcess

    class Broken(ServerProcess):
        name = "broken"

        def command(self) -> list[str]:
            return [sys.executable, "-c", "import sys; print('boom: bad config'); sys.exit(3)"]

        def probe(self) -> bool:
            return False

    server = Broken(tmp_path / "w")
    with pytest.raises(ServerError, match=r"(?s)exited with code 3.*boom: bad config"):
        server.start()
    assert not server.running


def test_start_timeout_kills_the_group(tmp_path: Any) -> None:
    from tests.servers.base import ServerProcess

    class Silent(ServerProcess):
        name = "silent"

        def command(self) -> list[str]:
            # a child that would outlive a plain kill of its parent
            return ["bash", "-c", "sleep 300 & echo started child $!; wait"]

        def probe(self) -> bool:
            return False

    server = Silent(tmp_path / "w", startup_timeout=1.0)
    with pytest.raises(ServerError, match=r"(?s)did not answer within 1s.*started child"):
        server.start()
    child = int(server.log_tail().rsplit("started child ", 1)[1].split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # a zombie counts as gone
        state = subprocess.run(["ps", "-o", "stat=", "-p", str(child)], capture_output=True,
                               text=True, check=False).stdout.strip()
        if not state or state.startswith("Z"):
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the server's child process survived the timeout")


def test_close_removes_the_temp_dir() -> None:
    from tests.servers.webhdfs import WebHdfsServer

    server = WebHdfsServer()
    workdir = server.workdir
    server.start()
    pid = server.pid
    assert pid is not None and workdir.exists()
    server.close()
    assert not workdir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ServerError, match="closed"):
        server.start()
