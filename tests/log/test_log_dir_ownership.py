"""Data the broker must never destroy: log dirs that are another broker's, another cluster's or
another process's are refused untouched; only provable replicas are loaded or deleted; a stray
replica is renamed ``-delete`` and deleted after ``file.delete.delay.ms``; one bad partition
takes only itself offline."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    read_meta_properties,
    write_meta_properties,
)
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.dir_deleter import DirDeleter, delete_replica_dir, remove_unused_replica_dir
from kafka_tiers.log.dir_ownership import (
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    LogDirInUseError,
    classify_entry,
)
from kafka_tiers.log.errors import LogDirError
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_dir_failure import LogDirOfflineError
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.names import is_kafka_partition_file

from .helpers import fill, read_all

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, max_index_size=4096)
ME = {"version": "1", "node.id": "1"}


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every path under ``root`` with its bytes and mtime (None for directories)."""
    out: dict[str, tuple[bytes, int] | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = (Path(p).read_bytes(), os.stat(p).st_mtime_ns)
    return out


def populate(dirs: list[Path], meta: dict[str, str], partitions: int = 4,
             records: int = 60) -> dict[TopicPartition, Path]:
    m = LogManager(dirs, CONFIG, meta_properties=meta)
    m.startup()
    where = {}
    for p in range(partitions):
        tp = TopicPartition("t", p)
        fill(m.get_or_create_log(tp), records)
        where[tp] = m.log_dir_of(tp)
    m.shutdown()
    return where


# ---------------------------------------------------------------- meta.properties
def test_another_brokers_log_dir_is_refused_untouched(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    populate(dirs, {"version": "1", "node.id": "2"})
    (dirs[1] / ".lock").unlink()  # e.g. copied from another machine: not even a .lock is made
    before = snapshot(tmp_path)
    m = LogManager(dirs, CONFIG, meta_properties=ME)
    with pytest.raises(InconsistentBrokerIdError) as err:
        m.startup()
    m.shutdown()
    message = str(err.value)
    assert "\n" not in message
    assert str(dirs[0]) in message and "broker.id 1" in message and "node.id 2" in message
    assert "broker.id=2" in message  # the fix
    assert snapshot(tmp_path) == before  # nothing read into logs, written, renamed, deleted


def test_another_clusters_log_dir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "a"
    populate([d], {"version": "1", "node.id": "1", "cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"})
    before = snapshot(tmp_path)
    m = LogManager([d], CONFIG, meta_properties={**ME, "cluster.id": "BBBBBBBBBBBBBBBBBBBBBB"})
    with pytest.raises(InconsistentClusterIdError) as err:
        m.startup()
    m.shutdown()
    message = str(err.value)
    assert "\n" not in message and str(d) in message
    assert "AAAAAAAAAAAAAAAAAAAAAA" in message and "BBBBBBBBBBBBBBBBBBBBBB" in message
    assert "wrong cluster" in message
    assert snapshot(tmp_path) == before


def test_meta_properties_written_and_completed(tmp_path: Path) -> None:
    fresh, old = tmp_path / "fresh", tmp_path / "old"
    old.mkdir()
    write_meta_properties(old, {"version": "0", "broker.id": "1"})  # Kafka ZK-mode, no cluster
    cluster = {**ME, "cluster.id": "CCCCCCCCCCCCCCCCCCCCCC"}
    with LogManager([fresh, old], CONFIG, meta_properties=cluster):
        pass
    assert read_meta_properties(fresh) == cluster
    assert read_meta_properties(old) == {"version": "0", "broker.id": "1",
                                         "cluster.id": "CCCCCCCCCCCCCCCCCCCCCC"}
    # a standalone broker knows no cluster id: it checks the broker id only
    with LogManager([fresh, old], CONFIG, meta_properties=ME):
        pass
    assert read_meta_properties(fresh) == cluster


# ---------------------------------------------------------------- locked by another process
def test_a_dir_locked_by_another_process_is_refused_and_never_touched(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    populate(dirs, ME)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(dirs[1] / '.lock')!r}, os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        before = snapshot(dirs[1])
        m = LogManager(dirs, CONFIG, meta_properties=ME)
        with pytest.raises(LogDirInUseError) as err:
            m.startup()
        m.shutdown()  # an owner's clean-up after the refused start writes nothing either
        message = str(err.value)
        assert "\n" not in message and str(dirs[1]) in message and "in use" in message
        assert snapshot(dirs[1]) == before
        # the refused start released the locks it took: the other dir is free
        with LogManager([dirs[0]], CONFIG, meta_properties=ME) as again:
            assert len(again.logs) > 0
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- foreign directories
def test_foreign_directories_are_left_alone_and_reported_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "a"
    populate([d], ME, partitions=1)
    (d / "backup-2024").mkdir()
    (d / "backup-2024" / "precious.txt").write_text("mine")
    (d / "foo-1").mkdir()
    (d / "foo-1" / "notes").write_text("also mine")
    (d / "not a partition").mkdir()
    (d / "lost+found").mkdir()
    foreign = {k: v for k, v in snapshot(d).items()
               if k.split("/")[0] in ("backup-2024", "foo-1", "not a partition")}
    with (caplog.at_level(logging.WARNING, logger="kafka_tiers.log.log_manager"),
          LogManager([d], CONFIG, meta_properties=ME) as m):
        assert set(m.logs) == {TopicPartition("t", 0)}
        assert sorted(Path(p).name for p in m.report.foreign_dirs) == [
            "backup-2024", "foo-1", "not a partition"]
        # a replica is never created over a foreign directory
        with pytest.raises(LogDirError, match="not a Kafka replica"):
            m.get_or_create_log(TopicPartition("foo", 1))
    lines = [r.getMessage() for r in caplog.records if "not Kafka replicas" in r.getMessage()]
    assert len(lines) == 1 and "backup-2024" in lines[0] and "foo-1" in lines[0]
    assert {k: v for k, v in snapshot(d).items() if k.split("/")[0] in
            ("backup-2024", "foo-1", "not a partition")} == foreign


def test_classify_entry(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "00000000000000000000.log").touch()
    (tmp_path / "u-0").mkdir()
    (tmp_path / "u-0" / "0.log").touch()  # not a Kafka segment name
    assert classify_entry("t-0", tmp_path / "t-0")[0] == "replica"
    assert classify_entry("u-0", tmp_path / "u-0")[0] == "foreign"
    assert classify_entry("backup-2024", tmp_path / "missing")[0] == "foreign"
    assert classify_entry("t-0.0123456789abcdef0123456789abcdef-delete", tmp_path)[0] == "delete"
    assert classify_entry("t-0.0123456789abcdef0123456789abcdef-future", tmp_path)[0] == "future"
    assert classify_entry("kafka-tiers-remote", tmp_path)[0] == "own"
    # a clean shutdown's segment list names a file to stat instead of listing; never a proof
    # on its own
    listed = {TopicPartition("t", 0): "00000000000000000000.log",
              TopicPartition("u", 0): "00000000000000000000.log"}
    assert classify_entry("t-0", tmp_path / "t-0", listed)[0] == "replica"
    assert classify_entry("u-0", tmp_path / "u-0", listed)[0] == "foreign"
    assert classify_entry("lost+found", tmp_path)[0] == "own"


# ---------------------------------------------------------------- deleting
def test_names_that_deletes_may_remove() -> None:
    for ours in ("00000000000000000042.log", "00000000000000000042.index.deleted",
                 "00000000000000000042.timeindex", "00000000000000000042.txnindex.swap",
                 "00000000000000000042.snapshot", "00000000000000000042.snapshot.tmp",
                 "leader-epoch-checkpoint", "leader-epoch-checkpoint.tmp",
                 "partition.metadata"):
        assert is_kafka_partition_file(ours), ours
    for theirs in ("precious.txt", "notes.tmp", "42.log", "00000000000000000042.foo",
                   "backup.log", "leader-epoch-checkpoint.bak"):
        assert not is_kafka_partition_file(theirs), theirs


def test_the_deleter_removes_only_kafka_files_of_delete_dirs(tmp_path: Path) -> None:
    doomed = tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete"
    doomed.mkdir()
    (doomed / "00000000000000000000.log").write_bytes(b"x")
    (doomed / "leader-epoch-checkpoint").write_text("0\n0\n")
    (doomed / "precious.txt").write_text("mine")
    assert delete_replica_dir(doomed) == ["precious.txt"]
    assert sorted(p.name for p in doomed.iterdir()) == ["precious.txt"]
    (doomed / "precious.txt").unlink()
    assert delete_replica_dir(doomed) == [] and not doomed.exists()
    # anything not named <tp>.<id>-delete is refused
    other = tmp_path / "t-1"
    other.mkdir()
    (other / "00000000000000000000.log").write_bytes(b"x")
    assert delete_replica_dir(other) == ["t-1"]
    assert (other / "00000000000000000000.log").exists()


def test_the_deleter_waits_its_delay_and_close_keeps_what_is_not_due(tmp_path: Path) -> None:
    first = tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete"
    later = tmp_path / "t-1.0123456789abcdef0123456789abcdef-delete"
    first.mkdir()
    later.mkdir()
    deleter = DirDeleter(delay_ms=300)
    start = time.monotonic()
    deleter.schedule(first)
    deleter.schedule(later, delay_ms=60_000)
    time.sleep(0.1)
    assert first.exists()
    deadline = time.monotonic() + 5
    while first.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not first.exists() and time.monotonic() - start >= 0.3
    assert deleter.close(5)  # does not wait 60 s
    assert later.exists() and deleter.pending == []


def test_a_stray_replica_is_renamed_then_deleted_after_the_delay(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "a"
    populate([d], ME, partitions=2)
    with (caplog.at_level(logging.WARNING, logger="kafka_tiers.log.log_manager"),
          LogManager([d], CONFIG, meta_properties=ME, file_delete_delay_ms=400) as m):
        doomed = m.delete_stray_replica(TopicPartition("t", 1))
        assert doomed is not None and doomed.parent == d
        assert doomed.name.startswith("t-1.") and doomed.name.endswith("-delete")
        assert not (d / "t-1").exists() and doomed.exists()  # renamed, not deleted yet
        assert m.get_log(TopicPartition("t", 1)) is None
        assert m.delete_stray_replica(TopicPartition("t", 1)) is None
        assert m.deleter.wait(5)
        assert not doomed.exists()
        assert read_all(m.get_log(TopicPartition("t", 0)))  # the other one serves
    lines = [r.getMessage() for r in caplog.records if "not assigned" in r.getMessage()]
    assert len(lines) == 1 and "t-1" in lines[0] and "file.delete.delay.ms" in lines[0]


def test_from_config_defaults_file_delete_delay_to_kafkas(tmp_path: Path) -> None:
    from kafka_tiers.config import BrokerConfig

    m = LogManager.from_config(BrokerConfig({"log.dirs": str(tmp_path / "a")}))
    assert m.deleter.delay_ms == 60000
    m = LogManager.from_config(BrokerConfig({"log.dirs": str(tmp_path / "a"),
                                             "file.delete.delay.ms": "5"}))
    assert m.deleter.delay_ms == 5


# ---------------------------------------------------------------- one bad partition
def _bad_partition_dirs(tmp_path: Path) -> tuple[list[Path], dict[TopicPartition, Path]]:
    dirs = [tmp_path / "a", tmp_path / "b"]
    where = populate(dirs, ME)
    assert set(where.values()) == set(dirs)  # both JBOD dirs hold partitions
    return dirs, where


def _check_only_t1_is_offline(m: LogManager, where: dict[TopicPartition, Path],
                              caplog: pytest.LogCaptureFixture, file: str) -> None:
    bad = TopicPartition("t", 1)
    assert m.offline_dirs == {}
    assert set(m.logs) == set(where) - {bad}
    for tp in set(where) - {bad}:
        assert len(read_all(m.get_log(tp))) == 60
    assert m.offline_partitions == {bad: where[bad]}
    with pytest.raises(LogDirOfflineError, match="t-1 is offline"):
        m.read(bad, 0, 1024)
    with pytest.raises(LogDirOfflineError):  # never re-created over the bad files
        m.get_or_create_log(bad)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "t-1" in errors[0] and file in errors[0]
    assert "\n" not in errors[0]


def test_one_failing_partition_takes_only_itself_offline(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    dirs, where = _bad_partition_dirs(tmp_path)
    real_open = Log.open

    def failing_open(path: Path, *args: object, **kwargs: object) -> Log:
        if Path(path).name == "t-1":
            raise ValueError(f"{Path(path) / 'leader-epoch-checkpoint'}: epoch went backwards")
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "open", staticmethod(failing_open))
    with caplog.at_level(logging.ERROR), LogManager(dirs, CONFIG, meta_properties=ME) as m:
        _check_only_t1_is_offline(m, where, caplog, "leader-epoch-checkpoint")
        assert "epoch went backwards" in m.report.failed_partitions[TopicPartition("t", 1)]


def test_a_malformed_leader_epoch_checkpoint_does_not_stop_the_broker(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dirs, where = _bad_partition_dirs(tmp_path)
    bad = TopicPartition("t", 1)
    (where[bad] / "t-1" / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\nnot numbers\n")
    with caplog.at_level(logging.ERROR), LogManager(dirs, CONFIG, meta_properties=ME) as m:
        for tp in set(where) - {bad}:
            assert len(read_all(m.get_log(tp))) == 60
        if bad in m.logs:  # the file's values were checked and ignored (recomputed)
            assert len(read_all(m.get_log(bad))) == 60
        else:
            _check_only_t1_is_offline(m, where, caplog, LEADER_EPOCH_CHECKPOINT)


def test_an_io_error_still_takes_the_whole_dir_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs, where = _bad_partition_dirs(tmp_path)
    real_open = Log.open

    def failing_open(path: Path, *args: object, **kwargs: object) -> Log:
        if Path(path).name == "t-1":
            raise OSError(5, "Input/output error", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "open", staticmethod(failing_open))
    with LogManager(dirs, CONFIG, meta_properties=ME) as m:
        bad_dir = where[TopicPartition("t", 1)]
        assert set(m.offline_dirs) == {bad_dir}
        assert set(m.logs) == {tp for tp, d in where.items() if d != bad_dir}


# ---------------------------------------------------------------- every other delete
def test_loading_removes_only_kafka_named_leftovers(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    fill(log, 10)
    log.close()
    (d / "notes.tmp").write_text("a user's file")
    (d / "backup.deleted").write_text("a user's file too")
    (d / "leader-epoch-checkpoint.tmp").write_text("torn")
    (d / "00000000000000000099.log.deleted").write_bytes(b"x")
    log = Log.open(d, CONFIG)
    try:
        names = {p.name for p in d.iterdir()}
        assert {"notes.tmp", "backup.deleted"} <= names
        assert not {"leader-epoch-checkpoint.tmp", "00000000000000000099.log.deleted"} & names
        assert len(read_all(log)) == 10
    finally:
        log.close()


def test_the_remote_index_cache_deletes_only_its_own_files(tmp_path: Path) -> None:
    from kafka_tiers.remote.index_cache import RemoteIndexCache

    d = tmp_path / "remote-log-index-cache"
    d.mkdir()
    (d / "precious.txt").write_text("mine")
    (d / "00000000000000000000_abc.index").write_bytes(b"\0" * 8)
    (d / f".{'0' * 32}.tmp").write_bytes(b"x")
    cache = RemoteIndexCache(d, 1 << 20)
    assert sorted(p.name for p in d.iterdir()) == ["precious.txt"]
    cache.close()
    assert (d / "precious.txt").read_text() == "mine"


def test_undoing_a_failed_creation_removes_only_kafka_files(tmp_path: Path) -> None:
    made = tmp_path / "t-0"
    made.mkdir()
    (made / "00000000000000000000.log").touch()
    (made / "00000000000000000000.index").touch()
    assert remove_unused_replica_dir(made) == [] and not made.exists()
    made.mkdir()
    (made / "00000000000000000000.log").touch()
    (made / "precious.txt").write_text("mine")
    assert remove_unused_replica_dir(made) == ["precious.txt"]
    assert sorted(p.name for p in made.iterdir()) == ["precious.txt"]


def test_an_offline_reassign_refuses_another_brokers_log_dirs(tmp_path: Path) -> None:
    import json

    dirs = [tmp_path / "a", tmp_path / "b"]
    where = populate(dirs, {"version": "1", "node.id": "2"}, partitions=1)
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=1\nlog.dirs={dirs[0]},{dirs[1]}\n")
    other = dirs[1] if where[TopicPartition("t", 0)] == dirs[0] else dirs[0]
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": [str(other)]}]}))
    before = snapshot(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "kafka_tiers", "reassign", "--config",
                           str(config), "--reassignment-json-file", str(plan), "--execute"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "doesn't match stored node.id 2" in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(tmp_path) == before
