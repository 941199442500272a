"""Errors: WebHDFS ``RemoteException`` bodies, 5xx answers and connection failures become
kafka-tiers errors with the right type and retriability; HA fails over to the next namenode on
a connection error or a StandbyException and keeps using the one that answered."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from hdfs import HdfsError
from kafka_tiers_hdfs.store import translate

from kafka_tiers.api import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
)
from kafka_tiers.conformance.storage import SegmentBuilder
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager
from kafka_tiers.remote.guarded import GuardedRemoteStorage
from tests.servers.base import free_port


def _config(url: str) -> dict[str, str]:
    return {"hdfs.namenode.url": url, "hdfs.user": "kt", "hdfs.base.dir": "/user/kt/errors",
            "hdfs.timeout.ms": "10000"}


STANDBY = {"RemoteException": {
    "exception": "StandbyException", "javaClassName": "org.apache.hadoop.ipc.StandbyException",
    "message": "Operation category READ is not supported in state standby."}}


@pytest.mark.parametrize(("name", "expected", "retriable"), [
    ("FileNotFoundException", RemoteResourceNotFoundError, False),
    ("StandbyException", RetriableRemoteStorageError, True),
    ("RetriableException", RetriableRemoteStorageError, True),
    ("SafeModeException", RetriableRemoteStorageError, True),
    ("AccessControlException", RemoteStorageError, False),
    ("FileAlreadyExistsException", RemoteStorageError, False),
    (None, RemoteStorageError, False),
])
def test_remote_exception_names_map_to_our_types(name: str | None, expected: type,
                                                 retriable: bool) -> None:
    err = translate(HdfsError("boom on /kafka/x", exception=name), "k/x.log")
    assert type(err) is expected
    assert err.retriable is retriable and err.resource == "k/x.log"


@pytest.mark.servers
def test_errors_from_the_server(webhdfs_server: Any, make_plugin: Callable[..., Any],
                                hdfs_config: dict[str, str], config_for: Callable[..., Any],
                                segments: SegmentBuilder) -> None:
    store = make_plugin(hdfs_config).object_store
    with pytest.raises(HdfsError) as missing:
        store.get("no/such.log")
    assert isinstance(store.translate_error(missing.value, "no/such.log"),
                      RemoteResourceNotFoundError)
    if webhdfs_server.superuser in (None, webhdfs_server.user):
        pytest.skip("a real cluster's permissions are unknown here, or the test user is the "
                    "HDFS superuser: nothing is known to be denied")
    # a base directory the user may not create: AccessControlException, not retriable
    denied = make_plugin(config_for(webhdfs_server, "/kt-denied-by-permissions"))
    segment = segments.make(0)
    with pytest.raises(RemoteStorageError) as info:
        denied.copy_log_segment_data(segment.metadata, segment.data)
    err = info.value
    assert type(err) is RemoteStorageError and not err.retriable
    assert "HDFS permission denied" in str(err) and f"user={webhdfs_server.user}" in str(err)


@pytest.mark.parametrize(("status", "body", "content_type"), [
    (500, {"RemoteException": {"exception": "RuntimeException",
                               "javaClassName": "java.lang.RuntimeException",
                               "message": "namenode bug"}}, "application/json"),
    (503, b"<html>Service Unavailable</html>", "text/html"),
])
def test_5xx_answers_are_retriable(fake_servers: dict[str, Any],
                                   make_plugin: Callable[..., Any], status: int, body: Any,
                                   content_type: str) -> None:
    server = fake_servers["namenode"](status, body, content_type)
    store = make_plugin(_config(server.url)).object_store
    with pytest.raises(Exception) as info:
        list(store.list(""))
    err = store.translate_error(info.value, "")
    assert isinstance(err, RetriableRemoteStorageError)
    assert f"HTTP {status}" in str(err)


def test_connection_errors_are_retriable_through_the_core_wrapper(
        segments: SegmentBuilder) -> None:
    rsm = GuardedRemoteStorage.load("hdfs", _config(f"http://127.0.0.1:{free_port()}"))
    try:
        segment = segments.make(0)
        with pytest.raises(RetriableRemoteStorageError) as info:
            rsm.copy_log_segment_data(segment.metadata, segment.data)
        assert info.value.plugin == "hdfs" and "unreachable" in str(info.value)
        with pytest.raises(RetriableRemoteStorageError):
            rsm.list_remote_segments(segment.tp)
    finally:
        rsm.close()


def test_standby_only_is_retriable(fake_servers: dict[str, Any],
                                   make_plugin: Callable[..., Any],
                                   segments: SegmentBuilder) -> None:
    standby = fake_servers["namenode"](403, STANDBY)
    rsm = make_plugin(_config(standby.url))
    with pytest.raises(RetriableRemoteStorageError, match="StandbyException"):
        rsm.list_remote_segments(segments.tp())
    assert standby.requests >= 1


@pytest.mark.servers
@pytest.mark.parametrize("first", ["dead port", "standby", "resetting"])
def test_ha_fails_over_and_remembers_the_active_namenode(
        first: str, webhdfs_server: Any, fake_servers: dict[str, Any], hdfs_config: dict[str, Any],
        make_plugin: Callable[..., Any], segments: SegmentBuilder) -> None:
    counted: Any = None
    if first == "dead port":
        bad_url = f"http://127.0.0.1:{free_port()}"
    elif first == "standby":
        counted = fake_servers["namenode"](403, STANDBY)
        bad_url = counted.url
    else:
        counted = fake_servers["closing"]()
        bad_url = counted.url
    rsm: ObjectStoreRemoteStorageManager = make_plugin(
        {**hdfs_config, "hdfs.namenode.url": f"{bad_url},{webhdfs_server.url}"})
    segment = segments.make(0, log_size=50_000)
    rsm.copy_log_segment_data(segment.metadata, segment.data)
    assert [m.segment_id for m in rsm.list_remote_segments(segment.tp)] == [
        segment.metadata.segment_id]
    with rsm.fetch_log_segment(segment.metadata, 100, 4099) as stream:
        assert stream.read() == segment.log[100:4100]
    rsm.object_store.put("extra/key", io.BytesIO(b"x"), 1)
    rsm.delete_log_segment_data(segment.metadata)
    assert rsm.list_remote_segments(segment.tp) == []
    if counted is not None:  # tried once, then the answering namenode is kept
        seen = counted.requests if first == "standby" else counted.connections
        assert seen == 1
