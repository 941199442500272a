"""Remote reads (only the byte range needed, the index cache, the reader pool's timeout) and
remote outages (local produce and fetch go on; the broker starts while the tier is down)."""

from __future__ import annotations

import threading
import time

import pytest

from kafka_tiers.api import (
    RemoteStorageError,
    RetriableRemoteStorageError,
)
from kafka_tiers.remote.index_cache import RemoteIndexCache
from kafka_tiers.remote.reader import RemoteReaderPool
from tests.broker import flaky_storage
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    new_threads,
    produce,
    read_values,
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    tiered,
    value,
)


def test_remote_read_fetches_only_the_range_needed(tmp_path):
    broker, store, _ = make_broker(tmp_path)
    tp = tiered(broker, segment_bytes=str(4 << 20), local_retention_bytes="0")
    produce(broker, tp, 0, 3000, size=1000, per_call=500, batch_records=10)
    broker.log(tp).roll()
    produce(broker, tp, 3000, 1)
    assert broker.run_tiering()[tp].copied
    segment = broker.rlm.remote_segments(tp)[0]
    assert segment.segment_size_in_bytes > 3_000_000
    result = broker.fetch(tp, 1500, 1)
    assert result.tier == "remote"
    assert [r.value for r in result.records_list()][:1] == [value(1500, 1000)]
    fetched = store.log_bytes_read
    assert 0 < fetched < 64 * 1024, fetched  # not the 3 MB segment
    assert all(r is not None and r.size < 64 * 1024 for r in store.log_gets)
    assert broker.metrics.value("RemoteFetchBytesPerSec", tp) == fetched
    # format 3: the indexes are inline in the manifest, so the store serves no index object;
    # the index cache's misses count the index downloads
    assert store.index_gets == 0 and broker.rlm.index_cache.misses == 1
    broker.fetch(tp, 2500, 1)  # the cached index serves the second read
    assert broker.rlm.index_cache.misses == 1 and broker.rlm.index_cache.hits == 1
    whole = broker.fetch(tp, 0, 10 << 20)  # a big max_bytes reads on to the segment's end
    assert whole.next_offset == 3000 and len(whole.records_list()) == 3000
    broker.shutdown()


def test_index_cache_is_bounded_by_bytes(tmp_path):
    broker, store, _ = make_broker(tmp_path, remote_log_index_file_cache_total_size_bytes="40")
    tp = tiered(broker, local_retention_bytes="0", index_interval_bytes="100")
    produce(broker, tp, 0, 80, batch_records=1)  # ~9 batches and several index entries each
    broker.run_tiering()
    segments = broker.rlm.remote_segments(tp)
    assert len(segments) >= 3
    for md in segments:
        broker.fetch(tp, md.start_offset + 1, 1)
    cache = broker.rlm.index_cache
    assert len(cache) >= 1 and (cache.size_bytes <= 40 or len(cache) == 1)
    assert segments[0].segment_id not in cache  # least recently used went first
    assert segments[-1].segment_id in cache
    assert store.index_gets == 0  # format 3: inline in the manifests
    assert cache.misses == len(segments)  # one index download per segment
    broker.shutdown()


def test_index_cache_lookup_and_eviction(tmp_path):
    import io
    import struct

    from kafka_tiers.api import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicPartition

    cache = RemoteIndexCache(tmp_path / "cache", max_bytes=24)
    fetched = []

    def md(start: int) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TopicPartition("t", 0)),
                                        start, start + 99, 0, 0, 0, 1000, {0: start})

    def fetch(m: RemoteLogSegmentMetadata) -> io.BytesIO:
        fetched.append(m.segment_id)
        return io.BytesIO(struct.pack(">iiii", 10, 300, 20, 700))

    a, b, c = md(0), md(100), md(200)
    assert cache.lookup(a, 15, fetch) == 300
    assert cache.lookup(a, 5, fetch) == 0
    assert cache.lookup(a, 25, fetch) == 700 and fetched == [a.segment_id]
    cache.lookup(b, 121, fetch)
    assert a.segment_id not in cache and b.segment_id in cache  # 16 + 16 > 24
    cache.lookup(c, 250, fetch)
    cache.remove(c.segment_id)
    assert len(cache) == 0 and cache.size_bytes == 0
    cache.close()
    assert not (tmp_path / "cache").exists()


def test_reader_pool_times_out_and_bounds_pending_reads():
    pool = RemoteReaderPool(1, 1)
    gate = threading.Event()
    try:
        started = time.monotonic()
        with pytest.raises(RetriableRemoteStorageError, match="timed out after 100 ms"):
            pool.run(lambda: gate.wait(10), 100, "t-0 at offset 5")
        assert time.monotonic() - started >= 0.09
        pool.submit(lambda: gate.wait(10))  # queued behind the hung one
        with pytest.raises(RetriableRemoteStorageError, match="too many remote reads pending"):
            pool.submit(lambda: None)
        assert pool.queued == 1
    finally:
        gate.set()
        pool.shutdown()
    with pytest.raises(RetriableRemoteStorageError, match="shut down"):
        pool.submit(lambda: None)


def test_remote_outage_leaves_local_traffic_untouched(tmp_path):
    broker, store, _ = make_broker(tmp_path, remote_fetch_max_wait_ms="300")
    tp = tiered(broker, local_retention_bytes="0")
    produce(broker, tp, 0, 60)
    broker.run_tiering()
    local_start = broker.log(tp).local_log_start_offset
    assert local_start > 0
    store.mode = "fail"
    produce(broker, tp, 60, 40)
    got = read_values(broker, tp, local_start, 100)
    assert all(tier == "local" for _, tier in got.values())
    with pytest.raises(RemoteStorageError, match="injected outage"):
        broker.fetch(tp, 0)
    result = broker.run_tiering()[tp]
    assert result.error is not None and not result.copied
    assert broker.metrics.value("RemoteFetchErrorsPerSec", tp) == 1

    store.mode = "hang"
    store.release.clear()
    started = time.monotonic()
    with pytest.raises(RetriableRemoteStorageError, match=r"remote\.fetch\.max\.wait\.ms"):
        broker.fetch(tp, 1, 100)
    elapsed = time.monotonic() - started
    assert 0.28 <= elapsed < 10
    produce(broker, tp, 100, 10)  # still fine while a reader hangs on the tier
    assert broker.fetch(tp, 105).records_list()[0].offset == 105
    store.release.set()
    store.mode = "ok"
    assert broker.fetch(tp, 1).tier == "remote"
    assert broker.run_tiering()[tp].copied
    broker.shutdown()
    assert not new_threads()


def test_a_hung_copy_in_the_background_does_not_block_produce_or_fetch(tmp_path):
    broker, store, _ = make_broker(tmp_path, background=True,
                                   remote_log_manager_task_interval_ms="50")
    tp = tiered(broker)
    store.mode = "hang"
    produce(broker, tp, 0, 30)  # rolls trigger the copy, which hangs in the tier
    assert store.hanging.wait(10)
    produce(broker, tp, 30, 30)
    assert read_values(broker, tp, 0, 60)[59] == (value(59), "local")
    store.mode = "ok"
    store.release.set()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not broker.rlm.remote_segments(tp):
        time.sleep(0.05)
    assert broker.rlm.remote_segments(tp)
    broker.shutdown()
    assert not new_threads()


def test_broker_starts_while_the_remote_tier_is_down(tmp_path):
    flaky_storage.DOWN.set()
    try:
        broker, _, _ = make_broker(tmp_path, controlled=False,
                                   remote_storage_manager_class=flaky_storage.PATH)
        assert broker.started and not broker.rlm.storage_loaded
        tp = tiered(broker, local_retention_bytes="0")
        produce(broker, tp, 0, 40)
        assert broker.fetch(tp, 0).tier == "local"
        result = broker.run_tiering()[tp]
        assert isinstance(result.error, RetriableRemoteStorageError)
        assert "not available" in str(result.error)
        assert "hunter2" not in str(result.error)  # secrets never in errors
    finally:
        flaky_storage.DOWN.clear()
    result = broker.run_tiering()[tp]
    assert result.error is None and result.copied
    assert broker.fetch(tp, 0).tier == "remote"
    broker.shutdown()
    assert not new_threads()
