"""Record batch v2 (magic 2), byte for byte as Kafka writes it: encode, decode, validate.

Layout of a batch (big-endian)::

    0  baseOffset int64         27 baseTimestamp int64
    8  batchLength int32        35 maxTimestamp int64
    12 partitionLeaderEpoch     43 producerId int64
    16 magic int8 (= 2)         51 producerEpoch int16
    17 crc uint32               53 baseSequence int32
    21 attributes int16         57 recordsCount int32
    23 lastOffsetDelta int32    61 records (compressed as a whole when a codec is set)

``batchLength`` counts the bytes after itself (size - 12). The CRC-32C covers bytes 21..end, so
the broker may rewrite ``baseOffset`` and ``partitionLeaderEpoch`` without recomputing it.
Attributes: bits 0-2 codec, bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional,
bit 5 control, bit 6 delete horizon set. Each record is::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1 = null), key, valueLength varint, value,
    headerCount varint, [headerKeyLength varint, key utf-8, valueLength varint, value]...
"""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from typing import NamedTuple

from kafka_tiers.log.compression import CompressionType, compress, decompress
from kafka_tiers.log.crc import crc32c
from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.varint import encode_varint

MAGIC = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE = 61
ATTRIBUTES_OFFSET = 21
CRC_OFFSET = 17
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_UI = struct.Struct(">I")
_H = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class TimestampType(IntEnum):
    """Which timestamp a batch carries: the producer's, or the broker's at append."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @classmethod
    def parse(cls, value: str | int | TimestampType) -> TimestampType:
        """From ``CreateTime`` / ``LogAppendTime`` (Kafka's config values) or an id."""
        if isinstance(value, TimestampType):
            return value
        if isinstance(value, int):
            return cls(value)
        text = value.strip().lower()
        if text == "createtime":
            return cls.CREATE_TIME
        if text == "logappendtime":
            return cls.LOG_APPEND_TIME
        raise ValueError(f"unknown timestamp type {value!r}: expected CreateTime or LogAppendTime")


class ControlRecordType(IntEnum):
    """The type in a control record's key (transaction markers)."""

    ABORT = 0
    COMMIT = 1


class Record(NamedTuple):
    """One decoded record. ``headers`` is a tuple of ``(key, value)`` with ``value`` nullable."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class ProducerRecord(NamedTuple):
    """A record to put in a new batch; ``timestamp`` None means now (milliseconds)."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


def _decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int,
                    fixed_timestamp: int | None) -> list[Record]:
    """Decode ``count`` records from ``data``; the whole buffer must be consumed."""
    out: list[Record] = []
    append = out.append
    pos = 0
    end = len(data)
    for _ in range(count):
        # --- length (varint), inlined for the one-byte case throughout
        b = data[pos]
        pos += 1
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
        else:
            length, pos = _slow_varint(data, pos, b)
        start = pos
        if length < 0 or start + length > end:
            raise CorruptRecordError(f"record length {length} overruns the batch")
        pos += 1  # attributes, unused
        b = data[pos]
        pos += 1
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
        else:
            ts_delta, pos = _slow_varint(data, pos, b)
        b = data[pos]
        pos += 1
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
        else:
            off_delta, pos = _slow_varint(data, pos, b)
        b = data[pos]
        pos += 1
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
        else:
            n, pos = _slow_varint(data, pos, b)
        if n >= 0:
            key = data[pos:pos + n]
            pos += n
        else:
            key = None
        b = data[pos]
        pos += 1
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
        else:
            n, pos = _slow_varint(data, pos, b)
        if n >= 0:
            value = data[pos:pos + n]
            pos += n
        else:
            value = None
        b = data[pos]
        pos += 1
        if b == 0:
            headers: tuple = ()
        else:
            if b < 0x80:
                nh = (b >> 1) ^ -(b & 1)
            else:
                nh, pos = _slow_varint(data, pos, b)
            if nh < 0:
                raise CorruptRecordError(f"negative header count {nh}")
            hs = []
            for _h in range(nh):
                b = data[pos]
                pos += 1
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                else:
                    n, pos = _slow_varint(data, pos, b)
                if n < 0:
                    raise CorruptRecordError("null header key")
                hkey = data[pos:pos + n].decode("utf-8")
                pos += n
                b = data[pos]
                pos += 1
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                else:
                    n, pos = _slow_varint(data, pos, b)
                if n >= 0:
                    hval = data[pos:pos + n]
                    pos += n
                else:
                    hval = None
                hs.append((hkey, hval))
            headers = tuple(hs)
        if pos - start != length:
            raise CorruptRecordError(
                f"record declares {length} bytes but its fields take {pos - start}")
        append(Record(base_offset + off_delta,
                      fixed_timestamp if fixed_timestamp is not None else base_timestamp + ts_delta,
                      key, value, headers))
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the batch's {count} records")
    return out


def _slow_varint(data: bytes, pos: int, first: int) -> tuple[int, int]:
    result = first & 0x7F
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


class RecordBatch:
    """A read-only view of one v2 record batch inside a buffer.

    Construction parses only the 61-byte header (cheap); :meth:`records` decompresses and
    decodes. Nothing is validated until :meth:`validate` (or :meth:`is_valid`) is called.

    Raises:
        CorruptRecordError: on construction, when fewer than 61 bytes are available or the
            declared size is smaller than a header or overruns the buffer.
    """

    __slots__ = ("_buf", "_pos", "attributes", "base_offset", "base_sequence",
                 "base_timestamp", "batch_length", "crc", "last_offset_delta", "magic",
                 "max_timestamp", "partition_leader_epoch", "producer_epoch", "producer_id",
                 "records_count")

    def __init__(self, buffer: bytes | bytearray | memoryview, position: int = 0) -> None:
        if len(buffer) - position < HEADER_SIZE:
            raise CorruptRecordError(
                f"{len(buffer) - position} bytes cannot hold a record batch header",
                position=position)
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.records_count) = HEADER.unpack_from(buffer, position)
        size = self.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"batch size {size} is smaller than its header",
                                     position=position)
        if position + size > len(buffer):
            raise CorruptRecordError(
                f"batch of {size} bytes overruns the {len(buffer) - position} bytes left",
                position=position)
        self._buf = buffer
        self._pos = position

    # --- header facts
    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def position(self) -> int:
        """Where the batch starts in its buffer."""
        return self._pos

    def raw(self) -> bytes:
        """The batch's bytes."""
        return bytes(self._buf[self._pos:self._pos + self.size])

    def compute_crc(self) -> int:
        """The CRC-32C of bytes 21..end as they are now."""
        view = memoryview(self._buf)
        return crc32c(view[self._pos + ATTRIBUTES_OFFSET:self._pos + self.size])

    def is_valid(self) -> bool:
        """True when the magic is 2 and the stored CRC matches the bytes."""
        return self.magic == MAGIC and self.crc == self.compute_crc()

    def validate(self, path: str | None = None) -> None:
        """Check magic, CRC and header consistency (Kafka's ``ensureValid`` and more).

        Raises:
            CorruptRecordError: naming what is wrong, the file and the position.
        """
        pos = self._pos
        if self.magic != MAGIC:
            raise CorruptRecordError(f"unsupported magic {self.magic} (expected 2)",
                                     path=path, position=pos)
        actual = self.compute_crc()
        if actual != self.crc:
            raise CorruptRecordError(
                f"CRC mismatch: stored {self.crc:#010x}, computed {actual:#010x}",
                path=path, position=pos)
        if self.records_count < 0 or self.last_offset_delta < 0:
            raise CorruptRecordError(
                f"negative record count {self.records_count} or last offset delta "
                f"{self.last_offset_delta}", path=path, position=pos)
        if self.attributes & COMPRESSION_MASK > CompressionType.ZSTD:
            raise CorruptRecordError(
                f"unknown compression id {self.attributes & COMPRESSION_MASK}",
                path=path, position=pos)

    def records_bytes(self) -> bytes:
        """The records section, decompressed."""
        view = memoryview(self._buf)[self._pos + HEADER_SIZE:self._pos + self.size]
        return decompress(self.attributes & COMPRESSION_MASK, view)

    def records(self) -> list[Record]:
        """Decode every record (absolute offsets; LogAppendTime batches give every record
        the batch's max timestamp, as Kafka does).

        Raises:
            CorruptRecordError: the records do not decode to exactly ``records_count`` records.
        """
        data = self.records_bytes()
        fixed = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        try:
            return _decode_records(data, self.records_count, self.base_offset,
                                   self.base_timestamp, fixed)
        except (IndexError, UnicodeDecodeError) as exc:
            raise CorruptRecordError(f"malformed records: {exc}", position=self._pos) from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def control_type(self) -> ControlRecordType | None:
        """For a control batch, the type of its (single) marker record; else None."""
        if not self.is_control:
            return None
        recs = self.records()
        if not recs or recs[0].key is None or len(recs[0].key) < 4:
            raise CorruptRecordError("control batch without a control record key",
                                     position=self._pos)
        _version, kind = _CONTROL_KEY.unpack_from(recs[0].key)
        try:
            return ControlRecordType(kind)
        except ValueError:
            raise CorruptRecordError(f"unknown control record type {kind}",
                                     position=self._pos) from None

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.records_count}, size={self.size}, "
                f"codec={self.attributes & COMPRESSION_MASK})")


def iter_batches(buffer: bytes | bytearray | memoryview, position: int = 0,
                 end: int | None = None) -> Iterator[RecordBatch]:
    """Shallow iteration over consecutive batches in ``buffer[position:end]``.

    Raises:
        CorruptRecordError: when the bytes stop inside a batch or a size is impossible.
    """
    stop = len(buffer) if end is None else end
    view = memoryview(buffer)[:stop] if end is not None else buffer
    pos = position
    while pos < stop:
        if stop - pos < LOG_OVERHEAD:
            raise CorruptRecordError(f"{stop - pos} trailing bytes are not a batch",
                                     position=pos)
        batch = RecordBatch(view, pos)
        yield batch
        pos += batch.size


def build_batch(
    records: Iterable[ProducerRecord | bytes | None],
    *,
    base_offset: int = 0,
    compression: CompressionType | int | str = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Encode records as one v2 batch.

    Records get offset deltas 0, 1, 2, ... (or ``offset_deltas``); a record without timestamp
    gets the current time. For LogAppendTime the caller (the log) later sets the time with
    :func:`set_log_append_time`.

    Raises:
        ValueError: no records, a bad field type, or out-of-order offset deltas.
    """
    codec = CompressionType.parse(compression)
    recs = [r if isinstance(r, ProducerRecord) else ProducerRecord(r) for r in records]
    if not recs:
        raise ValueError("a record batch needs at least one record")
    now = int(time.time() * 1000)
    stamps = [now if r.timestamp is None else int(r.timestamp) for r in recs]
    base_ts = stamps[0]
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(recs)))
    if len(deltas) != len(recs) or any(b <= a for a, b in itertools.pairwise(deltas)):
        raise ValueError("offset deltas must be strictly increasing, one per record")
    body = bytearray()
    for rec, ts, delta in zip(recs, stamps, deltas, strict=True):
        one = bytearray(b"\x00")
        one += encode_varint(ts - base_ts)
        one += encode_varint(delta)
        for field in (rec.key, rec.value):
            if field is None:
                one += b"\x01"
            else:
                if not isinstance(field, bytes | bytearray | memoryview):
                    raise ValueError(f"record key and value must be bytes, got {type(field)}")
                one += encode_varint(len(field))
                one += field
        one += encode_varint(len(rec.headers))
        for hkey, hval in rec.headers:
            kb = hkey.encode("utf-8")
            one += encode_varint(len(kb))
            one += kb
            if hval is None:
                one += b"\x01"
            else:
                one += encode_varint(len(hval))
                one += hval
        body += encode_varint(len(one))
        body += one
    payload = compress(codec, body) if codec != CompressionType.NONE else body
    attributes = int(codec) | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload),
                     partition_leader_epoch, MAGIC, 0, attributes, deltas[-1], base_ts,
                     max(stamps), producer_id, producer_epoch, base_sequence, len(recs))
    out += payload
    _UI.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_end_txn_marker(kind: ControlRecordType, *, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int = 0, base_offset: int = 0,
                         partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                         timestamp: int | None = None) -> bytes:
    """A transaction marker (a control batch with one COMMIT or ABORT record), as Kafka's
    ``EndTransactionMarker`` writes it."""
    key = _CONTROL_KEY.pack(0, int(kind))
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return build_batch([ProducerRecord(value, key, (), timestamp)], base_offset=base_offset,
                       partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                       producer_epoch=producer_epoch, transactional=True, control=True)


# --- header fields outside the CRC --------------------------------------------------------
# The CRC-32C covers bytes 21..end (attributes onward), so ``baseOffset``, ``batchLength``,
# ``partitionLeaderEpoch`` and ``magic`` can be damaged without a CRC failure. ``magic`` is
# checked by value and ``batchLength`` by the size checks and the CRC (a wrong length moves the
# CRC's range); ``baseOffset`` can only be checked against the batches around it, with these
# helpers (docs/log-format.md, "Fields outside the CRC").


def offset_order_problem(floor: int, base_offset: int, last_offset: int,
                         ceiling: int | None = None) -> str | None:
    """Why a batch holding ``base_offset..last_offset`` cannot stand where it is, or None.

    Args:
        floor: the lowest offset the batch may hold: the previous batch's last offset + 1, or
            the segment's base offset for its first batch.
        ceiling: the offset the batch must stay below (the next segment's base offset), if any.

    Integer comparisons only: cheap enough for every read.
    """
    if base_offset < floor:
        return (f"baseOffset {base_offset} is below {floor}, the first offset it may hold "
                "(after the previous batch, at or above the segment's base offset)")
    if last_offset < base_offset:
        return f"lastOffset {last_offset} is below baseOffset {base_offset}"
    if ceiling is not None and last_offset >= ceiling:
        return (f"batch {base_offset}-{last_offset} (baseOffset {base_offset}) reaches "
                f"{ceiling}, past the segment's last offset")
    return None


def earlier_batch_is_suspect(floor: int, prev_base: int, base_offset: int) -> bool:
    """When a batch starting at ``base_offset`` overlaps the batch before it (which starts at
    ``prev_base`` and had to start at or above ``floor``), which of the two has the damaged
    ``baseOffset``? The earlier one when it starts past its floor (a gap) and the later one
    would fit at that floor: a ``baseOffset`` raised by damage explains both facts. Otherwise
    the later one (its ``baseOffset`` went down)."""
    return prev_base > floor and base_offset >= floor


def first_offset_violation(bounds: Sequence[tuple[int, int]], floor: int,
                           ceiling: int | None = None) -> tuple[int, str] | None:
    """The index of the first batch whose ``(base offset, last offset)`` breaks the offset
    rules, and why; None when every batch keeps them. ``floor`` is the lowest offset the
    first batch may hold (the segment's base offset), ``ceiling`` the offset every batch must
    stay below. When two batches overlap, :func:`earlier_batch_is_suspect` says which one is
    blamed; the valid prefix is ``bounds[:index]``."""
    floors = []
    for i, (base, last) in enumerate(bounds):
        floors.append(floor)
        problem = offset_order_problem(floor, base, last, ceiling)
        if problem is not None:
            if i > 0 and base < floor and earlier_batch_is_suspect(floors[i - 1],
                                                                   bounds[i - 1][0], base):
                prev_base, prev_last = bounds[i - 1]
                return i - 1, (f"baseOffset {prev_base} (batch {prev_base}-{prev_last}) "
                               f"overlaps the next batch, which starts at {base}, and starts past "
                               f"{floors[i - 1]}, the first offset it could hold: damaged "
                               "baseOffset")
            return i, problem
        floor = last + 1
    return None


def offset_violations(bounds: Sequence[tuple[int, int]], floor: int,
                      ceiling: int | None = None) -> dict[int, str]:
    """Index -> why, for every batch of ``bounds`` breaking the offset rules (for tools that
    report every problem); after a bad batch the next ones are checked as if it were absent,
    so each damaged batch is named once."""
    out: dict[int, str] = {}
    i = 0
    while i < len(bounds):
        found = first_offset_violation(bounds[i:], floor, ceiling)
        if found is None:
            break
        k = i + found[0]
        out[k] = found[1]
        if k > i:
            floor = bounds[k - 1][1] + 1
        i = k + 1
    return out


def leader_epoch_problem(epoch: int) -> str | None:
    """Why a ``partitionLeaderEpoch`` (outside the CRC) is impossible, or None: it is -1 (no
    epoch) or a non-negative epoch."""
    if epoch < NO_PARTITION_LEADER_EPOCH:
        return f"partitionLeaderEpoch {epoch} is negative"
    return None


def epoch_violations(epochs: Sequence[int]) -> dict[int, str]:
    """Index -> why, for every batch whose ``partitionLeaderEpoch`` (outside the CRC) is below
    the epoch of the batch before it: Kafka's leader epochs never decrease along a log. A batch
    without an epoch (-1) is skipped, and each drop is named once (at the lower batch)."""
    out: dict[int, str] = {}
    previous = NO_PARTITION_LEADER_EPOCH
    for i, epoch in enumerate(epochs):
        if epoch < 0:
            continue
        if epoch < previous:
            out[i] = (f"partitionLeaderEpoch {epoch} is below {previous} of the batch before "
                      "(leader epochs never decrease along a log): damaged partitionLeaderEpoch")
        previous = epoch
    return out


def client_batch_problem(batch: RecordBatch) -> str | None:
    """Kafka's ``LogValidator`` checks of the header of a batch a client sent (magic 2,
    already :meth:`RecordBatch.validate`-d): the offset range the header claims must hold
    exactly the records it counts, so a client cannot move the log end offset by more than
    it writes. Kafka's messages; None when the batch holds.

    - ``recordsCount`` > 0 ("Invalid reported count for record batch");
    - ``lastOffsetDelta`` == ``recordsCount - 1`` ("Inconsistent batch offset range").

    The base offset is not checked (the leader overwrites it, as Kafka does); the records
    themselves are not decoded here (their count inside the body is not compared).
    """
    count = batch.records_count
    if count <= 0:
        return f"Invalid reported count for record batch: {count}"
    if batch.last_offset_delta + 1 != count:
        return (f"Inconsistent batch offset range [{batch.base_offset}, {batch.last_offset}] "
                f"and count of records {count}")
    return None


def verified_batches(buffer: bytes | bytearray | memoryview, *, floor: int = 0,
                     ceiling: int | None = None) -> list[RecordBatch]:
    """Every batch of ``buffer``, each one checked before it is returned: size and magic,
    CRC-32C and header consistency (:meth:`RecordBatch.validate`), a possible
    ``partitionLeaderEpoch`` that never decreases (:func:`epoch_violations`), and the
    offset rules from ``floor`` (the first offset the bytes may hold) below ``ceiling``
    (:func:`first_offset_violation`). For tools that print records: nothing is returned
    unless everything holds.

    Raises:
        CorruptRecordError: the first bad batch, with its byte position, its offsets (as
            stored) and why.
    """
    batches = list(iter_batches(buffer))
    found = first_offset_violation([(b.base_offset, b.last_offset) for b in batches], floor,
                                   ceiling)
    epoch_drops = epoch_violations([b.partition_leader_epoch for b in batches])
    for i, batch in enumerate(batches[:found[0] if found is not None else len(batches)]):
        try:
            batch.validate()
            problem = (leader_epoch_problem(batch.partition_leader_epoch)
                       or epoch_drops.get(i))
        except CorruptRecordError as exc:
            problem = str(exc)
        if problem is not None:
            raise CorruptRecordError(
                f"batch at byte {batch.position} (offsets {batch.base_offset}-"
                f"{batch.last_offset}): {problem}", position=batch.position)
    if found is not None:
        bad = batches[found[0]]
        raise CorruptRecordError(
            f"batch at byte {bad.position} (offsets {bad.base_offset}-{bad.last_offset}): "
            f"{found[1]}", position=bad.position)
    return batches


def set_base_offset(buffer: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Rewrite a batch's base offset in place (not covered by the CRC)."""
    _Q.pack_into(buffer, position, base_offset)


def set_partition_leader_epoch(buffer: bytearray | memoryview, position: int,
                               epoch: int) -> None:
    """Rewrite a batch's partition leader epoch in place (not covered by the CRC)."""
    _I.pack_into(buffer, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buffer: bytearray | memoryview, position: int, timestamp: int) -> None:
    """Mark a batch LogAppendTime with ``timestamp`` as its max timestamp and fix its CRC,
    as Kafka's ``setMaxTimestamp(LOG_APPEND_TIME, ...)`` does."""
    (attributes,) = _H.unpack_from(buffer, position + ATTRIBUTES_OFFSET)
    _H.pack_into(buffer, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _Q.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, timestamp)
    (length,) = _I.unpack_from(buffer, position + 8)
    view = memoryview(buffer)
    crc = crc32c(view[position + ATTRIBUTES_OFFSET:position + LOG_OVERHEAD + length])
    _UI.pack_into(buffer, position + CRC_OFFSET, crc)


__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "ControlRecordType",
    "ProducerRecord",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_batch",
    "build_end_txn_marker",
    "client_batch_problem",
    "earlier_batch_is_suspect",
    "epoch_violations",
    "first_offset_violation",
    "iter_batches",
    "leader_epoch_problem",
    "offset_order_problem",
    "offset_violations",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "verified_batches",
]
