"""The chunk caches (memory and disk) and the single-flight chunk loader.

Caches: the byte bound holds after every put (also from several threads), least recently used
goes first, unused entries expire, a chunk above the bound is not kept. Disk cache: hashed
names inside its directory, modes 0700/0600, a restart deletes only its own files, a damaged
or vanished file is a miss, an unusable directory is a ConfigError naming the key. Loader: N
readers of one chunk cause one load, a failed load poisons nothing, close() never hangs a
waiter, prefetches are bounded and never delay readers.
"""

from __future__ import annotations

import os
import random
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafka_tiers.api.errors import ConfigError, RetriableRemoteStorageError
from kafka_tiers.objectstore import disk_chunk_cache
from kafka_tiers.objectstore.chunk_cache import (
    CacheStats,
    ChunkCache,
    MemoryChunkCache,
    build_chunk_cache,
)
from kafka_tiers.objectstore.chunk_loader import ChunkLoader, LoaderStats
from kafka_tiers.objectstore.data_settings import DataSettings
from kafka_tiers.objectstore.disk_chunk_cache import DiskChunkCache, chunk_file_name
from tests.remote.data_path_helpers import ManualClock

WAIT = 5.0  # seconds a test waits for a thread before calling it hung


MakeCache = Callable[..., ChunkCache]


@pytest.fixture(params=["memory", "disk"])
def make_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeCache]:
    made: list[ChunkCache] = []

    def make(max_bytes: int, retention_ms: int = 600_000,
             clock: Callable[[], float] | None = None) -> ChunkCache:
        cache: ChunkCache
        if request.param == "memory":
            cache = MemoryChunkCache(max_bytes, retention_ms, clock=clock)
        else:
            cache = DiskChunkCache(tmp_path / f"cache{len(made)}", max_bytes, retention_ms,
                                   clock=clock)
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()


def own_files(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in directory.iterdir()
            if disk_chunk_cache.is_own_name(p.name)}


# -- both caches -----------------------------------------------------------------------------


def test_put_get_and_counters(make_cache: MakeCache) -> None:
    cache = make_cache(100)
    assert cache.get("seg.log#0") is None
    cache.put("seg.log#0", b"abc")
    assert cache.get("seg.log#0") == b"abc"
    cache.put("seg.log#0", b"defg")  # replaced, not added
    assert cache.get("seg.log#0") == b"defg"
    assert cache.stats() == CacheStats(hits=2, misses=1, evictions=0, entries=1, bytes=4,
                                       max_bytes=100)


def test_bound_holds_after_any_sequence_of_puts(make_cache: MakeCache) -> None:
    cache = make_cache(1000)
    rng = random.Random(16)
    for i in range(400):
        key = f"obj{rng.randrange(40)}#{rng.randrange(3)}"
        cache.put(key, bytes([i % 256]) * rng.choice([0, 1, 10, 99, 250, 600, 1000, 1001]))
        stats = cache.stats()
        assert stats.bytes <= 1000
        if isinstance(cache, DiskChunkCache):
            on_disk = own_files(Path(cache.path))
            assert sum(on_disk.values()) == stats.bytes and len(on_disk) == stats.entries
        if rng.random() < 0.3:
            cache.get(f"obj{rng.randrange(40)}#0")
    assert cache.stats().evictions > 0


def test_least_recently_used_goes_first(make_cache: MakeCache) -> None:
    cache = make_cache(30)
    for key in ("a", "b", "c"):
        cache.put(key, key.encode() * 10)
    assert cache.get("a") == b"a" * 10  # b is now the least recently used
    cache.put("d", b"d" * 10)
    assert cache.get("b") is None
    cache.put("e", b"e" * 10)  # then c
    assert cache.get("c") is None
    assert [cache.get(k) is not None for k in ("a", "d", "e")] == [True, True, True]
    assert cache.stats().evictions == 2


def test_chunk_larger_than_the_bound_is_not_kept(make_cache: MakeCache) -> None:
    cache = make_cache(10)
    cache.put("k", b"x" * 10)
    assert cache.get("k") == b"x" * 10
    cache.put("k", b"y" * 11)  # too large: not kept, and the old entry is gone too
    assert cache.get("k") is None
    assert cache.stats().bytes == 0 and cache.stats().entries == 0


def test_unused_entries_expire_after_retention(make_cache: MakeCache) -> None:
    clock = ManualClock()
    cache = make_cache(100, 1000, clock)
    cache.put("a", b"a")
    cache.put("b", b"b")
    clock.now += 0.7
    assert cache.get("a") == b"a"  # used: kept another second
    clock.now += 0.7
    assert cache.contains("b") is False
    assert cache.get("a") == b"a"
    clock.now += 1.0
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.evictions) == (0, 0, 2)
    if isinstance(cache, DiskChunkCache):
        assert own_files(Path(cache.path)) == {}


def test_contains_counts_nothing_and_keeps_the_order(make_cache: MakeCache) -> None:
    cache = make_cache(20)
    cache.put("a", b"a" * 10)
    cache.put("b", b"b" * 10)
    assert cache.contains("a") and not cache.contains("zzz")
    cache.put("c", b"c" * 10)  # a is still the least recently used
    assert not cache.contains("a")
    stats = cache.stats()
    assert (stats.hits, stats.misses) == (0, 0)


def test_discard_prefix_drops_one_objects_chunks(make_cache: MakeCache) -> None:
    cache = make_cache(100)
    for i in range(3):
        cache.put(f"t/0/seg1.log#{i}", b"1")
        cache.put(f"t/0/seg2.log#{i}", b"2")
    assert cache.discard_prefix("t/0/seg1.log#") == 3
    assert cache.get("t/0/seg1.log#0") is None and cache.get("t/0/seg2.log#0") == b"2"
    assert cache.stats().entries == 3


def test_bound_holds_under_concurrent_puts(make_cache: MakeCache) -> None:
    cache = make_cache(5000)
    start = threading.Barrier(8)
    over: list[int] = []

    def writer(w: int) -> None:
        start.wait()
        for i in range(60):
            cache.put(f"w{w}#{i}", bytes(300 + 50 * w))
            held = cache.stats().bytes
            if held > 5000:
                over.append(held)
            cache.get(f"w{(w + 1) % 8}#{i}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not over
    stats = cache.stats()
    assert stats.bytes <= 5000 and stats.evictions > 0
    if isinstance(cache, DiskChunkCache):
        files = own_files(Path(cache.path))
        assert sum(files.values()) == stats.bytes and len(files) == stats.entries


def test_closed_cache_misses_and_keeps_nothing(make_cache: MakeCache) -> None:
    cache = make_cache(100)
    cache.put("a", b"a")
    cache.close()
    cache.close()
    assert cache.get("a") is None
    cache.put("b", b"b")
    assert cache.get("b") is None and cache.stats().entries == 0


@pytest.mark.parametrize("cls", [MemoryChunkCache, DiskChunkCache])
def test_bounds_below_one_are_refused(cls: type, tmp_path: Path) -> None:
    args = (tmp_path / "c",) if cls is DiskChunkCache else ()
    with pytest.raises(ValueError):
        cls(*args, 0, 1000)
    with pytest.raises(ValueError):
        cls(*args, 10, 0)


def test_build_chunk_cache_follows_the_settings(tmp_path: Path) -> None:
    memory = build_chunk_cache(DataSettings.from_config({"fetch.chunk.cache.size": "1000"}).cache)
    assert isinstance(memory, MemoryChunkCache) and memory.max_bytes == 1000
    disk = build_chunk_cache(DataSettings.from_config({
        "fetch.chunk.cache.class": "disk", "fetch.chunk.cache.path": str(tmp_path / "d"),
        "fetch.chunk.cache.retention.ms": "5000"}).cache)
    assert isinstance(disk, DiskChunkCache) and disk.retention_s == 5
    disk.close()
    assert build_chunk_cache(DataSettings.from_config(
        {"fetch.chunk.cache.class": "none"}).cache) is None


# -- the disk cache --------------------------------------------------------------------------


def test_disk_names_are_hashes_inside_the_directory(tmp_path: Path) -> None:
    cache = DiskChunkCache(tmp_path / "c", 1000)
    keys = ["../../etc/passwd#0", "/abs/key.log#1", "t/0/" + "x" * 300 + ".log#2"]
    for key in keys:
        cache.put(key, key.encode())
    names = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert names == sorted(chunk_file_name(k) for k in keys)
    assert all(disk_chunk_cache.is_own_name(n) and "/" not in n and ".." not in n
               for n in names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    assert [cache.get(k) for k in keys] == [k.encode() for k in keys]


def test_disk_modes_are_0700_and_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        cache = DiskChunkCache(tmp_path / "a" / "b", 100)
        cache.put("k#0", b"secret-ish")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    (file,) = (tmp_path / "a" / "b").iterdir()
    assert stat.S_IMODE(file.stat().st_mode) == 0o600


CRASHING_CACHE = """
import os, sys
from kafka_tiers.objectstore.disk_chunk_cache import DiskChunkCache
first = DiskChunkCache(sys.argv[1], 1000)
first.put("a#0", b"a" * 10)
first.put("b#0", b"b" * 10)
os._exit(0)  # no close(): the broker crashed (the OS drops its lock on the directory)
"""


def test_disk_restart_deletes_only_its_own_files(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    subprocess.run([sys.executable, "-c", CRASHING_CACHE, str(directory)], check=True,
                   timeout=60)
    assert len(own_files(directory)) == 2
    # an earlier run's temporary file, and things that are not the cache's
    temp = directory / f"kt-chunk-{'1' * 64}.{'2' * 16}.tmp"
    temp.write_bytes(b"partial")
    foreign = directory / "notes.txt"
    foreign.write_bytes(b"keep me")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not yours")
    link = directory / chunk_file_name("link#0")  # our pattern, but a symlink
    link.symlink_to(outside)
    subdir = directory / chunk_file_name("dir#0")  # our pattern, but a directory
    subdir.mkdir()
    (subdir / "inside").write_bytes(b"x")
    lookalike = directory / (chunk_file_name("z#0") + ".bak")
    lookalike.write_bytes(b"y")
    # no close(): the broker crashed
    second = DiskChunkCache(directory, 1000)
    left = sorted(p.name for p in directory.iterdir())
    assert left == sorted([foreign.name, link.name, subdir.name, lookalike.name])
    assert link.is_symlink() and outside.read_bytes() == b"not yours"
    assert foreign.read_bytes() == b"keep me" and (subdir / "inside").exists()
    assert second.get("a#0") is None  # the index is per run
    second.put("c#0", b"c")
    second.close()  # deletes what it wrote, nothing else
    assert sorted(p.name for p in directory.iterdir()) == left


def test_a_second_live_cache_on_the_directory_is_refused_and_deletes_nothing(
        tmp_path: Path) -> None:
    directory = tmp_path / "c"
    first = DiskChunkCache(directory, 1000)
    first.put("a#0", b"a" * 10)
    before = own_files(directory)
    with pytest.raises(ConfigError) as err:
        DiskChunkCache(directory, 1000)
    assert err.value.key == "fetch.chunk.cache.path" and "\n" not in str(err.value)
    assert "in use by another live chunk cache" in str(err.value)
    assert str(directory) in str(err.value)
    assert own_files(directory) == before and first.get("a#0") == b"a" * 10
    # another process (a broker, a command with the broker's settings) is refused too
    ran = subprocess.run([sys.executable, "-c", CRASHING_CACHE, str(directory)],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0 and "in use by another live chunk cache" in ran.stderr
    assert own_files(directory) == before
    first.close()  # releases the directory
    second = DiskChunkCache(directory, 1000)
    second.close()


def test_a_second_manager_on_the_brokers_cache_path_is_refused(tmp_path: Path) -> None:
    from kafka_tiers.remote.local import LocalRemoteStorageManager

    settings = {"dir": str(tmp_path / "tier"), "fetch.chunk.cache.class": "disk",
                "fetch.chunk.cache.path": str(tmp_path / "cache")}
    broker = LocalRemoteStorageManager()
    broker.configure(settings)
    other = LocalRemoteStorageManager()
    with pytest.raises(ConfigError, match="in use by another live chunk cache"):
        other.configure(settings)
    broker.close()
    other.configure(settings)  # free again
    other.close()


@pytest.mark.parametrize("damage", ["truncate", "flip", "grow", "delete"])
def test_damaged_or_vanished_file_is_a_miss(tmp_path: Path, damage: str) -> None:
    cache = DiskChunkCache(tmp_path / "c", 1000)
    cache.put("seg.log#3", b"0123456789")
    path = tmp_path / "c" / chunk_file_name("seg.log#3")
    if damage == "truncate":
        path.write_bytes(b"01234")
    elif damage == "flip":
        path.write_bytes(b"0123X56789")
    elif damage == "grow":
        path.write_bytes(b"0123456789+")
    else:
        path.unlink()
    assert cache.get("seg.log#3") is None
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries, stats.bytes) == (0, 1, 0, 0)
    assert not path.exists()
    cache.put("seg.log#3", b"0123456789")  # downloaded again
    assert cache.get("seg.log#3") == b"0123456789"


def test_unusable_directory_is_a_config_error(tmp_path: Path) -> None:
    plain = tmp_path / "file"
    plain.write_bytes(b"")
    for path in (plain, plain / "sub"):
        with pytest.raises(ConfigError) as err:
            DiskChunkCache(path, 100)
        assert err.value.key == "fetch.chunk.cache.path"
        assert "fetch.chunk.cache.path" in str(err.value) and str(path) in str(err.value)
        assert "\n" not in str(err.value)
    assert plain.read_bytes() == b""


def test_disk_write_failure_keeps_nothing_and_raises_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DiskChunkCache(tmp_path / "c", 1000)

    def no_space(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(disk_chunk_cache.os, "replace", no_space)
    cache.put("k#0", b"data")
    monkeypatch.undo()
    assert cache.get("k#0") is None
    assert list((tmp_path / "c").iterdir()) == []  # no temporary file left


def test_disk_reads_racing_evictions_are_whole_or_miss(tmp_path: Path) -> None:
    cache = DiskChunkCache(tmp_path / "c", 4 * 4096)
    value = {f"k{i}": bytes([i]) * 4096 for i in range(8)}
    stop = threading.Event()
    bad: list[object] = []

    def reader() -> None:
        while not stop.is_set():
            for key, expected in value.items():
                try:
                    got = cache.get(key)
                except Exception as exc:  # never: a race is a miss
                    bad.append(exc)
                    return
                if got is not None and got != expected:
                    bad.append(key)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in readers:
        t.start()
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        for key, data in value.items():
            cache.put(key, data)
    stop.set()
    for t in readers:
        t.join(WAIT)
    assert not bad
    assert cache.stats().hits > 0 and cache.stats().bytes <= 4 * 4096


# -- the loader ------------------------------------------------------------------------------


class CountingLoad:
    """A load that counts its calls, optionally waits for a gate, fails the first ``fail``."""

    def __init__(self, data: bytes = b"chunk", *, gate: threading.Event | None = None,
                 fail: int = 0, delay: float = 0.0) -> None:
        self.data = data
        self.gate = gate
        self.fail = fail
        self.delay = delay
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self) -> bytes:
        with self.lock:
            self.calls += 1
            call = self.calls
        if self.gate is not None:
            assert self.gate.wait(WAIT)
        if self.delay:
            time.sleep(self.delay)
        if call <= self.fail:
            raise RetriableRemoteStorageError(f"store down (call {call})")
        return self.data


def run_threads(n: int, target: Callable[[], object]) -> tuple[list[object], list[BaseException]]:
    results: list[object] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(n)

    def body() -> None:
        start.wait()
        try:
            got = target()
        except BaseException as exc:
            with lock:
                errors.append(exc)
        else:
            with lock:
                results.append(got)

    threads = [threading.Thread(target=body) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive(), "a reader hung"
    return results, errors


@pytest.mark.parametrize("kind", ["memory", "disk", "none"])
def test_sixteen_concurrent_readers_cause_one_load(kind: str, tmp_path: Path) -> None:
    cache = {"memory": lambda: MemoryChunkCache(1 << 20),
             "disk": lambda: DiskChunkCache(tmp_path / "c", 1 << 20),
             "none": lambda: None}[kind]()
    loader = ChunkLoader(cache, threads=4)
    load = CountingLoad(b"x" * 1000, delay=0.2)
    results, errors = run_threads(16, lambda: loader.get("seg.log#0", load))
    assert not errors and results == [b"x" * 1000] * 16
    assert load.calls == 1 and loader.downloads == 1
    if cache is not None:
        assert loader.get("seg.log#0", load) == b"x" * 1000 and load.calls == 1
        cache.close()
    loader.close()


def test_a_failed_load_poisons_nothing() -> None:
    cache = MemoryChunkCache(1 << 20)
    loader = ChunkLoader(cache)
    load = CountingLoad(b"ok", delay=0.2, fail=1)
    results, errors = run_threads(8, lambda: loader.get("k#0", load))
    assert results == [] and len(errors) == 8  # every waiter got the one load's error
    assert all(isinstance(e, RetriableRemoteStorageError) for e in errors)
    assert load.calls == 1 and not cache.contains("k#0")
    assert loader.get("k#0", load) == b"ok"  # the retry loads again
    assert load.calls == 2
    stats = loader.stats()
    assert (stats.downloads, stats.download_failures, stats.in_flight) == (1, 1, 0)
    loader.close()


def test_close_fails_waiters_at_once() -> None:
    loader = ChunkLoader(MemoryChunkCache(1 << 20), threads=1)
    gate_p = threading.Event()
    blocked = CountingLoad(gate=gate_p)
    assert loader.prefetch("p#0", blocked)  # the pool's thread is busy ...
    assert loader.prefetch("p#1", CountingLoad())  # ... so this one waits in the queue
    gate = threading.Event()
    load = CountingLoad(gate=gate)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            loader.get("k#0", load)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for t in readers:
        t.start()
    deadline = time.monotonic() + WAIT
    while load.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # the three others wait for the first one's load
    loader.close()
    deadline = time.monotonic() + 2.0
    while len(errors) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    # the waiters failed at once; the reader running the load is in the store's hands
    assert len(errors) == 3 and all(isinstance(e, RetriableRemoteStorageError) for e in errors)
    gate.set()  # its load ends later: it gets the same error and nothing is kept
    for t in readers:
        t.join(WAIT)
        assert not t.is_alive()
    assert len(errors) == 4 and isinstance(errors[3], RetriableRemoteStorageError)
    assert load.calls == 1 and loader.cache is not None and not loader.cache.contains("k#0")
    gate_p.set()
    assert loader.stats().in_flight == 0 and loader.stats().downloads <= 2
    with pytest.raises(RetriableRemoteStorageError):
        loader.get("k#0", load)
    with pytest.raises(RetriableRemoteStorageError):
        loader.get_many([("a", load), ("b", load)])
    assert loader.prefetch("q#0", load) is False


def test_get_many_keeps_the_order_and_runs_in_parallel() -> None:
    loader = ChunkLoader(MemoryChunkCache(1 << 20), threads=4)
    loads = [CountingLoad(bytes([i]) * 10, delay=0.3 - 0.05 * i) for i in range(5)]
    started = time.monotonic()
    got = loader.get_many([(f"seg#{i}", load) for i, load in enumerate(loads)])
    elapsed = time.monotonic() - started
    assert got == [bytes([i]) * 10 for i in range(5)]
    assert elapsed < 0.9  # sequential would take 1.0 s
    assert [load.calls for load in loads] == [1] * 5
    # all cached now: no load runs again
    assert loader.get_many([(f"seg#{i}", load) for i, load in enumerate(loads)]) == got
    assert [load.calls for load in loads] == [1] * 5
    loader.close()


def test_get_many_raises_the_first_failure_in_order() -> None:
    cache = MemoryChunkCache(1 << 20)
    loader = ChunkLoader(cache, threads=2)
    ok = CountingLoad(b"a")
    bad1 = CountingLoad(b"b", fail=1, delay=0.1)
    bad2 = CountingLoad(b"c", fail=1)
    with pytest.raises(RetriableRemoteStorageError, match="call 1"):
        loader.get_many([("a", ok), ("b", bad1), ("c", bad2)])
    assert loader.get_many([("a", ok), ("b", bad1), ("c", bad2)]) == [b"a", b"b", b"c"]
    assert ok.calls == 1 and bad1.calls == 2 and bad2.calls == 2
    loader.close()


def test_prefetch_fills_the_cache_and_counts_its_hits() -> None:
    cache = MemoryChunkCache(1 << 20)
    loader = ChunkLoader(cache, threads=2)
    loads = {f"seg#{i}": CountingLoad(bytes([i])) for i in range(3)}
    assert all(loader.prefetch(k, f) for k, f in loads.items())
    deadline = time.monotonic() + WAIT
    while not all(cache.contains(k) for k in loads) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loader.prefetch("seg#0", loads["seg#0"]) is False  # cached: nothing to do
    assert [loader.get(k, f) for k, f in loads.items()] == [b"\0", b"\1", b"\2"]
    assert all(f.calls == 1 for f in loads.values())
    stats = loader.stats()
    assert (stats.downloads, stats.prefetches, stats.prefetch_hits) == (3, 3, 3)
    loader.get("seg#0", loads["seg#0"])  # a second read is an ordinary hit
    assert loader.stats().prefetch_hits == 3
    loader.close()


def test_reader_joining_a_running_prefetch_counts_a_prefetch_hit() -> None:
    loader = ChunkLoader(MemoryChunkCache(1 << 20), threads=1)
    gate = threading.Event()
    load = CountingLoad(gate=gate)
    loader.prefetch("k#0", load)
    deadline = time.monotonic() + WAIT
    while load.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    threading.Timer(0.1, gate.set).start()
    assert loader.get("k#0", load) == b"chunk" and load.calls == 1
    assert loader.stats().prefetch_hits == 1
    loader.close()


def test_prefetch_queue_is_bounded_and_never_delays_readers() -> None:
    loader = ChunkLoader(MemoryChunkCache(1 << 20), threads=1, max_pending=2)
    gate = threading.Event()
    blocker = CountingLoad(gate=gate)
    assert loader.prefetch("busy#0", blocker)  # takes the only thread
    deadline = time.monotonic() + WAIT
    while blocker.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    queued = [CountingLoad(b"p") for _ in range(4)]
    assert [loader.prefetch(f"p#{i}", f) for i, f in enumerate(queued)] == [
        True, True, False, False]
    assert loader.stats().prefetches_dropped == 2
    # the pool is busy and two prefetches wait: a reader's parallel read still completes,
    # on its own thread, and a reader of a queued prefetch runs it itself
    reads = [CountingLoad(bytes([i])) for i in range(3)]
    started = time.monotonic()
    assert loader.get_many([(f"r#{i}", f) for i, f in enumerate(reads)]) == [
        b"\0", b"\1", b"\2"]
    assert loader.get("p#0", queued[0]) == b"p"
    assert time.monotonic() - started < 2.0
    assert queued[0].calls == 1
    gate.set()
    loader.close()


def test_prefetch_without_a_cache_does_nothing() -> None:
    loader = ChunkLoader(None)
    load = CountingLoad()
    assert loader.prefetch("k#0", load) is False
    assert loader.stats() == LoaderStats(0, 0, 0, 0, 0, 0)
    assert loader.get("k#0", load) == b"chunk" and loader.get("k#0", load) == b"chunk"
    assert load.calls == 2  # nothing kept without a cache
    loader.close()


class BrokenCache(MemoryChunkCache):
    def put(self, key: str, data: bytes) -> None:
        raise OSError("disk gone")


def test_a_failing_cache_does_not_fail_or_hang_readers() -> None:
    loader = ChunkLoader(BrokenCache(1 << 20))
    load = CountingLoad(delay=0.1)
    results, errors = run_threads(4, lambda: loader.get("k#0", load))
    assert not errors and results == [b"chunk"] * 4 and load.calls == 1
    assert loader.stats().in_flight == 0
    loader.close()


class LateCache(MemoryChunkCache):
    """Misses each key's first lookup although it holds it: another reader's load put it
    there between this reader's miss and its claim of the key."""

    def __init__(self) -> None:
        super().__init__(1 << 20)
        self.seen: set[str] = set()

    def get(self, key: str) -> bytes | None:
        if key not in self.seen:
            self.seen.add(key)
            return None
        return super().get(key)


def test_a_load_that_ended_before_the_claim_is_not_repeated() -> None:
    cache = LateCache()
    cache.put("k#0", b"kept")
    cache.put("k#1", b"kept1")
    loader = ChunkLoader(cache)
    load = CountingLoad()
    assert loader.get("k#0", load) == b"kept"
    assert loader.get_many([("k#1", load), ("k#0", load)]) == [b"kept1", b"kept"]
    assert load.calls == 0 and loader.downloads == 0
    loader.close()


def test_get_many_with_a_key_twice_loads_it_once() -> None:
    loader = ChunkLoader(MemoryChunkCache(1 << 20), threads=2)
    a, b = CountingLoad(b"a", delay=0.05), CountingLoad(b"b", delay=0.05)
    assert loader.get_many([("a", a), ("b", b), ("a", a)]) == [b"a", b"b", b"a"]
    assert (a.calls, b.calls) == (1, 1)
    loader.close()


def test_close_ends_the_pool_threads() -> None:
    before = set(threading.enumerate())

    def pool_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate()
                if t.name == "kafka-tiers-chunk" and t not in before and t.is_alive()]

    loader = ChunkLoader(MemoryChunkCache(1 << 20), threads=3)
    loader.get_many([(f"k#{i}", CountingLoad(delay=0.02)) for i in range(6)])
    assert pool_threads()
    loader.close()
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and pool_threads():
        time.sleep(0.01)
    assert not pool_threads()


# -- a segment forgotten while its chunks download -------------------------------------------


def test_a_download_in_flight_during_a_discard_is_not_kept() -> None:
    cache = MemoryChunkCache(1 << 20)
    loader = ChunkLoader(cache, threads=2)
    started, release = threading.Event(), threading.Event()

    def slow() -> bytes:
        started.set()
        assert release.wait(WAIT)
        return b"old"

    results, errors = [], []
    reader = threading.Thread(target=lambda: results.append(loader.get("seg.log#0", slow)))
    reader.start()
    assert started.wait(WAIT)
    cache.put("seg.log#1", b"cached")
    assert loader.discard_prefix("seg.log#") == 1  # the segment is deleted meanwhile
    release.set()
    reader.join(WAIT)
    assert results == [b"old"] and not errors  # the reader still gets its bytes
    assert not cache.contains("seg.log#0") and cache.stats().entries == 0
    # a download that starts after the discard is kept, and another prefix never affected
    assert loader.get("seg.log#0", lambda: b"new") == b"new" and cache.contains("seg.log#0")
    loader.close()


class DiscardingDuringPut(MemoryChunkCache):
    """Runs a discard of the loader while a put of a chunk is being written."""

    loader: ChunkLoader

    def put(self, key: str, data: bytes) -> None:
        self.loader.discard_prefix("seg.log#")  # lands before this put has stored
        super().put(key, data)


def test_a_put_racing_a_discard_is_undone() -> None:
    cache = DiscardingDuringPut(1 << 20)
    loader = cache.loader = ChunkLoader(cache)
    assert loader.get("seg.log#0", lambda: b"x") == b"x"
    assert not cache.contains("seg.log#0")
    assert loader.get("other.log#0", lambda: b"y") == b"y"
    assert cache.contains("other.log#0")  # not under the discarded prefix
    loader.close()


def test_a_segment_deleted_while_its_chunk_downloads_leaves_nothing_cached(
        tmp_path: Path) -> None:
    from kafka_tiers.api.cluster import TopicPartition
    from kafka_tiers.api.storage import (
        LogSegmentData,
        RemoteLogSegmentId,
        RemoteLogSegmentMetadata,
    )
    from kafka_tiers.remote.local import LocalRemoteStorageManager

    rsm = LocalRemoteStorageManager()
    rsm.configure({"dir": str(tmp_path / "tier"), "chunk.size": "100"})
    seg = tmp_path / "seg"
    seg.mkdir()
    (seg / "log").write_bytes(b"L" * 300)
    for name in ("index", "time", "txn", "snap"):
        (seg / name).write_bytes(b"\0" * 8)
    md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TopicPartition("t", 0)), 0, 9,
                                  1, 0, 1, 300, {0: 0})
    rsm.copy_log_segment_data(md, LogSegmentData(seg / "log", seg / "index", seg / "time",
                                                 seg / "txn", seg / "snap", b"0\n1\n0 0\n"))
    store = rsm.object_store
    real_get = store.get
    opened, release = threading.Event(), threading.Event()

    def get_then_wait(key: str, byte_range: object = None) -> object:
        stream = real_get(key, byte_range)  # opened: its bytes come even after the delete
        if key.endswith(".log"):
            opened.set()
            assert release.wait(WAIT)
        return stream

    store.get = get_then_wait  # type: ignore[method-assign]
    read: list[bytes] = []

    def fetch() -> None:
        with rsm.fetch_log_segment(md, 0, 99) as stream:
            read.append(stream.read())

    reader = threading.Thread(target=fetch)
    reader.start()
    assert opened.wait(WAIT)
    rsm.delete_log_segment_data(md)
    release.set()
    reader.join(WAIT)
    assert read == [b"L" * 100]
    cache = rsm.chunk_loader.cache
    assert cache is not None and cache.stats().entries == 0
    rsm.close()
