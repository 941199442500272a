"""One Fetch reads every partition that needs the remote tier, in parallel (KAFKA-14915): N
slow remote partitions cost about one store delay, not N; the reader pool's bound refuses a
partition retriably; the response keeps its byte bound; local partitions of the same response
are answered as before. A read near a segment's end prefetches the next one (KIP-1003)."""

from __future__ import annotations

import time
from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.remote.local import LocalRemoteStorageManager
from tests.broker.helpers import STARTED, make_broker, shutdown_brokers  # noqa: F401
from tests.kafka.clients import confluent_consumer
from tests.kafka.targets import LISTENER
from tests.kafka.test_fetch import (
    KAFKA_STORAGE_ERROR,
    NONE,
    batches,
    fetch,
    offsets_of,
    part,
    produce,
    value,
)

PARTITIONS = 4
DELAY = 0.8


def _broker(tmp_path, **config: str) -> tuple[Any, Any]:
    cfg = {"remote.fetch.max.wait.ms": "10000", **config}
    b, store, _ = make_broker(tmp_path, listeners=LISTENER, **cfg)
    b.create_topic("tiered", PARTITIONS, {"remote.storage.enable": "true",
                                          "segment.bytes": "2048",
                                          "local.retention.bytes": "0"})
    b.create_topic("plain", 1)
    for p in range(PARTITIONS):
        produce(b, TopicPartition("tiered", p), 0, 60, per_batch=4)
    produce(b, TopicPartition("plain", 0), 0, 5)
    b.run_tiering()
    for p in range(PARTITIONS):
        assert b.log(TopicPartition("tiered", p)).local_log_start_offset > 20
    return b, store


def _slow_logs(store: Any, delay: float) -> None:
    """Every read of a segment's log from the store waits ``delay`` first."""
    inner = store.get

    def get(key: str, byte_range: Any = None) -> Any:
        if key.endswith(".log"):
            time.sleep(delay)
        return inner(key, byte_range)

    store.get = get


def test_n_remote_partitions_are_read_in_about_one_delay(tmp_path) -> None:
    b, store = _broker(tmp_path)
    fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)])])  # warm indexes
    _slow_logs(store, DELAY)
    start = time.monotonic()
    resp = fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)]),
                         ("plain", [part(12, 0, 0)])])
    took = time.monotonic() - start
    tiered, plain = resp.responses
    for p in tiered.partitions:  # every remote partition read in this one request
        assert p.error_code == NONE and offsets_of(p.records)[0] == 0
    [local] = plain.partitions  # the local partition of the same response, as before
    assert local.error_code == NONE and offsets_of(local.records) == list(range(5))
    assert took < DELAY * 2, f"{PARTITIONS} remote reads took {took:.2f} s: not in parallel"


def test_a_real_consumer_reads_n_slow_remote_partitions_in_about_one_delay(tmp_path) -> None:
    from confluent_kafka import TopicPartition as CTP

    b, store = _broker(tmp_path)
    _slow_logs(store, DELAY)
    got: dict[tuple[int, int], bytes] = {}
    first_of: dict[int, float] = {}
    with confluent_consumer(b.bootstrap_servers) as c:
        md = c.list_topics("tiered", timeout=10)  # connected before the clock starts
        assert len(md.topics["tiered"].partitions) == PARTITIONS
        start = time.monotonic()
        c.assign([CTP("tiered", p, 0) for p in range(PARTITIONS)])
        deadline = start + 30
        while len(first_of) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got[(m.partition(), m.offset())] = m.value()
            first_of.setdefault(m.partition(), time.monotonic() - start)
    assert sorted(first_of) == list(range(PARTITIONS))
    assert all(v == value(o) for (_p, o), v in got.items())
    slowest = max(first_of.values())
    # one at a time, the last partition's first records would come after N delays
    assert slowest < DELAY * (PARTITIONS - 1), first_of


def test_reads_beyond_the_reader_pool_bound_are_refused_per_partition(tmp_path) -> None:
    b, store = _broker(tmp_path, **{"remote.log.reader.threads": "1",
                                    "remote.log.reader.max.pending.tasks": "1"})
    fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)])])  # warm indexes
    _slow_logs(store, 0.3)
    resp = fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)])])
    codes = [p.error_code for p in resp.responses[0].partitions]
    assert codes == [NONE, NONE] + [KAFKA_STORAGE_ERROR] * (PARTITIONS - 2)  # retriable
    resp = fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(2, PARTITIONS)])])
    assert all(p.error_code == NONE and offsets_of(p.records)[0] == 0
               for p in resp.responses[0].partitions)  # the client's retry reads them


def test_the_response_keeps_its_byte_bound_in_request_order(tmp_path) -> None:
    b, _store = _broker(tmp_path)
    limit = 1500
    resp = fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)])],
                 max_bytes=limit)
    sizes = [len(bytes(p.records or b"")) for p in resp.responses[0].partitions]
    assert sizes[0] > 0 and sum(sizes) <= limit, sizes
    for p in resp.responses[0].partitions:
        assert p.error_code == NONE
        batches(p.records)  # whole batches only
    # the first partition with data gets its first batch whatever the bound (KIP-74)
    resp = fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)])],
                 max_bytes=1)
    sizes = [len(bytes(p.records or b"")) for p in resp.responses[0].partitions]
    assert sizes[0] > 0 and sizes[1:] == [0] * (PARTITIONS - 1), sizes
    assert len(batches(resp.responses[0].partitions[0].records)) == 1


def _spy_reads(b: Any) -> list[tuple[int, int]]:
    """(partition, max_bytes) of every remote read the broker starts, in order."""
    started: list[tuple[int, int]] = []
    inner = b.rlm.submit_read

    def submit_read(tp: TopicPartition, offset: int, max_bytes: int) -> Any:
        started.append((tp.partition, max_bytes))
        return inner(tp, offset, max_bytes)

    b.rlm.submit_read = submit_read
    return started


def test_the_response_budget_is_split_before_the_remote_reads_start(tmp_path) -> None:
    b, _store = _broker(tmp_path)
    fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)])])  # warm indexes
    started = _spy_reads(b)
    # request order: the local partition first takes what it reads, then 600 per remote
    # partition until the response's 1500 are spent; the last one is not read at all
    resp = fetch(b, 12, [("plain", [part(12, 0, 0)]),
                         ("tiered", [part(12, p, 0, max_bytes=600) for p in range(PARTITIONS)])],
                 max_bytes=1500)
    plain, tiered = resp.responses
    local = len(bytes(plain.partitions[0].records or b""))
    assert 0 < local < 1500
    left = 1500 - local
    want = []
    for p in range(PARTITIONS):
        if left > 0:
            want.append((p, min(600, left)))
            left -= min(600, left)
    assert started == want and len(want) < PARTITIONS, (started, local)
    sizes = [len(bytes(x.records or b"")) for x in tiered.partitions]
    assert local + sum(sizes) <= 1500 and all(x.error_code == NONE for x in tiered.partitions)
    assert all(size == 0 for size in sizes[len(want):])
    # max_bytes=1: one read (the first partition's whole first batch, KIP-74), and the fetch
    # quota is charged only the bytes that read fetched
    started.clear()
    before = b.rlm.fetch_quota._rate.total()
    resp = fetch(b, 12, [("tiered", [part(12, p, 0) for p in range(PARTITIONS)])],
                 max_bytes=1)
    assert started == [(0, 1)]
    charged = b.rlm.fetch_quota._rate.total() - before
    segment = b.rlm.remote_segments(TopicPartition("tiered", 0))[0].segment_size_in_bytes
    assert 0 < charged <= segment, (charged, segment)


def test_the_fetch_quota_is_checked_and_charged_per_read_as_it_starts(tmp_path) -> None:
    b, store = _broker(tmp_path, **{"remote.log.manager.fetch.max.bytes.per.second": "1000",
                                     "remote.log.manager.fetch.quota.window.num": "2",
                                     "remote.log.manager.fetch.quota.window.size.seconds": "1"})
    # the reads outlast the request's starts: no read ends (and is charged what it really
    # fetched) before the last one is decided, so only the reservations count
    _slow_logs(store, 1.0)
    started = _spy_reads(b)
    resp = fetch(b, 12, [("tiered", [part(12, p, 0, max_bytes=600) for p in range(PARTITIONS)])])
    # each read reserves its 600 bytes as it starts: after two, the rate (1200 bytes over
    # the 1 s span) is over the bound, so the next reads are skipped, not started
    assert started == [(0, 600), (1, 600)], started
    codes = [x.error_code for x in resp.responses[0].partitions]
    assert codes == [NONE] * PARTITIONS  # a skipped read: no records, no error
    sizes = [len(bytes(x.records or b"")) for x in resp.responses[0].partitions]
    assert all(sizes[:len(started)]) and not any(sizes[len(started):]), sizes


# ---------------------------------------------------------------------- KIP-1003 prefetch
class _Prefetching(LocalRemoteStorageManager):
    """The local plugin, recording the prefetches the broker asks for (``fail``: they
    raise)."""

    def __init__(self) -> None:
        super().__init__()
        self.prefetched: list[tuple[Any, int, int]] = []
        self.fail = False

    def prefetch(self, metadata: Any, start_position: int, size: int) -> None:
        self.prefetched.append((metadata, start_position, size))
        if self.fail:
            raise RuntimeError("injected prefetch failure")


def test_a_read_near_a_segments_end_prefetches_the_next_segment(tmp_path) -> None:
    plugin = _Prefetching()
    plugin.configure({"dir": str(tmp_path / "remote")})
    budget = 1024
    b = Broker({"log.dirs": str(tmp_path / "b1"), "broker.id": "1",
                "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
                "rsm.config.fetch.chunk.cache.prefetch.max.size": str(budget),
                "remote.log.manager.task.interval.ms": "3600000"}, remote_storage=plugin)
    b.start()
    STARTED.append(b)
    b.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                            "local.retention.bytes": "0"})
    tp = TopicPartition("t", 0)
    produce(b, tp, 0, 60, per_batch=4)
    b.run_tiering()
    segs = sorted(b.rlm.remote_segments(tp), key=lambda m: m.start_offset)
    assert len(segs) >= 3
    b.fetch(tp, segs[0].start_offset, 1)  # far from the segment's end: nothing
    assert plugin.prefetched == []
    got = b.fetch(tp, segs[0].end_offset, 1)  # the segment's last batch: the next one
    assert got.tier == "remote"
    [(md, start, size)] = plugin.prefetched
    assert md.segment_id == segs[1].segment_id and start == 0 and 0 < size <= budget
    plugin.fail = True  # a failing prefetch never fails the read
    assert b.fetch(tp, segs[1].end_offset, 1).records
    assert plugin.prefetched[-1][0].segment_id == segs[2].segment_id
    plugin.prefetched.clear()
    plugin.fail = False
    b.fetch(tp, segs[-1].end_offset, 1)  # the last remote segment: no next one
    assert plugin.prefetched == []
