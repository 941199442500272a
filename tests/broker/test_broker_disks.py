"""The broker over JBOD log dirs: produce follows a replica moved between dirs, and a broker
whose every log dir fails stops (as Kafka does) and says so through the hooks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.log_manager import LogDirOfflineError
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    read_values,
    shutdown_brokers,  # noqa: F401
    value,
)
from tests.jbod.helpers import failing_dir


def test_produce_and_fetch_follow_a_replica_moved_to_another_dir(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    broker, _, _ = make_broker(tmp_path, log_dirs=f"{d1},{d2}", remote_log_storage_enable="false")
    broker.create_topic("moving", 1)
    tp = TopicPartition("moving", 0)
    source = broker.log_manager.log_dir_of(tp)
    target = d2 if Path(source) == d1 else d1
    for i in range(50):
        broker.produce(tp, [(None, value(i))])
    assert broker.log_manager.alter_replica_log_dirs({tp: str(target)}) == {tp: "NONE"}
    i = 50
    deadline = time.monotonic() + 30
    while Path(broker.log_manager.log_dir_of(tp)) != target and time.monotonic() < deadline:
        broker.produce(tp, [(None, value(i))])  # appends continue during the move
        i += 1
    assert Path(broker.log_manager.log_dir_of(tp)) == target
    for j in range(i, i + 10):
        broker.produce(tp, [(None, value(j))])
    got = read_values(broker, tp, 0, i + 10)
    assert [got[k][0] for k in range(i + 10)] == [value(k) for k in range(i + 10)]


def test_every_log_dir_failing_stops_the_broker(tmp_path: Path) -> None:
    broker, _, recorder = make_broker(tmp_path, remote_log_storage_enable="false")
    broker.create_topic("t", 1)
    tp = TopicPartition("t", 0)
    broker.produce(tp, [(None, b"before")])
    with failing_dir(tmp_path / "b1"), pytest.raises(LogDirOfflineError):
        broker.produce(tp, [(None, b"during")])
    deadline = time.monotonic() + 10
    while broker.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not broker.started
    assert (1, False) in recorder.of("broker_stopping")
