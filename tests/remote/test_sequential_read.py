"""Read-ahead streams of sequential readers: one ranged read per sequentially read segment,
read at most ``prefetch.max.size`` past the reader, falling back to chunk reads when it fails,
shared by concurrent readers, closed when idle, on delete and with the manager."""

from __future__ import annotations

import threading
import time
from typing import Any

from kafka_tiers.api.objectstore import ByteRange
from kafka_tiers.objectstore.keys import ObjectKind
from tests.remote.data_path_helpers import (
    log_bytes,
    make_rsm,
    new_md,
    read,
    segment_files,
    stored_segment,
    wait_for,
)

CHUNK = 1000
SIZE = 10_000


def setup(tmp_path: Any, prefetch: int = 2000, **settings: str) -> tuple[Any, Any, Any, bytes]:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": str(CHUNK),
                                         "compression.enabled": "true",
                                         "fetch.chunk.cache.prefetch.max.size": str(prefetch),
                                         **settings})
    store, md, log = stored_segment(rsm, tmp_path, SIZE)
    return rsm, store, md, log


def read_sequentially(rsm: Any, md: Any, step: int = 400) -> bytes:
    out = bytearray()
    position = 0
    while position < SIZE:
        part = read(rsm, md, position, min(position + step, SIZE) - 1)
        out += part
        position += len(part)
    return bytes(out)


def stream_of(rsm: Any, md: Any) -> Any:
    return rsm._read_ahead.get(rsm.object_key(md, ObjectKind.LOG))


def test_a_sequentially_read_segment_is_one_ranged_read_past_its_first_chunk(tmp_path):
    rsm, store, md, log = setup(tmp_path)
    assert read_sequentially(rsm, md) == log
    gets = store.log_gets()
    # the first read loads chunk 0; the second (sequential) opens ONE read from chunk 1 on
    assert len(gets) == 2, gets
    assert gets[1] is not None and gets[1].first > 0
    assert rsm.cache_stats()["downloads"] == SIZE // CHUNK  # every chunk once
    rsm.close()


def test_the_stream_reads_at_most_prefetch_max_size_past_the_reader(tmp_path):
    rsm, store, md, log = setup(tmp_path, prefetch=2000)
    assert read(rsm, md, 0, 999) == log[:1000]
    assert read(rsm, md, 1000, 1499) == log[1000:1500]
    stream = stream_of(rsm, md)
    assert stream is not None
    # chunk 1 (the reader's) and 2000 bytes (2 chunks) past it, no more
    assert wait_for(lambda: stream.chunks_read == 3)
    time.sleep(0.2)
    assert stream.chunks_read == 3 and stream.next_chunk == 4
    assert rsm.cache_stats()["chunk_cache"]["entries"] == 4
    # the reader moves on: the stream follows it
    assert read(rsm, md, 1500, 3999) == log[1500:4000]
    assert wait_for(lambda: stream.chunks_read == 5)
    time.sleep(0.1)
    assert stream.chunks_read == 5
    assert len(store.log_gets()) == 2
    rsm.close()


class FailingRead:
    """A store stream that fails after ``good`` bytes."""

    def __init__(self, inner: Any, good: int) -> None:
        self.inner = inner
        self.left = good

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            raise OSError("connection reset by the test")
        data = self.inner.read(min(n, self.left) if n >= 0 else self.left)
        self.left -= len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_failed_stream_falls_back_to_chunk_reads(tmp_path):
    rsm, store, md, log = setup(tmp_path, prefetch=3000)
    inner_get = store.inner.get
    stored: dict[str, Any] = {}

    def get(key: str, byte_range: ByteRange | None = None) -> Any:
        stream = inner_get(key, byte_range)
        if key.endswith(".log"):
            stored["log_gets"] = stored.get("log_gets", 0) + 1
        if key.endswith(".log") and stored["log_gets"] == 2:  # the stream's read
            stored["failed"] = byte_range
            return FailingRead(stream, 10)  # fails inside its first chunk
        return stream

    store.inner = _Patched(store.inner, get)
    assert read_sequentially(rsm, md) == log
    assert "failed" in stored  # the stream was opened and failed
    assert stored["log_gets"] > 2  # the reader's chunks were then read one by one
    assert rsm.cache_stats()["downloads"] == SIZE // CHUNK  # its chunks read one by one
    rsm.close()


class _Patched:
    def __init__(self, inner: Any, get: Any) -> None:
        self._inner = inner
        self.get = get

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_concurrent_readers_share_the_stream_and_each_chunk_is_read_once(tmp_path):
    rsm, store, md, log = setup(tmp_path, prefetch=2000)
    results: list[bytes] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            results.append(read_sequentially(rsm, md, step=300))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors and results == [log, log]
    assert rsm.cache_stats()["downloads"] == SIZE // CHUNK  # single flight kept
    assert len(store.log_gets()) <= 3
    rsm.close()


def test_an_idle_stream_closes_and_so_do_deleted_segments_and_the_manager(tmp_path):
    rsm, _store, md, log = setup(tmp_path, prefetch=1000)
    rsm._read_ahead.idle_s = 0.2
    assert read(rsm, md, 0, 999) == log[:1000]
    assert read(rsm, md, 1000, 1999) == log[1000:2000]
    stream = stream_of(rsm, md)
    assert stream is not None and not stream.closed
    assert wait_for(lambda: stream.closed, 3.0)
    stream.join(2.0)
    assert len(rsm._read_ahead) == 0
    # a stream closed by a delete, and by the manager's close
    rsm._read_ahead.idle_s = 30.0
    assert read(rsm, md, 2000, 2999) == log[2000:3000]
    assert read(rsm, md, 3000, 3999) == log[3000:4000]
    stream = stream_of(rsm, md)
    assert stream is not None and not stream.closed
    rsm.delete_log_segment_data(md)
    assert wait_for(lambda: stream.closed, 3.0)
    md2 = new_md(size=len(log))
    rsm.copy_log_segment_data(md2, segment_files(tmp_path / "seg2", log))
    assert read(rsm, md2, 0, 999) == log[:1000]
    assert read(rsm, md2, 1000, 1999) == log[1000:2000]
    stream = stream_of(rsm, md2)
    assert stream is not None
    rsm.close()
    assert wait_for(lambda: stream.closed, 3.0)


def test_open_streams_are_bounded(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": str(CHUNK),
                                         "fetch.chunk.cache.prefetch.max.size": "1000"})
    rsm._read_ahead.max_open = 2
    log = log_bytes(SIZE)
    mds = []
    for i in range(3):
        md = new_md(size=len(log))
        rsm.copy_log_segment_data(md, segment_files(tmp_path / f"seg{i}", log))
        mds.append(md)
    streams = []
    for md in mds:
        assert read(rsm, md, 0, 999) == log[:1000]
        assert read(rsm, md, 1000, 1999) == log[1000:2000]
        streams.append(stream_of(rsm, md))
    assert len(rsm._read_ahead) == 2
    assert wait_for(lambda: streams[0].closed, 3.0)  # the least recently used
    assert not streams[2].closed
    rsm.close()
