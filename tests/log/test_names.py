"""Topic names as Kafka validates them; nothing from a name leaves its log dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.errors import InvalidTopicError
from kafka_tiers.log.names import (
    child_path,
    parse_partition_dir,
    parse_segment_file,
    partition_dir,
    segment_file_name,
    validate_topic,
)


@pytest.mark.parametrize("name", ["a", "my-topic", "my_topic.v2", "__consumer_offsets",
                                  "x" * 249, "A-Z_0.9"])
def test_legal_topics(name: str) -> None:
    assert validate_topic(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a/b", "../etc", "a b", "tópico",
                                  "a\\b", "a\0b", "a:b"])
def test_illegal_topics(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic(name)


def test_partition_dirs(tmp_path: Path) -> None:
    assert partition_dir(tmp_path, TopicPartition("t.x", 3)) == tmp_path / "t.x-3"
    with pytest.raises(InvalidTopicError):
        partition_dir(tmp_path, TopicPartition("../../etc", 0))
    p = parse_partition_dir("my-topic-12")
    assert p.partition == TopicPartition("my-topic", 12) and p.kind == ""
    fut = parse_partition_dir("t-1.0123456789abcdef0123456789abcdef-future")
    assert fut.kind == "future" and fut.partition == TopicPartition("t", 1)
    for bad in ("nopartition", "..-1", "a/b-1", "t-x"):
        with pytest.raises(InvalidTopicError):
            parse_partition_dir(bad)


def test_child_path_refuses_escapes(tmp_path: Path) -> None:
    for bad in ("..", ".", "a/../../x", "/etc/passwd", ""):
        with pytest.raises(InvalidTopicError):
            child_path(tmp_path, bad)


def test_segment_names() -> None:
    assert segment_file_name(42, ".log") == "00000000000000000042.log"
    assert parse_segment_file("00000000000000000042.timeindex") == (42, ".timeindex", "")
    assert parse_segment_file("00000000000000000042.log.deleted") == (42, ".log", ".deleted")
    assert parse_segment_file("42.log") is None
    assert parse_segment_file("leader-epoch-checkpoint") is None
