"""The JBOD commands against a running :class:`~kafka_tiers.broker.Broker` with two log dirs,
as a new user would run them: produce, `log-dirs plan`, `reassign --execute` (through the
broker's admin channel, while a producer keeps appending), `--verify`, `log-dirs describe`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker import Broker
from kafka_tiers.config import BrokerConfig
from kafka_tiers.log.errors import LogClosedError
from kafka_tiers.log.records import RecordBatch


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafka_tiers", *args], capture_output=True,
                          text=True, timeout=120)


def values(broker: Broker, tp: TopicPartition) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        res = broker.fetch(tp, offset)
        if not res.records:
            return out
        pos = 0
        while pos < len(res.records):
            b = RecordBatch(res.records, pos)
            out += [r.value or b"" for r in b.records() if r.offset >= offset]
            pos += b.size
        offset = res.next_offset


def test_plan_and_reassign_a_running_broker(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    props.write_text(f"broker.id=1\nlog.dirs={d1},{d2}\nlog.segment.bytes=16384\n"
                     "remote.log.storage.enable=false\n")
    broker = Broker(BrokerConfig.from_file(props)).start()
    try:
        broker.create_topic("orders", 3)  # new replicas go to the emptiest dir: d1, d2, d1
        placed = {p: broker.log_manager.log_dir_of(TopicPartition("orders", p))
                  for p in range(3)}
        assert placed == {0: d1, 1: d2, 2: d1}
        sent_to: dict[int, list[bytes]] = {0: [], 2: []}
        for p, rounds in ((0, 200), (2, 120)):  # d1 holds far more than d2
            for i in range(rounds):
                batch = [b"v%d-%d" % (i, k) for k in range(10)]
                broker.produce(TopicPartition("orders", p), batch)
                sent_to[p] += batch
        plan = tmp_path / "plan.json"
        proc = cli("log-dirs", "plan", "--config", str(props), "--output", str(plan))
        assert proc.returncode == 0, proc.stderr
        moves = json.loads(plan.read_text())["partitions"]
        assert len(moves) == 1 and moves[0]["log_dirs"] == [str(d2)]
        tp = TopicPartition("orders", moves[0]["partition"])
        sent = sent_to[tp.partition]
        stop = threading.Event()
        uncertain: list[bytes] = []

        def producer() -> None:
            n = 0
            while not stop.is_set():
                value = b"live-%d" % n
                n += 1
                try:
                    broker.produce(tp, [value])
                except LogClosedError:  # the swap closed the log under this call: the
                    uncertain.append(value)  # record may or may not have landed
                    continue
                sent.append(value)

        thread = threading.Thread(target=producer)
        thread.start()
        target = str(d2)
        try:
            proc = cli("reassign", "--config", str(props), "--reassignment-json-file",
                       str(plan), "--execute")
            assert proc.returncode == 0, proc.stderr
            assert f"orders-{tp.partition} -> {target}: done" in proc.stdout
        finally:
            stop.set()
            thread.join()
        assert str(broker.log_manager.log_dir_of(tp)) == target
        got = values(broker, tp)
        assert [v for v in got if v not in uncertain] == sent  # nothing lost, nothing twice
        assert all(got.count(v) <= 1 for v in uncertain)
        proc = cli("reassign", "--config", str(props), "--reassignment-json-file", str(plan),
                   "--verify")
        assert proc.returncode == 0 and "1 of 1 replica(s) in their requested dir" in proc.stdout
        proc = cli("log-dirs", "describe", "--config", str(props), "--format", "json")
        doc = json.loads(proc.stdout)
        where = {d["path"]: [(p["topic"], p["partition"]) for p in d["partitions"]]
                 for d in doc["log_dirs"]}
        assert ("orders", tp.partition) in where[target]
    finally:
        broker.shutdown()
