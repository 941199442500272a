"""Faults on a private WebHDFS emulator (``server_factory``), stopped and restarted by the tests
(skipped on a real cluster, which is not ours to stop):

(a) the server stops in the middle of a copy: the copy fails cleanly with a retriable error;
    nothing is half-visible (no listed segment, no readable data, and once the server is back
    and ``collect_orphans`` ran, no temporary file); a retry succeeds.
(b) the server is down when the broker starts: the broker starts, local produce and fetch work,
    and tiering resumes when the server is back.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from kafka_tiers.api import (
    ByteRange,
    ObjectInfo,
    ObjectStore,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
    TopicPartition,
)
from kafka_tiers.conformance.storage import SegmentBuilder
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager, partition_prefix
from tests.servers.webhdfs import WebHdfsServer

pytestmark = pytest.mark.servers


@pytest.fixture
def private_server(webhdfs_server: Any, server_factory: Callable[..., Any]) -> WebHdfsServer:
    """A private emulator this test may stop and restart."""
    if not webhdfs_server.restartable:
        pytest.skip("fault tests need the WebHDFS emulator (KT_HDFS_URL points at a real "
                    "cluster, which tests do not stop)")
    return server_factory(WebHdfsServer)


class _StopsServer(io.RawIOBase):
    """Reads ``inner``; once ``after`` bytes went by, stops the server (once)."""

    def __init__(self, inner: BinaryIO, server: WebHdfsServer, after: int) -> None:
        self._inner = inner
        self._server = server
        self._after = after
        self.read_bytes = 0
        self.stopped = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.read_bytes >= self._after and not self.stopped:
            self.stopped = True
            self._server.stop()
        chunk = self._inner.read(len(buffer))
        buffer[:len(chunk)] = chunk
        self.read_bytes += len(chunk)
        return len(chunk)


class _StopDuringLogPut(ObjectStore):
    """Delegates to the plugin's store; the put of the ``.log`` object stops the server
    part-way through its data."""

    def __init__(self, inner: ObjectStore, server: WebHdfsServer, after: int) -> None:
        self.inner = inner
        self.server = server
        self.after = after
        self.reader: _StopsServer | None = None

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        if key.endswith(".log") and self.reader is None:
            self.reader = _StopsServer(data, self.server, self.after)
            data = io.BufferedReader(self.reader, 64 * 1024)  # type: ignore[assignment]
        return self.inner.put(key, data, length)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        return self.inner.get(key, byte_range)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.inner.delete_many(keys)

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        return self.inner.list(prefix)

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        return self.inner.translate_error(exc, key)

    def collect_garbage(self, prefix: str, older_than_ms: int, dry_run: bool = False
                        ) -> list[str]:
        return self.inner.collect_garbage(prefix, older_than_ms, dry_run)

    def close(self) -> None:
        self.inner.close()


def test_server_stops_mid_copy(private_server: WebHdfsServer, config_for: Callable[..., Any],
                               make_plugin: Callable[..., Any],
                               segments: SegmentBuilder) -> None:
    server = private_server
    rsm: ObjectStoreRemoteStorageManager = make_plugin(config_for(server))
    client = server.client()
    earlier = segments.make(0, log_size=20_000)
    rsm.copy_log_segment_data(earlier.metadata, earlier.data)
    big = segments.make(1000, log_size=8 * 1024 * 1024)
    holder: list[_StopDuringLogPut] = []
    rsm.wrap_object_store(lambda s: holder.append(_StopDuringLogPut(s, server, 3 << 20))
                          or holder[0])
    with pytest.raises(RetriableRemoteStorageError) as info:
        rsm.copy_log_segment_data(big.metadata, big.data)
    reader = holder[0].reader
    assert reader is not None and reader.stopped and not server.running
    assert reader.read_bytes < len(big.log)  # it failed mid-way, not at the end
    assert info.value.segment_id == big.metadata.segment_id

    server.start()
    directory = f"{rsm.object_store.inner.base_dir}/{big.tp.topic}-{big.tp.partition}"
    # nothing of the failed copy is visible: not listed, not readable
    assert [m.segment_id for m in rsm.list_remote_segments(big.tp)] == [
        earlier.metadata.segment_id]
    for fetch in (lambda: rsm.fetch_log_segment(big.metadata, 0),
                  lambda: rsm.fetch_log_segment(big.metadata, 100, 200)):
        with pytest.raises(RemoteResourceNotFoundError):
            fetch().close()
    prefix = partition_prefix(rsm.key_prefix, big.tp)
    assert all(big.metadata.segment_id not in i.key for i in rsm.object_store.list(prefix))
    # the partial bytes are in the temporary file the client could not delete (server gone)
    hidden = [(n, s["length"]) for n, s in client.list(directory, status=True)
              if n.startswith(".")]
    assert len(hidden) == 1 and hidden[0][0].endswith(".kt-tmp")
    assert 0 < hidden[0][1] < len(big.log)
    # cleanup: the garbage collection of the remote log manager removes it
    rsm.collect_orphans(0, big.tp)
    assert all(not n.startswith(".") for n in client.list(directory))
    with rsm.fetch_log_segment(earlier.metadata, 0) as stream:
        assert stream.read() == earlier.log

    # a retry (a new segment id, as the caller must) succeeds once the server is back
    retry = segments.retry(big, new_id=True)
    rsm.copy_log_segment_data(retry.metadata, retry.data)
    assert [m.segment_id for m in rsm.list_remote_segments(big.tp)] == [
        earlier.metadata.segment_id, retry.metadata.segment_id]
    with rsm.fetch_log_segment(retry.metadata, 0) as stream:
        assert stream.read() == retry.log
    assert all(not n.startswith(".") for n in client.list(directory))


def _value(i: int) -> bytes:
    return f"value-{i:05d}-".encode() * 20


def _produce(broker: Any, tp: TopicPartition, count: int) -> None:
    for start in range(0, count, 10):
        broker.produce(tp, [(f"k{i}".encode(), _value(i)) for i in range(start, start + 10)])


def _read(broker: Any, tp: TopicPartition, offset: int) -> tuple[bytes | None, str]:
    result = broker.fetch(tp, offset, 4096)
    record = next(r for r in result.records_list() if r.offset == offset)
    return record.value, result.tier


def test_server_down_at_broker_start(private_server: WebHdfsServer,
                                     config_for: Callable[..., Any], tmp_path: Path,
                                     segments: SegmentBuilder) -> None:
    from kafka_tiers.broker import Broker
    from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager

    server = private_server
    server.stop()
    rsm_config = {f"rsm.config.{k}": v for k, v in config_for(server).items()}
    broker = Broker({"log.dirs": str(tmp_path / "logs"), "broker.id": "1",
                     "remote.log.storage.enable": "true",
                     "remote.storage.manager.class": "hdfs",
                     "remote.log.manager.task.interval.ms": "3600000", **rsm_config},
                    hooks=Hooks(make_plugin_manager(load_entrypoints=False)), background=False)
    broker.start()
    try:
        tp = segments.tp(0)
        broker.create_topic(tp.topic, 1, {"remote.storage.enable": "true",
                                          "segment.bytes": "4096",
                                          "local.retention.bytes": "0"})
        _produce(broker, tp, 100)
        rolled = broker.log(tp).segment_bases()[:-1]
        assert len(rolled) >= 3
        assert _read(broker, tp, 0) == (_value(0), "local")
        down = broker.run_tiering()[tp]
        assert isinstance(down.error, RemoteStorageError) and down.error.retriable
        assert down.copied == [] and broker.log(tp).local_log_start_offset == 0
        assert _read(broker, tp, 5) == (_value(5), "local")  # nothing deleted locally

        server.start()
        back = broker.run_tiering()[tp]
        assert back.error is None
        assert [m.start_offset for m in back.copied] == rolled
        lg = broker.log(tp)  # local retention ran once the segments were remote
        assert lg.num_segments == 1 and lg.local_log_start_offset == lg.segment_bases()[0] > 0
        assert _read(broker, tp, 0) == (_value(0), "remote")
        assert _read(broker, tp, 99) == (_value(99), "local")
    finally:
        broker.shutdown()
