"""Producer ids for idempotent producers: unique in the cluster, never reused after a restart.

Ids are handed out from blocks of :data:`BLOCK_SIZE` (Kafka's ``ProducerIdManager`` in
ZooKeeper mode). A block is claimed before any of its ids is given out:

- in a cluster, from the metadata store node ``/latest_producer_id_block`` (Kafka's ZooKeeper
  path and JSON layout ``{"version": 1, "broker": <id>, "block_start": "<first>",
  "block_end": "<last>"}``), written with the version read: two brokers racing for a block
  both read version ``v``, one write succeeds, the other re-reads and takes the next block;
- standalone, from the file :data:`BLOCK_FILE` in the first log dir (same JSON), replaced
  crash-safely (temp file, fsync, rename, fsync dir) before the block is used, so a restart
  (clean or not) starts after the last block claimed.

Ids of a block not used before a restart are skipped, as in Kafka.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any, Protocol

from kafka_tiers.cluster.metadata_store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
)
from kafka_tiers.log.checkpoints import read_file_nofollow, write_atomic

#: ids claimed at once (Kafka's PRODUCER_ID_BLOCK_SIZE)
BLOCK_SIZE = 1000
#: the metadata store node of the last block claimed (Kafka's ZooKeeper path)
BLOCK_NODE = "/latest_producer_id_block"
#: the standalone broker's file of the last block claimed, in its first log dir
BLOCK_FILE = "kafka-tiers-producer-id-block"
#: the largest producer id (int64)
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdsExhaustedError(Exception):
    """No block of producer ids is left (the int64 space is used up), or the stored
    block is unreadable.

    Attributes:
        kafka_error_code: UNKNOWN_SERVER_ERROR (-1), as Kafka answers it.
    """

    kafka_error_code = -1


class ProducerIdManager(Protocol):
    """Hands out producer ids (thread-safe)."""

    def generate(self) -> int:
        """A producer id never handed out before by any broker of the cluster.

        Raises:
            ProducerIdsExhaustedError: no id is left, or the last block is unreadable.
            MetadataStoreError, OSError: the block could not be claimed (nothing handed out).
        """
        ...

    def close(self) -> None:
        """Release resources (the ids of the current block are not reused)."""
        ...


def _block(data: Any, where: str) -> tuple[int, int]:
    try:
        start, end = int(data["block_start"]), int(data["block_end"])
    except (TypeError, KeyError, ValueError):
        raise ProducerIdsExhaustedError(
            f"{where} holds no producer id block: {str(data)[:200]!r}; restore it (ids after "
            f"its block_end are free) or remove it only if no producer id was ever given out"
        ) from None
    if not 0 <= start <= end:
        raise ProducerIdsExhaustedError(f"{where}: block {start}..{end} is not a block")
    return start, end


def _next_block(last: tuple[int, int] | None, broker_id: int) -> dict[str, Any]:
    start = 0 if last is None else last[1] + 1
    if start > MAX_PRODUCER_ID - BLOCK_SIZE:
        raise ProducerIdsExhaustedError(
            f"no producer id block is left after {start - 1}: the int64 space is exhausted")
    return {"version": 1, "broker": broker_id, "block_start": str(start),
            "block_end": str(start + BLOCK_SIZE - 1)}


class _BlockManager:
    """Ids from the current block; a new block claimed by ``_claim`` when it is used up."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._next = 0
        self._end = -1

    def _claim(self) -> tuple[int, int]:
        raise NotImplementedError

    def generate(self) -> int:
        with self._lock:
            if self._next > self._end:
                self._next, self._end = self._claim()
            pid = self._next
            self._next += 1
            return pid

    def close(self) -> None:
        pass


class StoreProducerIdManager(_BlockManager):
    """Blocks claimed in the cluster's metadata store (ZooKeeper or the embedded store)."""

    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        super().__init__(broker_id)
        self.store = store

    def _claim(self) -> tuple[int, int]:
        while True:
            got = self.store.get_or_none(BLOCK_NODE)
            if got is None:
                block = _next_block(None, self.broker_id)
                try:
                    self.store.create(BLOCK_NODE, block)
                except NodeExistsError:  # another broker claimed the first block
                    continue
            else:
                data, version = got
                block = _next_block(_block(data, BLOCK_NODE), self.broker_id)
                try:
                    self.store.set(BLOCK_NODE, block, version)
                except BadVersionError:  # another broker claimed that block: re-read
                    continue
            return int(block["block_start"]), int(block["block_end"])


class FileProducerIdManager(_BlockManager):
    """Blocks claimed in :data:`BLOCK_FILE` of a standalone broker's first log dir."""

    def __init__(self, directory: str | Path, broker_id: int) -> None:
        super().__init__(broker_id)
        self.path = Path(directory) / BLOCK_FILE

    def _claim(self) -> tuple[int, int]:
        last = None
        with contextlib.suppress(FileNotFoundError):
            raw = read_file_nofollow(self.path)
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):  # not JSON, or nested too deep
                data = raw[:200]
            last = _block(data, str(self.path))
        block = _next_block(last, self.broker_id)
        write_atomic(self.path, json.dumps(block, sort_keys=True).encode() + b"\n")
        return int(block["block_start"]), int(block["block_end"])


def manager_for(broker: Any) -> ProducerIdManager:
    """The producer id manager of a broker: its metadata store when it is a cluster member,
    else the block file in its first log dir."""
    broker_id = int(broker.broker_id)
    member = getattr(broker, "member", None)
    if member is not None and member.store is not None:
        return StoreProducerIdManager(member.store, broker_id)
    return FileProducerIdManager(broker.log_manager.log_dirs[0], broker_id)


__all__ = ["BLOCK_FILE", "BLOCK_NODE", "BLOCK_SIZE", "FileProducerIdManager",
           "ProducerIdManager", "ProducerIdsExhaustedError", "StoreProducerIdManager",
           "manager_for"]
