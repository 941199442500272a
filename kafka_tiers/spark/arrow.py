"""Decoding Kafka record batches straight into Arrow record batches (no Python row objects).

The decoder walks the records of each batch once, in Python, noting only integers (offset and
timestamp deltas, byte positions and lengths of keys, values and headers); every byte copy is
then done by Arrow in C++: the decompressed records sections are joined into one buffer, viewed
as one binary array whose elements alternate between the wanted fields and the gaps between
them, and the keys, values and header fields are taken out of it by index.

The Arrow schema is the one Spark derives from :data:`SPARK_SCHEMA_DDL` (the schema of Spark's
own Kafka source, headers included)::

    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp, timestampType int, headers array<struct<key:string, value:binary>>

This module needs ``pyarrow`` and ``numpy`` (the ``spark`` extra), not ``pyspark``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.records import RecordBatch
from kafka_tiers.spark import _walk

#: Spark's schema of the data source, as DDL.
SPARK_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>"
)

_HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])

#: The Arrow schema Spark expects for :data:`SPARK_SCHEMA_DDL` (timestamps in UTC).
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", pa.list_(pa.field("element", _HEADER_TYPE))),
])

_TS_MASK = 0x08


_PAD = bytes(16)


def _varints(u8: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at every position of ``pos`` in ``u8``: (values, byte lengths).

    ``u8`` must end in at least 10 padding bytes, so no read goes past it.
    """
    b = u8[pos].astype(np.int64)
    val = b & 0x7F
    lengths = np.ones(len(pos), dtype=np.int64)
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while more.size:
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")
        b = u8[pos[more] + lengths[more]].astype(np.int64)
        val[more] |= (b & 0x7F) << shift
        lengths[more] += 1
        more = more[b >= 0x80]
        shift += 7
    return (val >> 1) ^ -(val & 1), lengths


def _record_starts(buf: bytes, end: int) -> list[int]:
    """The start of every record in ``buf[:end]`` (consecutive length-prefixed records)."""
    starts: list[int] = []
    append = starts.append
    p = 0
    while p < end:
        append(p)
        b = buf[p]
        if b < 0x80:
            v = b
            p += 1
        else:
            c = buf[p + 1] if p + 1 < end else 0
            if c < 0x80:
                v = (b & 0x7F) | (c << 7)
                p += 2
            else:
                length, p = _varint(buf, p + 1, b)
                v = length << 1 if length >= 0 else 1
        if v & 1:
            raise CorruptRecordError(f"negative record length at byte {starts[-1]}")
        p += v >> 1
    if p != end:
        raise CorruptRecordError("the last record overruns its batch")
    return starts


def _varint(data: bytes, pos: int, b: int) -> tuple[int, int]:
    result = b & 0x7F
    shift = 7
    while True:
        if pos >= len(data):
            raise CorruptRecordError("a varint overruns its batch")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


@dataclass
class _Decoded:
    """Every record of some batches, as integer columns over one joined buffer."""

    buffer: pa.Buffer
    offsets: np.ndarray
    stamps: np.ndarray
    ts_types: np.ndarray
    bounds: np.ndarray  # (n, 4): key start, key end, value start, value end
    key_null: np.ndarray
    value_null: np.ndarray
    header_counts: np.ndarray
    header_bounds: np.ndarray  # (h, 4) in record order
    header_value_null: np.ndarray


def _decode(batches: Sequence[RecordBatch], *, compiled: bool | None = None) -> _Decoded:
    """Walk every record of ``batches`` (decompressing them); ``compiled`` None uses the numba
    walk when numba is installed."""
    datas = [b.records_bytes() for b in batches]
    joined = b"".join(datas)
    counts = np.array([b.records_count for b in batches], dtype=np.int64)
    if compiled is None:
        compiled = _walk.AVAILABLE
    if compiled:
        return _decode_compiled(batches, joined, datas, counts)
    try:
        return _decode_python(batches, joined, datas, counts)
    except IndexError:  # a damaged length points past the records
        raise CorruptRecordError("a record overruns its batch") from None


def _finish(batches: Sequence[RecordBatch], joined: bytes, counts: np.ndarray,
            off_delta: np.ndarray, ts_delta: np.ndarray, bounds: np.ndarray,
            key_null: np.ndarray, value_null: np.ndarray, hcount: np.ndarray,
            hbounds: np.ndarray, hnull: np.ndarray) -> _Decoded:
    base_offsets = np.array([b.base_offset for b in batches], dtype=np.int64)
    fixed = np.array([bool(b.attributes & _TS_MASK) for b in batches], dtype=bool)
    base_ts = np.array([b.max_timestamp if f else b.base_timestamp
                        for b, f in zip(batches, fixed, strict=True)], dtype=np.int64)
    rec_fixed = np.repeat(fixed, counts)
    stamps = np.repeat(base_ts, counts) + np.where(rec_fixed, 0, ts_delta)
    return _Decoded(pa.py_buffer(joined), np.repeat(base_offsets, counts) + off_delta, stamps,
                    rec_fixed.astype(np.int32), bounds, key_null, value_null, hcount, hbounds,
                    hnull)


def _decode_compiled(batches: Sequence[RecordBatch], joined: bytes, datas: list[bytes],
                     counts: np.ndarray) -> _Decoded:
    n = int(counts.sum())
    u8 = np.frombuffer(joined + _PAD, dtype=np.uint8)
    ends = np.cumsum([len(d) for d in datas], dtype=np.int64)
    off = np.empty(n, dtype=np.int64)
    ts = np.empty(n, dtype=np.int64)
    bounds = np.empty((n, 4), dtype=np.int64)
    knull = np.empty(n, dtype=np.bool_)
    vnull = np.empty(n, dtype=np.bool_)
    hcount = np.empty(n, dtype=np.int64)
    hpos = np.empty(n, dtype=np.int64)
    code, index = _walk.walk(u8, ends, counts, off, ts, bounds, knull, vnull, hcount, hpos)
    if code < 0:
        raise CorruptRecordError(f"{_walk.MESSAGES[code]} (record {index} of the batches "
                                 f"decoded together)")
    total = int(hcount.sum())
    hbounds = np.empty((total, 4), dtype=np.int64)
    hnull = np.zeros(total, dtype=bool)
    if total:
        first = np.cumsum(hcount) - hcount
        _walk.walk_headers(u8, hpos, hcount, first, hbounds, hnull)
    return _finish(batches, joined, counts, off, ts, bounds, knull, vnull, hcount, hbounds,
                   hnull)


def _decode_python(batches: Sequence[RecordBatch], joined: bytes, datas: list[bytes],
                   counts: np.ndarray) -> _Decoded:
    sections = np.cumsum([0] + [len(d) for d in datas], dtype=np.int64)
    starts = np.array(_record_starts(joined, len(joined)), dtype=np.int64)
    # every batch must hold exactly its declared records, none crossing into the next
    found = np.diff(np.searchsorted(starts, sections, side="left"))
    if len(found) and not np.array_equal(found, counts):
        bad = int(np.flatnonzero(found != counts)[0])
        raise CorruptRecordError(
            f"batch at offset {batches[bad].base_offset} declares {int(counts[bad])} records "
            f"but holds {int(found[bad])}")
    u8 = np.frombuffer(joined + _PAD, dtype=np.uint8)
    length, ln = _varints(u8, starts)
    rec_end = starts + ln + length
    p = starts + ln + 1  # past the length and the attributes byte
    ts_delta, ln = _varints(u8, p)
    p = p + ln
    off_delta, ln = _varints(u8, p)
    p = p + ln
    klen, ln = _varints(u8, p)
    kstart = p + ln
    kend = kstart + np.maximum(klen, 0)
    vlen, ln = _varints(u8, kend)
    vstart = kend + ln
    vend = vstart + np.maximum(vlen, 0)
    hcount, ln = _varints(u8, vend)
    p = vstart + np.maximum(vlen, 0) + ln
    if (hcount < 0).any():
        raise CorruptRecordError("negative header count")
    total_headers = int(hcount.sum())
    hbounds = np.zeros((total_headers, 4), dtype=np.int64)
    hnull = np.zeros(total_headers, dtype=bool)
    if total_headers:
        first = np.concatenate(([0], np.cumsum(hcount)[:-1]))
        for j in range(int(hcount.max())):
            rows = np.flatnonzero(hcount > j)
            q = p[rows]
            hk, ln = _varints(u8, q)
            if (hk < 0).any():
                raise CorruptRecordError("null header key")
            ks = q + ln
            ke = ks + hk
            hv, ln = _varints(u8, ke)
            vs = ke + ln
            ve = vs + np.maximum(hv, 0)
            slot = first[rows] + j
            hbounds[slot, 0] = ks
            hbounds[slot, 1] = ke
            hbounds[slot, 2] = vs
            hbounds[slot, 3] = ve
            hnull[slot] = hv < 0
            p[rows] = ve
    if not np.array_equal(p, rec_end):
        bad = int(np.flatnonzero(p != rec_end)[0])
        raise CorruptRecordError(f"record {bad} of the batches declares {int(length[bad])} "
                                 f"bytes but its fields take {int(p[bad] - starts[bad] - 1)}")
    bounds = np.stack([kstart, kend, vstart, vend], axis=1)
    return _finish(batches, joined, counts, off_delta, ts_delta, bounds, klen < 0, vlen < 0,
                   hcount, hbounds, hnull)


def _validity(nulls: np.ndarray) -> pa.Buffer | None:
    if not nulls.any():
        return None
    return pa.py_buffer(np.packbits(~nulls.astype(bool), bitorder="little"))


def _fields(buffer: pa.Buffer, bounds: np.ndarray, nulls: np.ndarray, take: np.ndarray,
            pick: int) -> pa.Array:
    """Elements ``pick`` (0 or 1) of each ``(start, end, start, end)`` group of ``bounds`` at
    the indices ``take``, as a binary array with nulls where ``nulls``."""
    if len(bounds) == 0:
        return pa.array([], pa.binary())
    offsets_type: type[np.signedinteger[Any]]
    if int(bounds[-1]) >= 2**31:
        offsets_type, binary_type = np.int64, pa.large_binary()
    else:
        offsets_type, binary_type = np.int32, pa.binary()
    offsets = bounds.astype(offsets_type)
    whole = pa.Array.from_buffers(binary_type, len(offsets) - 1,
                                  [None, pa.py_buffer(offsets), buffer])
    picked = whole.take(pa.array(take * 4 + pick * 2, pa.int64()))
    if binary_type != pa.binary():
        picked = picked.cast(pa.binary())
    valid = _validity(nulls[take]) if len(take) else None
    if valid is None:
        return picked
    return pa.Array.from_buffers(pa.binary(), len(picked),
                                 [valid, picked.buffers()[1], picked.buffers()[2]])


def batches_to_arrow(batches: Sequence[RecordBatch], topic: str, partition: int, *,
                     min_offset: int = 0, max_offset: int | None = None,
                     min_timestamp: int | None = None, max_timestamp: int | None = None,
                     schema: pa.Schema = ARROW_SCHEMA,
                     compiled: bool | None = None) -> pa.RecordBatch:
    """Decode validated record batches into one Arrow record batch of the Spark schema.

    Keeps only records with ``min_offset <= offset < max_offset`` and, when given,
    ``min_timestamp <= timestamp < max_timestamp`` (epoch milliseconds). Control batches
    (transaction markers) must not be passed: consumers never see them.

    Args:
        schema: the exact Arrow schema to produce (Spark's, from the reader's schema).
        compiled: walk the records with numba (None: when installed) or in Python.

    Raises:
        CorruptRecordError: a batch's records do not decode.
    """
    dec = _decode(batches, compiled=compiled)
    offsets, stamps = dec.offsets, dec.stamps
    keep = offsets >= min_offset
    if max_offset is not None:
        keep &= offsets < max_offset
    if min_timestamp is not None:
        keep &= stamps >= min_timestamp
    if max_timestamp is not None:
        keep &= stamps < max_timestamp
    take = np.flatnonzero(keep)
    n = len(take)
    buffer = dec.buffer
    bounds = dec.bounds.reshape(-1)
    keys = _fields(buffer, bounds, dec.key_null, take, 0)
    values = _fields(buffer, bounds, dec.value_null, take, 1)
    ts_type = dec.ts_types[take]
    headers_type = schema.field("headers").type
    hcounts = dec.header_counts
    if len(dec.header_bounds):
        starts = np.concatenate(([0], np.cumsum(hcounts)))
        kept_counts = hcounts[take]
        list_offsets = np.concatenate(([0], np.cumsum(kept_counts))).astype(np.int32)
        firsts = starts[:-1][take]
        idx = (np.repeat(firsts - list_offsets[:-1], kept_counts)
               + np.arange(int(kept_counts.sum()), dtype=np.int64))
        hbounds = dec.header_bounds.reshape(-1)
        hkeys = _fields(buffer, hbounds, np.zeros(len(dec.header_bounds), dtype=bool), idx, 0)
        hvalues = _fields(buffer, hbounds, dec.header_value_null, idx, 1)
        try:
            hkeys = hkeys.cast(pa.string())
        except pa.ArrowInvalid as exc:
            raise CorruptRecordError(f"a header key is not UTF-8: {exc}") from None
        struct = pa.StructArray.from_arrays([hkeys, hvalues],
                                            fields=list(headers_type.value_type))
        headers = pa.ListArray.from_arrays(pa.array(list_offsets), struct, type=headers_type)
    else:
        headers = pa.ListArray.from_arrays(
            pa.array(np.zeros(n + 1, dtype=np.int32)),
            pa.array([], type=headers_type.value_type), type=headers_type)
    arrays = [
        keys,
        values,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets[take]),
        pa.array(stamps[take] * 1000, type=schema.field("timestamp").type),
        pa.array(ts_type),
        headers,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


__all__ = ["ARROW_SCHEMA", "SPARK_SCHEMA_DDL", "batches_to_arrow"]
