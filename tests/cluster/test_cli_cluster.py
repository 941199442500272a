"""The cluster commands as a new user runs them: ``cluster start`` in the foreground, then
``topics``, ``cluster describe``, ``cluster reassign`` and ``elect-leaders`` against it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.cli import cli
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.cluster.processes import cluster_start

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


def test_cluster_start_from_one_command_then_topics(tmp_path: Path) -> None:
    d = tmp_path / "c"
    with cluster_start(d, status_interval=0.3) as lines:
        code, out = run("topics", "create", "orders", "--partitions", "3",
                        "--replication-factor", "3", "--dir", str(d))
        assert code == 0 and "created 3 partition(s) of orders" in out
        code, out = run("topics", "produce", "orders", "--partition", "1", "hello", "world",
                        "--dir", str(d))
        assert code == 0 and "offsets 0..1" in out
        code, out = run("topics", "consume", "orders", "--partition", "1", "--dir", str(d),
                        "--format", "json")
        assert [r["value"] for r in json.loads(out)] == ["hello", "world"]
        code, out = run("cluster", "describe", "--dir", str(d), "--format", "json")
        md = json.loads(out)
        assert sorted(b["rack"] for b in md["brokers"]) == ["/dc1/r1", "/dc1/r2", "/dc2/r1"]
        assert md["controller"] in (1, 2, 3)
        parts = md["topics"][0]["partitions"]
        assert all(sorted(p["replicas"]) == [1, 2, 3] for p in parts)
        code, out = run("cluster", "elect-leaders", "--dir", str(d), "--topic", "orders")
        assert code == 0 and "orders-0" in out
    assert "controller: broker" in "".join(lines)


@pytest.fixture
def tcp_cluster(tmp_path: Path):
    c = LocalCluster(tmp_path / "tcp", 3, transport="tcp", log_dirs_per_broker=2,
                     overrides={"listeners": "PLAINTEXT://127.0.0.1:0"}).start()
    yield c
    c.close()


@pytest.mark.parametrize("command", [("cluster", "reassign"), ("reassign",)],
                         ids=["cluster-reassign", "reassign"])
def test_reassign_command_moves_replicas_across_brokers_into_log_dirs(
        tcp_cluster, tmp_path, command: tuple[str, ...]) -> None:
    # `kafka-tiers reassign --bootstrap-server` (the JBOD command) drives the same controller,
    # through the Kafka protocol (--bootstrap-server names Kafka listeners)
    c = tcp_cluster
    topic = "r-" + "-".join(command)
    boot = c.bootstrap_servers
    code, out = run("topics", "create", topic, "--partitions", "1", "--replication-factor", "2",
                    "--broker-ids", "1,2", "--bootstrap-server", boot, "--format", "json")
    assert code == 0
    before = json.loads(out)["assignment"]["0"]
    code, _ = run("topics", "produce", topic, "a", "b", "c", "--bootstrap-server", boot)
    assert code == 0
    target = [3, before[0]]
    dest = c.broker_config(3)["log.dirs"].split(",")[1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target, "log_dirs": [dest, "any"]}]}))
    code, out = run(*command, "--reassignment-json-file", str(plan), "--execute",
                    "--bootstrap-server", boot, "--format", "json")
    assert code == 0, out
    assert json.loads(out)["partitions"][0]["state"] == "done"
    code, out = run(*command, "--reassignment-json-file", str(plan), "--verify",
                    "--bootstrap-server", boot)
    assert code == 0 and "done" in out
    code, out = run("topics", "consume", topic, "--bootstrap-server", boot, "--format", "json")
    assert [r["value"] for r in json.loads(out)] == ["a", "b", "c"]


def test_cli_errors_are_one_line(tcp_cluster) -> None:
    boot = tcp_cluster.bootstrap_servers
    proc = subprocess.run([sys.executable, "-m", "kafka_tiers", "topics", "describe", "nope",
                           "--bootstrap-server", boot], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: unknown topic 'nope'"


def test_a_port_in_use_is_one_error_line_and_the_log_dirs_are_released(tmp_path: Path) -> None:
    """A broker whose port is taken refuses to start with one line naming the address (no
    traceback), and leaves its log dirs unlocked for the next attempt."""
    import socket

    from kafka_tiers.broker import Broker
    from kafka_tiers.cluster.transport import TransportError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        props = tmp_path / "server.properties"
        props.write_text(f"broker.id=1\nlog.dirs={tmp_path / 'logs'}\nport={port}\n")
        proc = subprocess.run(
            [sys.executable, "-m", "kafka_tiers", "broker", "start", "--config", str(props)],
            capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 2
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert lines == [f"error: cannot listen on 127.0.0.1:{port}: address already in use"], (
            proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr

        config = {"broker.id": "1", "log.dirs": str(tmp_path / "logs"), "port": str(port)}
        with pytest.raises(TransportError, match=f"cannot listen on 127.0.0.1:{port}"):
            Broker(config, cluster=True).start()
    # the failed starts released the dirs: a broker on a free port starts on them
    config["port"] = "0"
    with Broker(config, cluster=True).start() as broker:
        assert broker.started


def test_an_unknown_placer_refuses_the_start(tmp_path: Path) -> None:
    """Every broker may become the controller, which places topics: an unknown placer is one
    error line at start, not a failure of the first topic creation."""
    from kafka_tiers.api import PluginError
    from kafka_tiers.broker import Broker

    config = {"broker.id": "1", "log.dirs": str(tmp_path / "logs"), "port": "0",
              "broker.replica.placer": "no-such-placer"}
    with pytest.raises(PluginError, match="unknown replica placer 'no-such-placer'"):
        Broker(config, cluster=True).start()
    props = tmp_path / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    proc = subprocess.run(
        [sys.executable, "-m", "kafka_tiers", "broker", "start", "--config", str(props)],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown replica placer"), proc.stderr
