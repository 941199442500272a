"""The Arrow decoder (no Spark): every codec, nulls, headers, LogAppendTime, offset and
timestamp bounds, record by record against the log engine's own reader; the numba walk and the
Python walk agree, also on damaged bytes, which raise CorruptRecordError and never crash."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("pyarrow", reason="the spark extra is not installed")

from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.records import (
    HEADER_SIZE,
    RecordBatch,
    build_batch,
    set_log_append_time,
)
from kafka_tiers.spark import _walk
from kafka_tiers.spark.arrow import batches_to_arrow
from tests.spark.helpers import CODECS, record

WALKS = [False, *([True] if _walk.AVAILABLE else [])]


def _batches(codec: str) -> list[RecordBatch]:
    out = []
    for k in range(6):
        raw = bytearray(build_batch([record(0, i) for i in range(k * 50, (k + 1) * 50)],
                                    base_offset=k * 50, compression=codec))
        if k == 3:
            set_log_append_time(raw, 0, 1_900_000_000_000)
        out.append(RecordBatch(bytes(raw)))
    return out


def _rows(rb) -> list[tuple]:
    return [(r["offset"], r["key"], r["value"], round(r["timestamp"].timestamp() * 1000),
             r["timestampType"], tuple((h["key"], h["value"]) for h in r["headers"]))
            for r in rb.to_pylist()]


@pytest.mark.parametrize("compiled", WALKS)
@pytest.mark.parametrize("codec", CODECS)
def test_decodes_like_the_log_engine(codec: str, compiled: bool) -> None:
    batches = _batches(codec)
    for lo, hi, tlo, thi in [(0, None, None, None), (37, 251, None, None),
                             (0, None, 1795132800000 + 40 * 180_000,
                              1795132800000 + 220 * 180_000)]:
        rb = batches_to_arrow(batches, "t", 2, min_offset=lo, max_offset=hi,
                              min_timestamp=tlo, max_timestamp=thi, compiled=compiled)
        want = [(r.offset, r.key, r.value, r.timestamp, int(b.timestamp_type), r.headers)
                for b in batches for r in b.records()
                if lo <= r.offset < (hi or 2**62)
                and (tlo is None or tlo <= r.timestamp < thi)]
        assert want and _rows(rb) == want
        assert set(rb.column("partition").to_pylist()) == {2}


def test_damaged_records_raise_and_both_walks_agree() -> None:
    rng = random.Random(5)
    good = build_batch([record(1, i) for i in range(40)], compression="none")
    outcomes = {"raised": 0, "decoded": 0}
    for _ in range(300):
        raw = bytearray(good)
        for _k in range(rng.randint(1, 3)):
            raw[rng.randrange(HEADER_SIZE, len(raw))] = rng.randrange(256)
        batch = RecordBatch(bytes(raw))
        results = []
        for compiled in WALKS:
            try:
                results.append(_rows(batches_to_arrow([batch], "t", 0, compiled=compiled)))
            except CorruptRecordError:
                results.append("corrupt")
        assert all(r == results[0] for r in results)
        outcomes["raised" if results[0] == "corrupt" else "decoded"] += 1
    assert outcomes["raised"] >= 10 and outcomes["decoded"] >= 10
