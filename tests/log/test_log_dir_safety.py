"""Log-dir rules the review of issue 13 found broken: nothing is written through a symlink; a
replica not assigned to this broker is never loaded (recovered); one partition's bad file takes
that partition offline, not its dir; a replica that is not new is never created while a dir is
offline; a ``meta.properties`` naming no broker is refused."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.checkpoints import LEADER_EPOCH_CHECKPOINT, read_file_nofollow
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.dir_ownership import (
    FOREIGN,
    LINKED,
    REPLICA,
    InconsistentBrokerIdError,
    classify_entry,
)
from kafka_tiers.log.errors import LogDirError
from kafka_tiers.log.handles import HANDLES
from kafka_tiers.log.log_dir_failure import LogDirOfflineError
from kafka_tiers.log.log_manager import LogManager

from .helpers import fill, read_all

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, max_index_size=4096)
ME = {"version": "1", "node.id": "1"}
SEGMENT = "00000000000000000000.log"
USER_DATA = b"user data\n" * 100


def populate(dirs: list[Path], partitions: int = 4, records: int = 60
             ) -> dict[TopicPartition, Path]:
    m = LogManager(dirs, CONFIG, meta_properties=ME)
    m.startup()
    where = {}
    for p in range(partitions):
        tp = TopicPartition("t", p)
        fill(m.get_or_create_log(tp), records)
        where[tp] = m.log_dir_of(tp)
    m.shutdown()
    return where


def crash_marker_away(log_dir: Path) -> None:
    """Make the next start a recovery (no clean-shutdown marker)."""
    (log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)


# ---------------------------------------------------------------- symlinks
def test_a_segment_symlink_to_a_users_file_is_never_truncated(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "d"
    populate([d], partitions=1)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(USER_DATA)
    sym = d / "sym-0"
    sym.mkdir()
    os.symlink(outside, sym / SEGMENT)
    crash_marker_away(d)
    with caplog.at_level(logging.WARNING), LogManager([d], CONFIG, meta_properties=ME) as m:
        assert TopicPartition("sym", 0) not in m.logs
        assert str(sym) in m.report.foreign_dirs
        assert len(read_all(m.get_log(TopicPartition("t", 0)))) == 60
        with pytest.raises(LogDirOfflineError):  # never made anew over or beside the link
            m.get_or_create_log(TopicPartition("sym", 0))
    assert outside.read_bytes() == USER_DATA
    assert (sym / SEGMENT).is_symlink()
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING and "sym-0" in r.getMessage()]
    assert len(warnings) == 1


def test_a_symlinked_partition_dir_is_reported_and_left_alone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "d"
    populate([d], partitions=1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / SEGMENT).write_bytes(USER_DATA)
    os.symlink(elsewhere, d / "link-0")
    crash_marker_away(d)
    with caplog.at_level(logging.WARNING), LogManager([d], CONFIG, meta_properties=ME) as m:
        assert TopicPartition("link", 0) not in m.logs
        assert str(d / "link-0") in m.report.foreign_dirs
    assert (elsewhere / SEGMENT).read_bytes() == USER_DATA
    assert any("link-0" in r.getMessage() for r in caplog.records
               if r.levelno == logging.WARNING)


def test_a_symlink_among_a_replicas_files_makes_it_no_replica(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    part.mkdir()
    (part / SEGMENT).write_bytes(b"")
    assert classify_entry("t-0", part)[0] == REPLICA
    os.symlink(tmp_path / "x", part / LEADER_EPOCH_CHECKPOINT)
    assert classify_entry("t-0", part)[0] == LINKED
    # the clean-shutdown fast path (one stat of the expected segment) does not follow a link
    other = tmp_path / "u-0"
    other.mkdir()
    (tmp_path / "real.log").write_bytes(b"")
    os.symlink(tmp_path / "real.log", other / SEGMENT)
    assert classify_entry("u-0", other, {TopicPartition("u", 0): SEGMENT})[0] == LINKED
    (tmp_path / "notes").mkdir()
    assert classify_entry("notes", tmp_path / "notes")[0] == FOREIGN


def test_files_of_a_log_are_never_opened_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"x")
    link = tmp_path / "link"
    os.symlink(target, link)
    with pytest.raises(OSError) as info:
        read_file_nofollow(link)
    assert info.value.errno == errno.ELOOP


def test_a_symlink_appearing_after_the_listing_is_a_partition_problem(
        tmp_path: Path) -> None:
    """A segment replaced by a link (the clean-shutdown fast path stats only the first
    segment): opening it with O_NOFOLLOW fails, that partition is offline, the dir serves and
    the outside file is untouched."""
    a, b = tmp_path / "a", tmp_path / "b"
    where = populate([a, b], records=200)  # several segments each
    bad = TopicPartition("t", 1)
    part = where[bad] / "t-1"
    segments = sorted(p for p in part.iterdir() if p.suffix == ".log")
    assert len(segments) >= 2
    outside = tmp_path / "outside.txt"
    outside.write_bytes(USER_DATA)
    last = segments[-1]
    last.unlink()
    os.symlink(outside, last)
    crash_marker_away(where[bad])
    with LogManager([a, b], CONFIG, meta_properties=ME) as m:
        assert m.offline_dirs == {}
        assert bad not in m.logs
        assert set(m.logs) == set(where) - {bad}
    assert outside.read_bytes() == USER_DATA


# ---------------------------------------------------------------- unassigned replicas
def _user_replica(log_dir: Path, name: str = "bar-0") -> Path:
    part = log_dir / name
    part.mkdir()
    (part / SEGMENT).write_bytes(USER_DATA)
    return part


def test_an_unassigned_replica_is_renamed_for_delete_with_its_content_untouched(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "d"
    populate([d], partitions=2)
    _user_replica(d)
    _user_replica(d, "baz-0." + "a" * 32 + "-future")  # a move's future: never promoted
    crash_marker_away(d)  # a recovery start: would truncate what it loads
    assigned = {TopicPartition("t", 0), TopicPartition("t", 1)}
    m = LogManager([d], CONFIG, meta_properties=ME, file_delete_delay_ms=60_000)
    with caplog.at_level(logging.WARNING):
        report = m.startup(assigned, delete_unassigned=True)
    try:
        assert set(m.logs) == assigned
        assert not (d / "bar-0").exists()
        assert not (d / "baz-0").exists()
        assert len(report.unassigned_deleted) == 2
        for doomed in report.unassigned_deleted:
            assert Path(doomed).name.startswith(("bar-0.", "baz-0."))
            assert doomed.endswith("-delete")
            assert (Path(doomed) / SEGMENT).read_bytes() == USER_DATA  # renaming back restores
        assert any("bar-0" in r.getMessage() for r in caplog.records
                   if r.levelno == logging.WARNING)
    finally:
        m.shutdown()


def test_an_unassigned_replica_of_a_standalone_broker_is_left_alone(tmp_path: Path) -> None:
    d = tmp_path / "d"
    populate([d], partitions=1)
    part = _user_replica(d)
    crash_marker_away(d)
    m = LogManager([d], CONFIG, meta_properties=ME)
    report = m.startup({TopicPartition("t", 0)})
    try:
        assert TopicPartition("bar", 0) not in m.logs
        assert report.unassigned_left == [str(part)]
        assert (part / SEGMENT).read_bytes() == USER_DATA
        with pytest.raises(LogDirError, match="not assigned"):  # never adopted later
            m.get_or_create_log(TopicPartition("bar", 0))
        assert (part / SEGMENT).read_bytes() == USER_DATA
    finally:
        m.shutdown()


# ---------------------------------------------------------------- one bad file
@pytest.mark.parametrize("damage", ["dir", "symlink", "index_dir"])
def test_one_bad_partition_file_takes_only_its_partition_offline(
        tmp_path: Path, damage: str) -> None:
    """The reviewer's repro: ``rm leader-epoch-checkpoint; mkdir leader-epoch-checkpoint``
    (EISDIR) took the whole dir offline and its partitions were recreated empty elsewhere."""
    a, b = tmp_path / "a", tmp_path / "b"
    where = populate([a, b])
    bad = TopicPartition("t", 0)
    checkpoint = where[bad] / "t-0" / LEADER_EPOCH_CHECKPOINT
    checkpoint.unlink(missing_ok=True)
    if damage == "dir":
        checkpoint.mkdir()
    elif damage == "symlink":
        os.symlink(tmp_path / "nowhere", checkpoint)
    else:
        index = where[bad] / "t-0" / "00000000000000000000.index"
        index.unlink(missing_ok=True)
        index.mkdir()
    crash_marker_away(where[bad])
    with LogManager([a, b], CONFIG, meta_properties=ME) as m:
        assert m.offline_dirs == {}
        assert bad not in m.logs
        assert set(m.logs) == set(where) - {bad}
        for tp in set(where) - {bad}:
            assert len(read_all(m.get_log(tp))) == 60
        assert bad in m.offline_partitions
        with pytest.raises(LogDirOfflineError):  # never recreated empty elsewhere
            m.get_or_create_log(bad)


def test_a_replica_that_is_not_new_is_not_created_while_a_dir_is_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    where = populate([a, b])
    lost = next(tp for tp, d in where.items() if d == a)
    from kafka_tiers.log.log import Log
    real_open = Log.open

    def failing_open(path: Path, *args: object, **kwargs: object) -> Log:
        if Path(path).parent == a:
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "open", staticmethod(failing_open))
    with LogManager([a, b], CONFIG, meta_properties=ME) as m:
        assert set(m.offline_dirs) == {a}
        with pytest.raises(LogDirOfflineError, match="not a new replica"):
            m.get_or_create_log(lost, is_new=False)
        assert not (b / lost_name(lost)).exists()  # no empty copy, no reused offsets
        monkeypatch.setattr(Log, "open", real_open)
        new = m.get_or_create_log(TopicPartition("fresh", 0), is_new=True)
        assert m.log_dir_of(TopicPartition("fresh", 0)) == b and new.log_end_offset == 0


def lost_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


# ---------------------------------------------------------------- meta.properties
def test_a_meta_properties_naming_no_broker_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "meta.properties").write_text("version=1\n")
    m = LogManager([d], CONFIG, meta_properties=ME)
    with pytest.raises(InconsistentBrokerIdError) as info:
        m.startup()
    message = str(info.value)
    assert str(d) in message and "node.id=1" in message and "\n" not in message
    assert (d / "meta.properties").read_text() == "version=1\n"  # nothing written


# ---------------------------------------------------------------- describe
def test_describe_lists_only_replicas_and_reports_foreign_entries(tmp_path: Path) -> None:
    from kafka_tiers.log.describe import scan_log_dirs, to_json

    d = tmp_path / "d"
    populate([d], partitions=1)
    (d / "backup-2024").mkdir()
    (d / "backup-2024" / "notes.txt").write_text("mine")
    (d / "foo-0").mkdir()  # a partition name without log files
    (d / "foo-0" / "x.txt").write_text("mine")
    os.symlink(d / "foo-0", d / "bar-1")
    for described in (scan_log_dirs([d]), _describe_running(d)):
        [desc] = described
        assert [(p.topic, p.partition) for p in desc.partitions] == [("t", 0)]
        assert desc.foreign == ("backup-2024", "bar-1", "foo-0")
        assert to_json(described)["log_dirs"][0]["foreign"] == ["backup-2024", "bar-1", "foo-0"]


def _describe_running(d: Path) -> list:
    with LogManager([d], CONFIG, meta_properties=ME) as m:
        return m.describe_log_dirs()


def test_an_offline_reassign_loads_only_the_replicas_it_moves(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from kafka_tiers.cli import cli

    a, b = tmp_path / "a", tmp_path / "b"
    where = populate([a, b], partitions=2)
    src = where[TopicPartition("t", 0)]
    dest = b if src == a else a
    notes = src / "notes-1"
    notes.mkdir()
    junk = os.urandom(1 << 20)
    (notes / SEGMENT).write_bytes(junk)
    crash_marker_away(src)  # a recovery start: would truncate the random .log
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=1\nlog.dirs={a},{b}\n")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": [str(dest)]}]}))
    res = CliRunner().invoke(cli, ["reassign", "--config", str(config),
                                   "--reassignment-json-file", str(plan), "--execute"])
    assert res.exit_code == 0, res.output
    assert (dest / "t-0").is_dir()
    assert (notes / SEGMENT).read_bytes() == junk


def test_a_partition_file_error_while_serving_takes_only_that_partition_offline(
        tmp_path: Path) -> None:
    """An inactive segment (opened lazily) replaced by a link while the broker runs: the read
    fails with ELOOP, that partition goes offline, its dir keeps serving the others."""
    a, b = tmp_path / "a", tmp_path / "b"
    where = populate([a, b], records=200)
    bad = TopicPartition("t", 1)
    with LogManager([a, b], CONFIG, meta_properties=ME) as m:
        part = where[bad] / "t-1"
        first = sorted(p for p in part.iterdir() if p.suffix == ".log")[0]
        outside = tmp_path / "outside.txt"
        outside.write_bytes(USER_DATA)
        first.unlink()
        os.symlink(outside, first)
        HANDLES.release_all()  # inactive segments hold no descriptor: reopened on the read
        with pytest.raises(LogDirOfflineError, match="t-1 is offline"):
            m.read(bad, 0, 1 << 20)
        assert m.offline_dirs == {}
        assert bad in m.offline_partitions and bad not in m.logs
        for tp in set(where) - {bad}:
            assert len(read_all(m.get_log(tp))) == 200
        with pytest.raises(LogDirOfflineError):
            m.get_or_create_log(bad)
    assert outside.read_bytes() == USER_DATA
