"""MultipartObjectStore.put: one request for small objects, concurrent bounded-memory multi-part
uploads above that, part sizes grown to fit max_parts, and abort-on-failure that waits for the
parts in flight and re-raises the original error."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

import pytest

from kafka_tiers.api import ByteRange, RemoteStorageError
from tests.remote.backends import MemoryMultipartStore


class MemoryStore(MemoryMultipartStore):
    """The in-memory multi-part store of ``tests/remote/backends.py`` with concurrency settings
    and instrumented parts: ``upload_part`` may sleep or fail, and records when parts start and
    end (from any thread); the abort may fail."""

    def __init__(self, part_size: int = 10, concurrency: int = 1, max_parts: int | None = None,
                 delay: float = 0.0, fail_part: int | None = None,
                 fail_abort: bool = False) -> None:
        super().__init__(part_size)
        self.upload_concurrency = concurrency
        self.max_parts = max_parts
        self.delay = delay
        self.fail_part = fail_part
        self.fail_abort = fail_abort
        self.part_threads: set[str] = set()
        self.finished_parts: list[int] = []
        self.uploaded_bytes = 0
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.events: list[str] = []  # "start N", "end N", "abort": the order things happened

    def upload_part(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        with self.lock:
            self.events.append(f"start {part_number}")
            self.part_threads.add(threading.current_thread().name)
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if part_number == self.fail_part:
                self.calls.append(f"part{part_number}")
                raise ConnectionResetError(f"injected: part {part_number} lost")
            time.sleep(self.delay)
            tag = super().upload_part(key, upload_id, part_number, data)
            with self.lock:
                self.finished_parts.append(part_number)
                self.uploaded_bytes += len(data)
            return tag
        finally:
            with self.lock:
                self.active -= 1
                self.events.append(f"end {part_number}")

    def complete_multipart_upload(self, key: str, upload_id: str, parts: Sequence[str]) -> None:
        numbers = [int(tag.rpartition("-")[2]) for tag in parts]
        assert numbers == list(range(1, len(parts) + 1)), numbers  # in part-number order
        super().complete_multipart_upload(key, upload_id, parts)

    def abort_multipart_upload(self, key: str, upload_id: str) -> None:
        with self.lock:
            self.events.append("abort")
        if self.fail_abort:
            self.calls.append("abort")
            raise ConnectionRefusedError("injected: the abort cannot get through")
        super().abort_multipart_upload(key, upload_id)


class Source(io.RawIOBase):
    """Yields ``data`` in reads of at most ``step`` bytes; calls ``on_read`` with the number of
    bytes read so far after each read; raises OSError once ``fail_at`` bytes are read."""

    def __init__(self, data: bytes, step: int = 7, fail_at: int | None = None,
                 on_read: Callable[[int], None] | None = None) -> None:
        self._data = data
        self._pos = 0
        self._step = step
        self._fail_at = fail_at
        self._on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._fail_at is not None and self._pos >= self._fail_at:
            raise OSError(5, "injected: Input/output error")
        n = min(len(buffer), self._step, len(self._data) - self._pos)
        if self._fail_at is not None:
            n = min(n, self._fail_at - self._pos)
        buffer[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        if self._on_read is not None:
            self._on_read(self._pos)
        return n


def payload(size: int) -> bytes:
    return bytes(i % 251 for i in range(size))


def stream(data: bytes, **kwargs: Any) -> BinaryIO:
    return Source(data, **kwargs)  # type: ignore[return-value]


@pytest.mark.parametrize("concurrency", [1, 3])
@pytest.mark.parametrize("size", [0, 1, 9, 10])
@pytest.mark.parametrize("known", [True, False])
def test_up_to_one_part_is_one_put_object(concurrency: int, size: int, known: bool) -> None:
    store = MemoryStore(concurrency=concurrency)
    data = payload(size)
    assert store.put("k", stream(data), size if known else None) == size
    assert store.calls == ["put_object"] and store.objects["k"] == data


@pytest.mark.parametrize("concurrency", [1, 3])
@pytest.mark.parametrize("known", [True, False])
def test_an_exact_multiple_of_the_part_size(concurrency: int, known: bool) -> None:
    store = MemoryStore(concurrency=concurrency)
    data = payload(40)
    assert store.put("k", stream(data), 40 if known else None) == 40
    assert store.calls[0] == "create" and store.calls[-1] == "complete"
    assert sorted(store.calls[1:-1]) == ["part1", "part2", "part3", "part4"]
    assert store.objects["k"] == data and store.uploads == {}


@pytest.mark.parametrize("concurrency", [1, 2, 4])
def test_unknown_length_is_read_to_its_end(concurrency: int) -> None:
    store = MemoryStore(concurrency=concurrency, delay=0.01)
    data = payload(123)
    assert store.put("k", stream(data), None) == 123
    assert sorted(store.finished_parts) == list(range(1, 14))  # 12 full parts and 3 bytes
    assert store.objects["k"] == data
    with store.get("k", ByteRange(8, 12)) as got:
        assert got.read() == data[8:13]


def test_parts_in_flight_and_parts_in_memory_are_bounded() -> None:
    concurrency, part = 3, 10
    store = MemoryStore(part_size=part, concurrency=concurrency, delay=0.05)
    worst = [0]

    def on_read(position: int) -> None:
        with store.lock:  # bytes read but not yet uploaded: what the put holds
            held = position - store.uploaded_bytes
        worst[0] = max(worst[0], held)

    data = payload(part * 12 + 5)
    assert store.put("k", stream(data, step=part, on_read=on_read), len(data)) == len(data)
    assert store.objects["k"] == data
    assert store.peak == concurrency  # reached, never exceeded
    # a part read while `concurrency` are in flight: concurrency + 1 held, never more
    assert worst[0] == part * (concurrency + 1)


def test_sequential_mode_uses_no_threads_and_holds_two_parts_at_most() -> None:
    store = MemoryStore(part_size=10, concurrency=1)
    worst = [0]

    def on_read(position: int) -> None:
        worst[0] = max(worst[0], position - store.uploaded_bytes)

    before = threading.active_count()
    seen: list[int] = []
    real = store.upload_part

    def upload_part(*args: Any) -> str:
        seen.append(threading.active_count())
        return real(*args)

    store.upload_part = upload_part  # type: ignore[method-assign]
    data = payload(95)
    assert store.put("k", stream(data, step=10, on_read=on_read)) == 95
    assert store.part_threads == {threading.current_thread().name}
    assert set(seen) == {before}
    assert store.calls == ["create"] + [f"part{n}" for n in range(1, 11)] + ["complete"]
    assert worst[0] == 20  # the first two parts, read to see whether there is more
    assert store.objects["k"] == data


def test_concurrent_uploads_run_on_named_threads_that_end_with_the_put() -> None:
    store = MemoryStore(concurrency=3, delay=0.01)
    store.upload_thread_name = "my-plugin-upload"
    assert store.put("k", stream(payload(55)), 55) == 55
    assert store.part_threads and all(n.startswith("my-plugin-upload")
                                      for n in store.part_threads)
    assert not [t for t in threading.enumerate() if t.name.startswith("my-plugin-upload")]


@pytest.mark.parametrize("known", [True, False])
def test_a_known_length_starts_the_upload_before_the_second_part_is_read(known: bool) -> None:
    store = MemoryStore(part_size=10)
    calls_when_second_read: list[list[str]] = []

    def on_read(position: int) -> None:
        if position == 20:  # the second part has just been read
            calls_when_second_read.append(list(store.calls))

    data = payload(30)
    assert store.put("k", stream(data, step=10, on_read=on_read), 30 if known else None) == 30
    assert calls_when_second_read == [["create", "part1"] if known else []]
    assert store.objects["k"] == data


def test_max_parts_grows_the_part_size_for_a_known_length() -> None:
    store = MemoryStore(part_size=10, concurrency=2, max_parts=4)
    assert store.part_size_for(None) == 10
    assert store.part_size_for(40) == 10
    assert store.part_size_for(41) == 11
    assert store.part_size_for(1000) == 250
    data = payload(95)
    assert store.put("k", stream(data), 95) == 95
    assert len(store.finished_parts) == 4  # parts of 24 bytes: 24+24+24+23
    assert store.objects["k"] == data


def test_without_max_parts_the_part_size_never_grows() -> None:
    store = MemoryStore(part_size=10)
    assert store.part_size_for(10**12) == 10


def test_an_unknown_length_needing_too_many_parts_is_refused_and_aborted() -> None:
    store = MemoryStore(part_size=10, concurrency=2, max_parts=4)
    store.part_size_setting = "my.part.size"
    with pytest.raises(RemoteStorageError, match=r"k needs more than 4 parts of 10 bytes: "
                                                 r"raise my\.part\.size") as info:
        store.put("k", stream(payload(45)), None)
    assert not info.value.retriable
    assert store.calls.count("abort") == 1 and "complete" not in store.calls
    assert store.objects == {} and store.uploads == {}
    # the same without a setting name: the message names part_size
    plain = MemoryStore(part_size=10, max_parts=2)
    with pytest.raises(RemoteStorageError, match="raise part_size"):
        plain.put("k", stream(payload(21)), None)


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(RemoteStorageError, match="part_size must be > 0"):
        MemoryStore(part_size=0).put("k", stream(b"x"), 1)
    with pytest.raises(RemoteStorageError, match="upload_concurrency"):
        MemoryStore(concurrency=0).put("k", stream(b"x"), 1)


def test_a_failed_part_aborts_once_the_parts_in_flight_end() -> None:
    store = MemoryStore(part_size=10, concurrency=3, delay=0.2, fail_part=3)
    with pytest.raises(ConnectionResetError, match="part 3 lost"):
        store.put("k", stream(payload(100)), 100)
    assert store.calls.count("abort") == 1 and "complete" not in store.calls
    abort = store.events.index("abort")
    starts = [e for e in store.events if e.startswith("start")]
    ends = [e for e in store.events if e.startswith("end")]
    assert len(starts) == len(ends) and all(store.events.index(e) < abort for e in ends)
    assert {1, 2} <= set(store.finished_parts)  # they were in flight and ran to their end
    assert store.objects == {} and store.uploads == {}
    assert len(starts) <= 4  # nothing started after the failure was seen (parts 1-3, maybe 4)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_failed_local_read_aborts_and_raises_the_oserror(concurrency: int) -> None:
    store = MemoryStore(part_size=10, concurrency=concurrency, delay=0.05)
    with pytest.raises(OSError, match="Input/output error") as info:
        store.put("k", stream(payload(100), fail_at=35), 100)
    assert type(info.value) is OSError
    assert store.calls.count("abort") == 1 and "complete" not in store.calls
    assert store.events[-1] == "abort"  # after every part ended
    assert sorted(store.finished_parts) == [1, 2, 3]
    assert store.objects == {} and store.uploads == {}


def test_a_failed_abort_logs_a_warning_and_the_original_error_is_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore(part_size=10, concurrency=2, fail_part=2, fail_abort=True)
    with caplog.at_level(logging.WARNING, logger="kafka_tiers.api.objectstore"), \
            pytest.raises(ConnectionResetError, match="part 2 lost"):
        store.put("k", stream(payload(50)), 50)
    assert store.calls.count("abort") == 1
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert "could not abort" in message and "k" in message
    assert "the abort cannot get through" in message
    assert record.exc_info is None  # no traceback
    assert store.objects == {}


def test_a_failing_abort_hook_does_not_hide_the_original_error(
        caplog: pytest.LogCaptureFixture) -> None:
    class Store(MemoryStore):
        def abort_failed_upload(self, key: str, upload_id: str) -> None:
            self.calls.append("hook")
            raise RuntimeError("hook broke")

    store = Store(part_size=10, concurrency=2, fail_part=1)
    with caplog.at_level(logging.WARNING), pytest.raises(ConnectionResetError):
        store.put("k", stream(payload(30)), 30)
    assert store.calls.count("hook") == 1
    assert any("hook broke" in r.getMessage() for r in caplog.records)


def test_a_failed_complete_is_aborted_too() -> None:
    class Store(MemoryStore):
        def complete_multipart_upload(self, key: str, upload_id: str,
                                      parts: Sequence[str]) -> None:
            raise TimeoutError("injected: complete timed out")

    store = Store(part_size=10, concurrency=2)
    with pytest.raises(TimeoutError):
        store.put("k", stream(payload(30)), 30)
    assert store.calls.count("abort") == 1 and store.uploads == {}


def test_a_failed_create_has_nothing_to_abort() -> None:
    class Store(MemoryStore):
        def create_multipart_upload(self, key: str) -> str:
            raise ConnectionRefusedError("injected")

    store = Store(part_size=10, concurrency=2)
    with pytest.raises(ConnectionRefusedError):
        store.put("k", stream(payload(30)), 30)
    assert "abort" not in store.calls
