"""ListOffsets (key 2), v1-v10 (v0 was removed in Kafka 4), on the partition's leader.

Timestamps (Kafka's specials, each from the version that introduced it)
    ``-1`` latest: the high watermark (``read_committed``: the last stable offset, which is
    the high watermark here, as no transaction is ever open), the current leader epoch;
    ``-2`` earliest: the log start offset, remote tier included (a tiered partition's first
    remote offset when below its local log); ``-3`` max timestamp (v7+, KIP-734): the record
    with the largest timestamp in the local log; ``-4`` earliest local (v8+, KIP-405): the
    local log start offset; ``-5`` latest tiered (v9+, KIP-1005): the highest offset in the
    remote tier, -1 when none (or the topic is not tiered).
By timestamp (``>= 0``)
    the first record whose timestamp is at least the one asked for: first in the remote
    tier for a tiered partition below its local log start (the remote segments' max timestamps
    pick the segment, its time index and offset index where to start reading, its batches the
    record, on the remote reader pool, bounded by ``remote.fetch.max.wait.ms`` or the
    request's ``timeout_ms`` from v10), then in the local log (its time index). None at or
    past the high watermark: offset and timestamp -1 (Kafka's answer).
Each answer carries the leader epoch of the offset (v4+), from the leader epoch cache or the
remote segment's epochs.
Errors per partition
    ``TOPIC_AUTHORIZATION_FAILED`` without DESCRIBE on the topic (checked first);
    ``UNKNOWN_TOPIC_OR_PARTITION``; ``NOT_LEADER_OR_FOLLOWER`` on a follower (or a broker
    holding no replica of an existing partition; a debugging request, replica id -2, may ask
    any replica); ``FENCED_LEADER_EPOCH`` / ``UNKNOWN_LEADER_EPOCH`` when the request's
    ``current_leader_epoch`` (v4+) is older / newer than the leader's; ``INVALID_REQUEST``
    for a partition listed twice; ``REQUEST_TIMED_OUT`` when the remote tier did not answer
    in time; ``KAFKA_STORAGE_ERROR`` when it failed.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from kafka_tiers.api import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RetriableRemoteStorageError,
    TopicPartition,
)
from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka import errors as E
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import TOPIC_AUTHORIZATION_FAILED, allowed_names
from kafka_tiers.log.records import verified_batches

log = logging.getLogger(__name__)
T = TypeVar("T")

LIST_OFFSETS_KEY = 2
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
#: the replica id of a debugging request, which may be answered by any replica
DEBUGGING_REPLICA_ID = -2
#: bytes read from a remote segment per step while looking for a timestamp
REMOTE_SCAN_BYTES = 1 << 20
_TIME_ENTRY = struct.Struct(">qi")


class _Answer:
    """One partition's answer: error, timestamp, offset, leader epoch."""

    __slots__ = ("epoch", "error", "offset", "timestamp")

    def __init__(self, error: int = E.NONE, timestamp: int = -1, offset: int = -1,
                 epoch: int = -1) -> None:
        self.error, self.timestamp, self.offset, self.epoch = error, timestamp, offset, epoch


@handles(LIST_OFFSETS_KEY, 1, 10)
def list_offsets(ctx: RequestContext, request: Any) -> Any:
    """The ListOffsets answer (see the module docstring)."""
    v = ctx.version
    cls = response_class(LIST_OFFSETS_KEY, v)
    topic_cls = cls.ListOffsetsTopicResponse
    part_cls = topic_cls.ListOffsetsPartitionResponse
    replica_id = int(request.replica_id)
    timeout_ms = int(request.timeout_ms) if v >= 10 else None
    seen = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                (t.name for t in request.topics))
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            tp, refused = topic_partition_or_error(t.name, p.partition_index)
            if t.name not in describable:
                ans = _Answer(TOPIC_AUTHORIZATION_FAILED)
            elif seen[t.name, p.partition_index] > 1:
                ans = _Answer(E.INVALID_REQUEST)
            elif tp is None:
                assert refused is not None
                ans = _Answer(refused[0])
            else:
                epoch = int(p.current_leader_epoch) if v >= 4 else -1
                ans = _one(ctx, tp, int(p.timestamp), epoch, replica_id, timeout_ms)
            parts.append(part_cls(partition_index=p.partition_index, error_code=ans.error,
                                  timestamp=ans.timestamp, offset=ans.offset,
                                  leader_epoch=ans.epoch))
        topics.append(topic_cls(name=t.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)


def _one(ctx: RequestContext, tp: TopicPartition, timestamp: int, current_epoch: int,
         replica_id: int, timeout_ms: int | None) -> _Answer:
    broker = ctx.broker
    try:
        leader, leader_epoch = broker.leadership(tp)
    except Exception as exc:
        code, _ = E.error_of(exc)
        if code == E.UNKNOWN_TOPIC_OR_PARTITION and broker.member is not None and \
                ClusterState(broker, ctx.listener).partition(tp) is not None:
            code = E.NOT_LEADER_OR_FOLLOWER  # an existing partition this broker holds not
        return _Answer(code)
    if not leader and replica_id != DEBUGGING_REPLICA_ID:
        return _Answer(E.NOT_LEADER_OR_FOLLOWER)
    if current_epoch >= 0:
        if current_epoch < leader_epoch:
            return _Answer(E.FENCED_LEADER_EPOCH)
        if current_epoch > leader_epoch:
            return _Answer(E.UNKNOWN_LEADER_EPOCH)
    try:
        return _lookup(ctx, tp, timestamp, leader_epoch, replica_id, timeout_ms)
    except RetriableRemoteStorageError as exc:
        log.warning("ListOffsets of %s at %d: %s", tp, timestamp, exc)
        return _Answer(E.REQUEST_TIMED_OUT)
    except Exception as exc:
        code, message = E.error_of(exc)
        if code == E.UNKNOWN_SERVER_ERROR:
            log.exception("ListOffsets of %s at %d failed", tp, timestamp)
        else:
            log.debug("ListOffsets of %s at %d: %s", tp, timestamp, message)
        return _Answer(code)


def _lookup(ctx: RequestContext, tp: TopicPartition, timestamp: int, leader_epoch: int,
            replica_id: int, timeout_ms: int | None) -> _Answer:
    broker = ctx.broker
    lg = broker.log(tp)
    # a consumer sees up to the high watermark (read_committed: the last stable offset, the
    # same here); a follower or a debugging request up to the log end
    upper = lg.high_watermark if replica_id == -1 else lg.log_end_offset
    cache = lg.leader_epoch_cache
    tiered = broker.rlm is not None and broker.tiered(tp)

    def epoch_of(offset: int, segs: list[RemoteLogSegmentMetadata] | None = None) -> int:
        found = cache.epoch_for_offset(offset)
        if found is None and segs:
            found = _remote_epoch(segs, offset)
        return -1 if found is None else found

    rlm = broker.rlm
    wait = timeout_ms if timeout_ms is not None and timeout_ms > 0 else \
        (rlm.fetch_timeout_ms if rlm is not None else 0)

    def remote(what: str, fn: Callable[[], T]) -> T:
        """``fn`` (which may read the remote tier: a listing, an index, batches) on the
        remote reader pool, waited for at most ``wait`` ms."""
        assert rlm is not None
        return rlm.reader.run(fn, wait, f"{tp} {what}")

    if timestamp == LATEST:
        return _Answer(E.NONE, -1, upper, leader_epoch)
    if timestamp == EARLIEST:
        if not tiered:
            start = lg.log_start_offset
            return _Answer(E.NONE, -1, start, epoch_of(start))
        start, segs = remote("log start offset", lambda: (broker.log_start_offset(tp),
                                                          _remote_segments(broker, tp)))
        return _Answer(E.NONE, -1, start, epoch_of(start, segs))
    if timestamp == EARLIEST_LOCAL:
        start = lg.local_log_start_offset
        return _Answer(E.NONE, -1, start, epoch_of(start))
    if timestamp == LATEST_TIERED:
        if not tiered:
            return _Answer(E.NONE, -1, -1, -1)
        segs = remote("remote segments", lambda: _remote_segments(broker, tp))
        highest = max((m.end_offset for m in segs), default=-1)
        if highest < 0:
            return _Answer(E.NONE, -1, -1, -1)
        return _Answer(E.NONE, -1, highest, epoch_of(highest, segs))
    if timestamp == MAX_TIMESTAMP:
        found = lg.offset_for_timestamp(MAX_TIMESTAMP)
        if found is None or found.offset >= upper:
            return _Answer()
        return _Answer(E.NONE, found.timestamp, found.offset, epoch_of(found.offset))
    # by timestamp: the remote tier first (below the local log), then the local log
    if tiered:
        local_start = lg.local_log_start_offset
        got = remote(f"offset for timestamp {timestamp}",
                     lambda: _remote_offset_for_timestamp(
                         broker, tp, timestamp, broker.log_start_offset(tp), local_start))
        if got is not None:
            return got if got.offset < upper else _Answer()
    found = lg.offset_for_timestamp(timestamp)
    if found is None or found.offset >= upper:
        return _Answer()
    return _Answer(E.NONE, found.timestamp, found.offset, epoch_of(found.offset))


def _remote_segments(broker: Any, tp: TopicPartition) -> list[RemoteLogSegmentMetadata]:
    rlm = broker.rlm
    return [] if rlm is None else sorted(rlm.remote_segments(tp), key=lambda m: m.start_offset)


def _remote_epoch(segs: list[RemoteLogSegmentMetadata], offset: int) -> int | None:
    """The leader epoch of ``offset`` from the remote segments' epoch starts."""
    for md in segs:
        if md.start_offset <= offset <= md.end_offset:
            best = None
            for epoch, start in sorted(md.segment_leader_epochs.items(), key=lambda e: e[1]):
                if start <= offset:
                    best = epoch
            return best
    return None


def _time_index_floor(raw: bytes, base_offset: int, timestamp: int) -> int:
    """The offset of the last time index entry with a timestamp below ``timestamp`` (Kafka's
    time index: 12-byte entries, ``int64 timestamp | int32 offset - base``): reading from it
    finds the first record at or after ``timestamp``. The segment's base offset when none."""
    floor = base_offset
    last_ts = -1
    for pos in range(0, len(raw) - len(raw) % _TIME_ENTRY.size, _TIME_ENTRY.size):
        ts, rel = _TIME_ENTRY.unpack_from(raw, pos)
        if ts <= last_ts and pos > 0:  # trailing preallocated zeros, or the end
            break
        last_ts = ts
        if ts >= timestamp:
            break
        floor = base_offset + rel
    return floor


def _remote_offset_for_timestamp(broker: Any, tp: TopicPartition, timestamp: int,
                                 log_start: int, local_start: int) -> _Answer | None:
    """The first record at or after ``timestamp`` in the remote segments below the local log
    (Kafka's ``RemoteLogManager.findOffsetByTimestamp``), or None when they hold none.

    Raises:
        RemoteStorageError: the remote tier failed.
    """
    from kafka_tiers.remote.remote_log_manager import read_batches

    rlm = broker.rlm
    storage = rlm.storage
    segs = _remote_segments(broker, tp)
    for md in segs:
        if md.end_offset < log_start or md.start_offset >= local_start:
            continue
        if md.max_timestamp_ms < timestamp:
            continue
        offset = max(md.start_offset, log_start)
        try:
            with storage.fetch_index(md, IndexType.TIMESTAMP) as f:
                offset = max(offset, _time_index_floor(f.read(), md.start_offset, timestamp))
        except RemoteResourceNotFoundError:
            pass  # no time index: scan the segment from its start
        while offset <= md.end_offset:
            position = rlm.index_cache.lookup(
                md, offset, lambda m: storage.fetch_index(m, IndexType.OFFSET))
            got = read_batches(storage, md, offset, REMOTE_SCAN_BYTES, position)
            if not got.records:
                break
            for batch in verified_batches(got.records):
                if batch.max_timestamp < timestamp or \
                        batch.base_offset + batch.last_offset_delta < offset:
                    continue
                for rec in batch.records():
                    if rec.timestamp >= timestamp and rec.offset >= log_start:
                        epoch = _remote_epoch(segs, rec.offset)
                        return _Answer(E.NONE, rec.timestamp, rec.offset,
                                       -1 if epoch is None else epoch)
            if got.next_offset <= offset:
                break
            offset = got.next_offset
    return None


__all__ = ["list_offsets"]
