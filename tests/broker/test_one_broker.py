"""One broker: the remote tier is composed in exactly one module, the cluster layer and the log
engine import nothing of the broker assembly, a standalone broker reads the topics file earlier
releases wrote, and the same class serves as a cluster member."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker import TOPICS_FILE, Broker, BrokerError
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    new_threads,
    produce,
    read_values,
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    value,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kafka_tiers"
#: the one module that composes the remote tier
ASSEMBLY = PACKAGE / "broker" / "broker.py"


def _calls(path: Path) -> list[str]:
    """Every ``RemoteLogManager(...)`` construction and ``GuardedRemoteStorage.load(...)``
    call in a module, as ``name@line``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id == "RemoteLogManager":
            found.append(f"RemoteLogManager@{node.lineno}")
        elif (isinstance(fn, ast.Attribute) and fn.attr == "load"
              and isinstance(fn.value, ast.Name) and fn.value.id == "GuardedRemoteStorage"):
            found.append(f"GuardedRemoteStorage.load@{node.lineno}")
    return found


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


#: tools that read the remote tier with no broker (``kafka-tiers remote``, the Spark reader):
#: they open the storage plugin behind its guard, and compose nothing of a broker's tier
OFFLINE_READERS = {"kafka_tiers/cli/remote.py", "kafka_tiers/spark/reading.py"}


def test_the_remote_tier_is_composed_in_exactly_one_module() -> None:
    where = {str(p.relative_to(ROOT)): calls for p in sorted(PACKAGE.rglob("*.py"))
             if (calls := _calls(p))}
    assembly = str(ASSEMBLY.relative_to(ROOT))
    assert sorted(c.split("@")[0] for c in where.pop(assembly, [])) == [
        "GuardedRemoteStorage.load", "RemoteLogManager"]
    elsewhere = {path: calls for path, calls in where.items()
                 if path not in OFFLINE_READERS
                 or any(c.startswith("RemoteLogManager") for c in calls)}
    assert elsewhere == {}, f"a second composition of the remote tier: {elsewhere}"


def test_lower_layers_import_nothing_of_the_broker_assembly() -> None:
    for path in [*sorted((PACKAGE / "cluster").glob("*.py")), *sorted((PACKAGE / "log").glob(
            "*.py"))]:
        if path.name == "local_cluster.py":  # brokers in one process: it starts brokers
            continue
        bad = sorted(m for m in _imports(path)
                     if m == "kafka_tiers.broker" or m.startswith("kafka_tiers.broker."))
        assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"
    # the admin channel lives with the broker, the log manager only runs the job it is given
    assert not (PACKAGE / "log" / "admin_channel.py").exists()
    assert not (PACKAGE / "broker.py").exists()


def test_one_broker_class() -> None:
    classes = [str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("*.py"))
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.ClassDef) and node.name.endswith("Broker")
               and not node.name.endswith(("Error", "Info"))]
    assert classes == [str(ASSEMBLY.relative_to(ROOT))]


def test_a_topics_file_of_an_earlier_release_is_read_with_its_data(tmp_path: Path) -> None:
    """Upgrading keeps a user's topics: the file and the logs an earlier standalone broker left
    are served as they are (nothing migrated, nothing rewritten at start)."""
    broker, _, _ = make_broker(tmp_path)
    broker.create_topic("plain", 2, {"segment.bytes": "4096", "retention.ms": "600000"})
    produce(broker, TopicPartition("plain", 1), 0, 30)
    broker.shutdown()
    path = tmp_path / "b1" / TOPICS_FILE
    # exactly what the releases before the broker package wrote
    path.write_text(json.dumps({"version": 1, "topics": {"plain": {
        "partitions": 2, "config": {"retention.ms": "600000", "segment.bytes": "4096"}}}},
        indent=2, sort_keys=True))
    before = path.read_bytes()
    again, _, _ = make_broker(tmp_path)
    info = again.topic("plain")
    assert info.partitions == 2 and dict(info.config) == {"retention.ms": "600000",
                                                          "segment.bytes": "4096"}
    assert again.log(TopicPartition("plain", 1)).config.segment_bytes == 4096
    got = read_values(again, TopicPartition("plain", 1), 0, 30)
    assert {o: v for o, (v, _) in got.items()} == {i: value(i) for i in range(30)}
    assert path.read_bytes() == before
    again.shutdown()
    assert not new_threads()


def test_the_same_class_is_a_cluster_member(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "c", 2, overrides={"auto.leader.rebalance.enable": "false"}
                      ) as c:
        member = c.broker(1)
        assert type(member) is Broker and member.cluster and member.address
        cl = c.client()
        cl.create_topic("t", 1, 2)
        leader = c.broker(cl.leader("t", 0, refresh=True))
        tp = TopicPartition("t", 0)
        assert leader.produce(tp, [(b"k", b"v1"), (b"k", b"v2")]) == 0
        assert [r.value for r in leader.fetch(tp, 0).records_list()] == [b"v1", b"v2"]
        assert set(leader.topics()) == {"t"} and leader.topic("t").partitions == 1
        with pytest.raises(BrokerError, match="controller"):
            leader.create_topic("x")
        with pytest.raises(BrokerError, match="controller"):
            leader.become_follower(tp)
    with (Broker({"log.dirs": str(tmp_path / "alone")}, background=False) as alone,
          pytest.raises(BrokerError, match="standalone")):
        alone.pause()


def test_a_stop_waiting_for_a_remote_task_that_reads_the_topics_does_not_deadlock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop waits for the remote log manager's running tasks; a task reads its topic's
    tiering settings. The stop must not hold what that read needs (it deadlocked when the
    lifecycle and the topic map shared one lock)."""
    import threading

    broker, _, _ = make_broker(tmp_path)
    broker.create_topic("tiered", 1, {"remote.storage.enable": "true"})
    tp = TopicPartition("tiered", 0)
    assert broker.rlm is not None
    rlm_shutdown = broker.rlm.shutdown
    finished: list[bool] = []

    def shutdown_waiting_for_a_task() -> None:
        # what a running copy does while the stop waits for it
        task = threading.Thread(target=lambda: finished.append(
            broker._tiering_of(tp) is not None))
        task.start()
        task.join(timeout=10)
        rlm_shutdown()

    monkeypatch.setattr(broker.rlm, "shutdown", shutdown_waiting_for_a_task)
    broker.shutdown()
    assert finished == [True], "the task waiting on the broker's lock never finished"
    assert not broker.started
