"""The topic-level ``min.insync.replicas`` (Kafka's override of the broker key): honoured by
``acks=all`` produce (NOT_ENOUGH_REPLICAS, nothing appended, while ``acks=1`` is accepted),
validated as every topic config (INVALID_CONFIG), described with its broker synonym, and
applied at once when altered through the config APIs; standalone and on a cluster."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from tests.kafka.clients import confluent_producer
from tests.kafka.targets import KafkaTarget

INVALID_CONFIG = 40


def _admin(target: KafkaTarget) -> AdminClient:
    return AdminClient({"bootstrap.servers": target.bootstrap_servers,
                        "socket.timeout.ms": 10000})


def _produce(target: KafkaTarget, topic: str, acks: str) -> KafkaError | None:
    """One record with ``acks`` and no retry: the broker's error, or None."""
    errors: list[Any] = []
    with confluent_producer(target.bootstrap_servers, acks=acks, retries=0,
                            linger_ms=0) as producer:
        producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
        assert producer.flush(15) == 0
    return errors[0]


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Whether ``check`` holds within ``timeout`` seconds (a cluster's replicas learn an
    altered config from the controller's LeaderAndIsr, a moment after the alter returns)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _set(admin: AdminClient, topic: str, value: str) -> Any:
    [fut] = admin.incremental_alter_configs([ConfigResource(
        "topic", topic, incremental_configs=[ConfigEntry(
            "min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)])],
        request_timeout=10).values()
    try:
        return fut.result()
    except Exception as exc:
        return exc.args[0]


def test_topic_min_insync_replicas_is_honoured_and_alterable(kafka_target: KafkaTarget
                                                             ) -> None:
    replicas = kafka_target.brokers  # the ISR of a topic on every broker
    kafka_target.create_topic("strict", 1, config={"min.insync.replicas": str(replicas + 1)})
    err = _produce(kafka_target, "strict", "all")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    assert _produce(kafka_target, "strict", "1") is None  # acks=1 does not need the ISR
    admin = _admin(kafka_target)
    [described] = [f.result() for f in admin.describe_configs(
        [ConfigResource("topic", "strict")], request_timeout=10).values()]
    entry = described["min.insync.replicas"]
    assert entry.value == str(replicas + 1)
    assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert "min.insync.replicas" in [s.name for s in entry.synonyms.values()]

    assert _set(admin, "strict", str(replicas)) is None  # applied without a restart
    assert _eventually(lambda: _produce(kafka_target, "strict", "all") is None)
    assert _set(admin, "strict", str(replicas + 1)) is None
    assert _eventually(lambda: getattr(_produce(kafka_target, "strict", "all"), "code",
                                       lambda: None)() == KafkaError.NOT_ENOUGH_REPLICAS)

    # a topic without the key takes the broker's (1)
    kafka_target.create_topic("lenient", 1)
    assert _produce(kafka_target, "lenient", "all") is None
    [default] = [f.result() for f in admin.describe_configs(
        [ConfigResource("topic", "lenient")], request_timeout=10).values()]
    assert default["min.insync.replicas"].value == "1"


@pytest.mark.parametrize("bad", ["0", "-1", "two", "2147483648"])
def test_a_bad_topic_min_insync_replicas_is_refused(kafka_target: KafkaTarget,
                                                    bad: str) -> None:
    admin = _admin(kafka_target)
    [fut] = admin.create_topics([NewTopic("bad", 1, 1, config={"min.insync.replicas": bad})],
                                request_timeout=10).values()
    with pytest.raises(Exception) as raised:
        fut.result()
    error = raised.value.args[0]
    assert error.code() == INVALID_CONFIG and "min.insync.replicas" in error.str()
    kafka_target.create_topic("good", 1)
    refused = _set(admin, "good", bad)
    assert refused is not None and refused.code() == INVALID_CONFIG
    [described] = [f.result() for f in admin.describe_configs(
        [ConfigResource("topic", "good")], request_timeout=10).values()]
    assert described["min.insync.replicas"].value == "1"  # unchanged
