"""kafka_tiers.cli.stopping.StopOnSignal in-process: the deadline, the last flush, the ERROR
line, a second signal, and a shutdown that finishes in time (the exit function is recorded
instead of ending the test process)."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import threading
import time

import pytest

from kafka_tiers.cli.stopping import EXIT_FORCED, TIMEOUT_KEY, StopOnSignal


def test_an_overrun_flushes_logs_one_error_line_and_exits(
        caplog: pytest.LogCaptureFixture) -> None:
    exited: list[int] = []
    flushed = threading.Event()
    done = threading.Event()

    def exit_fn(code: int) -> None:
        exited.append(code)
        done.set()

    guard = StopOnSignal(500, "broker 7", flush=flushed.set, exit_fn=exit_fn)
    caplog.set_level(logging.INFO, logger="kafka_tiers.cli.stopping")
    try:
        start = time.monotonic()
        guard.arm()
        assert done.wait(5)
        took = time.monotonic() - start
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert exited == [EXIT_FORCED]
    assert flushed.is_set()
    assert 0.3 < took < 1.0, took
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert f"broker 7 did not stop within {TIMEOUT_KEY}=500 ms" in errors[0].getMessage()


def test_a_shutdown_in_time_disarms_the_deadline() -> None:
    exited: list[int] = []
    guard = StopOnSignal(300, "broker 7", exit_fn=exited.append)
    try:
        guard.arm()
        guard.done()
        time.sleep(0.6)
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert exited == []


def test_signals_ask_for_the_shutdown_once(caplog: pytest.LogCaptureFixture) -> None:
    exited: list[int] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    guard = StopOnSignal(10_000, "broker 7", exit_fn=exited.append)
    caplog.set_level(logging.INFO, logger="kafka_tiers.cli.stopping")
    try:
        guard.install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert guard.requested.wait(5)
        os.kill(os.getpid(), signal.SIGINT)  # a second signal: only a line
        time.sleep(0.1)
        guard.done()
    finally:
        faulthandler.cancel_dump_traceback_later()
        for s, handler in old.items():
            signal.signal(s, handler)
    messages = [r.getMessage() for r in caplog.records]
    assert any("SIGTERM received; shutting down" in m for m in messages), messages
    assert any("SIGINT received; the shutdown is under way" in m for m in messages), messages
    assert exited == []
