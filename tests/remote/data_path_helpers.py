"""Helpers of the object-store data path's tests: a manager on a local directory, a store that
counts its gets and puts, segment files holding a log that looks like batches, and one segment
copied through a counting manager."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.objectstore import ByteRange
from kafka_tiers.api.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
)
from kafka_tiers.conformance.storage import write_key_pair
from kafka_tiers.log.records import ATTRIBUTES_OFFSET, HEADER_SIZE
from kafka_tiers.remote.local import LocalRemoteStorageManager

TP = TopicPartition("orders", 3)
INDEX_FILES = {IndexType.OFFSET: "index", IndexType.TIMESTAMP: "time",
               IndexType.TRANSACTION: "txn", IndexType.PRODUCER_SNAPSHOT: "snap"}
EPOCHS = b"0\n1\n0 42\n"


class CountingStore:
    """Delegates to a store, recording every get's key and range and the bytes read."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gets: list[tuple[str, ByteRange | None]] = []
        self.puts: list[tuple[str, int | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get(self, key: str, byte_range: ByteRange | None = None) -> Any:
        self.gets.append((key, byte_range))
        return self.inner.get(key, byte_range)

    def put(self, key: str, data: Any, length: int | None = None) -> int:
        self.puts.append((key, length))
        return self.inner.put(key, data, length)

    def log_gets(self) -> list[ByteRange | None]:
        return [r for k, r in self.gets if k.endswith(".log")]


def make_rsm(root: Path, **settings: str) -> LocalRemoteStorageManager:
    rsm = LocalRemoteStorageManager()
    rsm.configure({"dir": str(root), "key.prefix": "kt", **settings})
    return rsm


def counting(rsm: LocalRemoteStorageManager) -> CountingStore:
    holder: list[CountingStore] = []
    rsm.wrap_object_store(lambda s: holder.append(CountingStore(s)) or holder[0])
    return holder[0]


def log_bytes(size: int, *, compressed_batch: bool = False) -> bytes:
    """A log whose first bytes look like a batch header (codec bits from the flag), then
    compressible but not constant text."""
    head = bytearray(HEADER_SIZE)
    head[ATTRIBUTES_OFFSET + 1] = 0x04 if compressed_batch else 0x00  # zstd codec bits
    body = b"".join(b"record %06d of the orders topic;" % i for i in range(size // 20 + 1))
    return (bytes(head) + body)[:size]


def segment_files(folder: Path, log: bytes, *, index_size: int = 64) -> LogSegmentData:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log").write_bytes(log)
    for i, name in enumerate(INDEX_FILES.values()):
        (folder / name).write_bytes(bytes((i * 7 + j) % 251 for j in range(index_size)))
    return LogSegmentData(folder / "log", folder / "index", folder / "time", folder / "txn",
                          folder / "snap", EPOCHS)


def new_md(start: int = 0, size: int = 1000) -> RemoteLogSegmentMetadata:
    """Metadata of a segment whose log has ``size`` bytes (a manifest's chunk index must
    hold ``segment_size_in_bytes``)."""
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TP), start, start + 99, 1, 0,
                                    1, size, {0: start})


class ManualClock:
    """Monotonic seconds a test moves by hand (``clock.now += 0.5``), for the caches'
    ``clock`` argument."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def wait_for(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def read(rsm: Any, md: RemoteLogSegmentMetadata, start: int, end: int | None = None) -> bytes:
    with rsm.fetch_log_segment(md, start, end) as stream:
        return stream.read()


def key_pair_files(folder: Path, key_id: str) -> tuple[Path, Path]:
    """An RSA key pair for ``key_id`` as PEM files in ``folder`` (the conformance suite's
    :func:`~kafka_tiers.conformance.storage.write_key_pair`: the private one ``0600``, the same
    id the same pair within a process); returns (public key file, private key file)."""
    files = write_key_pair(folder, key_id)
    return (Path(files[f"encryption.key.pairs.{key_id}.public.key.file"]),
            Path(files[f"encryption.key.pairs.{key_id}.private.key.file"]))


def stored_segment(rsm: LocalRemoteStorageManager, folder: Path, size: int
                   ) -> tuple[CountingStore, RemoteLogSegmentMetadata, bytes]:
    """Copy a new segment whose log is ``log_bytes(size)`` (files under ``folder / "seg"``)
    through ``rsm``, its store wrapped to count; returns the counting store (its gets cleared
    after the copy), the segment's metadata and its log."""
    store = counting(rsm)
    log = log_bytes(size)
    md = new_md(size=len(log))
    rsm.copy_log_segment_data(md, segment_files(folder / "seg", log))
    store.gets.clear()
    return store, md, log


__all__ = ["EPOCHS", "INDEX_FILES", "TP", "CountingStore", "ManualClock", "counting",
           "key_pair_files", "log_bytes", "make_rsm", "new_md", "read", "segment_files",
           "stored_segment", "wait_for"]
