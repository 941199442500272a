"""The data path's speed rules: chunks encoded on a pool ahead of the upload (in order, bounded,
stopped by close), zstd level 1 by default, long reads of plain logs streamed with one ranged
read past the chunk cache, and prefetches read as spans of contiguous chunks (one ranged read
each, the chunks cached as they arrive)."""

from __future__ import annotations

import io
import threading
import time
import zlib
from collections.abc import Iterator

import pytest

from kafka_tiers.api.errors import RemoteStorageError
from kafka_tiers.objectstore.chunk_cache import MemoryChunkCache
from kafka_tiers.objectstore.chunk_loader import ChunkLoader
from kafka_tiers.objectstore.data_settings import DataSettings
from kafka_tiers.objectstore.streams import CopyCancelled, EncodingReader
from tests.remote.data_path_helpers import (
    log_bytes,
    make_rsm,
    new_md,
    read,
    segment_files,
    stored_segment,
    wait_for,
)


class Encoder:
    """An encode that records how many run at once and can be held until released."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls: list[int] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, number: int, view: memoryview) -> bytes:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.calls.append(number)
        try:
            self.gate.wait(5)
            time.sleep(self.delay)
            return zlib.compress(bytes(view)) + number.to_bytes(4, "big")
        finally:
            with self.lock:
                self.running -= 1


class TrackedFile(io.BytesIO):
    """A source recording how far it has been read."""

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        return super().readinto(buffer)


def drain(reader: EncodingReader) -> bytes:
    with io.BufferedReader(reader, buffer_size=1 << 16) as stream:
        return stream.read()


DATA = bytes(range(256)) * 400  # 102400 bytes: 26 chunks of 4000 (the last 2400)


def test_pipelined_encoding_is_ordered_and_hashes_like_the_serial_one() -> None:
    serial = EncodingReader(io.BytesIO(DATA), "f", len(DATA), 4000, Encoder())
    out_serial = drain(serial)
    encoder = Encoder(delay=0.01)
    parallel = EncodingReader(io.BytesIO(DATA), "f", len(DATA), 4000, encoder, workers=2)
    out_parallel = drain(parallel)
    assert out_parallel == out_serial
    assert parallel.stored_sizes == serial.stored_sizes and len(serial.stored_sizes) == 26
    assert parallel.digest.hexdigest() == serial.digest.hexdigest()
    assert parallel.stored_digest.hexdigest() == serial.stored_digest.hexdigest()
    assert parallel.count == len(DATA)
    assert encoder.most == 2  # two chunks encoded at once, never more
    assert sorted(encoder.calls) == list(range(26))


def test_pipeline_reads_at_most_workers_plus_one_chunks_ahead() -> None:
    encoder = Encoder()
    encoder.gate.clear()  # encodes block: the reader may only read ahead its bound
    source = TrackedFile(DATA)
    reader = EncodingReader(source, "f", len(DATA), 4000, encoder, workers=2)
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(reader.readinto(bytearray(10))))
    thread.start()
    assert wait_for(lambda: encoder.running == 2)
    time.sleep(0.05)
    assert source.tell() == 2 * 4000  # two chunks being encoded, nothing more read
    encoder.gate.set()
    thread.join(5)
    assert got == [10]
    # one chunk being uploaded, two encoding ahead: three chunks of the file read
    assert source.tell() <= 3 * 4000
    reader.close()


def test_close_stops_the_pipeline_and_waits_for_running_encodes() -> None:
    encoder = Encoder(delay=0.05)
    reader = EncodingReader(io.BytesIO(DATA), "f", len(DATA), 4000, encoder, workers=2)
    assert reader.readinto(bytearray(10)) == 10
    reader.close()
    assert encoder.running == 0  # nothing encodes after close returns
    calls = len(encoder.calls)
    time.sleep(0.1)
    assert len(encoder.calls) == calls <= 4


def test_cancel_stops_the_pipeline() -> None:
    cancel = threading.Event()
    encoder = Encoder(delay=0.02)
    reader = EncodingReader(io.BytesIO(DATA), "f", len(DATA), 4000, encoder, cancel,
                            workers=2)
    assert reader.readinto(bytearray(10)) == 10
    cancel.set()
    with pytest.raises(CopyCancelled):
        reader.readinto(bytearray(10))
    assert encoder.running == 0
    assert len(encoder.calls) <= 4


def test_a_failed_encode_fails_the_read_and_stops_the_pool() -> None:
    def encode(number: int, view: memoryview) -> bytes:
        if number == 3:
            raise ValueError("boom")
        return bytes(view)

    reader = EncodingReader(io.BytesIO(DATA), "f", len(DATA), 4000, encode, workers=2)
    with pytest.raises(ValueError, match="boom"):
        drain(reader)


def test_default_zstd_level_is_one() -> None:
    assert DataSettings.from_config({}).zstd_level == 1
    assert DataSettings.from_config({"compression.zstd.level": "3"}).zstd_level == 3


def test_copy_with_the_pipeline_reads_back(tmp_path) -> None:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true"})
    log = log_bytes(20_500)
    md = new_md(size=len(log))
    rsm.copy_log_segment_data(md, segment_files(tmp_path / "seg", log))
    assert read(rsm, md, 0) == log
    assert read(rsm, md, 999, 15_001) == log[999:15_002]
    rsm.close()


def test_long_read_of_a_plain_log_is_one_ranged_read_past_the_cache(tmp_path) -> None:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000",
                                         "fetch.chunk.download.threads": "2"})
    store, md, log = stored_segment(rsm, tmp_path, 10_000)
    assert read(rsm, md, 0) == log
    assert len(store.log_gets()) == 1 and store.log_gets()[0] is None  # the whole object
    assert read(rsm, md, 500, 7_999) == log[500:8000]
    assert store.log_gets()[1].first == 500 and store.log_gets()[1].last == 7_999
    assert rsm.cache_stats()["chunk_cache"]["entries"] == 0  # nothing pushed through
    # a short read (one window of chunks) still goes through the cache
    assert read(rsm, md, 2000, 3999) == log[2000:4000]
    assert rsm.cache_stats()["chunk_cache"]["entries"] == 2
    rsm.close()


def test_prefetch_reads_spans_of_chunks_with_one_ranged_read(tmp_path) -> None:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true",
                                         "fetch.chunk.cache.prefetch.max.size": "4000"})
    store, md, log = stored_segment(rsm, tmp_path, 10_000)
    rsm.prefetch(md, 1000, 6000)  # chunks 1..6: one span
    assert wait_for(lambda: rsm.cache_stats()["chunk_cache"]["entries"] == 6)
    assert len(store.log_gets()) == 1
    store.gets.clear()
    assert read(rsm, md, 1000, 6999) == log[1000:7000]
    assert store.log_gets() == []
    rsm.close()


def test_sequential_window_slides_on_in_spans(tmp_path) -> None:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true",
                                         "fetch.chunk.cache.prefetch.max.size": "4000"})
    store, md, log = stored_segment(rsm, tmp_path, 20_000)
    for start in range(0, 20_000, 500):
        assert read(rsm, md, start, start + 499) == log[start:start + 500]
        time.sleep(0.01)
    # 20 chunks: without spans every chunk is its own ranged read
    assert len(store.log_gets()) < 14
    rsm.close()


def test_span_loader_rules() -> None:
    cache = MemoryChunkCache(1 << 20)
    loader = ChunkLoader(cache, threads=1)
    spans: list[tuple[int, int]] = []
    release = threading.Event()

    def load_span(first: int, end: int) -> Iterator[bytes]:
        spans.append((first, end))
        release.wait(5)
        for i in range(first, end):
            yield b"c%d" % i

    singles: list[int] = []

    def single(i: int):  # type: ignore[no-untyped-def]
        def load() -> bytes:
            singles.append(i)
            return b"c%d" % i
        return load

    cache.put("k2", b"c2")
    items = [(f"k{i}", single(i)) for i in range(6)]
    assert loader.prefetch_spans(items, load_span, 3) == 5  # k2 is cached
    release.set()
    assert wait_for(lambda: all(cache.contains(f"k{i}") for i in range(6)))
    assert spans == [(0, 2), (3, 6)] and singles == []
    assert loader.get("k4", single(4)) == b"c4" and singles == []
    assert loader.stats().prefetches == 5
    # a failed span frees its keys: the next reader loads again
    loader2 = ChunkLoader(MemoryChunkCache(1 << 20), threads=1)

    def failing(first: int, end: int) -> Iterator[bytes]:
        yield b"c%d" % first
        raise RemoteStorageError("store down")

    assert loader2.prefetch_spans(items[:3], failing, 3) == 3
    assert wait_for(lambda: loader2.stats().in_flight == 0)
    assert loader2.cache is not None and loader2.cache.contains("k0")
    assert not loader2.cache.contains("k1")
    assert loader2.get("k1", single(1)) == b"c1" and singles == [1]
    assert loader2.absent(["k0", "k1", "k2"]) == 1
    loader.close()
    loader2.close()
