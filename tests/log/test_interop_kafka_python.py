"""Interoperability with an implementation nobody here wrote: kafka-python's ``kafka.record``.

Batches and whole segment files we write decode with kafka-python; batches and segment files
built with kafka-python's builders read correctly with ours (offsets, timestamps, keys, values,
headers, compression).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("kafka.record")

from kafka.record.default_records import (
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kafka_tiers.cli.dump_log import dump_files
from kafka_tiers.log.compression import CompressionType
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import ProducerRecord, RecordBatch, build_batch


def _kafka_python_has(codec: CompressionType) -> bool:
    import kafka.codec as codecs

    return {CompressionType.NONE: True, CompressionType.GZIP: codecs.has_gzip(),
            CompressionType.SNAPPY: codecs.has_snappy(), CompressionType.LZ4: codecs.has_lz4(),
            CompressionType.ZSTD: codecs.has_zstd()}[codec]


# kafka-python needs python-snappy, lz4 and zstandard for those codecs; a missing one skips
CODECS = [pytest.param(c, id=c.name.lower(), marks=pytest.mark.skipif(
    not _kafka_python_has(c), reason=f"kafka-python cannot {c.name.lower()} here"))
    for c in CompressionType]


def _records(n: int, seed: int = 0) -> list[ProducerRecord]:
    return [ProducerRecord(
        value=None if i % 17 == 5 else (b"val-%d-%d" % (seed, i)) * (1 + i % 4),
        key=None if i % 3 == 0 else b"key-%d" % i,
        headers=[("trace", b"t%d" % i), ("empty", None)] if i % 2 else [],
        timestamp=1_600_000_000_000 + 7 * i) for i in range(n)]


def _expected(recs: list[ProducerRecord], base: int) -> list[tuple]:
    return [(base + i, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
            for i, r in enumerate(recs)]


def _theirs(batch: DefaultRecordBatch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
            for r in batch]


def _ours(batch: RecordBatch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
            for r in batch.records()]


def _kafka_python_batch(recs: list[ProducerRecord], codec: int, base: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 30)
    for i, r in enumerate(recs):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=list(r.headers))
    data = bytearray(builder.build())
    data[0:8] = base.to_bytes(8, "big", signed=True)
    return bytes(data)


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_kafka_python(codec: CompressionType) -> None:
    recs = _records(200, seed=int(codec))
    data = build_batch(recs, base_offset=500, compression=codec, partition_leader_epoch=4)
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == int(codec)
    assert theirs.base_offset == 500 and theirs.leader_epoch == 4
    assert theirs.last_offset_delta == 199
    assert _theirs(theirs) == _expected(recs, 500)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_with_ours(codec: CompressionType) -> None:
    recs = _records(200, seed=10 + int(codec))
    data = _kafka_python_batch(recs, int(codec), base=77)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.compression == codec
    assert _ours(batch) == _expected(recs, 77)


def test_transactional_producer_fields_match() -> None:
    data = build_batch(_records(5), producer_id=1234, producer_epoch=7, base_sequence=40,
                       transactional=True)
    theirs = DefaultRecordBatch(data)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (1234, 7, 40)
    assert theirs.is_transactional and not theirs.is_control_batch
    assert theirs.last_sequence == 44


@pytest.mark.parametrize("codec", [CODECS[0], CODECS[3], CODECS[4]])
def test_segment_files_we_write_decode_with_kafka_python(tmp_path: Path,
                                                         codec: CompressionType) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=2048,
                                               index_interval_bytes=512))
    sent: list[tuple] = []
    offset = 0
    for n in range(60):
        recs = _records(1 + n % 6, seed=n)
        log.append(build_batch(recs, compression=codec), leader_epoch=2)
        sent += _expected(recs, offset)
        offset += len(recs)
    log.close()
    got: list[tuple] = []
    files = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(files) > 1
    for path in files:
        records = MemoryRecords(path.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            assert batch.leader_epoch == 2
            got += _theirs(batch)
    assert got == sent


@pytest.mark.parametrize("codec", CODECS)
def test_segments_built_with_kafka_python_read_with_ours(tmp_path: Path,
                                                         codec: CompressionType) -> None:
    """A segment file made only of kafka-python's bytes, loaded after an 'unclean' start
    (so every batch is validated and the indexes built by our code)."""
    part = tmp_path / "their-topic-3"
    part.mkdir()
    builder = MemoryRecordsBuilder(magic=2, compression_type=int(codec), batch_size=1 << 30)
    expected = []
    for i, r in enumerate(_records(120, seed=99)):
        builder.append(timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
        expected.append((i, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]))
    builder.close()
    first = builder.buffer()
    # a second batch continuing the offsets, as a producer's next request would
    more = _records(30, seed=7)
    second = _kafka_python_batch(more, int(codec), base=120)
    expected += _expected(more, 120)
    (part / "00000000000000000000.log").write_bytes(bytes(first) + second)
    log = Log.open(part, LogConfig(index_interval_bytes=64), clean_shutdown=False)
    try:
        assert log.log_end_offset == 150
        got = []
        for b in log.read(0, 1 << 20).batches():
            got += _ours(b)
        assert got == expected
        middle = log.read(125, 1)
        assert middle.batches()[0].base_offset == 120
        assert log.offset_for_timestamp(expected[60][1]).offset == 60
    finally:
        log.close()
    result = dump_files([part / "00000000000000000000.log"], print_data=True)[0]
    assert [b["isValid"] for b in result["batches"]] == [True, True]
    assert [r["offset"] for b in result["batches"] for r in b["records"]] == list(range(150))


def test_kafka_python_producer_batches_append_through_the_log(tmp_path: Path) -> None:
    """As a broker receives them: kafka-python batches (offsets from 0, epoch 0) appended as
    leader get the log's offsets and epoch, and still decode with kafka-python afterwards."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=2048))
    try:
        sent = []
        for n in range(20):
            recs = _records(3, seed=n)
            info = log.append(_kafka_python_batch(recs, 0), leader_epoch=9)
            sent += _expected(recs, info.first_offset)
        got: list[tuple] = []
        offset = 0
        while offset < log.log_end_offset:  # one fetch per segment, as Kafka serves them
            fetched = log.read(offset, 1 << 20)
            records = MemoryRecords(bytes(fetched.records))
            while records.has_next():
                batch = records.next_batch()
                assert batch.validate_crc() and batch.leader_epoch == 9
                got += _theirs(batch)
            offset = fetched.next_offset
        assert log.num_segments > 1
        assert got == sent
    finally:
        log.close()
