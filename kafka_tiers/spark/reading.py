"""Reading one planned slice into Arrow record batches: no Spark needed (the benchmark and the
tests call it directly too).

A slice is fetched with one ranged read (``fetch_log_segment(md, start, end)`` through the
storage plugin, or the local file), consumed in chunks; whole batches are CRC-checked
(``RecordBatch.validate``), control batches dropped, and groups of batches decoded by
:func:`kafka_tiers.spark.arrow.batches_to_arrow`. Reading stops at the first batch at or past
the slice's ending offset.

Corrupt data (a bad CRC, an impossible batch size, records that do not decode):

* ``FAILFAST`` (default): raises :class:`CorruptDataError` naming the object and the byte
  position of the batch;
* ``PERMISSIVE``: the batch is skipped (after an unreadable size, reading continues at the next
  offset-index entry), a warning names it, and it is counted in :class:`SliceStats` (and, with
  ``corruptBatchesPath``, written there as one JSON line per skipped batch).

Never a wrong row: a batch is either validated and decoded whole, or not used at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

import pyarrow as pa

from kafka_tiers.api import KafkaTiersError, RemoteStorageManager
from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.records import HEADER_SIZE, LOG_OVERHEAD, RecordBatch
from kafka_tiers.spark.arrow import ARROW_SCHEMA, batches_to_arrow
from kafka_tiers.spark.planning import SegmentSlice, metadata_from_tuple

log = logging.getLogger(__name__)

_CHUNK = 8 * 1024 * 1024
_TARGET_BYTES = 16 * 1024 * 1024

_storages: dict[str, RemoteStorageManager] = {}
_storages_lock = threading.Lock()


class CorruptDataError(KafkaTiersError):
    """A record batch of a segment is corrupt.

    Attributes:
        object_name: the remote object key (or local file) holding it.
        position: the batch's byte position in that object.
    """

    def __init__(self, message: str, *, object_name: str, position: int) -> None:
        super().__init__(message)
        self.object_name = object_name
        self.position = position


@dataclass
class SliceStats:
    """What reading a slice did.

    Attributes:
        records: rows yielded.
        batches: batches decoded.
        bytes_read: bytes fetched.
        skipped: ``(position, reason)`` of every corrupt batch skipped (PERMISSIVE).
    """

    records: int = 0
    batches: int = 0
    bytes_read: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)


def load_storage(name: str, config: Mapping[str, str]) -> RemoteStorageManager:
    """The storage plugin ``name`` with ``config``, loaded once per process through
    :meth:`~kafka_tiers.remote.guarded.GuardedRemoteStorage.load` (secrets never appear in
    its messages), as a reader: :func:`~kafka_tiers.remote.storage_config.reader_data_config`
    (encrypted segments need only the private keys of their key pairs, given in ``config``
    as the broker has them; a broker's disk chunk cache becomes a memory one).

    Raises:
        PluginError, ConfigError: the plugin cannot be loaded or configured.
    """
    from kafka_tiers.remote.guarded import GuardedRemoteStorage
    from kafka_tiers.remote.storage_config import reader_data_config

    config = reader_data_config(config)
    digest = hashlib.sha256(json.dumps([name, sorted(config.items())]).encode()).hexdigest()
    with _storages_lock:
        storage = _storages.get(digest)
        if storage is None:
            storage = _storages[digest] = GuardedRemoteStorage.load(name, dict(config))
        return storage


def _open(piece: SegmentSlice, storage: RemoteStorageManager | None, start: int,
          end: int | None) -> BinaryIO:
    if piece.source == "local":
        from kafka_tiers.spark.local_source import LocalRange

        assert piece.path is not None
        return LocalRange(piece.path).open(start, end)
    assert storage is not None and piece.segment is not None
    return storage.fetch_log_segment(metadata_from_tuple(piece.segment), start, end)


def _corrupt(piece: SegmentSlice, position: int, reason: str) -> CorruptDataError:
    return CorruptDataError(
        f"corrupt record batch in {piece.name} at byte position {position} "
        f"({piece.topic}-{piece.partition}): {reason}; set mode=PERMISSIVE to skip corrupt "
        f"batches", object_name=piece.name, position=position)


def read_slice(piece: SegmentSlice, storage: RemoteStorageManager | None, *,
               mode: str = "FAILFAST", max_records_per_batch: int = 65536,
               schema: pa.Schema = ARROW_SCHEMA, stats: SliceStats | None = None,
               corrupt_batches_path: str | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one slice as Arrow record batches of ``schema``.

    Raises:
        CorruptDataError: FAILFAST and a corrupt batch.
        RemoteStorageError: the fetch failed.
    """
    stats = stats if stats is not None else SliceStats()
    permissive = mode.upper() == "PERMISSIVE"
    pending: list[RecordBatch] = []
    pending_records = 0
    pending_bytes = 0

    def flush() -> Iterator[pa.RecordBatch]:
        nonlocal pending, pending_records, pending_bytes
        group, pending, pending_records, pending_bytes = pending, [], 0, 0
        if not group:
            return
        try:
            out = [batches_to_arrow(group, piece.topic, piece.partition,
                                    min_offset=piece.min_offset, max_offset=piece.max_offset,
                                    min_timestamp=piece.min_timestamp,
                                    max_timestamp=piece.max_timestamp, schema=schema)]
        except CorruptRecordError:
            out = []
            for batch in group:  # find the culprit; the others are good
                try:
                    out.append(batches_to_arrow(
                        [batch], piece.topic, piece.partition, min_offset=piece.min_offset,
                        max_offset=piece.max_offset, min_timestamp=piece.min_timestamp,
                        max_timestamp=piece.max_timestamp, schema=schema))
                except CorruptRecordError as exc:
                    position = positions.get(id(batch), -1)
                    if not permissive:
                        raise _corrupt(piece, position, str(exc)) from None
                    skip(position, str(exc))
        for rb in out:
            if rb.num_rows:
                stats.records += rb.num_rows
                yield rb

    def skip(position: int, reason: str) -> None:
        stats.skipped.append((position, reason))
        log.warning("skipping corrupt record batch in %s at byte position %d: %s",
                    piece.name, position, reason)

    positions: dict[int, int] = {}
    prev_last = -1
    seg_end = piece.segment[4] if piece.segment is not None else None
    resync = list(piece.resync_positions)
    file_pos = piece.start_position
    limit = piece.end_position
    stream = _open(piece, storage, file_pos, limit)
    buf = b""
    base = file_pos  # file position of buf[0]
    eof = False
    done = False
    try:
        while not done:
            if not eof:
                chunk = stream.read(_CHUNK)
                if not chunk:
                    eof = True
                else:
                    stats.bytes_read += len(chunk)
                    buf = buf + chunk if buf else chunk
            pos = 0
            n = len(buf)
            while True:
                if n - pos < LOG_OVERHEAD or (n - pos < HEADER_SIZE and not eof):
                    break
                size = int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True) + LOG_OVERHEAD
                at = base + pos
                if size < HEADER_SIZE or n - pos < HEADER_SIZE:
                    reason = (f"impossible batch size {size}" if size < HEADER_SIZE
                              else "the data ends inside a batch header")
                    if eof and piece.last_segment and piece.source == "local" \
                            and size >= HEADER_SIZE:
                        done = True  # a half-written tail of an active segment
                        break
                    if not permissive:
                        raise _corrupt(piece, at, reason)
                    skip(at, reason)
                    nxt = next((r for r in resync if r > at), None)
                    if nxt is None:
                        done = True
                        break
                    if nxt - base <= n:
                        pos = nxt - base
                        continue
                    # the resync point is beyond the buffer: reopen there
                    stream.close()
                    stream = _open(piece, storage, nxt, limit)
                    buf, base, pos, n, eof = b"", nxt, 0, 0, False
                    break
                if n - pos < size:
                    if not eof:
                        break
                    if piece.source == "local" and piece.last_segment:
                        done = True  # a half-written tail of an active segment
                        break
                    reason = f"batch of {size} bytes is cut short at {n - pos} bytes"
                    if not permissive:
                        raise _corrupt(piece, at, reason)
                    skip(at, reason)
                    nxt = next((r for r in resync if r > at), None)
                    if nxt is None or nxt - base > n:
                        done = True
                        break
                    pos = nxt - base
                    continue
                batch = RecordBatch(buf, pos)
                pos += size
                # base offsets are outside the CRC: check them against their neighbours
                if batch.base_offset <= prev_last or (
                        seg_end is not None and batch.last_offset > seg_end):
                    reason = (f"batch offsets {batch.base_offset}-{batch.last_offset} do not "
                              f"follow offset {prev_last} within the segment")
                    if not permissive:
                        raise _corrupt(piece, at, reason)
                    skip(at, reason)
                    continue
                prev_last = batch.last_offset
                if piece.max_offset is not None and batch.base_offset >= piece.max_offset:
                    done = True
                    break
                if batch.last_offset < piece.min_offset:
                    continue
                try:
                    batch.validate()
                except CorruptRecordError as exc:
                    if not permissive:
                        raise _corrupt(piece, at, str(exc)) from None
                    skip(at, str(exc))
                    continue
                if batch.is_control or batch.records_count == 0:
                    continue
                if (piece.min_timestamp is not None
                        and batch.max_timestamp < piece.min_timestamp
                        and not batch.attributes & 0x08):
                    continue
                positions[id(batch)] = at
                pending.append(batch)
                pending_records += batch.records_count
                pending_bytes += size
                stats.batches += 1
                if pending_records >= max_records_per_batch or pending_bytes >= _TARGET_BYTES:
                    yield from flush()
                    positions.clear()
            if pending:
                # batches view ``buf``: decode them before the buffer moves on
                yield from flush()
                positions.clear()
            if pos:
                buf = buf[pos:]
                base += pos
            if done or not eof:
                continue
            if buf and not (piece.source == "local" and piece.last_segment):
                reason = f"{len(buf)} trailing bytes are not a whole batch"
                if not permissive:
                    raise _corrupt(piece, base, reason)
                skip(base, reason)
            break
        yield from flush()
    finally:
        stream.close()
        if stats.skipped:
            log.warning("skipped %d corrupt record batch(es) in %s", len(stats.skipped),
                        piece.name)
            if corrupt_batches_path:
                _write_skipped(corrupt_batches_path, piece, stats.skipped)


def _write_skipped(directory: str, piece: SegmentSlice, skipped: list[tuple[int, str]]) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"skipped-{uuid.uuid4().hex}.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for position, reason in skipped:
            fh.write(json.dumps({"object": piece.name, "topic": piece.topic,
                                 "partition": piece.partition, "position": position,
                                 "reason": reason}) + "\n")


__all__ = ["CorruptDataError", "SliceStats", "load_storage", "read_slice"]
