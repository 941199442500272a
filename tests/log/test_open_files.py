"""Open files are a bounded resource, and running out of one is never a disk failure.

* Every descriptor a log keeps between calls (a segment's ``.log``, active or not, and each
  index map) is one entry of the shared LRU handle cache, capped by ``log.open.files.max``;
  a new segment opens nothing; an index map costs one descriptor, not two.
* Released active segments reopen on next use: appends, index entries and fsyncs stay right.
* EMFILE / ENFILE / ENOMEM / ENOSPC / MemoryError refuse the call with a retriable
  :class:`ResourceExhaustedError`; the log dir stays online and the other replicas serve.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log import handles
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.handles import HANDLES, HandleCache, OpenFilesCollector
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_dir_failure import ResourceExhaustedError
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.segment import LogSegment
from tests.log.helpers import batch_of, read_all

ROOT = Path(__file__).resolve().parents[2]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def cap() -> Iterator[Callable[[int], None]]:
    """Set the process-wide cap for one test (restored afterwards)."""
    before = HANDLES.capacity

    def set_cap(n: int) -> None:
        HANDLES.capacity = n

    yield set_cap
    HANDLES.capacity = before


def test_a_new_segment_opens_no_file(tmp_path: Path) -> None:
    before = open_fds()
    seg = LogSegment.create(tmp_path, 0)
    assert open_fds() == before
    assert seg.log_path.exists() and seg.offset_index.path.exists()
    assert seg.offset_index.path.stat().st_size == seg.offset_index.max_entries * 8  # prealloc
    seg.close()


def test_an_index_map_costs_one_descriptor(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0)
    before = open_fds()
    seg.offset_index.append(5, 100)  # maps the preallocated file
    assert seg.offset_index.mapped and seg.offset_index in HANDLES
    assert open_fds() == before + 1
    assert seg.offset_index.release() and open_fds() == before
    assert seg.offset_index.entries == 1 and seg.offset_index.lookup(7).position == 100
    seg.close()


def test_a_small_inactive_index_holds_no_descriptor(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0)
    seg.offset_index.append(3, 0)
    seg.close()
    again = LogSegment(tmp_path, 0)
    before = open_fds()
    assert again.offset_index.lookup(5).offset == 3  # read into memory: 8 bytes
    assert open_fds() == before and again.offset_index not in HANDLES
    again.close()


def test_active_segments_share_the_cap_and_stay_correct(tmp_path: Path,
                                                        cap: Callable[[int], None]) -> None:
    """60 logs, each with an active segment and indexes in use, never hold more descriptors
    than the cap; every record reads back; each log reopens cleanly (indexes intact)."""
    cap(12)
    HANDLES.release_all()
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=64)
    before = open_fds()
    logs = [Log.open(tmp_path / f"t-{i}", config) for i in range(60)]
    try:
        peak = 0
        for round_ in range(4):
            for i, lg in enumerate(logs):
                lg.append(batch_of([b"r%d-%d-" % (round_, i) + b"x" * 80]))
                peak = max(peak, open_fds() - before)
                assert len(HANDLES) <= 12 + 2  # at most the busy ones above the cap
        assert peak <= 14, peak  # today: 5 per log, 300
        for lg in logs:
            lg.flush()
        for i, lg in enumerate(logs):
            assert [v for _, v in read_all(lg)] == [
                b"r%d-%d-" % (r, i) + b"x" * 80 for r in range(4)]
            assert lg.active_segment.offset_index.entries >= 1
        assert HANDLES.evictions > 0
    finally:
        for lg in logs:
            lg.close()
    assert open_fds() == before
    for i in range(60):  # a clean reopen: sanity checks pass, records intact
        with Log.open(tmp_path / f"t-{i}", config) as lg:
            lg.active_segment.sanity_check(deep_tail=True)
            assert len(read_all(lg)) == 4


def test_a_released_active_segment_still_fsyncs_its_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=32))
    try:
        for i in range(3):
            lg.append(batch_of([b"v%d" % i + b"y" * 64]))
        seg = lg.active_segment
        seg.close_handles()  # what the cache does to an idle active segment
        assert seg._fd is None and not seg.offset_index.mapped
        synced: list[int] = []
        real = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
        lg.flush()
        assert len(synced) >= 2  # the .log and the .index, reopened to be synced
        lg.append(batch_of([b"after"]))  # reopens writable, at the right position
        assert [v for _, v in read_all(lg)][-1] == b"after"
    finally:
        lg.close()


def test_the_cap_is_a_config_key_and_a_metric(tmp_path: Path,
                                              cap: Callable[[int], None]) -> None:
    from kafka_tiers.config import BrokerConfig

    config = BrokerConfig({"log.dirs": str(tmp_path / "d")})
    assert config["log.open.files.max"] == handles.DEFAULT_CAPACITY
    LogManager.from_config(BrokerConfig({"log.dirs": str(tmp_path / "d"),
                                         "log.open.files.max": "40"}))
    assert HANDLES.capacity == 40
    with pytest.raises(ValueError, match=r"log\.open\.files\.max"):
        HandleCache(2)
    collected = {m.name: m.samples[0].value for m in OpenFilesCollector().collect()}
    assert collected[handles.OPEN_FILES_MAX_METRIC] == 40
    assert collected[handles.OPEN_FILES_METRIC] == len(HANDLES)
    from kafka_tiers.broker.broker import Broker

    with Broker({"log.dirs": str(tmp_path / "b"), "log.open.files.max": "64"},
                background=False) as broker:
        text = broker.metrics_text()
    assert f"{handles.OPEN_FILES_METRIC} " in text and f"{handles.OPEN_FILES_MAX_METRIC} 64.0" \
        in text and f"{handles.EVICTIONS_METRIC}_total " in text


# ---------------------------------------------------------------------- running out

@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    lm = LogManager([tmp_path / "d"])
    lm.startup()
    yield lm
    lm.shutdown()


def _fail_open(monkeypatch: pytest.MonkeyPatch, marker: str, err: int) -> None:
    """Make ``os.open`` of any path containing ``marker`` fail with ``err``."""
    real = os.open

    def fake(path: object, *args: object, **kwargs: object) -> int:
        if marker in os.fspath(path):  # type: ignore[arg-type]
            raise OSError(err, os.strerror(err), os.fspath(path))  # type: ignore[arg-type]
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", fake)


@pytest.mark.parametrize("err", [errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.ENOMEM])
def test_running_out_while_creating_refuses_that_replica_only(
        manager: LogManager, monkeypatch: pytest.MonkeyPatch, err: int) -> None:
    old = TopicPartition("old", 0)
    manager.get_or_create_log(old)
    manager.append(old, batch_of([b"before"]))
    _fail_open(monkeypatch, "new-0", err)
    with pytest.raises(ResourceExhaustedError) as info:
        manager.get_or_create_log(TopicPartition("new", 0))
    assert info.value.retriable and "refused: out of" in str(info.value)
    assert not manager.failure.offline  # today: the dir went offline, "old" with it
    manager.append(old, batch_of([b"after"]))
    assert [v for _, v in read_all(manager.get_log(old))] == [b"before", b"after"]
    monkeypatch.undo()  # the resource is back: the same call succeeds
    assert manager.get_or_create_log(TopicPartition("new", 0)) is not None


def test_running_out_while_producing_is_retriable(manager: LogManager,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    tp = TopicPartition("t", 0)
    lg = manager.get_or_create_log(tp)
    manager.append(tp, batch_of([b"one"]))
    lg.active_segment.close_handles()
    _fail_open(monkeypatch, "t-0", errno.EMFILE)
    with pytest.raises(ResourceExhaustedError):
        manager.append(tp, batch_of([b"refused"]))
    monkeypatch.undo()
    real_pwrite = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda *a: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(ResourceExhaustedError, match="disk space"):
        manager.append(tp, batch_of([b"no space"]))
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    monkeypatch.setattr(Log, "append", lambda *a, **k: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(ResourceExhaustedError, match="memory"):
        manager.append(tp, batch_of([b"no memory"]))
    monkeypatch.undo()
    assert not manager.failure.offline
    manager.append(tp, batch_of([b"two"]))
    assert [(o, v) for o, v in read_all(lg)] == [(0, b"one"), (1, b"two")]


def test_a_broker_under_ulimit_64_serves_300_partitions(tmp_path: Path) -> None:
    """A process limited to 64 descriptors creates 300 partitions and produces to and reads
    from each (today: EMFILE after about 10, and the dir goes offline)."""
    script = textwrap.dedent(f"""
        import os, resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        from kafka_tiers.api import TopicPartition
        from kafka_tiers.log.handles import HANDLES
        from kafka_tiers.log.log_manager import LogManager
        from tests.log.helpers import batch_of
        HANDLES.capacity = 24
        lm = LogManager([{str(tmp_path / "d")!r}])
        lm.startup()
        peak = 0
        for i in range(300):
            tp = TopicPartition("t", i)
            lm.get_or_create_log(tp)
            lm.append(tp, batch_of([b"v%d" % i]))
            peak = max(peak, len(os.listdir("/proc/self/fd")))
        for i in range(300):
            data = lm.read(TopicPartition("t", i), 0, 1 << 20)
            assert data.batches()[0].records()[0].value == b"v%d" % i
        assert not lm.failure.offline
        lm.shutdown()
        print("peak", peak)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) <= 64


@pytest.mark.slow
def test_partition_scale_benchmark_runs_small(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "partition_scale.py"),
                           "--partitions", "300", "--baseline", "30", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["benchmark"] == "partition_scale" and isinstance(doc["goal_met"], bool)
    assert doc["all_succeeded"] and doc["peak_fds"] <= 900
    assert doc["baseline_held_fds_per_partition"] >= 2 > doc["held_fds_per_partition"]
    assert list(tmp_path.iterdir()) == []  # cleaned up after itself


def test_a_batched_creation_fsyncs_the_log_dir_once(manager: LogManager,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_tiers.log.log_manager as log_manager

    synced: list[Path] = []
    real = log_manager.fsync_dir
    monkeypatch.setattr(log_manager, "fsync_dir", lambda d: (synced.append(Path(d)), real(d)))
    manager.get_or_create_log(TopicPartition("single", 0))
    assert synced == [manager.log_dirs[0]]
    synced.clear()
    with manager.batched_creation():
        for p in range(50):
            manager.get_or_create_log(TopicPartition("many", p))
        assert synced == []  # deferred to the end of the block
    assert synced == [manager.log_dirs[0]]  # today: one fsync per partition


def test_the_txn_index_is_synced_only_after_a_write(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_tiers.log.txnindex import AbortedTxn, TransactionIndex

    index = TransactionIndex(tmp_path / "0.txnindex", 0)
    index.append(AbortedTxn(1, 0, 5, 0))
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    index.flush()
    index.flush()  # nothing written since: no open, no fsync (today: one each time)
    assert len(synced) == 1
    index.append(AbortedTxn(1, 6, 9, 0))
    index.flush()
    assert len(synced) == 2


class _Handle:
    def __init__(self, busy: bool = False) -> None:
        self.busy, self.released = busy, 0

    def release(self) -> bool:
        if self.busy:
            return False
        self.released += 1
        return True


def test_the_cache_keeps_counting_a_busy_handle_and_closes_the_oldest() -> None:
    cache = HandleCache(8)
    busy = _Handle(busy=True)
    cache.touch(busy)
    idle = [_Handle() for _ in range(8)]
    for h in idle:
        cache.touch(h)
    # the oldest (busy) could not be closed: it stays counted; the next oldest went instead
    assert busy in cache and busy.released == 0
    assert len(cache) == 9 and cache.evictions == 0
    cache.touch(_Handle())  # back to the cap: the two oldest idle ones are closed
    assert [h.released for h in idle[:3]] == [1, 1, 0] and len(cache) == 8
    cache.touch(idle[2])  # a use moves it to the recent end: the next victim is idle[3]
    cache.touch(_Handle())
    assert idle[2] in cache and idle[2].released == 0 and idle[3].released == 1
    assert cache.evictions == 3
    busy.busy = False
    assert cache.release_all() == 8 and len(cache) == 0
