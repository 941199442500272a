"""Internal topics (``__consumer_offsets``) are protected where Kafka protects them, by every
API, on a standalone broker and a cluster (:mod:`kafka_tiers.kafka.internal_topics`): a client
cannot append to them (a forged commit or an undecodable batch would reach every group of the
partition), delete their records, delete them or grow them. Every other API naming topics is
classified as allowed (as Kafka allows it), so a new API must be classified here."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafka_tiers.kafka import errors as E
from kafka_tiers.kafka.codec import REQUESTS
from kafka_tiers.kafka.internal_topics import INTERNAL_TOPICS, OFFSETS_TOPIC, Operation, refusal
from kafka_tiers.kafka.registry import apis
from kafka_tiers.log.records import ProducerRecord, build_batch
from tests.kafka.raw_requests import RawConnection, request_class
from tests.kafka.request_builder import error_codes, request_fields
from tests.kafka.targets import KafkaTarget

#: API key -> the error every entry naming an internal topic gets (Kafka's, see the module)
PROTECTED = {0: E.INVALID_TOPIC_EXCEPTION, 21: E.INVALID_TOPIC_EXCEPTION,
             20: E.INVALID_REQUEST, 37: E.INVALID_REQUEST}
#: APIs naming topics that Kafka serves for internal topics as for any other (CreateAcls, 30:
#: an ACL may name an internal topic, e.g. to let a user read __consumer_offsets)
ALLOWED = frozenset({1, 2, 3, 8, 9, 19, 23, 30, 32, 33, 34, 35, 43, 44, 45, 46, 47})
GROUP = "internal-topics-group"


def _names_topics(api_key: int, version: int) -> bool:
    def walk(fields: dict[str, Any]) -> bool:
        for field in fields.values():
            if not field.for_version_q(version):
                continue
            if field._entity_type == "topicName" or field._json["name"] == "ResourceName":
                return True
            inner = getattr(field, "fields", None)
            if isinstance(inner, dict) and walk(inner):
                return True
        return False
    return walk(REQUESTS[api_key][version].fields)


def _served() -> list[tuple[int, int]]:
    return [(key, v) for key, api in sorted(apis().items())
            for v in range(api.min_version, api.max_version + 1)]


def _offsets_topic_created(bootstrap: str, timeout: float = 15.0) -> None:
    """FindCoordinator creates ``__consumer_offsets``; wait until the group has one."""
    deadline = time.monotonic() + timeout
    while True:
        with RawConnection(bootstrap) as conn:
            answer = conn.call(10, 3, key=GROUP, key_type=0)
        if answer.error_code == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no coordinator for {GROUP}: error {answer.error_code}")
        time.sleep(0.1)


def test_every_internal_topic_is_refused_for_every_protected_operation() -> None:
    for topic in INTERNAL_TOPICS:
        for op in Operation:
            assert refusal(topic, op) is not None, (topic, op)
    for op in Operation:
        assert refusal("orders", op) is None
    assert refusal("__cluster_metadata", Operation.DELETE_TOPIC) is not None


def test_every_api_naming_topics_is_classified() -> None:
    naming = {key for key, v in _served() if _names_topics(key, v)}
    assert naming - set(PROTECTED) - ALLOWED == set(), \
        "classify each new API: does Kafka protect internal topics from it?"


def test_every_api_protects_internal_topics_where_kafka_does(kafka_target: KafkaTarget
                                                             ) -> None:
    _offsets_topic_created(kafka_target.bootstrap_servers)
    batch = build_batch([ProducerRecord(b"forged-commit", b"forged-key")])
    wrong = []
    for key, version in _served():
        if not _names_topics(key, version):
            continue
        fields = request_fields(key, version, OFFSETS_TOPIC, 0)
        if key == 0:  # a well-formed batch: only the topic is wrong
            for td in fields["topic_data"]:
                for pd in td.partition_data:
                    pd.records = batch
        with RawConnection(kafka_target.bootstrap_servers, timeout=10) as conn:
            answer = conn.call(key, version, **fields)
        if key in PROTECTED:
            codes = [c for c in error_codes(answer) if c != 0]
            if codes != [PROTECTED[key]]:
                wrong.append(f"api {key} v{version}: errors {codes}, want {PROTECTED[key]}")
    assert not wrong, wrong


@pytest.mark.parametrize("acks", [1, -1])
def test_produce_to_the_offsets_topic_appends_nothing(kafka_target: KafkaTarget,
                                                      acks: int) -> None:
    _offsets_topic_created(kafka_target.bootstrap_servers)
    produce = request_class(0, 9)
    with RawConnection(kafka_target.bootstrap_servers) as conn:
        answer = conn.call(0, 9, transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
            produce.TopicProduceData(name=OFFSETS_TOPIC, partition_data=[
                produce.TopicProduceData.PartitionProduceData(
                    index=p, records=build_batch([ProducerRecord(b"x")])) for p in range(5)])])
        for part in answer.responses[0].partition_responses:
            assert part.error_code == E.INVALID_TOPIC_EXCEPTION
            assert part.error_message == (f"Cannot append to internal topic {OFFSETS_TOPIC}: "
                                          "only the broker writes its records")
        listed = conn.call(2, 7, replica_id=-1, isolation_level=0, topics=[
            request_class(2, 7).ListOffsetsTopic(name=OFFSETS_TOPIC, partitions=[
                request_class(2, 7).ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=p, timestamp=-1, current_leader_epoch=-1)
                for p in range(5)])])
    # nothing written: no group has committed, so every partition this broker leads is empty
    led = [p.offset for p in listed.topics[0].partitions if p.error_code == 0]
    assert led and set(led) == {0}


def test_delete_records_of_the_offsets_topic_is_refused(kafka_target: KafkaTarget) -> None:
    _offsets_topic_created(kafka_target.bootstrap_servers)
    cls = request_class(21, 2)
    with RawConnection(kafka_target.bootstrap_servers) as conn:
        answer = conn.call(21, 2, timeout_ms=5000, topics=[cls.DeleteRecordsTopic(
            name=OFFSETS_TOPIC, partitions=[
                cls.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=-1)
                for p in range(5)])])
    parts = answer.topics[0].partitions
    assert [(p.error_code, p.low_watermark) for p in parts] == \
        [(E.INVALID_TOPIC_EXCEPTION, -1)] * 5
