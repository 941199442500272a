"""Helpers of the broker and remote log manager tests: a hook recorder, an object store that
fails, hangs and counts bytes on demand, and a broker factory over temporary directories."""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from kafka_tiers.api import (
    ByteRange,
    ObjectInfo,
    ObjectStore,
    RemoteLogSegmentMetadata,
    RemoteStorageError,
    RetriableRemoteStorageError,
    TopicPartition,
)
from kafka_tiers.broker import Broker
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
from kafka_tiers.plugins.hookspecs import hookimpl
from kafka_tiers.remote.local import LocalRemoteStorageManager


class Recorder:
    """A hook plugin recording the calls it sees as ``(hook, args...)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def of(self, name: str) -> list[tuple[Any, ...]]:
        return [c[1:] for c in self.calls if c[0] == name]

    @hookimpl
    def kafka_tiers_broker_started(self, broker_id: int, config: Mapping[str, Any]) -> None:
        self.calls.append(("broker_started", broker_id))

    @hookimpl
    def kafka_tiers_broker_stopping(self, broker_id: int, clean: bool) -> None:
        self.calls.append(("broker_stopping", broker_id, clean))

    @hookimpl
    def kafka_tiers_topic_created(self, topic: str, assignment: Mapping[int, Sequence[int]]
                                  ) -> None:
        self.calls.append(("topic_created", topic, dict(assignment)))

    @hookimpl
    def kafka_tiers_segment_rolled(self, topic_partition: TopicPartition, base_offset: int,
                                   next_offset: int) -> None:
        self.calls.append(("segment_rolled", topic_partition, base_offset, next_offset))

    @hookimpl
    def kafka_tiers_segment_copied(self, topic_partition: TopicPartition, metadata: Any) -> None:
        self.calls.append(("segment_copied", topic_partition, metadata))

    @hookimpl
    def kafka_tiers_segment_copy_failed(self, topic_partition: TopicPartition, metadata: Any,
                                        error: BaseException) -> None:
        self.calls.append(("segment_copy_failed", topic_partition, metadata, error))

    @hookimpl
    def kafka_tiers_remote_segment_deleted(self, topic_partition: TopicPartition,
                                           metadata: Any) -> None:
        self.calls.append(("remote_segment_deleted", topic_partition, metadata))


class ControlledStore(ObjectStore):
    """Wraps a store: ``mode`` "ok", "fail" (every call raises a retriable error) or "hang"
    (every call waits for :attr:`release`); ``fail_puts`` fails that many next puts whose key
    ends with ``fail_suffix``; ``fail_deletes`` refuses deletes (but of manifests alone).
    Counts the bytes read from ``.log`` objects and records every ranged get."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.mode = "ok"
        self.release = threading.Event()
        self.fail_puts = 0
        self.fail_suffix = ""
        self.fail_deletes = False
        self.log_bytes_read = 0
        self.log_gets: list[ByteRange | None] = []
        self.index_gets = 0
        self.puts: list[str] = []
        self.hanging = threading.Event()
        self._lock = threading.Lock()

    @property
    def max_delete_batch(self) -> int:  # type: ignore[override]
        return self.inner.max_delete_batch

    def _gate(self) -> None:
        if self.mode == "fail":
            raise RetriableRemoteStorageError("injected outage: the remote tier is down")
        if self.mode == "hang":
            self.hanging.set()
            self.release.wait(30)
            raise RetriableRemoteStorageError("injected outage: released after hanging")

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        self._gate()
        with self._lock:
            if self.fail_puts and key.endswith(self.fail_suffix):
                self.fail_puts -= 1
                raise RetriableRemoteStorageError(f"injected fault on put {key}")
            self.puts.append(key)
        return self.inner.put(key, data, length)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        self._gate()
        stream = self.inner.get(key, byte_range)
        if key.endswith(".index"):
            with self._lock:
                self.index_gets += 1
        if not key.endswith(".log"):
            return stream
        with self._lock:
            self.log_gets.append(byte_range)
        return io.BufferedReader(_Counting(stream, self))  # type: ignore[return-value]

    def delete_many(self, keys: Sequence[str]) -> None:
        self._gate()
        if self.fail_deletes and len(keys) > 1:
            raise RemoteStorageError("injected fault: delete refused")
        self.inner.delete_many(keys)

    def list(self, prefix: str) -> list[ObjectInfo]:
        self._gate()
        return list(self.inner.list(prefix))

    def close(self) -> None:
        self.inner.close()


class _Counting(io.RawIOBase):
    def __init__(self, inner: BinaryIO, store: ControlledStore) -> None:
        self._inner = inner
        self._store = store

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self._inner.read(len(memoryview(buffer)))
        n = len(chunk)
        memoryview(buffer).cast("B")[:n] = chunk
        with self._store._lock:
            self._store.log_bytes_read += n
        return n

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


def local_plugin(remote_dir: Path) -> tuple[LocalRemoteStorageManager, ControlledStore]:
    """A configured ``local`` plugin whose store is a :class:`ControlledStore`."""
    plugin = LocalRemoteStorageManager()
    plugin.configure({"dir": str(remote_dir)})
    holder: list[ControlledStore] = []

    def wrap(store: ObjectStore) -> ObjectStore:
        holder.append(ControlledStore(store))
        return holder[0]

    plugin.wrap_object_store(wrap)
    return plugin, holder[0]


def make_broker(tmp_path: Path, name: str = "b1", *, remote: str = "remote",
                background: bool = False, controlled: bool = True, broker_id: int = 1,
                **config: str) -> tuple[Broker, ControlledStore | None, Recorder]:
    """A started broker with log dir ``tmp_path/name`` and the ``local`` remote tier in
    ``tmp_path/remote``; keys given as ``remote_log_x=...`` become ``remote.log.x``."""
    recorder = Recorder()
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[recorder]))
    cfg = {"log.dirs": str(tmp_path / name), "broker.id": str(broker_id),
           "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / remote),
           "remote.log.manager.task.interval.ms": "3600000",
           "remote.log.manager.task.retry.jitter": "0"}
    cfg.update({k.replace("_", "."): v for k, v in config.items()})
    if not controlled:
        cfg["rsm.config.password"] = "hunter2"  # a secret key, never to be shown
    store = None
    plugin = None
    if controlled:
        plugin, store = local_plugin(tmp_path / remote)
    broker = Broker(cfg, hooks=hooks, remote_storage=plugin, background=background)
    broker.start()
    STARTED.append(broker)
    return broker, store, recorder


#: every broker :func:`make_broker` started (shut down by :func:`shutdown_brokers`).
STARTED: list[Broker] = []


@pytest.fixture(autouse=True)
def shutdown_brokers() -> Iterator[None]:
    """Shut down, after each test (failed ones included), every broker it started."""
    yield
    while STARTED:
        broker = STARTED.pop()
        with contextlib.suppress(Exception):
            broker.shutdown()


_BASELINE: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def thread_baseline() -> None:
    """Remember the threads alive when the test starts (see :func:`new_threads`)."""
    _BASELINE.clear()
    _BASELINE.update(threading.enumerate())


def new_threads() -> list[str]:
    """Names of the threads alive now that were not when the test started."""
    return sorted(t.name for t in threading.enumerate() if t not in _BASELINE and t.is_alive())


def value(i: int, size: int = 200) -> bytes:
    """The value of record ``i``."""
    return (f"value-{i:06d}-".encode() * (size // 13 + 1))[:size]


def produce(broker: Broker, tp: TopicPartition, start: int, count: int, *, size: int = 200,
            per_call: int = 10, timestamp: int | None = None, batch_records: int = 500) -> None:
    """Produce records ``start..start+count-1`` with :func:`value` values."""
    for i in range(start, start + count, per_call):
        broker.produce(tp, [(f"k{j}".encode(), value(j, size), (), timestamp)
                            for j in range(i, min(i + per_call, start + count))],
                       batch_records=batch_records)


def tiered(broker: Broker, name: str = "t", **config: str) -> TopicPartition:
    """Create a tiered topic with 2 KiB segments (keys given as ``local_retention_bytes=``)."""
    cfg = {"remote.storage.enable": "true", "segment.bytes": "2048"}
    cfg.update({k.replace("_", "."): v for k, v in config.items()})
    broker.create_topic(name, 1, cfg)
    return TopicPartition(name, 0)


def tiered_segments(tmp_path: Path, count: int, **config: str) -> list[RemoteLogSegmentMetadata]:
    """Records ``0..count-1`` of a tiered topic t (partition 0, :func:`tiered`), produced to a
    :func:`make_broker` broker (not controlled, ``config`` added) that tiers its rolled
    segments into ``tmp_path/remote`` and shuts down; returns the copied segments."""
    broker, _, _ = make_broker(tmp_path, controlled=False, **config)
    tp = tiered(broker)
    produce(broker, tp, 0, count)
    copied = broker.run_tiering()[tp].copied
    broker.shutdown()
    return copied


def read_values(broker: Broker, tp: TopicPartition, start: int, end: int,
                max_bytes: int = 4096) -> dict[int, tuple[bytes | None, str]]:
    """offset -> (value, tier) for ``start..end-1``."""
    out: dict[int, tuple[bytes | None, str]] = {}
    offset = start
    while offset < end:
        result = broker.fetch(tp, offset, max_bytes)
        recs = [r for r in result.records_list() if r.offset < end]
        assert recs, f"nothing read at {offset}"
        for r in recs:
            out[r.offset] = (r.value, result.tier)
        offset = recs[-1].offset + 1
    return out


__all__ = [
    "STARTED",
    "ControlledStore",
    "Recorder",
    "local_plugin",
    "make_broker",
    "new_threads",
    "produce",
    "read_values",
    "shutdown_brokers",
    "thread_baseline",
    "tiered",
    "tiered_segments",
    "value",
]
