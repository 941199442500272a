"""Topic ids (KIP-516) and the Metadata API, against a standalone broker and a 3-broker
in-process cluster, through real clients (confluent-kafka, kafka-python, aiokafka) and
kafka-python's own message classes on a raw socket."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.broker.topics import TOPICS_FILE
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.metadata_store import TopicAssignment, topic_path
from kafka_tiers.kafka.topic_ids import topic_id, topic_name


def _standalone(tmp_path: Path, **extra: str) -> Broker:
    return Broker({"broker.id": "1", "log.dirs": str(tmp_path / "d"),
                   "listeners": "PLAINTEXT://127.0.0.1:0", **extra},
                  background=False).start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = _standalone(tmp_path)
    try:
        yield b
    finally:
        b.shutdown()


# ---------------------------------------------------------------------------- topic ids

def test_a_standalone_topic_gets_an_id_at_creation_stable_across_restarts(tmp_path: Path
                                                                           ) -> None:
    b = _standalone(tmp_path)
    try:
        b.create_topic("orders", 2)
        b.create_topic("other", 1)
        tid = topic_id(b, "orders")
        assert isinstance(tid, uuid.UUID) and tid.int != 0
        assert topic_id(b, "other") not in (None, tid)
        assert topic_name(b, tid) == "orders"
        assert topic_id(b, "missing") is None
        assert topic_name(b, uuid.uuid4()) is None
        assert topic_name(b, uuid.UUID(int=0)) is None
        stored = json.loads((tmp_path / "d" / TOPICS_FILE).read_text())
        assert stored["topics"]["orders"]["topic_id"] == str(tid)
    finally:
        b.shutdown()
    again = _standalone(tmp_path)
    try:
        assert topic_id(again, "orders") == tid
        assert topic_name(again, tid) == "orders"
    finally:
        again.shutdown()


def test_a_deleted_then_recreated_topic_has_a_new_id(broker: Broker) -> None:
    broker.create_topic("t", 1)
    first = topic_id(broker, "t")
    assert first is not None and topic_name(broker, first) == "t"
    broker.delete_topic("t")
    assert topic_id(broker, "t") is None  # the cache follows the topic set
    assert topic_name(broker, first) is None
    broker.create_topic("t", 1)
    second = topic_id(broker, "t")
    assert second is not None and second != first
    assert topic_name(broker, second) == "t" and topic_name(broker, first) is None


def test_a_topic_of_an_earlier_release_gets_its_id_once_when_first_needed(tmp_path: Path
                                                                           ) -> None:
    b = _standalone(tmp_path)
    b.create_topic("old", 1)
    b.shutdown()
    path = tmp_path / "d" / TOPICS_FILE
    path.write_text(json.dumps({"version": 1, "topics": {"old": {"partitions": 1,
                                                                 "config": {}}}}))
    before = path.read_bytes()
    b = _standalone(tmp_path)
    try:
        assert path.read_bytes() == before  # nothing rewritten at start
        tid = topic_id(b, "old")
        assert tid is not None
        assert json.loads(path.read_text())["topics"]["old"]["topic_id"] == str(tid)
        assert topic_id(b, "old") == tid
    finally:
        b.shutdown()
    b = _standalone(tmp_path)
    try:
        assert topic_id(b, "old") == tid and topic_name(b, tid) == "old"
    finally:
        b.shutdown()


def test_an_earlier_release_topic_found_by_id_lookup_gets_its_id(tmp_path: Path) -> None:
    b = _standalone(tmp_path)
    b.create_topic("old", 1)
    b.shutdown()
    path = tmp_path / "d" / TOPICS_FILE
    path.write_text(json.dumps({"version": 1, "topics": {"old": {"partitions": 1,
                                                                 "config": {}}}}))
    b = _standalone(tmp_path)
    try:
        assert topic_name(b, uuid.uuid4()) is None  # scanning gave every topic its id
        tid = json.loads(path.read_text())["topics"]["old"]["topic_id"]
        assert topic_name(b, uuid.UUID(tid)) == "old"
    finally:
        b.shutdown()


def test_cluster_topic_ids_agree_on_every_broker_and_survive_restarts(tmp_path: Path
                                                                      ) -> None:
    with LocalCluster(tmp_path / "c", 3) as c:
        cl = c.client()
        cl.create_topic("t", 3, 2)
        ids = {topic_id(c.broker(b), "t") for b in (1, 2, 3)}
        assert len(ids) == 1 and None not in ids
        (tid,) = ids
        assert tid is not None
        assert all(topic_name(c.broker(b), tid) == "t" for b in (1, 2, 3))
        cl.create_topic("t", 5, 2)  # more partitions keep the id
        assert c.broker(1).member.metadata.topic("t").topic_id == str(tid)
        c.restart(2)
        assert topic_id(c.broker(2), "t") == tid
        assert topic_name(c.broker(2), tid) == "t"
        cl.delete_topic("t")
        c.wait_until(lambda: topic_id(c.broker(1), "t") is None, 10, "the id forgotten")
        assert topic_name(c.broker(3), tid) is None
        cl.close()


def test_the_controller_gives_an_id_to_a_topic_that_predates_ids(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "c", 3) as c:
        cl = c.client()
        cl.create_topic("legacy", 2, 3)
        md = c.broker(1).member.metadata
        asg = md.topic("legacy")
        # as an earlier release stored it: no topic_id
        md.store.set(topic_path("legacy"), TopicAssignment(
            "legacy", asg.partitions, asg.config).to_json(), asg.version)
        assert md.topic("legacy").topic_id is None
        ctl = c.controller_id()
        assert ctl is not None
        c.kill(ctl)
        c.wait_until(lambda: c.controller_id() not in (None, ctl), 20, "a new controller")
        c.wait_until(lambda: any(c.broker(b).member.metadata.topic("legacy").topic_id
                                 for b in c.live), 20, "the id given")
        survivor = c.live[0]
        tid = topic_id(c.broker(survivor), "legacy")
        assert tid is not None
        assert {topic_id(c.broker(b), "legacy") for b in c.live} == {tid}
        cl.close()
