"""``kafka-tiers log-dirs describe|plan`` and ``kafka-tiers reassign --execute|--verify``:
human and JSON output, with and without a running broker, one-line errors."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.admin_channel import AdminChannel
from kafka_tiers.cli import cli
from kafka_tiers.cli.reassign import parse_duration
from kafka_tiers.log.log_manager import LogManager
from tests.jbod.helpers import CONFIG, produce, read_values, value

SIZES = {0: 3000, 1: 500, 2: 1500, 3: 200}


@pytest.fixture
def broker_dirs(tmp_path: Path) -> tuple[Path, list[Path]]:
    """Two log dirs, every partition of ``orders`` in the first; returns (config, dirs)."""
    dirs = [tmp_path / "disk1", tmp_path / "disk2"]
    # written as broker 1 writes them (a meta.properties naming no broker is refused)
    m = LogManager(dirs, CONFIG, meta_properties={"version": "1", "node.id": "1"})
    m.startup()
    for p, n in SIZES.items():
        tp = TopicPartition("orders", p)
        m.get_or_create_log(tp, log_dir=dirs[0])
        produce(m, tp, 0, n)
    m.shutdown()
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=1\nlog.dirs={dirs[0]},{dirs[1]}\nlog.segment.bytes=16384\n")
    return config, dirs


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.stdout


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafka_tiers", *args], capture_output=True,
                          text=True, timeout=60)


def test_describe_json_and_table(broker_dirs) -> None:
    config, dirs = broker_dirs
    code, out = invoke("log-dirs", "describe", "--config", str(config), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["version"] == 1 and [d["path"] for d in doc["log_dirs"]] == list(map(str, dirs))
    first, second = doc["log_dirs"]
    assert first["is_live"] and second["is_live"] and second["partitions"] == []
    assert first["total_bytes"] > 0 and first["usable_bytes"] > 0
    m = LogManager(dirs, CONFIG)
    m.startup()
    try:
        live = {(p.topic, p.partition): p for p in m.describe_log_dirs()[0].partitions}
    finally:
        m.shutdown()
    for p in first["partitions"]:
        assert set(p) >= {"topic", "partition", "size", "is_temporary", "log_end_offset"}
        assert p["log_end_offset"] == SIZES[p["partition"]] == live[("orders",
                                                                      p["partition"])].log_end_offset
        assert p["size"] == live[("orders", p["partition"])].size and not p["is_temporary"]
    code, out = invoke("log-dirs", "describe", "--config", str(config), "--topics", "nope",
                       "--log-dirs", str(dirs[0]), "--format", "json")
    assert [d["partitions"] for d in json.loads(out)["log_dirs"]] == [[]]
    code, out = invoke("log-dirs", "describe", "--config", str(config))
    assert code == 0
    assert "broker not running" in out and str(dirs[0]) in out and "orders-0" in out
    assert "█" in out and "3000" in out and "live" in out


def test_plan_execute_in_process_and_verify(broker_dirs, tmp_path) -> None:
    config, dirs = broker_dirs
    plan = tmp_path / "plan.json"
    code, out = invoke("log-dirs", "plan", "--config", str(config), "--output", str(plan))
    assert code == 0 and "move orders-0" in out and "after" in out
    doc = json.loads(plan.read_text())
    assert doc["version"] == 1 and doc["partitions"]
    assert all(p["replicas"] == [1] and p["log_dirs"] == [str(dirs[1])] for p in doc["partitions"])
    code, out = invoke("reassign", "--config", str(config), "--reassignment-json-file",
                       str(plan), "--verify")
    assert code == 1 and "not_moved" in out
    code, out = invoke("reassign", "--config", str(config), "--reassignment-json-file",
                       str(plan), "--execute", "--format", "json")
    assert code == 0
    result = json.loads(out)
    assert result["mode"] == "in-process"
    assert all(r["state"] == "done" for r in result["replicas"])
    code, out = invoke("reassign", "--config", str(config), "--reassignment-json-file",
                       str(plan), "--verify", "--format", "json")
    assert code == 0 and all(r["state"] == "done" and r["current_log_dir"] == str(dirs[1])
                             for r in json.loads(out)["replicas"])
    code, out = invoke("reassign", "--config", str(config), "--reassignment-json-file",
                       str(plan), "--verify")
    assert code == 0 and "in their requested dir" in out
    before = {d: 0 for d in map(str, dirs)}
    _c, out = invoke("log-dirs", "describe", "--config", str(config), "--format", "json")
    for d in json.loads(out)["log_dirs"]:
        before[d["path"]] = sum(p["size"] for p in d["partitions"])
    total = sum(before.values())
    assert max(before.values()) < 0.7 * total  # the plan evened the dirs out
    m = LogManager(dirs, CONFIG)
    m.startup()
    try:
        for p, n in SIZES.items():
            tp = TopicPartition("orders", p)
            got = read_values(m, tp)
            assert [o for o, _ in got] == list(range(n))
            assert all(v == value(tp, o) for o, v in got)
    finally:
        m.shutdown()


def test_reassign_through_a_running_broker(broker_dirs, tmp_path) -> None:
    config, dirs = broker_dirs
    m = LogManager(dirs, CONFIG)
    m.startup()
    AdminChannel(m).attach(poll_ms=20)
    m.start_scheduler(tick_seconds=0.02)
    try:
        tp = TopicPartition("orders", 2)
        later = TopicPartition("later", 0)
        request = tmp_path / "move.json"
        request.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 2, "replicas": [1], "log_dirs": [str(dirs[1])]},
            {"topic": "later", "partition": 0, "replicas": [1], "log_dirs": [str(dirs[1])]},
            {"topic": "orders", "partition": 3, "replicas": [1, 2],
             "log_dirs": ["any", "/data/x"]}]}))
        res = CliRunner().invoke(cli, ["reassign", "--config", str(config),
                                       "--reassignment-json-file", str(request), "--execute",
                                       "--no-wait"])
        assert res.exit_code == 0, res.output
        assert "give --bootstrap-server to move replicas between brokers" in res.stderr
        assert "orders-3@broker2" in res.stderr
        assert m.wait_for_moves(20)
        assert m.log_dir_of(tp) == dirs[1]
        assert m.mover.pending == {later: dirs[1]}  # remembered until the replica exists
        m.get_or_create_log(later)
        assert m.log_dir_of(later) == dirs[1]
        code, out = invoke("reassign", "--config", str(config), "--reassignment-json-file",
                           str(request), "--verify", "--format", "json")
        states = {(r["topic"], r["partition"]): r["state"] for r in json.loads(out)["replicas"]}
        assert code == 0 and states == {("orders", 2): "done", ("later", 0): "done",
                                         ("orders", 3): "done"}
        back = tmp_path / "back.json"
        back.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 2, "replicas": [1], "log_dirs": [str(dirs[0])]}]}))
        code, out = invoke("reassign", "--config", str(config), "--reassignment-json-file",
                           str(back), "--execute", "--format", "json")
        assert code == 0 and json.loads(out)["mode"] == "broker"
        assert json.loads(out)["replicas"][0]["state"] == "done"
        assert m.log_dir_of(tp) == dirs[0]
        m.mark_log_dir_offline(dirs[1], OSError(errno.EIO, "disk gone"))
        code, out = invoke("log-dirs", "describe", "--config", str(config), "--format", "json")
        live = {d["path"]: d["is_live"] for d in json.loads(out)["log_dirs"]}
        assert live == {str(dirs[0]): True, str(dirs[1]): False}
        code, out = invoke("log-dirs", "describe", "--config", str(config))
        assert "broker running" in out and "OFFLINE" in out
    finally:
        m.shutdown()


def test_bad_requests_are_one_line_errors(broker_dirs, tmp_path) -> None:
    config, dirs = broker_dirs
    cases = {
        "outside": (str(tmp_path / "elsewhere"), "is not a log dir of broker 1"),
        "relative": ("disk2", "neither 'any' nor an absolute path"),
        "dotdot": (f"{dirs[1]}/../disk1", "must not contain '..'"),
    }
    for name, (where, message) in cases.items():
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [1], "log_dirs": [where]}]}))
        proc = run("reassign", "--config", str(config), "--reassignment-json-file", str(f),
                   "--execute")
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    only_remote = tmp_path / "remote.json"
    only_remote.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [2, 3]}]}))
    proc = run("reassign", "--config", str(config), "--reassignment-json-file",
               str(only_remote), "--execute")
    assert proc.returncode == 2
    assert "give --bootstrap-server to move replicas between brokers" in proc.stderr
    assert "error: nothing to do on broker 1" in proc.stderr
    assert not list(dirs[1].glob("orders-*"))
    proc = run("reassign", "--config", str(config), "--reassignment-json-file",
               str(only_remote))
    assert proc.returncode == 2 and "--execute or --verify" in proc.stderr


def test_durations() -> None:
    assert parse_duration("10s") == 10 and parse_duration("500ms") == 0.5
    assert parse_duration("2m") == 120 and parse_duration("3") == 3
    with pytest.raises(Exception, match="duration"):
        parse_duration("soon")


def test_admin_channel_refuses_bad_requests_and_times_out(broker_dirs, tmp_path) -> None:
    from kafka_tiers.broker.admin_channel import ADMIN_DIR_NAME, read_status

    config, dirs = broker_dirs
    m = LogManager(dirs, CONFIG)
    m.startup()  # holds the locks, but no scheduler takes requests
    try:
        f = tmp_path / "move.json"
        f.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 1, "replicas": [1], "log_dirs": [str(dirs[1])]}]}))
        proc = run("reassign", "--config", str(config), "--reassignment-json-file", str(f),
                   "--execute", "--timeout", "300ms")
        assert proc.returncode == 2
        assert "did not take request" in proc.stderr and len(proc.stderr.splitlines()) == 1
        admin = dirs[0] / ADMIN_DIR_NAME
        (admin / "reassign-bad-1.json").write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "../../etc", "partition": 0, "log_dir": str(dirs[1])}]}))
        channel = AdminChannel(m)
        assert channel.poll() == 2  # the queued request from the CLI, and the bad one
        assert "topic" in read_status(dirs, "bad-1")["error"]
        assert not list(admin.glob("reassign-*.json"))
        assert m.wait_for_moves(20)
        channel.poll()
        assert m.log_dir_of(TopicPartition("orders", 1)) == dirs[1]
        (status,) = [read_status(dirs, p.name[len("status-"):-len(".json")])
                     for p in admin.glob("status-*.json") if "bad" not in p.name]
        assert status["complete"] and status["replicas"][0]["state"] == "done"
    finally:
        m.shutdown()
