"""Record batch v2 encoding and decoding, varints, CRC and compression."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_tiers.log.compression import CompressionType, compress, decompress
from kafka_tiers.log.crc import crc32c
from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.records import (
    HEADER_SIZE,
    ControlRecordType,
    ProducerRecord,
    RecordBatch,
    TimestampType,
    build_batch,
    build_end_txn_marker,
    iter_batches,
    set_base_offset,
    set_log_append_time,
)
from kafka_tiers.log.varint import decode_varint, encode_varint, size_of_varint

CODECS = list(CompressionType)


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varint_round_trip(n: int) -> None:
    data = encode_varint(n)
    assert len(data) == size_of_varint(n)
    assert decode_varint(b"\xff" + data + b"\x00", 1) == (n, 1 + len(data))


def test_varint_known_encodings() -> None:
    # zigzag: 0->0, -1->1, 1->2, -64->127, 64->128 (two bytes)
    assert encode_varint(0) == b"\x00"
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(-64) == b"\x7f"
    assert encode_varint(64) == b"\x80\x01"
    assert encode_varint(300) == b"\xd8\x04"


def test_varint_truncated_and_overlong_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 11, 0)


def test_crc32c_known_vector() -> None:
    # the standard CRC-32C check value
    assert crc32c(b"123456789") == 0xE3069283


def test_header_layout_is_kafkas() -> None:
    data = build_batch([ProducerRecord(b"v", b"k", (), 1234)], base_offset=7,
                       partition_leader_epoch=3, producer_id=99, producer_epoch=2,
                       base_sequence=5, transactional=True)
    (base, length, epoch, magic, crc, attrs, last_delta, first_ts, max_ts, pid, pepoch,
     seq, count) = struct.unpack_from(">qiibIhiqqqhii", data)
    assert (base, length, epoch, magic) == (7, len(data) - 12, 3, 2)
    assert crc == crc32c(data[21:])
    assert attrs == 0x10  # transactional, no codec, CreateTime
    assert (last_delta, first_ts, max_ts, pid, pepoch, seq, count) == (0, 1234, 1234, 99, 2, 5, 1)
    assert len(data) > HEADER_SIZE


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_round_trip_every_codec(codec: CompressionType) -> None:
    recs = [ProducerRecord(b"value-%d" % i * (i % 5), None if i % 3 == 0 else b"k%d" % i,
                           [("h1", b"x"), ("h2", None)] if i % 2 else [], 10_000 + 3 * i)
            for i in range(300)]
    data = build_batch(recs, base_offset=1000, compression=codec)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.compression == codec
    out = batch.records()
    assert [r.offset for r in out] == list(range(1000, 1300))
    for rec, got in zip(recs, out, strict=True):
        assert (got.key, got.value, got.timestamp) == (rec.key, rec.value, rec.timestamp)
        assert got.headers == tuple(tuple(h) for h in rec.headers)
    assert batch.max_timestamp == 10_000 + 3 * 299
    assert batch.last_offset == 1299 and batch.next_offset == 1300


def test_null_value_and_empty_key_are_distinct() -> None:
    data = build_batch([ProducerRecord(None, b""), ProducerRecord(b"", None)])
    a, b = RecordBatch(data).records()
    assert (a.key, a.value) == (b"", None)
    assert (b.key, b.value) == (None, b"")


def test_crc_detects_any_flipped_bit_in_covered_bytes() -> None:
    data = bytearray(build_batch([ProducerRecord(b"x" * 50, b"key")]))
    for pos in range(21, len(data)):
        for bit in (0, 3, 7):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            assert not RecordBatch(bytes(bad)).is_valid()
    assert RecordBatch(bytes(data)).is_valid()


def test_base_offset_rewrite_keeps_crc_valid() -> None:
    data = bytearray(build_batch([ProducerRecord(b"a"), ProducerRecord(b"b")]))
    set_base_offset(data, 0, 42)
    batch = RecordBatch(bytes(data))
    batch.validate()
    assert [r.offset for r in batch.records()] == [42, 43]


def test_log_append_time_sets_every_record_timestamp() -> None:
    data = bytearray(build_batch([ProducerRecord(b"a", timestamp=5),
                                  ProducerRecord(b"b", timestamp=9)]))
    set_log_append_time(data, 0, 777)
    batch = RecordBatch(bytes(data))
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [777, 777]


def test_control_marker() -> None:
    data = build_end_txn_marker(ControlRecordType.ABORT, producer_id=5, producer_epoch=1,
                                coordinator_epoch=3)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.is_control and batch.is_transactional
    assert batch.control_type() == ControlRecordType.ABORT
    (rec,) = batch.records()
    assert rec.key == b"\x00\x00\x00\x00" and rec.value == b"\x00\x00\x00\x00\x00\x03"


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 60, 61, 70])
def test_truncated_batch_is_corrupt(cut: int) -> None:
    data = build_batch([ProducerRecord(b"x" * 40)])
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data + data[:cut]))


def test_record_count_mismatch_is_corrupt() -> None:
    data = bytearray(build_batch([ProducerRecord(b"a"), ProducerRecord(b"b")]))
    struct.pack_into(">i", data, 57, 3)  # claims three records
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError):
        RecordBatch(bytes(data)).records()


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=4000), st.sampled_from(CODECS))
def test_compression_round_trip(payload: bytes, codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, payload)) == payload


def test_snappy_uses_xerial_framing_and_reads_raw() -> None:
    import cramjam

    data = b"abc" * 40_000
    framed = compress(CompressionType.SNAPPY, data)
    assert framed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert decompress(CompressionType.SNAPPY, framed) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw) == data


def test_garbage_compressed_payload_is_corrupt() -> None:
    for codec in (CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD,
                  CompressionType.SNAPPY):
        with pytest.raises(CorruptRecordError):
            decompress(codec, b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\xff\xff\xff\x00garbage"
                       if codec == CompressionType.SNAPPY else b"not compressed at all")


def test_build_batch_refuses_bad_input() -> None:
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([ProducerRecord("text")])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        build_batch([ProducerRecord(b"a"), ProducerRecord(b"b")], offset_deltas=[1, 1])


_VALID = build_batch([ProducerRecord(b"value-%d" % i, b"k", [("h", b"x")], 5 + i)
                      for i in range(5)])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1,
                max_size=6), st.integers(HEADER_SIZE, len(_VALID)))
def test_mutated_batches_fail_only_with_corrupt_record_error(
        edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(_VALID)
    for pos, value in edits:
        data[pos] = value
    try:
        batch = RecordBatch(bytes(data[:cut]))
        if batch.is_valid():
            batch.records()
        else:
            with pytest.raises(CorruptRecordError):
                batch.validate()
        batch.records()  # decoding unvalidated bytes must fail cleanly too
    except CorruptRecordError:
        pass
