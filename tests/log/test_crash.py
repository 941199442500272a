"""Crash tests: a writer process is SIGKILLed at random points; after restart every flushed
record is present and nothing corrupt is served."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_tiers.log.log_manager import LogManager

from .crash_writer import CONFIG, TP
from .helpers import read_all

WRITER = Path(__file__).with_name("crash_writer.py")
ROOT = Path(__file__).resolve().parents[2]


def _run_and_kill(log_dir: Path, seed: int, rng: random.Random) -> int:
    """Start the writer, let it flush a random number of times, SIGKILL it mid-stream.
    Returns the highest offset it reported flushed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(WRITER), str(log_dir), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    flushed = 0
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("start"), proc.stderr.read() if proc.stderr else first
        for _ in range(rng.randint(1, 25)):
            line = proc.stdout.readline()
            assert line.startswith("flushed"), line
            flushed = int(line.split()[1])
        time.sleep(rng.random() * 0.02)  # land anywhere inside an append
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return flushed


def _verify(log_dir: Path, flushed: int, check_all: bool) -> int:
    manager = LogManager([log_dir], CONFIG, sanity_check_all=check_all)
    report = manager.startup()
    try:
        assert report.clean_shutdown == {str(log_dir): False}
        log = manager.get_log(TP)
        assert log is not None
        assert log.log_end_offset >= flushed
        served = read_all(log)
        assert [o for o, _ in served] == list(range(log.log_end_offset))
        for offset, value in served:
            assert value == b"rec-%d" % offset
        return log.log_end_offset
    finally:
        manager.shutdown()
        (log_dir / ".kafka_cleanshutdown").unlink()  # the next writer run must look unclean


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_loses_no_flushed_record(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    log_dir = tmp_path / "logs"
    end = 0
    for round_ in range(4):
        flushed = _run_and_kill(log_dir, seed * 100 + round_, rng)
        assert flushed >= end  # the writer continued from the recovered end
        end = _verify(log_dir, flushed, check_all=bool(round_ % 2))


@pytest.mark.slow
def test_sigkill_many_rounds(tmp_path: Path) -> None:
    rng = random.Random(7)
    log_dir = tmp_path / "logs"
    for round_ in range(15):
        flushed = _run_and_kill(log_dir, 700 + round_, rng)
        _verify(log_dir, flushed, check_all=bool(round_ % 2))
