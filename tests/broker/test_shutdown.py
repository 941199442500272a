"""Shutdown never deadlocks: no component waits for another while holding a lock the other
may need (issue 13: the documented ``with Broker(...)`` snippet hung on exit in 7 of 10 runs,
the broker lock held while the remote log manager waited for its pool, whose task waited for
that lock). Every wait here is bounded: a hang fails the test with every thread's stack."""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from kafka_tiers.api import ObjectStore, TopicPartition
from kafka_tiers.broker import Broker
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
from kafka_tiers.plugins.hookspecs import hookimpl
from kafka_tiers.remote.local import LocalRemoteStorageManager
from tests.broker.helpers import ControlledStore, new_threads, value

#: seconds one shutdown may take before the test fails with every thread's stack
SHUTDOWN_LIMIT = 20.0


def _stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(f"--- thread {names.get(ident, ident)}\n"
                     + "".join(traceback.format_stack(frame))
                     for ident, frame in sys._current_frames().items())


def _bounded(fn: Callable[[], object], what: str, limit: float = SHUTDOWN_LIMIT) -> None:
    """Run ``fn`` in a thread; fail with every thread's stack if it is not done in time."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported below
            errors.append(exc)

    t = threading.Thread(target=run, name=f"test-{what}", daemon=True)
    t.start()
    t.join(limit)
    if t.is_alive():
        stacks = _stacks()
        # the deadlocked threads (a pool's are not daemons) would keep the test process from
        # exiting once the tests are done: end it then, with a failure code
        register = getattr(threading, "_register_atexit", None)
        if register is not None:
            register(lambda: os._exit(1))
        pytest.fail(f"{what} did not finish within {limit} s (deadlock?):\n{stacks}")
    if errors:
        raise errors[0]


class _SlowStore(ControlledStore):
    """Puts take a little while, so copies are in flight when a shutdown starts; counts
    the puts running now."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.in_flight = 0

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        with self._lock:
            self.in_flight += 1
        try:
            time.sleep(0.005)
            return super().put(key, data, length)
        finally:
            with self._lock:
                self.in_flight -= 1


class _Copies:
    def __init__(self) -> None:
        self.copied = threading.Event()

    @hookimpl
    def kafka_tiers_segment_copied(self, topic_partition: TopicPartition, metadata: Any) -> None:
        self.copied.set()


def _tiered_broker(tmp_path: Path, run: int) -> tuple[Broker, _SlowStore, _Copies]:
    plugin = LocalRemoteStorageManager()
    plugin.configure({"dir": str(tmp_path / f"remote-{run}")})
    holder: list[_SlowStore] = []

    def wrap(store: ObjectStore) -> ObjectStore:
        holder.append(_SlowStore(store))
        return holder[0]

    plugin.wrap_object_store(wrap)
    copies = _Copies()
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[copies]))
    broker = Broker({"log.dirs": str(tmp_path / f"logs-{run}"), "broker.id": "1",
                     "remote.log.storage.enable": "true",
                     "remote.log.manager.task.interval.ms": "20",
                     "remote.log.manager.thread.pool.size": "2",
                     "remote.log.manager.task.retry.jitter": "0"},
                    hooks=hooks, remote_storage=plugin, background=True)
    return broker, holder[0], copies


@pytest.mark.slow
def test_shutdown_with_copies_in_flight_finishes_50_times_out_of_50(tmp_path: Path) -> None:
    """50 brokers with tiered topics: segments roll and are copied (by the scheduler and on
    every roll) while the shutdown starts; every shutdown finishes, cleanly."""
    in_flight_at_stop = 0
    for run in range(50):
        broker, store, copies = _tiered_broker(tmp_path, run)
        _bounded(broker.start, f"start {run}")
        tps = [*broker.create_topic("t", 2, {"remote.storage.enable": "true",
                                             "segment.bytes": "1024",
                                             "local.retention.bytes": "2048"}),
               *broker.create_topic("u", 1, {"remote.storage.enable": "true",
                                             "segment.bytes": "1024"})]
        stop = threading.Event()

        def produce(broker: Broker = broker, stop: threading.Event = stop,
                    tps: list[TopicPartition] = tps) -> None:
            i = 0
            while not stop.is_set():
                try:
                    broker.produce(tps[i % len(tps)], [value(i + j, 100) for j in range(5)])
                except Exception:  # the broker stopped under it: expected
                    return
                i += 5

        producer = threading.Thread(target=produce, name=f"producer-{run}", daemon=True)
        producer.start()
        assert copies.copied.wait(10), "no segment was copied"
        in_flight_at_stop += store.in_flight > 0
        _bounded(broker.shutdown, f"shutdown {run}")
        stop.set()
        producer.join(5)
        assert not producer.is_alive()
        assert not broker.started
        assert (tmp_path / f"logs-{run}" / ".kafka_cleanshutdown").exists()
        _bounded(broker.shutdown, f"second shutdown {run}", 2)  # idempotent
    assert not [n for n in new_threads() if n.startswith(("kafka-tiers", "tcp-server"))]
    # the runs did stop with copies running (the case the issue saw deadlock)
    assert in_flight_at_stop >= 5, in_flight_at_stop


@pytest.mark.slow
def test_the_documented_snippet_exits(tmp_path: Path) -> None:
    """docs/tiered-storage.md's ``with Broker(...)`` snippet, ten times, each bounded."""
    from kafka_tiers.config import BrokerConfig

    for run in range(10):
        props = tmp_path / f"server-{run}.properties"
        props.write_text(f"log.dirs={tmp_path / f'logs-{run}'}\nremote.log.storage.enable=true\n"
                         f"remote.storage.manager.class=local\n"
                         f"rsm.config.dir={tmp_path / f'tier-{run}'}\n")

        def snippet(props: Path = props) -> None:
            with Broker(BrokerConfig.from_file(props)) as broker:
                broker.create_topic("orders", 6, {"remote.storage.enable": "true",
                                                  "local.retention.ms": "3600000",
                                                  "remote.retention.period": "2592000000"})

        _bounded(snippet, f"snippet run {run}", 10)


def test_a_stop_asked_for_during_the_start_is_not_lost(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal handler runs on the thread that is starting the broker and asks for a stop:
    the start stops the broker once it is up (it used to ignore the stop: not started yet)."""
    broker = Broker({"log.dirs": str(tmp_path / "logs")}, background=True)
    real = broker._start

    def start_interrupted(timeout: float | None) -> None:
        real(timeout)
        broker.shutdown()  # what a SIGTERM handler on this thread does mid-start

    monkeypatch.setattr(broker, "_start", start_interrupted)
    _bounded(broker.start, "start")
    assert not broker.started
    assert broker.log_manager is None
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()


def test_a_shutdown_from_another_thread_during_the_start_waits_and_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker({"log.dirs": str(tmp_path / "logs")}, background=True)
    real = broker._start
    starting, go = threading.Event(), threading.Event()

    def slow_start(timeout: float | None) -> None:
        starting.set()
        go.wait(10)
        real(timeout)

    monkeypatch.setattr(broker, "_start", slow_start)
    starter = threading.Thread(target=broker.start, daemon=True)
    starter.start()
    assert starting.wait(10)
    stopper = threading.Thread(target=broker.shutdown, daemon=True)
    stopper.start()
    time.sleep(0.1)
    assert stopper.is_alive(), "shutdown returned while the start was still running"
    go.set()
    stopper.join(SHUTDOWN_LIMIT)
    starter.join(SHUTDOWN_LIMIT)
    assert not stopper.is_alive() and not starter.is_alive(), _stacks()
    assert not broker.started
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()


def test_a_start_while_another_thread_starts_returns_once_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker({"log.dirs": str(tmp_path / "logs")}, background=False)
    real = broker._start
    starting, go = threading.Event(), threading.Event()

    def slow_start(timeout: float | None) -> None:
        starting.set()
        go.wait(10)
        real(timeout)

    monkeypatch.setattr(broker, "_start", slow_start)
    first = threading.Thread(target=broker.start, daemon=True)
    first.start()
    assert starting.wait(10)
    seen: list[bool] = []
    second = threading.Thread(target=lambda: seen.append(broker.start().started), daemon=True)
    second.start()
    time.sleep(0.1)
    assert second.is_alive(), "start() returned while another thread was still starting"
    go.set()
    first.join(SHUTDOWN_LIMIT)
    second.join(SHUTDOWN_LIMIT)
    assert seen == [True]
    _bounded(broker.shutdown, "shutdown")


class _RollReader:
    """A hook plugin that, on a roll, waits a little and then reads the log manager (as a
    plugin reporting sizes might): it runs under the rolling log's lock."""

    def __init__(self) -> None:
        self.broker: Broker | None = None
        self.rolling = threading.Event()
        self.read: list[bool] = []

    @hookimpl
    def kafka_tiers_segment_rolled(self, topic_partition: TopicPartition, base_offset: int,
                                   next_offset: int) -> None:
        assert self.broker is not None
        lm = self.broker.log_manager
        if self.rolling.is_set() or lm is None:
            return
        self.rolling.set()
        time.sleep(0.5)  # the shutdown reaches the log manager meanwhile
        self.read.append(lm.get_log(topic_partition) is not None)


def test_the_log_manager_closes_logs_without_holding_its_lock(tmp_path: Path) -> None:
    """A roll's callbacks run under the log's lock; the log manager's shutdown closed each
    log (waiting for that lock) while holding its own lock, which a roll hook reading the
    log manager needs: a deadlock."""
    reader = _RollReader()
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[reader]))
    broker = Broker({"log.dirs": str(tmp_path / "logs")}, hooks=hooks, background=False)
    reader.broker = broker
    broker.start()
    tp = broker.create_topic("t", 1, {"segment.bytes": "1024"})[0]
    def produce() -> None:
        try:
            for i in range(20):
                broker.produce(tp, [value(i, 300)])
        except Exception:  # the broker stopped under it: expected
            return

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    assert reader.rolling.wait(10)
    _bounded(broker.shutdown, "shutdown during a roll")
    producer.join(SHUTDOWN_LIMIT)
    assert reader.read == [True]
