"""A small LRU cache of remote offset indexes, bounded by bytes (Kafka's ``RemoteIndexCache``).

A remote read needs the segment's offset index to find the byte position of an offset. The
index is fetched once with ``fetch_index(metadata, IndexType.OFFSET)``, written to a file in the
cache directory (``<first log dir>/remote-log-index-cache``, as Kafka does) and read with the log
engine's :class:`~kafka_tiers.log.index.OffsetIndex`. Least recently used indexes are closed and
deleted while the cache holds more than ``remote.log.index.file.cache.total.size.bytes``; the
cache always keeps the index just used, even when that one alone is larger.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kafka_tiers.api import RemoteLogSegmentMetadata
from kafka_tiers.log.index import OffsetIndex

_CHUNK = 1 << 20
#: the names this cache writes: ``<20 digits>_<segment id>.index`` and ``.<32 hex>.tmp``
_OWN_FILE = re.compile(r"\d{20}_[^/]+\.index|\.[0-9a-f]{32}\.tmp")


def _remove_own_files(directory: Path) -> None:
    """Delete the files this cache wrote in ``directory`` (by their names), then the directory
    when that leaves it empty; anything else in it stays. Idempotent; I/O errors ignored."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if _OWN_FILE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    with contextlib.suppress(OSError):
        directory.rmdir()


class RemoteIndexCache:
    """Remote offset indexes by segment id, least recently used evicted first.

    Args:
        directory: where index files are kept; the files this cache writes there are deleted
            at start and at :meth:`close` (nothing else in it is touched).
        max_bytes: the most bytes of index files kept.

    Thread-safe. Fetches run outside the lock, so a slow remote tier never blocks lookups of
    cached indexes.
    """

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        _remove_own_files(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[OffsetIndex, int]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        """Bytes of index files held."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, segment_id: object) -> bool:
        with self._lock:
            return segment_id in self._entries

    def lookup(self, metadata: RemoteLogSegmentMetadata, offset: int,
               fetch: Callable[[RemoteLogSegmentMetadata], BinaryIO]) -> int:
        """The byte position in the segment's log to start reading ``offset`` from: the
        position of the largest index entry at or below it (0 when none).

        Args:
            fetch: opens the segment's offset index (``fetch_index(md, IndexType.OFFSET)``);
                called on a miss only.

        Raises:
            RemoteStorageError: from ``fetch`` (nothing is cached then).
        """
        sid = metadata.segment_id
        with self._lock:
            entry = self._entries.get(sid)
            if entry is not None:
                self._entries.move_to_end(sid)
                self.hits += 1
                return entry[0].lookup(offset).position
            self.misses += 1
        path = self._download(metadata, fetch)
        index = OffsetIndex(path, metadata.start_offset, writable=False)
        size = path.stat().st_size
        with self._lock:
            old = self._entries.pop(sid, None)
            if old is not None:
                self._drop(old)
            self._entries[sid] = (index, size)
            self._bytes += size
            position = index.lookup(offset).position
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _, victim = self._entries.popitem(last=False)
                self._drop(victim)
            return position

    def _download(self, metadata: RemoteLogSegmentMetadata,
                  fetch: Callable[[RemoteLogSegmentMetadata], BinaryIO]) -> Path:
        final = self.directory / f"{metadata.start_offset:020d}_{metadata.segment_id}.index"
        tmp = self.directory / f".{uuid.uuid4().hex}.tmp"
        try:
            with fetch(metadata) as stream, open(tmp, "wb") as out:
                while True:
                    chunk = stream.read(_CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        return final

    def _drop(self, entry: tuple[OffsetIndex, int]) -> None:
        index, size = entry
        self._bytes -= size
        index.delete()

    def remove(self, segment_id: str) -> None:
        """Forget a segment's index (its segment was deleted)."""
        with self._lock:
            entry = self._entries.pop(segment_id, None)
            if entry is not None:
                self._drop(entry)

    def close(self) -> None:
        """Close and delete every cached index."""
        with self._lock:
            while self._entries:
                _, entry = self._entries.popitem(last=False)
                self._drop(entry)
        _remove_own_files(self.directory)


__all__ = ["RemoteIndexCache"]
