"""Produce (key 0), v3-v13 (v3 is the oldest Kafka 4 accepts; magic v2 batches only; v13
names topics by topic id).

Record batches pass through as bytes: the handler reads the batch header's length and magic
only, the log engine checks each batch's header and CRC as for any append; records are never
decoded. A client's append goes through the producer state checks (``AppendOrigin.CLIENT``:
epochs and sequences, a retried batch answered with its original offsets).

Per request
    ``acks`` other than 0, 1 and -1: every partition ``INVALID_REQUIRED_ACKS``. A
    ``transactional_id``: every partition ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``
    ("transactions are not supported by kafka-tiers", as InitProducerId answers one); a
    transactional batch without one is refused by the log engine (``INVALID_TXN_STATE``).
    ``acks=0``: no response; when a partition failed the connection is closed instead (as
    Kafka does: the client's only hint to refresh its metadata).
Per partition
    ``TOPIC_AUTHORIZATION_FAILED`` without WRITE on the topic (checked first, as Kafka),
    ``UNKNOWN_TOPIC_OR_PARTITION`` (``UNKNOWN_TOPIC_ID`` for v13; also an empty topic name or a
    negative partition, :mod:`kafka_tiers.kafka.request_partitions`),
    ``INVALID_TOPIC_EXCEPTION`` for an internal topic (``__consumer_offsets``: only the broker
    writes it, :mod:`kafka_tiers.kafka.internal_topics`), ``NOT_LEADER_OR_FOLLOWER``
    (also from a broker holding no replica of an existing partition, so clients re-route; v10+
    carries the current leader and its endpoint, KIP-951), ``INVALID_RECORD`` (no batch, more
    than one, or not magic 2, as Kafka's ``ProduceRequest`` validation), ``CORRUPT_MESSAGE``,
    ``MESSAGE_TOO_LARGE``, ``KAFKA_STORAGE_ERROR``, ``NOT_ENOUGH_REPLICAS`` (``acks=-1`` with
    fewer in-sync replicas than ``min.insync.replicas``; nothing appended),
    ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``, ``REQUEST_TIMED_OUT`` (``acks=-1`` not committed
    within the request's ``timeout_ms``), and the idempotence errors of the producer state.
Acks on a cluster
    through the member's replica manager (``acks=-1`` waits for the ISR). The partitions of
    one ``acks=-1`` request are appended and waited for in parallel, so a request's latency is
    its slowest partition's, not their sum.
Standalone
    the broker is the only replica: the high watermark moves with the append; ``acks=-1``
    needs ``min.insync.replicas`` <= 1.
"""

from __future__ import annotations

import concurrent.futures
import logging
import struct
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.authorizer import AclOperation, ResourceType
from kafka_tiers.kafka import errors as E
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import CLOSE_CONNECTION, NO_RESPONSE, RequestContext
from kafka_tiers.kafka.internal_topics import Operation, refusal
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import TOPIC_AUTHORIZATION_FAILED, allowed_names
from kafka_tiers.kafka.topic_ids import topic_name
from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.producer_state import AppendOrigin
from kafka_tiers.log.records import HEADER_SIZE, LOG_OVERHEAD, MAGIC, verified_batches

if TYPE_CHECKING:
    from kafka_tiers.kafka.server import KafkaServer

log = logging.getLogger(__name__)

PRODUCE_KEY = 0
INVALID_TXN_STATE = 48
UNKNOWN_TOPIC_ID = 100
TRANSACTIONS_UNSUPPORTED = "transactions are not supported by kafka-tiers"
_BATCH_LENGTH = struct.Struct(">i")
_MAGIC_OFFSET = 16
_MAX_TIMESTAMP_OFFSET = 35
_I64 = struct.Struct(">q")
#: threads waiting for acks=-1 partitions of one request in parallel (per Kafka server)
ACK_WAITERS = 16


@dataclass
class PartitionResult:
    """One partition's answer."""

    error: int = E.NONE
    message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1


class _AckWaiters:
    """The shared pool that appends and waits for the partitions of an acks=-1 request."""

    def __init__(self, _server: KafkaServer) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(ACK_WAITERS,
                                                          thread_name_prefix="kafka-produce")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


@handles(PRODUCE_KEY, 3, 13)
def produce(ctx: RequestContext, request: Any) -> Any:
    """The Produce answer (see the module docstring)."""
    v = ctx.version
    acks = int(request.acks)
    deadline = time.monotonic() + max(int(request.timeout_ms), 0) / 1000.0
    # (topic name or None, topic id, [(partition, records)])
    work: list[tuple[str | None, uuid.UUID | None, list[tuple[int, Any]]]] = []
    for td in request.topic_data:
        tid = td.topic_id if v >= 13 else None
        name = topic_name(ctx.broker, tid) if tid is not None else td.name
        work.append((name, tid, [(pd.index, pd.records) for pd in td.partition_data]))
    results: dict[tuple[int, int], PartitionResult] = {}
    if acks not in (0, 1, -1):
        for i, (_, _, parts) in enumerate(work):
            for p, _ in parts:
                results[i, p] = PartitionResult(
                    E.INVALID_REQUIRED_ACKS, f"acks must be -1 (all), 0 or 1, got {acks}")
    elif request.transactional_id is not None:
        for i, (_, _, parts) in enumerate(work):
            for p, _ in parts:
                results[i, p] = PartitionResult(
                    E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    f"{TRANSACTIONS_UNSUPPORTED}: transactional id "
                    f"{request.transactional_id!r} refused; produce without transactional.id")
    else:
        jobs: list[tuple[tuple[int, int], TopicPartition, Any]] = []
        writable = allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                 (name for name, _, _ in work if name is not None))
        for i, (name, tid, parts) in enumerate(work):
            for p, records in parts:
                if name is None:
                    results[i, p] = PartitionResult(
                        UNKNOWN_TOPIC_ID, f"no topic has id {tid}")
                    continue
                if name not in writable:
                    results[i, p] = PartitionResult(
                        TOPIC_AUTHORIZATION_FAILED, f"{ctx.principal} may not write to "
                        f"topic {name!r} (WRITE on the topic is needed)")
                    continue
                tp, refused = topic_partition_or_error(name, p)
                refused = refused or refusal(name, Operation.PRODUCE)
                if tp is None or refused is not None:
                    assert refused is not None
                    results[i, p] = PartitionResult(*refused)
                else:
                    jobs.append(((i, p), tp, records))
        if acks == -1 and ctx.broker.member is not None and len(jobs) > 1:
            pool = ctx.component("produce.ack_waiters", _AckWaiters).pool
            futures = {key: pool.submit(_produce_one, ctx, tp, records, acks, deadline)
                       for key, tp, records in jobs[1:]}
            key, tp, records = jobs[0]
            results[key] = _produce_one(ctx, tp, records, acks, deadline)
            for key, fut in futures.items():
                results[key] = fut.result()
        else:
            for key, tp, records in jobs:
                results[key] = _produce_one(ctx, tp, records, acks, deadline)
    if acks == 0:
        failed = [r for r in results.values() if r.error != E.NONE]
        if failed:
            log.debug("produce with acks=0 from %s failed (%s): connection closed", ctx.peer,
                      failed[0].message)
            return CLOSE_CONNECTION
        return NO_RESPONSE
    return _response(ctx, work, results)


def _response(ctx: RequestContext, work: list[tuple[str | None, uuid.UUID | None,
                                                     list[tuple[int, Any]]]],
              results: dict[tuple[int, int], PartitionResult]) -> Any:
    v = ctx.version
    cls = response_class(PRODUCE_KEY, v)
    topic_cls = cls.TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    leaders: dict[int, Any] = {}
    state = ClusterState(ctx.broker, ctx.listener) if v >= 10 else None
    topics = []
    for i, (name, tid, parts) in enumerate(work):
        out = []
        for p, _ in parts:
            r = results[i, p]
            fields: dict[str, Any] = {
                "index": p, "error_code": r.error, "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time, "log_start_offset": r.log_start_offset,
                "record_errors": [], "error_message": r.message if r.error else None}
            if state is not None and r.error == E.NOT_LEADER_OR_FOLLOWER and name is not None:
                current = _current_leader(state, TopicPartition(name, p), leaders)
                if current is not None:
                    fields["current_leader"] = part_cls.LeaderIdAndEpoch(
                        leader_id=current[0], leader_epoch=current[1])
            out.append(part_cls(**fields))
        topics.append(topic_cls(name=name or "", topic_id=tid or uuid.UUID(int=0),
                                partition_responses=out))
    fields = {"responses": topics, "throttle_time_ms": 0}
    if leaders:
        fields["node_endpoints"] = [
            cls.NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in leaders.values()]
    return cls(**fields)


def _current_leader(state: ClusterState, tp: TopicPartition, leaders: dict[int, Any]
                    ) -> tuple[int, int] | None:
    """KIP-951: the partition's current leader and epoch when it is known and advertised on
    this listener (its endpoint is added to ``leaders``)."""
    try:
        pv = state.partition(tp)
    except Exception:  # the hint is optional: never fail the answer for it
        return None
    if pv is None or pv.leader < 0:
        return None
    if pv.leader not in leaders:
        ep = next((b for b in state.brokers() if b.node_id == pv.leader), None)
        if ep is None:
            return None
        leaders[pv.leader] = ep
    return pv.leader, pv.leader_epoch


def check_single_batch(records: Any) -> tuple[int, str] | None:
    """Kafka's ``ProduceRequest`` validation of one partition's records (v3+): exactly one
    batch, magic 2. ``(error code, message)`` when refused, None otherwise. Reads two header
    fields; the log engine checks the rest (CRC, sizes)."""
    if not records:
        return E.INVALID_RECORD, "the partition's records are empty: one record batch is needed"
    if len(records) < HEADER_SIZE:
        return E.CORRUPT_MESSAGE, (f"{len(records)} bytes of records are shorter than a "
                                   f"record batch header ({HEADER_SIZE} bytes)")
    (length,) = _BATCH_LENGTH.unpack_from(records, 8)
    magic = records[_MAGIC_OFFSET]
    if magic != MAGIC:
        return E.INVALID_RECORD, (f"record batch magic {magic}: Produce v3+ takes magic "
                                  f"{MAGIC} batches only")
    if LOG_OVERHEAD + length < len(records):
        return E.INVALID_RECORD, ("more than one record batch for one partition: Produce v3+ "
                                  "takes exactly one")
    return None


def _produce_one(ctx: RequestContext, tp: TopicPartition, records: Any, acks: int,
                 deadline: float) -> PartitionResult:
    refused = check_single_batch(records)
    if refused is not None:
        return PartitionResult(*refused)
    data = records if isinstance(records, bytes | bytearray | memoryview) else bytes(records)
    broker = ctx.broker
    try:
        if broker.member is None:
            return _produce_standalone(ctx, tp, data, acks)
        return _produce_replicated(ctx, tp, data, acks, deadline)
    except Exception as exc:
        code, message = E.error_of(exc)
        if code == E.INVALID_RECORD and _corrupt(data):
            code = E.CORRUPT_MESSAGE  # Kafka's answer to a bad CRC or a malformed batch
        if code == E.UNKNOWN_SERVER_ERROR:
            log.exception("produce to %s from %s failed", tp, ctx.peer)
        elif code == E.UNKNOWN_TOPIC_OR_PARTITION and broker.member is not None \
                and _exists(ctx, tp):
            # a broker holding no replica of an existing partition (moved, not yet created)
            code, message = E.NOT_LEADER_OR_FOLLOWER, (
                f"broker {broker.broker_id} is not the leader of {tp}: {message}")
        return PartitionResult(code, message)


def _corrupt(data: Any) -> bool:
    """Whether the batch fails its own checks (size, magic, CRC): read only when the log
    refused it, to tell a damaged batch from one the log refuses for another reason."""
    try:
        for _ in verified_batches(bytes(data)):
            pass
    except CorruptRecordError:
        return True
    except Exception:
        return False
    return False


def _produce_standalone(ctx: RequestContext, tp: TopicPartition, data: Any, acks: int
                        ) -> PartitionResult:
    if acks == -1:
        # the topic's min.insync.replicas (validated with its config), else the broker's
        raw = ctx.broker.topic(tp.topic).config.get("min.insync.replicas")
        min_isr = int(ctx.config["min.insync.replicas"] if raw is None else raw)
        if min_isr > 1:
            return PartitionResult(
                E.NOT_ENOUGH_REPLICAS, f"{tp}: a standalone broker has 1 in-sync replica, "
                f"min.insync.replicas is {min_isr}; lower it or produce with acks=1")
    info = ctx.broker.append_client_batches(tp, data, origin=AppendOrigin.CLIENT)
    return PartitionResult(E.NONE, None, info.first_offset, info.log_append_time,
                           info.log_start_offset)


def _produce_replicated(ctx: RequestContext, tp: TopicPartition, data: Any, acks: int,
                        deadline: float) -> PartitionResult:
    member = ctx.broker.member
    assert member is not None
    replicas = member.replicas
    if replicas is None:
        return PartitionResult(E.NOT_LEADER_OR_FOLLOWER, "the broker is not serving yet")
    timeout = max(0.0, deadline - time.monotonic())
    base, _last = replicas.produce(tp, bytes(data), acks, timeout, origin=AppendOrigin.CLIENT)
    lg = ctx.broker.log_manager.get_log(tp) if ctx.broker.log_manager is not None else None
    append_time = -1
    start = -1
    if lg is not None:
        start = lg.log_start_offset
        if lg.config.log_append_time:
            append_time = _batch_max_timestamp(lg, base)
    return PartitionResult(E.NONE, None, base, append_time, start)


def _batch_max_timestamp(lg: Any, base: int) -> int:
    """The max timestamp of the batch at ``base`` (with LogAppendTime: its append time)."""
    try:
        data = lg.read(base, HEADER_SIZE).records
    except Exception:
        return -1
    if len(data) < HEADER_SIZE:
        return -1
    return int(_I64.unpack_from(bytes(data[:HEADER_SIZE]), _MAX_TIMESTAMP_OFFSET)[0])


def _exists(ctx: RequestContext, tp: TopicPartition) -> bool:
    try:
        return ClusterState(ctx.broker, ctx.listener).partition(tp) is not None
    except Exception:
        return False


__all__ = ["TRANSACTIONS_UNSUPPORTED", "PartitionResult", "check_single_batch", "produce"]
