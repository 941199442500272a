"""Every served API and version answers a request naming partition ``-1`` and the topic ``''``
(Kafka's per-partition ``UNKNOWN_TOPIC_OR_PARTITION`` / ``INVALID_TOPIC_EXCEPTION``): no
connection closed, no ERROR log record, no traceback. The rule lives in
:mod:`kafka_tiers.kafka.request_partitions`; its unit tests are here too.

Requests are built from each API's own message schema (:mod:`tests.kafka.request_builder`).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.kafka import errors as E
from kafka_tiers.kafka.registry import apis
from kafka_tiers.kafka.request_partitions import (
    PartitionRefused,
    request_partition,
    topic_partition_or_error,
)
from tests.kafka.raw_requests import RawConnection
from tests.kafka.request_builder import request_fields
from tests.kafka.targets import KafkaTarget

#: APIs that may close the connection on these values because Kafka does too (none today)
KAFKA_CLOSES: frozenset[int] = frozenset()


def _served() -> list[tuple[int, int]]:
    return [(key, v) for key, api in sorted(apis().items())
            for v in range(api.min_version, api.max_version + 1)]


# ------------------------------------------------------------------ the rule, unit tests


def test_request_partition_accepts_a_named_partition() -> None:
    assert request_partition("t", 3) == TopicPartition("t", 3)


@pytest.mark.parametrize(("topic", "partition", "code"), [
    ("t", -1, E.UNKNOWN_TOPIC_OR_PARTITION),
    ("t", -(1 << 31), E.UNKNOWN_TOPIC_OR_PARTITION),
    ("", 0, E.UNKNOWN_TOPIC_OR_PARTITION),
    (None, 0, E.UNKNOWN_TOPIC_OR_PARTITION),
    ("", -1, E.UNKNOWN_TOPIC_OR_PARTITION),
])
def test_request_partition_refuses_what_no_topic_can_hold(topic: Any, partition: int,
                                                          code: int) -> None:
    with pytest.raises(PartitionRefused) as info:
        request_partition(topic, partition)
    assert info.value.kafka_error_code == code
    assert repr(topic if topic is not None else "") in str(info.value) or "null" in str(
        info.value)
    tp, refused = topic_partition_or_error(topic, partition)
    assert tp is None and refused is not None and refused[0] == code


# ------------------------------------------------------------------ every API on the wire


def _kafka_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.name.startswith("kafka_tiers") and (r.levelno >= logging.ERROR or r.exc_info)]


@pytest.mark.parametrize(("topic", "partition"), [("", 0), ("present", -1), ("", -1)])
def test_every_api_answers_a_bad_topic_or_partition(kafka_target: KafkaTarget, topic: str,
                                                    partition: int,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    kafka_target.create_topic("present", 1)
    caplog.set_level(logging.WARNING)
    failures = []
    for key, version in _served():
        fields = request_fields(key, version, topic, partition)
        try:
            with RawConnection(kafka_target.bootstrap_servers, timeout=8) as conn:
                conn.call(key, version, **fields)
        except OSError as exc:  # ConnectionError, TimeoutError
            if key not in KAFKA_CLOSES:
                failures.append(f"api {key} v{version}: {type(exc).__name__}: {exc}")
    assert not failures, failures
    bad = _kafka_errors(caplog)
    assert not bad, [f"{r.name}: {r.getMessage()}" for r in bad][:5]
