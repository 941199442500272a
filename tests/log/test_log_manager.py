"""The log manager: startup per document 002, checkpoints, clean shutdown, dir safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.config import BrokerConfig
from kafka_tiers.log.checkpoints import OffsetCheckpointFile
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.errors import InvalidTopicError, LogDirError
from kafka_tiers.log.log_manager import LogManager

from .helpers import fill, read_all

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, max_index_size=4096)


def _populate(dirs: list[Path], partitions: int = 4, records: int = 150) -> dict:
    m = LogManager(dirs, CONFIG)
    m.startup()
    values = {}
    for p in range(partitions):
        tp = TopicPartition("orders", p)
        log = m.get_or_create_log(tp)
        values[tp] = fill(log, records)
        log.update_high_watermark(records - 10)
    m.shutdown()
    return values


def test_shutdown_writes_kafkas_files(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    _populate(dirs)
    for d in dirs:
        names = {p.name for p in d.iterdir()}
        assert {"meta.properties", ".kafka_cleanshutdown", "recovery-point-offset-checkpoint",
                "log-start-offset-checkpoint", "replication-offset-checkpoint"} <= names
        rp = OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read()
        hw = OffsetCheckpointFile(d / "replication-offset-checkpoint").read()
        assert set(rp.values()) == {150} and set(hw.values()) == {140}
        assert len(rp) == 2  # partitions are spread over both dirs


@pytest.mark.parametrize("check_all", [True, False])
def test_restart_after_clean_shutdown(tmp_path: Path, check_all: bool) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    values = _populate(dirs)
    m = LogManager(dirs, CONFIG, sanity_check_all=check_all)
    report = m.startup()
    try:
        assert all(report.clean_shutdown.values())
        assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)  # removed on use
        assert report.recovered_segments == 0
        if check_all:
            assert report.unchecked_segments == 0
        else:
            assert report.unchecked_segments == report.segments - report.logs
            m.start_background_check()
            assert m.wait_background_check(30)
            assert sum(lg.unchecked_segments for lg in m.logs.values()) == 0
        for tp, vals in values.items():
            log = m.get_log(tp)
            assert log is not None and log.high_watermark == 140
            assert read_all(log) == list(enumerate(vals))
    finally:
        m.shutdown()


def test_unclean_restart_recovers(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1"]
    values = _populate(dirs, partitions=2)
    (dirs[0] / ".kafka_cleanshutdown").unlink()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    m = LogManager(dirs, CONFIG, sanity_check_all=False)
    report = m.startup()
    try:
        assert report.clean_shutdown == {str(dirs[0]): False}
        assert report.recovered_segments == report.segments  # everything from offset 0
        for tp, vals in values.items():
            assert read_all(m.get_log(tp)) == list(enumerate(vals))
    finally:
        m.shutdown()


def test_malformed_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1"]
    values = _populate(dirs, partitions=1)
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("0\n5\nbroken\n")
    m = LogManager(dirs, CONFIG)
    report = m.startup()
    try:
        assert report.problems and report.recovered_segments == report.segments
        (tp, vals), = values.items()
        assert read_all(m.get_log(tp)) == list(enumerate(vals))
    finally:
        m.shutdown()


def test_dir_lock_and_bad_names(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    m = LogManager([d], CONFIG)
    m.startup()
    try:
        with pytest.raises(LogDirError, match="in use"):
            LogManager([d], CONFIG).startup()
        with pytest.raises(InvalidTopicError):
            m.get_or_create_log(TopicPartition("../../escape", 0))
        with pytest.raises(LogDirError):
            m.get_or_create_log(TopicPartition("ok", 0), log_dir=tmp_path / "elsewhere")
        assert not (tmp_path / "escape-0").exists()
    finally:
        m.shutdown()
    (d / "not a partition").mkdir()
    (d / "stale-1.0123456789abcdef0123456789abcdef-delete").mkdir()
    m = LogManager([d], CONFIG)
    m.startup()
    try:
        assert not (d / "stale-1.0123456789abcdef0123456789abcdef-delete").exists()
        assert m.logs == {}
    finally:
        m.shutdown()


def test_delete_log_and_topic_overrides(tmp_path: Path) -> None:
    m = LogManager([tmp_path / "d"], CONFIG,
                   topic_overrides={"big": {"segment.bytes": "1048576"}})
    m.startup()
    try:
        big = m.get_or_create_log(TopicPartition("big", 0))
        small = m.get_or_create_log(TopicPartition("small", 0))
        fill(big, 100)
        fill(small, 100)
        assert big.num_segments == 1 and small.num_segments > 1
        assert m.delete_log(TopicPartition("small", 0))
        assert not (tmp_path / "d" / "small-0").exists()
        assert not m.delete_log(TopicPartition("small", 0))
    finally:
        m.shutdown()


def test_from_broker_config(tmp_path: Path) -> None:
    cfg = BrokerConfig({"log.dirs": f"{tmp_path}/a,{tmp_path}/b",
                        "sanity.check.all.logs.enabled": "false",
                        "log.segment.bytes": "2048", "num.recovery.threads.per.data.dir": "3"})
    m = LogManager.from_config(cfg)
    assert m.log_dirs == [tmp_path / "a", tmp_path / "b"]
    assert not m.sanity_check_all and m.recovery_threads_per_dir == 3
    assert m.config.segment_bytes == 2048


def test_background_check_runs_alongside_appends_and_reads(tmp_path: Path) -> None:
    import threading

    dirs = [tmp_path / "d1"]
    values = _populate(dirs, partitions=3, records=300)
    m = LogManager(dirs, CONFIG, sanity_check_all=False)
    m.startup()
    try:
        errors: list[BaseException] = []

        def produce() -> None:
            try:
                for tp in values:
                    fill(m.get_log(tp), 100)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        writer = threading.Thread(target=produce)
        m.start_background_check()
        writer.start()
        for tp, vals in values.items():
            assert read_all(m.get_log(tp))[:300] == list(enumerate(vals))
        writer.join()
        assert m.wait_background_check(30)
        assert not errors
        for tp in values:
            log = m.get_log(tp)
            assert log.unchecked_segments == 0 and log.log_end_offset == 400
    finally:
        m.shutdown()


def test_segment_list_is_used_only_when_valid(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1"]
    values = _populate(dirs, partitions=1)
    (tp,) = values
    assert (dirs[0] / "kafka-tiers-segment-list").exists()
    part = dirs[0] / "orders-0"
    # a segment appears behind kafka-tiers' back: the dir mtime changes, the list is ignored
    extra_base = 10_000
    src = sorted(part.glob("*.log"))[-1]
    (part / f"{extra_base:020d}.log").write_bytes(b"")
    m = LogManager(dirs, CONFIG, sanity_check_all=False)
    m.startup()
    try:
        log = m.get_log(tp)
        assert extra_base in log.segment_bases()
        assert not (dirs[0] / "kafka-tiers-segment-list").exists()  # removed at startup
        assert src.exists()
    finally:
        m.shutdown()


def test_periodic_jobs_follow_their_intervals(tmp_path: Path) -> None:
    from dataclasses import replace

    from kafka_tiers.log.log_manager import MaintenanceIntervals

    now = [1_000_000.0]
    config = replace(CONFIG, retention_ms=10_000, flush_interval_ms=5_000)
    m = LogManager([tmp_path / "d"], config, time_fn=lambda: now[0],
                   intervals=MaintenanceIntervals(flush_check_ms=1_000,
                                                  recovery_checkpoint_ms=60_000,
                                                  start_offset_checkpoint_ms=60_000,
                                                  retention_check_ms=300_000))
    m.startup()
    try:
        log = m.get_or_create_log(TopicPartition("jobs", 0))
        fill(log, 200, start_ts=int(now[0] * 1000))
        log.update_high_watermark(log.log_end_offset)
        assert m.run_due_tasks() == []  # first call starts the clocks
        now[0] += 6
        assert m.run_due_tasks() == ["flush"]
        assert log.recovery_point == log.log_end_offset
        now[0] += 60
        assert m.run_due_tasks() == ["flush", "checkpoint"]
        rp = OffsetCheckpointFile(tmp_path / "d" / "recovery-point-offset-checkpoint").read()
        assert rp == {TopicPartition("jobs", 0): 200}
        before = log.num_segments
        now[0] += 300
        assert "retention" in m.run_due_tasks()
        assert log.num_segments < before and log.log_start_offset > 0
    finally:
        m.shutdown()
