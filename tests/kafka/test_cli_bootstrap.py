"""Our own tools speak the Kafka protocol: ``kafka-tiers topics``, ``cluster``, ``reassign``,
``log-dirs`` and ``place`` given ``--bootstrap-server`` reach the brokers' Kafka listeners
only (kafka-python's admin client), and ``broker start`` / ``cluster start`` open the Kafka
listener and print its bootstrap address."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.cli import cli
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.cli_run import kt

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def cluster(make_kafka_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    """3 brokers in racks /dc1/r1, /dc1/r2, /dc2/r1 with Kafka listeners and 2 log dirs each."""
    c = make_kafka_cluster(3)
    return c


def _internal_topic(c: LocalCluster, name: str, partitions: int = 3, rf: int = 2) -> None:
    with c.client() as client:
        client.create_topic(name, partitions, rf)


def test_describe_and_list_through_the_kafka_protocol_only(cluster: LocalCluster) -> None:
    _internal_topic(cluster, "orders")
    boot = cluster.bootstrap_servers
    code, out, err = run("topics", "describe", "orders", "--bootstrap-server", boot,
                         "--format", "json")
    assert code == 0, err
    parts = json.loads(out)[0]["partitions"]
    assert [p["partition"] for p in parts] == [0, 1, 2]
    assert all(len(p["replicas"]) == 2 and p["leader"] in p["replicas"] for p in parts)
    code, out, err = run("topics", "list", "--bootstrap-server", boot)
    assert code == 0 and out.split() == ["orders"], err
    code, out, err = run("cluster", "describe", "--bootstrap-server", boot, "--format", "json")
    assert code == 0, err
    md = json.loads(out)
    listeners = {f"{b['host']}:{b['port']}" for b in md["brokers"]}
    assert listeners == set(boot.split(","))  # the Kafka listeners, not the internal transport
    assert not listeners & set(cluster.addresses())
    assert md["controller"] in (1, 2, 3)
    # $KAFKA_TIERS_BOOTSTRAP means the same
    code, out, err = run("topics", "list", env={"KAFKA_TIERS_BOOTSTRAP": boot})
    assert code == 0 and out.split() == ["orders"], err


def test_an_unknown_topic_and_an_unreachable_listener_are_one_line(
        cluster: LocalCluster) -> None:
    boot = cluster.bootstrap_servers
    proc = subprocess.run([sys.executable, "-m", "kafka_tiers", "topics", "describe", "nope",
                           "--bootstrap-server", boot], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: unknown topic 'nope'"
    # the internal transport's address is no Kafka listener: refused fast, one line
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = f"127.0.0.1:{s.getsockname()[1]}"
    proc = subprocess.run([sys.executable, "-m", "kafka_tiers", "topics", "list",
                           "--bootstrap-server", free], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach a Kafka listener at "
                                                   f"{free}"), proc.stderr


def test_place_reads_the_live_cluster_through_metadata(cluster: LocalCluster,
                                                       tmp_path: Path) -> None:
    _internal_topic(cluster, "orders", partitions=2, rf=2)
    code, out, err = run("place", "--bootstrap-server", cluster.bootstrap_servers,
                         "--partitions", "3", "--replication-factor", "2", "--topic", "orders",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    # the placement continues the live topic after its two partitions, on its brokers
    assert [p["partition"] for p in doc["partitions"]] == [2, 3, 4]
    assert all(len(set(p["replicas"])) == 2 and set(p["replicas"]) <= {1, 2, 3}
               for p in doc["partitions"])
    ran = kt("place", "--partitions", "1", "--replication-factor", "1")
    assert ran.code == 2 and "give --cluster" in ran.err


def test_broker_start_prints_the_kafka_bootstrap_address(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=1\nlog.dirs={tmp_path / 'logs'}\n"
                     f"metadata.dir={tmp_path / 'md'}\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    proc = subprocess.Popen([sys.executable, "-m", "kafka_tiers", "broker", "start",
                             "--config", str(props), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        doc = json.loads(line)
        assert doc["event"] == "ready" and doc["broker_id"] == 1
        host, _, port = doc["bootstrap_servers"].partition(":")
        assert host == "127.0.0.1" and int(port) > 0
        assert doc["bootstrap_servers"] != doc["address"]
        code, out, err = run("cluster", "describe", "--bootstrap-server",
                             doc["bootstrap_servers"], "--format", "json")
        assert code == 0, err
        assert [b["broker_id"] for b in json.loads(out)["brokers"]] == [1]
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_cluster_start_gives_every_broker_a_kafka_listener(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "kafka_tiers", "cluster", "start",
                             "--brokers", "2", "--dir", str(tmp_path / "c"), "--format", "json",
                             "--set", "listeners=PLAINTEXT://127.0.0.1:9092",
                             "--set", "advertised.listeners=PLAINTEXT://elsewhere:9092"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, start_new_session=True)
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
        assert doc["event"] == "running"
        per_broker = [b["bootstrap_servers"] for b in doc["brokers"]]
        assert doc["bootstrap_servers"] == ",".join(per_broker) and len(set(per_broker)) == 2
        # free ports, advertised as bound: listeners and advertised.listeners are per broker
        assert "127.0.0.1:9092" not in per_broker
        assert all(b.startswith("127.0.0.1:") for b in per_broker)
        code, out, err = run("cluster", "describe", "--bootstrap-server",
                             doc["bootstrap_servers"], "--format", "json")
        assert code == 0, err
        assert sorted(b["broker_id"] for b in json.loads(out)["brokers"]) == [1, 2]
    finally:
        os.kill(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert ("listeners=PLAINTEXT://127.0.0.1:9092, advertised.listeners=PLAINTEXT://"
            "elsewhere:9092 ignored") in err


@pytest.fixture
def jbod_cluster(make_kafka_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    """3 brokers with Kafka listeners and two log dirs each."""
    return make_kafka_cluster(3, name="jbod", log_dirs_per_broker=2)


def test_log_dirs_describe_through_describe_log_dirs(jbod_cluster: LocalCluster) -> None:
    c = jbod_cluster
    with c.client() as client:
        client.create_topic("events", 2, 3)
        client.produce("events", 0, [b"x" * 100] * 5)
    boot = c.bootstrap_servers
    code, out, err = run("log-dirs", "describe", "--bootstrap-server", boot, "--broker-ids", "2",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [b["broker"] for b in doc["brokers"]] == [2]
    dirs = doc["brokers"][0]["log_dirs"]
    assert {d["path"] for d in dirs} == set(c.broker_config(2)["log.dirs"].split(","))
    held = {(p["topic"], p["partition"]): p["size"] for d in dirs for p in d["partitions"]}
    assert set(held) == {("events", 0), ("events", 1)} and held[("events", 0)] > 500
    code, out, err = run("log-dirs", "describe", "--bootstrap-server", boot)
    assert code == 0 and out.count("log dir(s)") == 3, err
    ran = kt("log-dirs", "describe", "--bootstrap-server", boot, "--broker-ids", "9")
    assert ran.code == 2 and "broker 9 is not in the cluster" in ran.err


def test_reassign_and_consume_through_the_kafka_protocol(jbod_cluster: LocalCluster,
                                                          tmp_path: Path) -> None:
    """The JBOD reassignment file (replicas and a log dir per replica) applied through
    AlterReplicaLogDirs + AlterPartitionReassignments, verified through
    ListPartitionReassignments + DescribeLogDirs; the records read back through Fetch."""
    c = jbod_cluster
    with c.client() as client:
        before = client.create_topic("moving", 1, 2, broker_ids=[1, 2])[0]
        client.produce("moving", 0, [b"a", b"b", b"c"])
    boot = c.bootstrap_servers
    target = [3, before[0]]
    dest = c.broker_config(3)["log.dirs"].split(",")[1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": target, "log_dirs": [dest, "any"]}]}))
    for command in (("reassign",), ("cluster", "reassign")):
        code, out, err = run(*command, "--reassignment-json-file", str(plan), "--execute",
                             "--bootstrap-server", boot, "--format", "json", "--timeout", "60")
        assert code == 0, err
        assert json.loads(out)["partitions"][0]["state"] == "done"
        code, out, err = run(*command, "--reassignment-json-file", str(plan), "--verify",
                             "--bootstrap-server", boot)
        assert code == 0 and "done" in out, err
    with c.client() as client:
        assert client.describe_topic("moving")[0]["replicas"] == target
    dirs = {d["path"]: d for d in json.loads(run(
        "log-dirs", "describe", "--bootstrap-server", boot, "--broker-ids", "3",
        "--format", "json")[1])["brokers"][0]["log_dirs"]}
    assert [p["partition"] for p in dirs[dest]["partitions"]] == [0]
    code, out, err = run("topics", "consume", "moving", "--bootstrap-server", boot,
                         "--format", "json")
    assert code == 0, err
    assert [r["value"] for r in json.loads(out)] == ["a", "b", "c"]


def test_log_dirs_plan_through_the_kafka_protocol_keeps_every_replica(
        jbod_cluster: LocalCluster, tmp_path: Path) -> None:
    c = jbod_cluster
    with c.client() as client:
        for i in range(4):
            client.create_topic(f"t{i}", 1, 2, broker_ids=[1, 2])
            client.produce(f"t{i}", 0, [b"y" * 2000] * (i + 1))
    # pile broker 1's replicas into its first dir so there is something to even out
    first = c.broker_config(1)["log.dirs"].split(",")[0]
    pile = tmp_path / "pile.json"
    assignment = {}
    with c.client() as client:
        for i in range(4):
            assignment[f"t{i}"] = client.describe_topic(f"t{i}")[0]["replicas"]
    pile.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": r,
         "log_dirs": [first if b == 1 else "any" for b in r]} for t, r in assignment.items()]}))
    code, _out, err = run("reassign", "--bootstrap-server", c.bootstrap_servers,
                          "--reassignment-json-file", str(pile), "--execute", "--timeout", "60")
    assert code == 0, err
    code, out, err = run("log-dirs", "plan", "--bootstrap-server", c.bootstrap_servers,
                         "--broker-id", "1", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["partitions"], "nothing planned although one dir holds every replica"
    for e in doc["partitions"]:
        assert e["replicas"] == assignment[e["topic"]]  # the replica set is kept as it is
        assert [d for b, d in zip(e["replicas"], e["log_dirs"], strict=True) if b != 1] == [
            "any"]
    ran = kt("log-dirs", "plan", "--bootstrap-server", c.bootstrap_servers)
    assert ran.code == 2 and "--broker-id" in ran.err


def test_topics_lifecycle_through_the_kafka_protocol(cluster: LocalCluster) -> None:
    boot = cluster.bootstrap_servers
    code, out, err = run("topics", "create", "orders", "--partitions", "3",
                         "--replication-factor", "2", "--config", "retention.ms=3600000",
                         "--bootstrap-server", boot, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert sorted(doc["assignment"]) == ["0", "1", "2"]
    assert all(len(set(r)) == 2 for r in doc["assignment"].values())
    ran = kt("topics", "create", "orders", "--bootstrap-server", boot)
    assert ran.code == 2 and ran.err_lines == [
        "error: CreateTopics orders: TOPIC_ALREADY_EXISTS (give --partitions to add "
        "partitions)"], ran.err
    code, out, err = run("topics", "create", "orders", "--partitions", "2",
                         "--bootstrap-server", boot, "--format", "json")
    assert code == 0, err
    assert sorted(json.loads(out)["assignment"]) == ["3", "4"]  # CreatePartitions continues
    code, out, err = run("topics", "create", "pinned", "--partitions", "2",
                         "--replication-factor", "2", "--broker-ids", "1,3",
                         "--bootstrap-server", boot, "--format", "json")
    assert code == 0, err
    assert all(sorted(r) == [1, 3] for r in json.loads(out)["assignment"].values())
    code, out, err = run("topics", "produce", "orders", "--partition", "1", "hello", "world",
                         "--bootstrap-server", boot)
    assert code == 0 and "offsets 0..1" in out, err
    code, out, err = run("topics", "consume", "orders", "--partition", "1",
                         "--bootstrap-server", boot, "--format", "json")
    assert code == 0, err
    assert [(r["offset"], r["value"]) for r in json.loads(out)] == [(0, "hello"), (1, "world")]
    code, out, err = run("cluster", "elect-leaders", "--topic", "orders",
                         "--bootstrap-server", boot)
    assert code == 0 and "orders-0" in out, err
    code, out, err = run("topics", "delete", "orders", "--bootstrap-server", boot)
    assert code == 0 and "deleted orders" in out, err
    with cluster.client() as client:
        md = client.metadata()
    assert sorted(t["topic"] for t in md["topics"] if not t["error"]) == ["pinned"]


def test_a_port_that_is_no_kafka_listener_is_named() -> None:
    """A port that accepts connections but does not speak Kafka (say, the internal transport)
    fails within the timeout with one line saying so."""
    import socket

    from kafka_tiers.cli.kafka_admin import KafkaAdmin, KafkaAdminError

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        addr = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(KafkaAdminError, match=f"^{addr} accepted a connection but no Kafka "
                                                  "listener answered within 1s"):
            KafkaAdmin([addr], timeout=1.0)
