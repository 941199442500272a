"""What is specific to block blobs: block ids, blocks staged concurrently and committed in order,
a failed upload that commits nothing, batched deletes of at most 256 keys."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any

import pytest
from kafka_tiers_azure.store import MAX_BATCH, block_id

from kafka_tiers.api import RemoteResourceNotFoundError, TopicPartition
from kafka_tiers.plugins import load_remote_storage

BLOCK = 65536


class _FailAfter(io.RawIOBase):
    """Yields ``data`` up to ``limit`` bytes, then fails like a broken local disk."""

    def __init__(self, data: bytes, limit: int) -> None:
        self._data = io.BytesIO(data)
        self._limit = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._data.tell() >= self._limit:
            raise OSError("injected: local read failed")
        view = memoryview(buffer)[: self._limit - self._data.tell()]
        return self._data.readinto(view)


def _payload(size: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(size))


def test_block_ids_are_unique_and_of_one_length() -> None:
    ids = {block_id(u, n) for u in ("a" * 32, "b" * 32) for n in (1, 2, 999, 50_000)}
    assert len(ids) == 8 and {len(i) for i in ids} == {52}
    assert base64.b64decode(block_id("c" * 32, 7)) == b"c" * 32 + b"-00007"
    with pytest.raises(Exception, match="50000 blocks"):
        block_id("a" * 32, 50_001)


@pytest.mark.servers
@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_large_objects_go_up_in_blocks_committed_in_order(
        azurite_server: Any, fresh_container: str, config_for: Callable[..., dict[str, str]],
        concurrency: str) -> None:
    config = config_for(azurite_server, fresh_container, azure_upload_concurrency=concurrency)
    data = _payload(BLOCK * 7 + 123)
    with load_remote_storage("azure", config) as rsm:
        store = rsm.object_store
        assert store.put("obj", io.BufferedReader(io.BytesIO(data)), len(data)) == len(data)
        with store.get("obj") as stream:
            assert stream.read() == data
    blob = azurite_server.service_client().get_blob_client(fresh_container, "obj")
    committed, uncommitted = blob.get_block_list("all")
    assert [b.size for b in committed] == [BLOCK] * 7 + [123] and not uncommitted
    parts = [int(base64.b64decode(b.id).rsplit(b"-", 1)[1]) for b in committed]
    assert parts == list(range(1, 9))  # committed in part order


@pytest.mark.servers
@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_failed_upload_commits_nothing_and_keeps_the_old_blob(
        azurite_server: Any, fresh_container: str, config_for: Callable[..., dict[str, str]],
        concurrency: str) -> None:
    config = config_for(azurite_server, fresh_container, azure_upload_concurrency=concurrency)
    old, new = _payload(BLOCK * 2 + 5, 1), _payload(BLOCK * 6, 2)
    service = azurite_server.service_client()
    with load_remote_storage("azure", config) as rsm:
        store = rsm.object_store
        for key in ("fresh", "existing"):
            if key == "existing":
                store.put(key, io.BytesIO(old), len(old))
            with pytest.raises(OSError, match="injected"):
                store.put(key, io.BufferedReader(_FailAfter(new, BLOCK * 4 + 10)), len(new))
        # nothing committed: the fresh key does not exist, the existing one is unchanged
        assert [i.key for i in store.list("")] == ["existing"]
        with pytest.raises(RemoteResourceNotFoundError):
            store.get("fresh")
        with store.get("existing") as stream:
            assert stream.read() == old
        blob = service.get_blob_client(fresh_container, "fresh")
        assert blob.get_block_list("uncommitted")[1], "the staged blocks are left uncommitted"
        # a new upload over the uncommitted blocks works (block ids of one length)
        assert store.put("fresh", io.BytesIO(new), len(new)) == len(new)
        with store.get("fresh") as stream:
            assert stream.read() == new


@pytest.mark.servers
def test_deletes_go_in_batches_of_at_most_256(
        azurite_server: Any, plugin_config: dict[str, str]) -> None:
    tp = TopicPartition("many", 0)
    with load_remote_storage("azure", plugin_config) as rsm:
        store = rsm.object_store
        container = store.container
        keys = [f"many-0/{i:020d}-seg{i}.log" for i in range(300)]
        for key in keys:
            container.upload_blob(key, b"x")
        container.upload_blob("many-00/keep", b"other partition")
        calls: list[int] = []
        original = store.delete_many

        def counting(batch: list[str]) -> None:
            calls.append(len(batch))
            original(batch)

        store.delete_many = counting  # type: ignore[method-assign]
        rsm.delete_topic_partition(tp)
        assert sum(calls) == 300 and max(calls) <= MAX_BATCH == 256
        assert [i.key for i in store.list("")] == ["many-00/keep"]


@pytest.mark.servers
def test_plain_transfer_helpers(azurite_server: Any, tmp_path: Any,
                                helper: Callable[[str], Any]) -> None:
    plain = helper("plain_transfer")
    path = tmp_path / "segment.log"
    data = _payload(300_000)
    path.write_bytes(data)
    seconds = plain.plain_upload(azurite_server, path)
    got, read_seconds = plain.plain_download(azurite_server, "segment.log")
    assert got == data and seconds > 0 and read_seconds > 0
