"""A cluster broker never destroys what is not provably its own: another broker's or another
cluster's log dir refuses the start untouched; only unassigned replicas (partition dirs holding
Kafka log files) are removed, renamed ``-delete`` first; foreign directories stay; a replica the
``choose_log_dir`` hook cannot place is a visible creation error."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.transport import TransportError
from kafka_tiers.log.checkpoints import read_meta_properties
from kafka_tiers.log.dir_ownership import InconsistentBrokerIdError, InconsistentClusterIdError
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
from kafka_tiers.plugins.hookspecs import hookimpl


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    out: dict[str, tuple[bytes, int] | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = (Path(p).read_bytes(), os.stat(p).st_mtime_ns)
    return out


def data_dir(c: LocalCluster, broker_id: int) -> Path:
    return Path(c.broker_config(broker_id)["log.dirs"].split(",")[0])


def test_a_broker_started_on_another_brokers_log_dir_refuses(
        make_cluster: Any) -> None:
    c = make_cluster(2)
    client = c.client()
    client.create_topic("t", 2, 2)
    client.wait_for_leaders("t", 20)
    client.produce("t", 0, ["a", "b"])
    c.stop_broker(2, controlled=False)
    c.stop_broker(1, controlled=False)
    theirs = data_dir(c, 1)
    assert read_meta_properties(theirs)["node.id"] == "1"
    before = snapshot(theirs)
    config = {**c.broker_config(2), "log.dirs": str(theirs)}
    broker = Broker(config, cluster=True, network=c.network, embedded_server=c.embedded)
    with pytest.raises(InconsistentBrokerIdError) as err:
        broker.start()
    message = str(err.value)
    assert "\n" not in message and str(theirs) in message
    assert "broker.id 2" in message and "node.id 1" in message
    assert snapshot(theirs) == before


def test_a_broker_of_another_cluster_refuses(tmp_path: Path, make_cluster: Any) -> None:
    first = make_cluster(1, name="first")
    first.client().create_topic("t", 1, 1)
    first.stop_broker(1, controlled=False)
    theirs = data_dir(first, 1)
    cluster_id = read_meta_properties(theirs)["cluster.id"]
    assert cluster_id and cluster_id == first.brokers[1].member.cluster_id
    second = make_cluster(1, name="second")
    other_id = second.brokers[1].member.cluster_id
    assert other_id and other_id != cluster_id
    second.stop_broker(1, controlled=False)
    before = snapshot(theirs)
    config = {**second.broker_config(1), "log.dirs": str(theirs)}
    broker = Broker(config, cluster=True, network=second.network,
                    embedded_server=second.embedded)
    with pytest.raises(InconsistentClusterIdError) as err:
        broker.start()
    message = str(err.value)
    assert "\n" not in message and str(theirs) in message
    assert cluster_id in message and other_id in message
    assert snapshot(theirs) == before


def test_unassigned_replicas_are_renamed_not_deleted_and_foreign_dirs_stay(
        make_cluster: Any, caplog: pytest.LogCaptureFixture) -> None:
    c = make_cluster(1)
    client = c.client()
    client.create_topic("kept", 1, 1)
    client.wait_for_leaders("kept", 20)
    client.produce("kept", 0, ["k1", "k2"])
    c.stop_broker(1, controlled=False)
    d = data_dir(c, 1)
    shutil.copytree(d / "kept-0", d / "orphan-0")  # a replica the store does not assign here
    orphan_files = sorted(p.name for p in (d / "orphan-0").iterdir())
    assert any(name.endswith(".log") for name in orphan_files)
    (d / "backup-2024").mkdir()
    (d / "backup-2024" / "precious.txt").write_text("a user's file")
    (d / "foo-1").mkdir()
    (d / "foo-1" / "notes").write_text("no log files here")
    foreign = {k: v for k, v in snapshot(d).items()
               if k.split("/")[0] in ("backup-2024", "foo-1")}
    with caplog.at_level(logging.WARNING):
        c.start_broker(1)
        c.wait_until(lambda: c.controller_id() == 1, 20, "controller")
    assert not (d / "orphan-0").exists()
    (renamed,) = [p for p in d.iterdir() if p.name.startswith("orphan-0.")]
    assert renamed.name.endswith("-delete")
    assert sorted(p.name for p in renamed.iterdir()) == orphan_files  # kept for the delay
    assert {k: v for k, v in snapshot(d).items()
            if k.split("/")[0] in ("backup-2024", "foo-1")} == foreign
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    stray = [w for w in warnings if "orphan-0" in w and "not assigned" in w]
    assert len(stray) == 1 and "file.delete.delay.ms" in stray[0]
    reported = [w for w in warnings if "backup-2024" in w]
    assert len(reported) == 1 and "foo-1" in reported[0]
    assert [r.value for r in c.client().read_all("kept", 0, timeout=10)] == [b"k1", b"k2"]


class _ElsewherePlacer:
    @hookimpl
    def kafka_tiers_choose_log_dir(self, topic_partition: Any, log_dirs: Any) -> str:
        return "/nonexistent/not-a-log-dir"


def test_a_replica_the_hook_cannot_place_fails_visibly(make_cluster: Any) -> None:
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[_ElsewherePlacer()]))
    c = make_cluster(1, log_dirs_per_broker=2, hooks=hooks)
    with pytest.raises(TransportError) as err:
        c.client().create_topic("x", 2, 1)
    message = str(err.value)
    assert "KAFKA_STORAGE_ERROR" in message and "not-a-log-dir" in message
    assert "UNKNOWN" not in message  # the replica's own error, not a bug's
    assert c.brokers[1].log_manager.logs == {}
    assert not Path("/nonexistent/not-a-log-dir").exists()


def test_standalone_a_replica_the_hook_cannot_place_is_an_error_not_a_dead_broker(
        tmp_path: Path) -> None:
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    with Broker({"log.dirs": dirs}, background=False) as broker:
        good = broker.create_topic("good", 1)[0]
        broker.produce(good, [b"g"])
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[_ElsewherePlacer()]))
    with Broker({"log.dirs": dirs}, hooks=hooks, background=False) as broker:
        with pytest.raises(Exception, match="not-a-log-dir"):
            broker.create_topic("x", 1)
        assert broker.log_manager is not None and len(broker.log_manager.logs) == 1
    # the broker starts again with the partition it could not create offline
    with Broker({"log.dirs": dirs}, hooks=hooks, background=False) as broker:
        assert [r.value for r in broker.fetch(good, 0).records_list()] == [b"g"]


def test_the_embedded_stores_dir_inside_a_log_dir_is_not_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from kafka_tiers.cluster.transport import LoopbackNetwork

    config = {"broker.id": "1", "log.dirs": str(tmp_path / "logs")}  # metadata.dir: logs/metadata
    for _ in range(2):  # the second start finds logs/metadata
        with caplog.at_level(logging.WARNING), Broker(config, cluster=True,
                                                     network=LoopbackNetwork()):
            pass
    assert (tmp_path / "logs" / "metadata").is_dir()
    assert not [r for r in caplog.records if "not Kafka replicas" in r.getMessage()]
