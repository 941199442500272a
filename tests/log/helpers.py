"""Helpers of the log engine tests: building batches, filling and reading logs."""

from __future__ import annotations

from kafka_tiers.log.log import Log
from kafka_tiers.log.records import ProducerRecord, build_batch


def batch_of(values: list[bytes], *, ts: int = 1_000, **kw: object) -> bytes:
    """One batch with these values, keys ``k<value>`` and timestamps ts, ts+1, ..."""
    return build_batch([ProducerRecord(v, b"k" + v, (), ts + i) for i, v in enumerate(values)],
                       **kw)


def read_all(log: Log, start: int | None = None) -> list[tuple[int, bytes | None]]:
    """Every (offset, value) the log serves from ``start`` to its end."""
    out: list[tuple[int, bytes | None]] = []
    offset = log.local_log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        batches = data.batches()
        if not batches:
            break
        for b in batches:
            assert b.is_valid()
            out += [(r.offset, r.value) for r in b.records() if r.offset >= offset]
        offset = batches[-1].next_offset
    return out


def fill(log: Log, count: int, *, per_batch: int = 1, start_ts: int = 1_000,
         size: int = 40) -> list[bytes]:
    """Append ``count`` records (values ``v<n>`` padded to ``size``); returns the values."""
    values = []
    n = 0
    while n < count:
        chunk = [(b"v%d-" % (n + i)).ljust(size, b".") for i in range(min(per_batch, count - n))]
        log.append(batch_of(chunk, ts=start_ts + n))
        values += chunk
        n += len(chunk)
    return values


def crash(log: Log) -> None:
    """Drop a log's open files the way a killed process would: no flush, no index trimming,
    no checkpoint. The files stay exactly as the page cache holds them."""
    import os

    from kafka_tiers.log.handles import HANDLES

    for seg in log._segments:
        if seg._fd is not None:
            os.close(seg._fd)
            seg._fd = None
        HANDLES.forget(seg)
        for index in (seg.offset_index, seg.time_index):
            if index._mm is not None:
                index._mm.close()
                index._mm = None
            index._mapped = False
            HANDLES.forget(index)
            index._closed = True
        seg._closed = True
    log._closed = True
