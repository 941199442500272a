"""``kcat`` (librdkafka's command-line client, Debian's package) against a kafka-tiers broker
and cluster: ``-L`` lists brokers and partitions, ``-P`` produces keyed lines, ``-C`` consumes
them back (by partition and as a balanced group ``-G``), ``-Q`` finds offsets by timestamp.

Every run has a short timeout (socket, metadata and message timeouts in seconds, and a process
timeout), so a broker that does not answer fails the test quickly.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.processes import cluster_start
from tests.kafka.targets import KafkaTarget

PARTITIONS = 3
FAST = ["-X", "socket.timeout.ms=5000", "-X", "api.version.request.timeout.ms=5000",
        "-X", "metadata.request.timeout.ms=5000", "-X", "topic.metadata.refresh.interval.ms=1000"]


@pytest.fixture
def target(system_target: KafkaTarget) -> KafkaTarget:
    return system_target


def run_kcat(kcat: str, bootstrap: str, *args: str, stdin: str | None = None,
             timeout: float = 30.0) -> str:
    """Run kcat; its stdout, or an assertion error with its stderr."""
    proc = subprocess.run([kcat, "-b", bootstrap, *FAST, *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, (f"kcat {' '.join(args)} exited {proc.returncode}:\n"
                                  f"{proc.stderr[-3000:]}")
    return proc.stdout


def metadata(kcat: str, target: KafkaTarget) -> dict[str, Any]:
    return json.loads(run_kcat(kcat, target.bootstrap_servers, "-L", "-J"))


def produce_lines(kcat: str, target: KafkaTarget, topic: str, lines: list[str],
                  *extra: str) -> None:
    run_kcat(kcat, target.bootstrap_servers, "-P", "-t", topic, "-K", ":",
             "-X", "message.timeout.ms=10000", "-X", "acks=all", *extra,
             stdin="\n".join(lines) + "\n")


def consume_all(kcat: str, target: KafkaTarget, topic: str, *extra: str
                ) -> list[dict[str, Any]]:
    out = run_kcat(kcat, target.bootstrap_servers, "-C", "-t", topic, "-o", "beginning", "-e",
                   "-J", *extra)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_kcat_lists_brokers_topics_and_leaders(kcat: str, target: KafkaTarget) -> None:
    topic = f"kl-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, PARTITIONS)
    md = metadata(kcat, target)
    assert {f"{b['name']}" for b in md["brokers"]} == set(target.bootstrap_servers.split(","))
    assert len(md["brokers"]) == target.brokers
    ids = {b["id"] for b in md["brokers"]}
    assert md["controllerid"] in ids
    [t] = [t for t in md["topics"] if t["topic"] == topic]
    assert "error" not in t or not t["error"]
    assert sorted(p["partition"] for p in t["partitions"]) == list(range(PARTITIONS))
    for p in t["partitions"]:
        assert p["leader"] in ids
        reps = [r["id"] for r in p["replicas"]]
        assert len(reps) == min(3, target.brokers) and set(reps) <= ids
        assert p["leader"] in [r["id"] for r in p["isrs"]]


def test_kcat_produces_and_consumes_keyed_lines(kcat: str, target: KafkaTarget) -> None:
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, PARTITIONS)
    lines = [f"key-{i % 11}:line {i:05d} " + "z" * (i % 40) for i in range(400)]
    produce_lines(kcat, target, topic, lines)
    got = consume_all(kcat, target, topic)
    assert sorted(f"{m['key']}:{m['payload']}" for m in got) == sorted(lines)
    by_part: dict[int, list[dict[str, Any]]] = {}
    for m in got:
        by_part.setdefault(m["partition"], []).append(m)
    assert set(by_part) == set(range(PARTITIONS))
    sent_order = {line: i for i, line in enumerate(lines)}
    for p, msgs in by_part.items():
        offsets = [m["offset"] for m in msgs]
        assert offsets == list(range(len(msgs))), f"partition {p}: offsets {offsets[:5]}..."
        seq = [sent_order[f"{m['key']}:{m['payload']}"] for m in msgs]
        assert seq == sorted(seq)
    # one partition alone, from an absolute offset
    part1 = consume_all(kcat, target, topic, "-p", "1", "-o", "2")
    assert [m["offset"] for m in part1] == list(range(2, len(by_part[1])))


def test_kcat_balanced_group_consumes_everything(kcat: str, target: KafkaTarget) -> None:
    topic = f"kg-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, PARTITIONS)
    lines = [f"k{i}:g{i}" for i in range(90)]
    produce_lines(kcat, target, topic, lines)
    out = run_kcat(kcat, target.bootstrap_servers, "-G", f"grp-{uuid.uuid4().hex[:6]}",
                   "-o", "beginning", "-e", "-J", "-X", "session.timeout.ms=6000",
                   "-X", "heartbeat.interval.ms=500", topic, timeout=45)
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert sorted(f"{m['key']}:{m['payload']}" for m in got) == sorted(lines)


def test_kcat_queries_offsets_by_timestamp(kcat: str, target: KafkaTarget) -> None:
    topic = f"kq-{uuid.uuid4().hex[:8]}"
    target.create_topic(topic, 1)
    produce_lines(kcat, target, topic, [f"a:{i}" for i in range(5)], "-p", "0")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce_lines(kcat, target, topic, [f"b:{i}" for i in range(5)], "-p", "0")
    out = run_kcat(kcat, target.bootstrap_servers, "-Q", "-t", f"{topic}:0:{middle}")
    # "<topic> [0]  offset 5": the first record at or after the timestamp
    found = re.findall(r"\[0\]\s+offset\s+(-?\d+)", out)
    assert found == ["5"], out


def test_kcat_against_a_cluster_start_process(kcat: str, tmp_path: Path) -> None:
    """``kafka-tiers cluster start`` (3 brokers on the embedded store, in a process of their
    own) serves kcat from outside: the topic is created with librdkafka's admin client
    (CreateTopics through the placer), then listed, produced to and consumed."""
    from confluent_kafka.admin import AdminClient, NewTopic

    with cluster_start(tmp_path / "cs") as lines:
        found = re.search(r"running; bootstrap (\S+)", "".join(lines))
        assert found, "".join(lines)
        target = KafkaTarget("process", _Bootstrap(found.group(1)))
        admin = AdminClient({"bootstrap.servers": target.bootstrap_servers,
                             "socket.timeout.ms": 5000})
        admin.create_topics([NewTopic("cs-topic", PARTITIONS, 3)],
                            request_timeout=15)["cs-topic"].result(20)
        md = metadata(kcat, target)
        assert len(md["brokers"]) == 3
        [t] = [t for t in md["topics"] if t["topic"] == "cs-topic"]
        assert all(len(p["replicas"]) == 3 for p in t["partitions"])
        lines_in = [f"k{i}:v{i}" for i in range(60)]
        produce_lines(kcat, target, "cs-topic", lines_in)
        got = consume_all(kcat, target, "cs-topic")
        assert sorted(f"{m['key']}:{m['payload']}" for m in got) == sorted(lines_in)


@dataclass
class _Bootstrap:
    bootstrap_servers: str
