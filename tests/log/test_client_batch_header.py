"""A client's batch header must claim exactly the offsets of the records it counts (Kafka's
``LogValidator``): ``recordsCount`` > 0 and ``lastOffsetDelta == recordsCount - 1``. Refused
as ``InvalidRecordError`` (Kafka's ``INVALID_RECORD``) with Kafka's message; nothing appended.
Replication and local appends keep the batch as written (a leader checked it)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from kafka_tiers.log.crc import crc32c
from kafka_tiers.log.errors import InvalidRecordError
from kafka_tiers.log.log import Log
from kafka_tiers.log.producer_state import AppendOrigin
from kafka_tiers.log.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    ProducerRecord,
    RecordBatch,
    build_batch,
    client_batch_problem,
)

LAST_OFFSET_DELTA_AT = 23
RECORDS_COUNT_AT = 57


def forged(values: list[bytes], *, delta: int | None = None, count: int | None = None
           ) -> bytes:
    """A batch of ``values`` whose header claims ``delta`` / ``count``, CRC recomputed (so
    only the offset range is wrong)."""
    buf = bytearray(build_batch([ProducerRecord(v) for v in values]))
    if delta is not None:
        struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, delta)
    if count is not None:
        struct.pack_into(">i", buf, RECORDS_COUNT_AT, count)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def test_a_built_batch_holds() -> None:
    assert client_batch_problem(RecordBatch(build_batch([ProducerRecord(b"a")] * 3))) is None


@pytest.mark.parametrize(("values", "delta", "count", "message"), [
    ([b"a"], (1 << 31) - 1, None, "Inconsistent batch offset range [0, 2147483647] and count "
                                  "of records 1"),
    ([b"a", b"b"], 0, None, "Inconsistent batch offset range [0, 0] and count of records 2"),
    ([b"a"], None, 0, "Invalid reported count for record batch: 0"),
    ([b"a"], None, 5, "Inconsistent batch offset range [0, 0] and count of records 5"),
])
def test_an_inconsistent_header_is_named(values: list[bytes], delta: int | None,
                                         count: int | None, message: str) -> None:
    batch = RecordBatch(forged(values, delta=delta, count=count))
    batch.validate()  # a well-formed batch: only the offset range is wrong
    assert client_batch_problem(batch) == message


def test_a_client_append_of_a_forged_range_writes_nothing(open_log: Callable[..., Log]
                                                          ) -> None:
    log = open_log()
    log.append(build_batch([ProducerRecord(b"before")]), origin=AppendOrigin.CLIENT)
    with pytest.raises(InvalidRecordError, match=r"Inconsistent batch offset range \[0, "
                       r"2147483647\] and count of records 1 in topic partition topic-0"):
        log.append(forged([b"weird"], delta=(1 << 31) - 1), origin=AppendOrigin.CLIENT)
    with pytest.raises(InvalidRecordError, match="Invalid reported count for record batch"):
        log.append(forged([b"weird"], count=0), origin=AppendOrigin.CLIENT)
    assert log.log_end_offset == 1
    info = log.append(build_batch([ProducerRecord(b"after")]), origin=AppendOrigin.CLIENT)
    assert (info.first_offset, log.log_end_offset) == (1, 2)


def test_a_leader_may_write_a_batch_a_client_may_not(open_log: Callable[..., Log]) -> None:
    """Only the client origin is checked: the broker's own batches (compaction-style gaps
    on replication) keep their ranges."""
    log = open_log()
    log.append(forged([b"gap"], delta=4))
    assert log.log_end_offset == 5
