"""Short-timeout settings of the real Kafka clients (confluent-kafka/librdkafka, kafka-python,
aiokafka) for the tests: a broker that does not answer fails a test in seconds, not minutes.

Each function returns the settings to give the client's constructor; ``**extra`` overrides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def confluent_producer_conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka producer settings (``confluent_kafka.Producer(conf)``)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "socket.timeout.ms": 5000,
        "message.timeout.ms": 10000, "request.timeout.ms": 5000,
        "api.version.request.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000,
        "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1000,
    }
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return conf


def confluent_consumer_conf(bootstrap: str, group: str | None = None,
                            **extra: Any) -> dict[str, Any]:
    """librdkafka consumer settings (``confluent_kafka.Consumer(conf)``); without ``group``
    the consumer is meant for ``assign()`` only (a group id is still required by librdkafka,
    but no offset is committed)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group or "kt-test-assign",
        "auto.offset.reset": "earliest", "enable.auto.commit": group is not None,
        "socket.timeout.ms": 5000, "api.version.request.timeout.ms": 5000,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000, "fetch.wait.max.ms": 100,
        "reconnect.backoff.max.ms": 1000, "enable.partition.eof": False,
    }
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return conf


@contextlib.contextmanager
def confluent_producer(bootstrap: str, **extra: Any) -> Iterator[Any]:
    """A librdkafka producer with :func:`confluent_producer_conf`; on exit whatever is still
    queued is purged and the producer closed (a failed test leaves no client retrying)."""
    from confluent_kafka import Producer

    producer = Producer(confluent_producer_conf(bootstrap, **extra))
    try:
        yield producer
    finally:
        with contextlib.suppress(Exception):
            producer.purge()
        with contextlib.suppress(Exception):
            producer.flush(0)
        producer.close()


@contextlib.contextmanager
def confluent_consumer(bootstrap: str, group: str | None = None, **extra: Any
                       ) -> Iterator[Any]:
    """A librdkafka consumer with :func:`confluent_consumer_conf`, closed on exit."""
    from confluent_kafka import Consumer

    consumer = Consumer(confluent_consumer_conf(bootstrap, group, **extra))
    try:
        yield consumer
    finally:
        consumer.close()


def kafka_python_common(bootstrap: str) -> dict[str, Any]:
    """kafka-python settings shared by its producer, consumer and admin client."""
    return {"bootstrap_servers": bootstrap.split(","), "request_timeout_ms": 5000,
            "bootstrap_timeout_ms": 5000, "reconnect_backoff_max_ms": 1000,
            "metadata_max_age_ms": 2000}


def kafka_python_producer_conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """``kafka.KafkaProducer(**conf)`` (idempotent by default in 3.x)."""
    conf = kafka_python_common(bootstrap) | {"max_block_ms": 10000, "retry_backoff_ms": 100,
                                             "delivery_timeout_ms": 15000}
    conf.update(extra)
    return conf


def kafka_python_consumer_conf(bootstrap: str, group: str | None = None,
                               **extra: Any) -> dict[str, Any]:
    """``kafka.KafkaConsumer(**conf)``: from the earliest offset, a poll gives up quickly."""
    conf = kafka_python_common(bootstrap) | {
        "group_id": group, "auto_offset_reset": "earliest",
        "enable_auto_commit": group is not None, "consumer_timeout_ms": 10000,
        "session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "fetch_max_wait_ms": 100,
        "request_timeout_ms": 7000}
    conf.update(extra)
    return conf


def aiokafka_common(bootstrap: str) -> dict[str, Any]:
    """aiokafka settings shared by its producer and consumer."""
    return {"bootstrap_servers": bootstrap, "request_timeout_ms": 5000,
            "retry_backoff_ms": 100, "metadata_max_age_ms": 2000}


def aiokafka_consumer_conf(bootstrap: str, group: str | None = None,
                           **extra: Any) -> dict[str, Any]:
    """``aiokafka.AIOKafkaConsumer(**conf)``."""
    conf = aiokafka_common(bootstrap) | {
        "group_id": group, "auto_offset_reset": "earliest",
        "enable_auto_commit": group is not None, "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500, "fetch_max_wait_ms": 100}
    conf.update(extra)
    return conf


__all__ = ["aiokafka_common", "aiokafka_consumer_conf", "confluent_consumer",
           "confluent_consumer_conf", "confluent_producer", "confluent_producer_conf",
           "kafka_python_common", "kafka_python_consumer_conf", "kafka_python_producer_conf"]
