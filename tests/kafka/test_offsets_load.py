"""The group coordinator loads a ``__consumer_offsets`` partition holding a batch whose
records do not decode (a CRC-valid poison batch written before Produce to internal topics was
refused): the batch is skipped with one ERROR line naming the partition and its offsets, the
records around it load, and the groups of that partition keep working (no traceback, no
retry per timer pass)."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.groups import OFFSETS_TOPIC, partition_for
from kafka_tiers.kafka.groups.records import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
)
from kafka_tiers.log.crc import crc32c
from kafka_tiers.log.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    ProducerRecord,
    build_batch,
)
from tests.kafka.raw_requests import RawConnection

GROUP = "poisoned-group"
PARTITIONS = 5  # FAST_GROUPS' offsets.topic.num.partitions


def _commit_record(topic: str, partition: int, offset: int) -> bytes:
    return build_batch([ProducerRecord(
        encode_offset_value(OffsetValue(offset, -1, "", int(time.time() * 1000))),
        encode_offset_key(OffsetKey(GROUP, topic, partition)))])


def _poison() -> bytes:
    """A batch with a valid header and CRC whose record bytes are garbage."""
    buf = bytearray(build_batch([ProducerRecord(b"v" * 20, b"k" * 10)]))
    for i in range(HEADER_SIZE + 1, len(buf)):
        buf[i] = 0xFF
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def _coordinator_ready(bootstrap: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with RawConnection(bootstrap) as conn:
            if conn.call(10, 3, key=GROUP, key_type=0).error_code == 0:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no coordinator for {GROUP}")
        time.sleep(0.1)


def _committed(bootstrap: str) -> dict[tuple[str, int], int]:
    with RawConnection(bootstrap) as conn:
        answer = conn.call(9, 7, group_id=GROUP, topics=None, require_stable=False)
    assert answer.error_code == 0
    return {(t.name, p.partition_index): p.committed_offset
            for t in answer.topics for p in t.partitions}


def test_an_undecodable_batch_is_skipped_with_one_error(
        make_kafka_broker: Callable[..., Broker], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "offsets-data"
    first = make_kafka_broker(**{"log.dirs": str(data)})
    _coordinator_ready(first.bootstrap_servers)
    tp = TopicPartition(OFFSETS_TOPIC, partition_for(GROUP, PARTITIONS))
    first.produce(tp, _commit_record("orders", 0, 10))
    poison_at = first.produce(tp, _poison())
    first.produce(tp, _commit_record("orders", 1, 20))
    first.shutdown()

    caplog.set_level(logging.INFO)
    second = make_kafka_broker(**{"log.dirs": str(data), "broker.id": "1"})
    _coordinator_ready(second.bootstrap_servers)
    assert _committed(second.bootstrap_servers) == {("orders", 0): 10, ("orders", 1): 20}
    time.sleep(0.5)  # a few timer passes: the load is not retried
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage().split(":")[1].strip() for r in errors] == [str(tp)]
    assert f"offsets {poison_at}..{poison_at}" in errors[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]
