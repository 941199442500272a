"""Produce of a batch whose header claims an offset range other than its record count (a
CRC-valid forgery): ``INVALID_RECORD`` with Kafka's ``LogValidator`` message, nothing
appended, the log end offset unmoved, the next batch served as usual (standalone and
cluster; the rule itself: tests/log/test_client_batch_header.py)."""

from __future__ import annotations

import pytest

from kafka_tiers.kafka import errors as E
from kafka_tiers.log.records import ProducerRecord, build_batch
from tests.kafka.raw_requests import RawConnection, request_class
from tests.kafka.targets import KafkaTarget
from tests.log.test_client_batch_header import forged

TOPIC = "batch-header"


def _produce(bootstrap: str, records: bytes) -> tuple[int, int, str | None]:
    cls = request_class(0, 9)
    with RawConnection(bootstrap) as conn:
        answer = conn.call(0, 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            cls.TopicProduceData(name=TOPIC, partition_data=[
                cls.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    part = answer.responses[0].partition_responses[0]
    return part.error_code, part.base_offset, part.error_message


def _leader_bootstrap(target: KafkaTarget) -> str:
    """The address of the broker leading ``TOPIC``-0 (Produce goes to the leader)."""
    with RawConnection(target.bootstrap_servers) as conn:
        md = conn.call(3, 12, topics=[request_class(3, 12).MetadataRequestTopic(name=TOPIC)],
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    leader = md.topics[0].partitions[0].leader_id
    broker = next(b for b in md.brokers if b.node_id == leader)
    return f"{broker.host}:{broker.port}"


@pytest.mark.parametrize(("delta", "count", "message"), [
    ((1 << 31) - 1, None, "Inconsistent batch offset range [0, 2147483647] and count of "
                          "records 1 in topic partition batch-header-0"),
    (None, 0, "Invalid reported count for record batch: 0 in topic partition batch-header-0"),
])
def test_a_forged_offset_range_is_refused(kafka_target: KafkaTarget, delta: int | None,
                                          count: int | None, message: str) -> None:
    kafka_target.create_topic(TOPIC, 1)
    leader = _leader_bootstrap(kafka_target)
    assert _produce(leader, build_batch([ProducerRecord(b"before")]))[:2] == (0, 0)
    assert _produce(leader, forged([b"weird"], delta=delta, count=count)) == \
        (E.INVALID_RECORD, -1, message)
    assert _produce(leader, build_batch([ProducerRecord(b"after")]))[:2] == (0, 1)
