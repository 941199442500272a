"""SIGKILL of a broker process during a move, then restart: document 000's four recovery rules,
and nothing acknowledged is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.log_dir_failure import LogDirOfflineError
from kafka_tiers.log.log_manager import LogManager
from tests.jbod.helpers import CONFIG, read_values, value

WORKER = Path(__file__).with_name("move_worker.py")
TP = TopicPartition("jbod", 0)


def run_until_killed(dirs: list[Path], rate: int, crash_at: str, kill_on: str | None) -> int:
    """Run the worker; SIGKILL it when it prints ``kill_on`` (or let it kill itself).
    Returns the highest offset it acknowledged (every record below it must survive)."""
    proc = subprocess.Popen([sys.executable, str(WORKER), ",".join(map(str, dirs)), str(rate),
                             crash_at], stdout=subprocess.PIPE, text=True)
    acked = 0
    deadline = time.monotonic() + 60
    states: list[str] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("acked "):
                acked = max(acked, int(line.split()[1]))
            else:
                states.append(line.strip())
            if kill_on is not None and line.strip() == kill_on:
                proc.send_signal(signal.SIGKILL)
            assert time.monotonic() < deadline, f"the worker never reached {kill_on}: {states}"
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert acked >= 2500
    return acked


def check(manager: LogManager, acked: int) -> None:
    got = read_values(manager, TP)
    assert len(got) >= acked  # nothing acknowledged is lost
    assert [o for o, _ in got] == list(range(len(got)))  # nor duplicated
    assert all(v == value(TP, o) for o, v in got)


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("jbod-"))


@pytest.mark.parametrize("point", ["copying", "before_swap_rename"])
def test_rule1_source_and_future_present_resumes_the_move(tmp_path: Path, point: str) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    if point == "copying":
        acked = run_until_killed(dirs, 150_000, "none", "state copying 1")
    else:
        acked = run_until_killed(dirs, 0, point, None)
    assert names(dirs[0]) == ["jbod-0"]
    assert len(names(dirs[1])) == 1 and names(dirs[1])[0].endswith("-future")
    m = LogManager(dirs, CONFIG)
    report = m.startup()
    try:
        assert [a for a, _ in report.jbod_actions] == ["resumed"]
        assert m.wait_for_moves(30)
        assert m.log_dir_of(TP) == dirs[1]
        check(m, acked)
        assert m.mover.deleter.wait(10)
        assert names(dirs[0]) == [] and names(dirs[1]) == ["jbod-0"]
    finally:
        m.shutdown()


def test_rule2_only_future_present_is_promoted_rule4_delete_dirs_go(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    acked = run_until_killed(dirs, 0, "after_source_rename", None)
    (left,) = names(dirs[0])
    assert left.endswith("-delete")
    assert names(dirs[1])[0].endswith("-future")
    m = LogManager(dirs, CONFIG)
    report = m.startup()
    try:
        actions = sorted(a for a, _ in report.jbod_actions)
        assert actions == ["deleted", "promoted"]
        assert m.log_dir_of(TP) == dirs[1]
        check(m, acked)
        assert m.mover.deleter.wait(10)
        assert names(dirs[0]) == [] and names(dirs[1]) == ["jbod-0"]
    finally:
        m.shutdown()


def test_rule3_only_future_and_an_offline_dir_leaves_it_alone(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    acked = run_until_killed(dirs, 0, "after_source_rename", None)
    (future,) = names(dirs[1])
    before = sorted(os.listdir(dirs[1] / future))
    os.rename(dirs[2], tmp_path / "c-disk")  # the third disk fails: its dir is unusable
    dirs[2].write_bytes(b"not a directory")
    m = LogManager(dirs, CONFIG)
    report = m.startup()
    try:
        assert str(dirs[2]) in report.offline_dirs
        assert ("left", str(dirs[1] / future)) in report.jbod_actions
        assert m.offline_partitions == {TP: dirs[1]}
        assert m.get_log(TP) is None
        with pytest.raises(LogDirOfflineError):
            m.get_or_create_log(TP)
        assert names(dirs[1]) == [future] and sorted(os.listdir(dirs[1] / future)) == before
    finally:
        m.shutdown()
    dirs[2].unlink()
    os.rename(tmp_path / "c-disk", dirs[2])  # the disk is replaced: now rule 2 applies
    m = LogManager(dirs, CONFIG)
    report = m.startup()
    try:
        assert "promoted" in [a for a, _ in report.jbod_actions]
        check(m, acked)
    finally:
        m.shutdown()
