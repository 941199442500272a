"""The object store on HDFS: a write is invisible until its rename, failed writes leave no
temporary file, deletes prune empty directories, ranged reads, new files get the configured
replication and block size, and stale temporary files are collected."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hdfs import HdfsError
from kafka_tiers_hdfs import HdfsObjectStore

from kafka_tiers.api import (
    ByteRange,
    RemoteStorageError,
    RetriableRemoteStorageError,
    TopicPartition,
)

pytestmark = pytest.mark.servers


def _names(client: Any, path: str) -> list[str]:
    try:
        return sorted(client.list(path))
    except HdfsError:
        return []


class _PausingReader(io.RawIOBase):
    """Yields ``data``; blocks after ``pause_at`` bytes until ``resume`` is set."""

    def __init__(self, data: bytes, pause_at: int) -> None:
        self._data = io.BytesIO(data)
        self._pause_at = pause_at
        self.paused = threading.Event()
        self.resume = threading.Event()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._data.tell() >= self._pause_at and not self.resume.is_set():
            self.paused.set()
            assert self.resume.wait(30)
        want = len(buffer) if self.resume.is_set() else min(
            len(buffer), self._pause_at - self._data.tell())
        return self._data.readinto(memoryview(buffer)[:want])


class _FailingReader(io.RawIOBase):
    def __init__(self, good: int) -> None:
        self._left = good

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            raise OSError("the local disk failed")
        n = min(len(buffer), self._left)
        buffer[:n] = b"a" * n
        self._left -= n
        return n


def test_a_write_is_invisible_until_complete_then_whole(
        webhdfs_server: Any, make_plugin: Callable[..., Any],
        hdfs_config: dict[str, str]) -> None:
    store: HdfsObjectStore = make_plugin({**hdfs_config,
                                          "hdfs.upload.chunk.size": "65536"}).object_store
    client = webhdfs_server.client()
    old = b"old content"
    store.put("t-0/obj.log", io.BytesIO(old), len(old))
    new = bytes(range(256)) * 4096  # 1 MiB
    reader = _PausingReader(new, pause_at=300_000)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            store.put("t-0/obj.log", io.BufferedReader(reader), len(new))
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert reader.paused.wait(30)
        # mid-write: readers see the old object whole; the new bytes sit in a hidden file
        assert [(i.key, i.size) for i in store.list("t-0/")] == [("t-0/obj.log", len(old))]
        with store.get("t-0/obj.log") as stream:
            assert stream.read() == old
        hidden = [n for n in _names(client, f"{store.base_dir}/t-0") if n.startswith(".")]
        assert len(hidden) == 1 and store.is_temporary(hidden[0])
    finally:
        reader.resume.set()
        writer.join(30)
    assert not errors
    with store.get("t-0/obj.log") as stream:
        assert stream.read() == new
    assert _names(client, f"{store.base_dir}/t-0") == ["obj.log"]  # no temporary file left


@pytest.mark.parametrize("length", [None, 2_000_000])
def test_a_failed_write_leaves_nothing(webhdfs_server: Any, make_plugin: Callable[..., Any],
                                       hdfs_config: dict[str, str], length: int | None) -> None:
    store: HdfsObjectStore = make_plugin(hdfs_config).object_store
    client = webhdfs_server.client()
    store.put("t-0/keep.log", io.BytesIO(b"keep"), 4)
    with pytest.raises(Exception) as info:
        store.put("t-0/broken.log", io.BufferedReader(_FailingReader(700_000)), length)
    # requests reports a body that broke off as a connection error: retriable
    assert isinstance(store.translate_error(info.value, None), RetriableRemoteStorageError)
    assert _names(client, f"{store.base_dir}/t-0") == ["keep.log"]


@pytest.mark.parametrize(("data", "length", "message"), [
    (b"0123456789", 20, "ended after 10 of the 20 bytes"),
    (b"0123456789", 4, "more than the 4 bytes"),
    (b"0", 0, "more than the 0 bytes"),
])
def test_a_source_of_another_length_than_announced_fails(
        make_plugin: Callable[..., Any], hdfs_config: dict[str, str], webhdfs_server: Any,
        data: bytes, length: int, message: str) -> None:
    store: HdfsObjectStore = make_plugin(hdfs_config).object_store
    with pytest.raises(RemoteStorageError, match=message):
        store.put("t-0/odd.log", io.BytesIO(data), length)
    assert list(store.list("")) == []
    assert _names(webhdfs_server.client(), f"{store.base_dir}/t-0") == []
    assert store.put("t-0/empty.log", io.BytesIO(b""), 0) == 0
    with store.get("t-0/empty.log") as stream:
        assert stream.read() == b""


def test_ranged_reads(make_plugin: Callable[..., Any], hdfs_config: dict[str, str]) -> None:
    store: HdfsObjectStore = make_plugin(hdfs_config).object_store
    data = bytes(range(251)) * 1000
    store.put("t-0/r.log", io.BytesIO(data), len(data))
    for first, last in [(0, 0), (1, 13), (1000, 249_999), (250_000, 250_999), (0, 250_999)]:
        with store.get("t-0/r.log", ByteRange(first, last)) as stream:
            assert stream.read() == data[first:last + 1], (first, last)


def test_deletes_prune_empty_directories(webhdfs_server: Any, make_plugin: Callable[..., Any],
                                         hdfs_config: dict[str, str]) -> None:
    store: HdfsObjectStore = make_plugin(hdfs_config).object_store
    client = webhdfs_server.client()
    for key in ("p/orders-1/a.log", "p/orders-1/b.log", "p/orders-10/c.log"):
        store.put(key, io.BytesIO(b"x"), 1)
    assert [i.key for i in store.list("p/orders-1/")] == ["p/orders-1/a.log",
                                                          "p/orders-1/b.log"]
    assert sorted(i.key for i in store.list("p/orders-1")) == [  # a string prefix
        "p/orders-1/a.log", "p/orders-1/b.log", "p/orders-10/c.log"]
    assert [i.key for i in store.list("p/orders-10/c")] == ["p/orders-10/c.log"]
    store.delete_many(["p/orders-1/a.log", "p/orders-1/missing.log"])
    assert _names(client, f"{store.base_dir}/p") == ["orders-1", "orders-10"]
    store.delete_many(["p/orders-1/b.log"])
    assert _names(client, f"{store.base_dir}/p") == ["orders-10"]
    store.delete_many(["p/orders-10/c.log"])
    assert _names(client, store.base_dir) == []  # pruned up to, not including, the base
    assert client.status(store.base_dir)["type"] == "DIRECTORY"
    store.delete_many(["p/orders-10/c.log"])  # idempotent


def test_keys_cannot_use_the_temporary_namespace(make_plugin: Callable[..., Any],
                                                 hdfs_config: dict[str, str]) -> None:
    store: HdfsObjectStore = make_plugin(hdfs_config).object_store
    for key in (".hidden", "t-0/.x.log", "../escape", "a//b"):
        with pytest.raises(RemoteStorageError, match="invalid object key"):
            store.put(key, io.BytesIO(b"x"), 1)
    assert list(store.list("../")) == []


def test_new_files_get_replication_and_block_size(
        webhdfs_server: Any, make_plugin: Callable[..., Any],
        hdfs_config: dict[str, str]) -> None:
    store: HdfsObjectStore = make_plugin({**hdfs_config, "hdfs.replication": "2",
                                          "hdfs.block.size": str(2 << 20),
                                          "hdfs.buffer.size": "65536"}).object_store
    store.put("t-0/r.log", io.BytesIO(b"abc"), 3)
    status = webhdfs_server.client().status(f"{store.base_dir}/t-0/r.log")
    assert (status["replication"], status["blockSize"], status["length"]) == (2, 2 << 20, 3)
    with store.get("t-0/r.log", ByteRange(1, 2)) as stream:
        assert stream.read() == b"bc"


def test_stale_temporary_files_are_collected(webhdfs_server: Any,
                                             make_plugin: Callable[..., Any],
                                             hdfs_config: dict[str, str]) -> None:
    rsm = make_plugin(hdfs_config)
    store: HdfsObjectStore = rsm.object_store
    client = webhdfs_server.client()
    tp = TopicPartition("orders", 3)
    directory = f"{store.base_dir}/orders-3"
    temp = f"{directory}/.00000000000000000000-abc.log.0123456789abcdef.kt-tmp"
    client.write(temp, data=b"partial")  # what a write whose cleanup failed leaves
    client.write(f"{directory}/.foreign-hidden", data=b"not ours")
    assert list(store.list("")) == []  # never listed
    assert rsm.collect_orphans(3_600_000, tp) == []
    assert ".00000000000000000000-abc.log.0123456789abcdef.kt-tmp" in _names(client, directory)
    rsm.collect_orphans(0, tp, dry_run=True)
    assert ".00000000000000000000-abc.log.0123456789abcdef.kt-tmp" in _names(client, directory)
    assert rsm.collect_orphans(0) == []  # temporary files are not objects: not returned
    assert _names(client, directory) == [".foreign-hidden"]
