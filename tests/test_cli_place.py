"""``kafka-tiers place`` and ``kafka-tiers quickstart``: human and JSON output, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.cli import cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "kafka_tiers" / "samples" / "multi-level-cluster.json"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafka_tiers", *args], capture_output=True,
                          text=True, timeout=60)


def place_json(*extra: str) -> dict:
    res = CliRunner().invoke(cli, ["place", "--cluster", str(SAMPLE), "--partitions", "12",
                                   "--replication-factor", "3", "--format", "json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_json_is_kafka_reassignment_format() -> None:
    doc = place_json("--topic", "orders", "--placer", "multi-level-rack", "--seed", "5")
    assert doc["version"] == 1 and set(doc) == {"version", "partitions"}
    parts = doc["partitions"]
    assert [p["partition"] for p in parts] == list(range(12))
    for p in parts:
        assert set(p) == {"topic", "partition", "replicas"} and p["topic"] == "orders"
        assert len(set(p["replicas"])) == 3 and p["replicas"][0] != 6  # 6 is fenced


def test_seed_makes_it_deterministic_and_options_apply() -> None:
    a = place_json("--seed", "9")
    assert a == place_json("--seed", "9")
    sub = place_json("--broker-ids", "1,2,3,4", "--seed", "9")
    assert {r for p in sub["partitions"] for r in p["replicas"]} <= {1, 2, 3, 4}
    simple = place_json("--force-simple", "--seed", "9", "--placer", "multi-level-rack")
    assert simple["partitions"] and simple != place_json("--seed", "9",
                                                         "--placer", "multi-level-rack")


def test_existing_topic_continues_after_its_last_partition(tmp_path: Path) -> None:
    first = place_json("--topic", "orders", "--seed", "1")
    cluster = json.loads(SAMPLE.read_text())
    cluster["assignments"] = first
    f = tmp_path / "cluster.json"
    f.write_text(json.dumps(cluster))
    res = CliRunner().invoke(cli, ["place", "--cluster", str(f), "--partitions", "4",
                                   "--replication-factor", "3", "--topic", "orders",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    assert [p["partition"] for p in json.loads(res.output)["partitions"]] == [12, 13, 14, 15]


def test_placer_and_seed_from_server_properties(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("broker.replica.placer=simple\nplacer.seed=4\n")
    res = CliRunner().invoke(cli, ["place", "--cluster", str(SAMPLE), "--partitions", "3",
                                   "--replication-factor", "2", "--config", str(props)])
    assert res.exit_code == 0, res.output
    assert "placer simple" in res.output


def test_table_shows_brokers_levels_and_spread() -> None:
    res = run("place", "--cluster", str(SAMPLE), "--partitions", "12",
              "--replication-factor", "3", "--placer", "multi-level-rack", "--seed", "2")
    assert res.returncode == 0, res.stderr
    text = res.stdout
    for fragment in ("per broker", "per level 1 (3 domains)", "per level 2 (6 domains)",
                     "/dc2/rack1", "balance (max - min)", "level 1 spread", "goal 3"):
        assert fragment in text, fragment


@pytest.mark.parametrize(("args", "message"), [
    (["--cluster", "/nonexistent.json"], "error: cannot read /nonexistent.json"),
    (["--replication-factor", "30"], "error: replication factor 30 is larger than the 12"),
    (["--replication-factor", "0"], "error: replication factor must be at least 1, got 0"),
    (["--placer", "nope"], "error: unknown replica placer 'nope'; installed:"),
    (["--topic", "../etc"], "error: topic name '../etc' has characters other than"),
])
def test_errors_are_one_line(args: list[str], message: str) -> None:
    base = {"--cluster": str(SAMPLE), "--partitions": "3", "--replication-factor": "3"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    res = run("place", *flat)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), res.stderr
    assert "Traceback" not in res.stderr


def test_bad_cluster_file_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text('{"brokers": [{"id": 1, "rack": 5}]}')
    res = run("place", "--cluster", str(f), "--partitions", "1", "--replication-factor", "1")
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {f}: brokers[0].rack: expected a string or null"


def test_quickstart_human_and_json(tmp_path: Path) -> None:
    work = tmp_path / "qs"
    res = run("quickstart", "--dir", str(work))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "kafka-tiers quick start" in res.stdout
    assert "replica placer 'multi-level-rack' from kafka-tiers" in text
    assert "per level 1 (3 domains)" in res.stdout
    assert "from the remote tier" in text and "all match" in text
    assert "300 of 300 acknowledged records present after the failover: none lost" in text
    # the printed follow-up commands work on the files it left
    props = work.resolve() / "server.properties"
    assert f"kafka-tiers log-dirs describe --config {props}" in text
    # the broker's server.properties is all the remote commands need (one config dialect)
    assert f"kafka-tiers remote ls --config {props} --topic orders --partition 0" in text
    listed = run("remote", "ls", "--config", str(props), "--topic", "orders", "--partition", "0")
    assert listed.returncode == 0 and "segments" in listed.stdout, listed.stderr
    res = run("quickstart", "--format", "json", "--partitions", "6", "--dir", str(work))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["placer"] == "multi-level-rack"
    assert len(doc["placement"]["partitions"]) == 6
    assert doc["quality"]["levels"][0]["min_spread"] == 3
    tiering = doc["tiering"]
    assert tiering["read_back"]["matches"] and tiering["read_back"]["from_remote"] > 0
    described = run("log-dirs", "describe", "--config", tiering["server_properties"],
                    "--format", "json")
    assert described.returncode == 0, described.stderr
    dirs = {d["path"]: d for d in json.loads(described.stdout)["log_dirs"]}
    assert set(dirs) == set(tiering["log_dirs"])
    placed = {(p["topic"], p["partition"]) for d in dirs.values() for p in d["partitions"]}
    # the quick start's Kafka consumer looked up its group coordinator: Kafka's offsets topic
    assert placed == {("orders", 0), ("orders", 1), ("__consumer_offsets", 0)}
    listed = run("remote", "ls", "--storage", "local", "--set", f"dir={tiering['remote_dir']}",
                 "--topic", "orders", "--partition", "0", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["segments"]) == tiering["copied_segments"]
    dumped = run("dump-log", tiering["active_segment"], "--format", "json")
    assert dumped.returncode == 0, dumped.stderr
    cluster = doc["cluster"]
    assert cluster["placer"] == "multi-level-rack" and cluster["brokers"] == 3
    assert all(len(set(r)) == 3 for r in cluster["assignment"].values())
    killed = cluster["killed_broker"]
    assert [p["leader"] for p in cluster["after"] if p["partition"] == 0] != [killed]
    assert all(killed not in p["isr"] for p in cluster["after"])
    assert cluster["present_after_failover"] == cluster["acknowledged"] == 300


def test_quickstart_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("not the quick start's")
    res = run("quickstart", "--dir", str(tmp_path))
    assert res.returncode == 2
    assert "is not empty and was not made by the quick start" in res.stderr
    assert (tmp_path / "precious.txt").exists()


def test_help_is_instant_and_lists_commands() -> None:
    code = ("import sys, kafka_tiers.cli as c\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in sys.modules if m.startswith(('rich', 'stevedore', "
            "'kafka_tiers.placement', 'kafka_tiers.log'))]\nprint('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "HEAVY []" in out.stdout
    for name in ("place", "plugins", "quickstart", "conformance"):
        assert name in out.stdout


def test_place_on_a_running_clusters_file_continues_its_topics(tmp_path: Path) -> None:
    """The cluster.json of `cluster start` lists brokers and addresses only: place asks that
    cluster for its topics, so a topic's new partitions continue after its last one; a
    stopped cluster is one warning, and the file's brokers are used alone."""
    from kafka_tiers.api import BrokerInfo, ClusterView
    from kafka_tiers.cluster.local_cluster import LocalCluster
    from kafka_tiers.placement.cluster_file import ClusterFile, write_cluster_file
    from tests.cli_run import kt

    c = LocalCluster(tmp_path / "c", 2, transport="tcp").start()
    f = tmp_path / "cluster.json"
    args = ("place", "--cluster", str(f), "--partitions", "2", "--replication-factor", "2",
            "--topic", "orders", "--format", "json")
    try:
        write_cluster_file(f, ClusterFile(ClusterView([BrokerInfo(1, None), BrokerInfo(2, None)]),
                                          addresses={b: c.broker(b).address for b in (1, 2)}))
        with c.client() as client:
            client.create_topic("orders", 3, 2)
        ran = kt(*args)
        assert ran.code == 0 and not ran.err_lines, ran.err
        assert [p["partition"] for p in json.loads(ran.out)["partitions"]] == [3, 4]
    finally:
        c.close()
    ran = kt(*args)
    assert ran.code == 0
    assert len(ran.err_lines) == 1 and ran.err_lines[0].startswith(
        f"warning: {f}: the cluster at 127.0.0.1:") and "placing without its current topics" in (
        ran.err_lines[0])
    assert [p["partition"] for p in json.loads(ran.out)["partitions"]] == [0, 1]
