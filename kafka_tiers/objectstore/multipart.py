"""The multipart engine: how a :class:`~kafka_tiers.api.MultipartObjectStore` stores a stream.

Objects of up to one part go up with ``put_object``; larger ones in a multi-part upload with up
to ``upload_concurrency`` parts in flight at once (holding at most one part more in memory),
the part size grown to fit ``max_parts``, completed with the part tags in part-number order. A
failed upload is aborted (``abort_failed_upload``) once its parts in flight have ended, then the
original error is raised.
"""

from __future__ import annotations

import logging
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import BinaryIO

from kafka_tiers.api.errors import RemoteStorageError
from kafka_tiers.api.objectstore import MultipartObjectStore, ObjectStore, default_translate

log = logging.getLogger(__name__)


def multipart_put(store: MultipartObjectStore, key: str, data: BinaryIO,
                  length: int | None = None) -> int:
    """Store the stream in ``store``: one ``put_object`` for up to one part (of
    ``part_size_for(length)`` bytes), else a multi-part upload (see
    :class:`~kafka_tiers.api.MultipartObjectStore`). When ``length`` is known and larger
    than one part, the first part goes on the wire as soon as it is read; otherwise a second
    part is read to decide.

    Returns:
        The number of bytes stored.

    Raises:
        RemoteStorageError: ``part_size`` or ``upload_concurrency`` is invalid, or an
            object of unknown length needs more than ``max_parts`` parts (not
            retriable: raise the part size).
        Exception: whatever the part operations or ``data`` raise (the upload aborted).
    """
    size = store.part_size_for(length)
    concurrency = store.upload_concurrency
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise RemoteStorageError(f"upload_concurrency must be an int >= 1, got "
                                 f"{concurrency!r}", retriable=False)
    first = read_exact(data, size)
    ahead: list[bytes] = [first]
    more = len(first) == size and length is not None and length > size
    if len(first) == size and not more:
        second = read_exact(data, size)  # is there more than one part?
        if second:
            ahead.append(second)
            more = True
    if not more:
        store.put_object(key, first)
        return len(first)
    del first  # ahead holds the parts read so far; the upload takes them from it
    upload_id = store.create_multipart_upload(key)
    try:
        total, tags = _upload_parts(store, key, upload_id, data, size, ahead,
                                     concurrency)
        store.complete_multipart_upload(key, upload_id, tags)
    except BaseException:
        try:
            store.abort_failed_upload(key, upload_id)
        except Exception as exc:  # the hook should not raise: the original failure wins
            log.warning("abort_failed_upload failed for the upload %s of %s: %s",
                        upload_id, key, _describe(store, exc, key))
        raise
    return total


def _upload_parts(store: MultipartObjectStore, key: str, upload_id: str, data: BinaryIO,
                  size: int, ahead: list[bytes], concurrency: int) -> tuple[int, list[str]]:
    """Upload ``ahead`` and then the rest of ``data`` in parts of ``size`` bytes, with up
    to ``concurrency`` in flight; returns the byte count and the tags in part order.
    Returns or raises only once no part is in flight."""
    limit = store.max_parts
    pool = (ThreadPoolExecutor(concurrency, thread_name_prefix=store.upload_thread_name)
            if concurrency > 1 else None)
    in_flight: dict[Future[str], int] = {}
    tags: dict[int, str] = {}
    total = 0
    number = 0
    try:
        chunk: bytes | None = ahead.pop(0)
        while chunk:
            number += 1
            if limit is not None and number > limit:
                setting = store.part_size_setting or "part_size"
                raise RemoteStorageError(
                    f"{key} needs more than {limit} parts of {size} bytes: raise "
                    f"{setting}", resource=key, retriable=False)
            total += len(chunk)
            if pool is None:
                tags[number] = store.upload_part(key, upload_id, number, chunk)
            else:
                _collect_parts(in_flight, tags, block=False)  # a failure stops us early
                while len(in_flight) >= concurrency:
                    _collect_parts(in_flight, tags, block=True)
                in_flight[pool.submit(store.upload_part, key, upload_id, number,
                                      chunk)] = number
            chunk = None  # the part in flight holds the only reference to its bytes
            chunk = ahead.pop(0) if ahead else read_exact(data, size)
        while in_flight:
            _collect_parts(in_flight, tags, block=True)
    finally:
        for future in in_flight:
            future.cancel()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)  # the parts in flight end here
    return total, [tags[n] for n in sorted(tags)]


def _collect_parts(in_flight: dict[Future[str], int], tags: dict[int, str],
                   block: bool) -> None:
    """Move the finished parts' tags from ``in_flight`` to ``tags`` (waiting for one to finish
    when ``block``); re-raise the failure of the lowest-numbered failed part."""
    if block:
        wait(in_flight, return_when=FIRST_COMPLETED)
    done = sorted((n, f) for f, n in in_flight.items() if f.done())
    for number, future in done:
        del in_flight[future]
        tags[number] = future.result()  # raises the part's failure


def _describe(store: ObjectStore, exc: BaseException, key: str | None) -> str:
    """An exception for a log line: the store's translation (which keeps credentials out), or
    the default one."""
    try:
        mapped = store.translate_error(exc, key)
    except Exception:
        mapped = None
    return str(mapped or default_translate(exc, key))


def read_exact(stream: BinaryIO, size: int) -> bytes:
    """Read ``size`` bytes from ``stream``, fewer only at its end (``read`` may return less
    than asked; this keeps reading). For splitting an upload into parts of a fixed size."""
    parts: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


__all__ = ["multipart_put", "read_exact"]
