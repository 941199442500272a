"""Checkpoint files in Kafka's text formats, crash-safe writes, and the leader epoch cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.checkpoints import (
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    has_clean_shutdown,
    read_meta_properties,
    remove_clean_shutdown,
    write_clean_shutdown,
    write_meta_properties,
)
from kafka_tiers.log.errors import LogDirError
from kafka_tiers.log.leader_epoch import EpochEntry, LeaderEpochCache


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(path)
    assert cp.read() == {}
    cp.write({TopicPartition("b", 1): 9, TopicPartition("a", 0): 1234})
    assert path.read_text() == "0\n2\na 0 1234\nb 1 9\n"
    assert cp.read() == {TopicPartition("a", 0): 1234, TopicPartition("b", 1): 9}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n",
                                  "0\n1\n../x 0 1\n", "garbage"])
def test_malformed_offset_checkpoint(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(LogDirError):
        OffsetCheckpointFile(path).read()


def test_kafka_written_checkpoint_reads(tmp_path: Path) -> None:
    # as written by a Kafka 3.x broker
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\n3\n__consumer_offsets 12 0\nmy.topic 0 42\nmy_topic-x 7 100\n")
    assert OffsetCheckpointFile(path).read()[TopicPartition("my_topic-x", 7)] == 100


def test_leader_epoch_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, 120)]


def test_meta_properties_and_marker(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, {"version": "1", "node.id": "3", "cluster.id": "abc"})
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#\n#") and "node.id=3\n" in text
    assert read_meta_properties(tmp_path) == {"version": "1", "node.id": "3",
                                              "cluster.id": "abc"}
    assert not has_clean_shutdown(tmp_path)
    write_clean_shutdown(tmp_path, broker_epoch=12)
    assert json.loads((tmp_path / ".kafka_cleanshutdown").read_text()) == {
        "version": 0, "brokerEpoch": 12}
    remove_clean_shutdown(tmp_path)
    assert not has_clean_shutdown(tmp_path)
    (tmp_path / ".kafka_cleanshutdown").write_text("")  # older Kafka: empty marker
    assert has_clean_shutdown(tmp_path)


def test_leader_epoch_cache_rules(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)  # same epoch, later offset: no change
    assert cache.assign(2, 10)
    assert cache.assign(4, 30)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 30)]
    # changes are written by flush (the log's flush, before the recovery point moves), not
    # by every change
    assert cache.dirty and LeaderEpochCache(path).entries() == []
    cache.flush()
    assert not cache.dirty
    assert LeaderEpochCache(path).entries() == cache.entries()  # persisted
    assert cache.end_offset_for(4, 99) == (4, 99)
    assert cache.end_offset_for(2, 99) == (2, 30)
    assert cache.end_offset_for(3, 99) == (2, 30)  # unknown epoch between: floor epoch
    assert cache.end_offset_for(0, 99) == (0, 0)
    assert cache.end_offset_for(5, 99) == (-1, -1)
    # a new epoch at a lower offset replaces conflicting entries
    assert cache.assign(5, 20)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(5, 20)]
    cache.truncate_from_end(15)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries() == [EpochEntry(2, 12)]
    cache.flush()
    assert LeaderEpochCache(path).entries() == [EpochEntry(2, 12)]
    cache.clear()  # an emptied log: the file is emptied at once
    assert LeaderEpochCache(path).entries() == [] and not cache.dirty
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
