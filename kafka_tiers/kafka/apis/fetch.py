"""Fetch (key 1) v4-18: consumers read record batches, from local segments with
``os.sendfile`` (zero copy) or, below the local log start of a tiered topic, from the remote
tier through the configured storage plugin.

What a consumer fetch gets, per partition (Kafka's ``ReplicaManager.fetchMessages`` rules)
    - only from the partition's leader (else ``NOT_LEADER_OR_FOLLOWER``; from v12 with the
      current leader and, from v16, its endpoint: KIP-951), with ``current_leader_epoch``
      checked from v9 (``FENCED_LEADER_EPOCH`` below ours, ``UNKNOWN_LEADER_EPOCH`` above);
    - whole batches from the one holding ``fetch_offset``, never past the high watermark;
      the last stable offset is the high watermark (no transactions here, so both isolation
      levels read the same and no aborted transaction is ever listed); no preferred read
      replica (-1);
    - at most ``partition_max_bytes`` per partition and ``max_bytes`` (capped by the broker's
      ``fetch.max.bytes``) in all, except that the first batch of the first partition with
      data is sent whole however large (KIP-74: a consumer always progresses);
    - ``OFFSET_OUT_OF_RANGE`` above the log end offset or below the log start offset (the
      remote tier's included: a tiered topic's offsets below the local log start are read
      from the remote tier, and those in no remote segment are out of range);
    - ``KAFKA_STORAGE_ERROR`` (retriable) when the replica's log dir is offline, the broker
      is out of descriptors, or a remote read failed or took longer than
      ``remote.fetch.max.wait.ms``: only that partition; the others of the response carry
      their data.
Remote reads
    Every partition of a request that needs the remote tier is read from it, all at once
    (KAFKA-14915; Kafka before 4.2 read one per request): the reads are submitted together to
    the remote log manager's reader pool (``remote.log.reader.threads``; beyond
    ``remote.log.reader.max.pending.tasks`` waiting a read is refused: that partition's
    ``KAFKA_STORAGE_ERROR``, retriable) before anything is waited for, and each is waited for
    at most ``remote.fetch.max.wait.ms`` from its start, so N slow remote partitions cost
    about one delay, not N. The response's ``max_bytes`` is split in request order BEFORE
    the reads start: local partitions take what they read, each remote partition reserves
    ``min(partition_max_bytes, what is left)`` and is read with exactly that budget (whole
    batches; the first partition with data keeps its first batch, KIP-74); a remote
    partition left with no room is not read at all (no records, no error), so a request never
    downloads more than its response can carry. The fetch quota is checked for each read as
    it starts, and each read's budget is counted against it at once (corrected to the bytes
    really fetched when it ends). While the broker's remote fetch rate is over
    ``remote.log.manager.fetch.max.bytes.per.second`` (KIP-956) a remote partition gets no
    records and no error (the client asks again), as Kafka. A remote outage costs the
    partitions that need it that long, never another connection.
Long poll
    When fewer than ``min_bytes`` are readable (and nothing failed), the request waits until
    they are or ``max_wait_ms`` passes (capped by ``request.timeout.ms``), sleeping on the
    broker's :class:`~kafka_tiers.kafka.fetch_wait.DataArrived` signal (woken by high
    watermark moves), then reads again: no busy loop.
Zero copy
    A local read is a region of one segment file (``Log.read_region``: batch boundaries from
    the offset index and the batch headers, records never read). The response is encoded by
    kafka-python's schema-generated ``FetchResponse`` with a unique 16-byte placeholder as
    each such partition's records; the placeholder and its length prefix are then replaced
    by the real length prefix (the library's own codecs) and a
    :class:`~kafka_tiers.kafka.context.FileRegion`, which the server sends with
    ``os.sendfile`` from a descriptor of its own (so a segment deleted meanwhile still sends
    the bytes checked here).
Authorization
    A consumer's fetch needs READ on each topic (``TOPIC_AUTHORIZATION_FAILED`` for its
    partitions, checked before anything is read from either tier; a session's partitions are
    checked on every fetch); a replica's fetch (``replica_id`` >= 0) needs CLUSTER_ACTION on
    the cluster (else every partition ``TOPIC_AUTHORIZATION_FAILED``, as Kafka).
Followers
    A request listing more than ``max.request.partitions`` partitions, or growing a fetch
    session beyond that many, is answered with the top-level error ``INVALID_REQUEST`` and no
    partition (the session is closed).
    A fetch with ``replica_id`` >= 0 (a Kafka broker replicating) is refused: every partition
    is answered ``REPLICA_NOT_AVAILABLE``. kafka-tiers brokers replicate over their own
    transport; a Kafka broker cannot be a follower here.
Fetch sessions (KIP-227, v7+)
    Kept as Kafka keeps them (:mod:`kafka_tiers.kafka.fetch_sessions`): epoch 0 opens a
    session (when ``max.incremental.fetch.session.cache.slots`` has room), later fetches send
    only changes and get only the partitions with something new; epoch -1 fetches without a
    session.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from kafka.protocol.schemas.fields.codecs import Int32, UnsignedVarInt32

from kafka_tiers.api import RemoteResourceNotFoundError, RemoteStorageError, TopicPartition
from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.kafka import codec
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.context import FileRegion, RawBody, RequestContext
from kafka_tiers.kafka.errors import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    KAFKA_STORAGE_ERROR,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    error_of,
)
from kafka_tiers.kafka.fetch_sessions import (
    FETCH_SESSION_ID_NOT_FOUND,
    INITIAL_EPOCH,
    INVALID_FETCH_SESSION_EPOCH,
    SESSIONLESS_EPOCH,
    FetchSession,
    Key,
    cache_of,
    next_epoch,
)
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.request_partitions import topic_partition_or_error
from kafka_tiers.kafka.security.api_rules import TOPIC_AUTHORIZATION_FAILED, allowed_names
from kafka_tiers.kafka.topic_ids import topic_name
from kafka_tiers.log.errors import OffsetOutOfRangeError
from kafka_tiers.log.log import Log, RegionRead
from kafka_tiers.log.log_dir_failure import ResourceExhaustedError
from kafka_tiers.log.records import LOG_OVERHEAD
from kafka_tiers.placement.limits import LimitExceededError, check_request_entries

log = logging.getLogger(__name__)

FETCH_KEY = 1
MIN_VERSION, MAX_VERSION = 4, 18
REPLICA_NOT_AVAILABLE = 9
UNKNOWN_TOPIC_ID = 100
#: the size of a records placeholder: 12 random bytes per response and the slot number
_TOKEN_SIZE = 16
#: records read into memory (the remote tier's) at least this large are spliced into the
#: response as they are, not copied through the encoder and the send buffer
_SPLICE_MIN = 64 * 1024


@dataclass
class _Want:
    """One requested partition."""

    topic_index: int  # which topic entry of the request
    topic: str | None  # None: an unknown topic id
    topic_id: uuid.UUID | None
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int
    #: the principal may not READ the topic: nothing is read (local or remote tier)
    denied: bool = False


@dataclass
class _Got:
    """What one partition answers."""

    error: int = NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    region: RegionRead | None = None
    data: bytes = b""
    #: KIP-951: (leader id, leader epoch) on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH
    leader: tuple[int, int] | None = None
    remote: bool = False

    @property
    def size(self) -> int:
        return self.region.size if self.region is not None else len(self.data)

    def close(self) -> None:
        if self.region is not None and self.region.fd >= 0:
            os.close(self.region.fd)
        self.region = None


@dataclass
class _Pass:
    """One read of every requested partition."""

    got: list[_Got] = field(default_factory=list)
    remote_read: bool = False

    @property
    def bytes(self) -> int:
        return sum(g.size for g in self.got)

    @property
    def failed(self) -> bool:
        return any(g.error != NONE for g in self.got)

    def close(self) -> None:
        for g in self.got:
            g.close()


@handles(FETCH_KEY, MIN_VERSION, MAX_VERSION)
def fetch(ctx: RequestContext, request: Any) -> RawBody:
    """Answer a Fetch (see the module docstring)."""
    v = ctx.version
    try:
        check_request_entries(ctx.config, [p for t in request.topics for p in t.partitions],
                              "partitions to fetch")
    except LimitExceededError as exc:
        log.warning("kafka fetch from %s refused: %s", ctx.peer, exc)
        return _encode(ctx, request, [], _Pass(), INVALID_REQUEST)
    wants = _wants(ctx, request)
    replica_id = _replica_id(request, v)
    if replica_id >= 0:  # a replica's fetch needs CLUSTER_ACTION first, as Kafka's
        code = REPLICA_NOT_AVAILABLE if ctx.authorize(
            AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME) \
            else TOPIC_AUTHORIZATION_FAILED
        return _encode(ctx, request, wants, _Pass([_Got(code) for _ in wants]), NONE)
    opened = _session_of(ctx, request, wants)
    if isinstance(opened, int):  # a session error
        return _encode(ctx, request, [], _Pass(), opened)
    session, incremental = opened
    if incremental:
        assert session is not None
        wants = _session_wants(ctx, session)
    cfg = ctx.config
    limit = max(0, min(int(request.max_bytes), int(cfg["fetch.max.bytes"])))
    max_wait = min(max(int(request.max_wait_ms), 0), int(cfg["request.timeout.ms"])) / 1000.0
    min_bytes = int(request.min_bytes)
    deadline = time.monotonic() + max_wait
    signal = ctx.broker.data_arrived
    seen = signal.version
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                             (w.topic for w in wants if w.topic is not None))
    wants = [w if w.topic is None or w.topic in readable else replace(w, denied=True)
             for w in wants]
    result = _read_all(ctx, wants, limit, remote_allowed=True)
    while (max_wait > 0 and result.bytes < min_bytes and not result.failed
           and not result.remote_read and wants and not signal.closed):
        if time.monotonic() >= deadline:
            break
        seen = signal.wait(seen, deadline)
        if not _moved(ctx, wants, result):  # another partition's data: sleep on
            continue
        result.close()
        result = _read_all(ctx, wants, limit, remote_allowed=False)
    if session is not None:
        with session.lock:
            keep = [session.include(_key(ctx.version, w), g.error, g.high_watermark,
                                    g.log_start_offset, g.size)
                    for w, g in zip(wants, result.got, strict=True)]
        if incremental:  # only the partitions with something new
            wants = [w for w, k in zip(wants, keep, strict=True) if k]
            result.got = [g for g, k in zip(result.got, keep, strict=True) if k]
    try:
        return _encode(ctx, request, wants, result, NONE,
                       session.id if session is not None else 0)
    except BaseException:
        result.close()
        raise


def _key(version: int, w: _Want) -> Key:
    return (w.topic_id, None, w.partition) if version >= 13 else (None, w.topic, w.partition)


def _session_of(ctx: RequestContext, request: Any, wants: list[_Want]
                ) -> tuple[FetchSession | None, bool] | int:
    """``(session or None, incremental)`` of a request (see
    :mod:`kafka_tiers.kafka.fetch_sessions`), or a top-level error code."""
    sid, epoch = int(request.session_id), int(request.session_epoch)
    if ctx.version < 7:
        return None, False
    cache = cache_of(ctx.server)
    owner = (str(ctx.principal), ctx.listener)  # another's session id is unknown to this one
    if epoch in (SESSIONLESS_EPOCH, INITIAL_EPOCH):
        if sid != 0:
            cache.remove(sid, owner)
        if epoch == SESSIONLESS_EPOCH:
            return None, False
        session = cache.create(owner)
        if session is not None:
            session.update(((_key(ctx.version, w), w.offset, w.max_bytes,
                             w.current_leader_epoch) for w in wants), ())
        return session, False
    found = cache.get(sid, owner)
    if found is None:
        return FETCH_SESSION_ID_NOT_FOUND
    with found.lock:
        if epoch != found.epoch:
            return INVALID_FETCH_SESSION_EPOCH
        found.epoch = next_epoch(epoch)
        by_id = ctx.version >= 13
        forgotten = [(t.topic_id, None, int(p)) if by_id else (None, t.topic, int(p))
                     for t in request.forgotten_topics_data for p in t.partitions]
        found.update(((_key(ctx.version, w), w.offset, w.max_bytes, w.current_leader_epoch)
                      for w in wants), forgotten)
        try:  # a session grows by increments: bounded like one request
            check_request_entries(ctx.config, list(found.partitions),
                                  "partitions of a fetch session")
        except LimitExceededError as exc:
            log.warning("kafka fetch from %s: session %d closed: %s", ctx.peer, sid, exc)
            cache.remove(sid, owner)
            return INVALID_REQUEST
    return found, True


def _session_wants(ctx: RequestContext, session: FetchSession) -> list[_Want]:
    """Every partition of a session, grouped by topic (first-added topic first)."""
    with session.lock:
        items = list(session.partitions.items())
    groups: dict[tuple[uuid.UUID | None, str | None], list[_Want]] = {}
    names: dict[uuid.UUID, str | None] = {}
    for (tid, name, partition), sp in items:
        index = list(groups).index((tid, name)) if (tid, name) in groups else len(groups)
        group = groups.setdefault((tid, name), [])
        if tid is not None:  # v13+: named by id
            if tid not in names:
                names[tid] = topic_name(ctx.broker, tid)
            name = names[tid]
        group.append(_Want(index, name, tid, partition, sp.offset, sp.max_bytes,
                           sp.current_leader_epoch))
    return [w for group in groups.values() for w in group]


def _moved(ctx: RequestContext, wants: list[_Want], result: _Pass) -> bool:
    """Whether the high watermark of a requested partition moved since ``result`` was read
    (a cheap check before reading again: one wake-up serves every waiting fetch)."""
    lm = ctx.broker.log_manager
    if lm is None:
        return True
    for w, g in zip(wants, result.got, strict=True):
        tp, _ = topic_partition_or_error(w.topic, w.partition)
        if tp is None:
            continue
        lg = lm.get_log(tp)
        if lg is None or lg.high_watermark != g.high_watermark:
            return True
    return False


def _replica_id(request: Any, version: int) -> int:
    if version <= 14:
        return int(request.replica_id)
    state = getattr(request, "replica_state", None)
    return -1 if state is None else int(state.replica_id)


def _wants(ctx: RequestContext, request: Any) -> list[_Want]:
    """The requested partitions in request order (v13+: topics named by id)."""
    out: list[_Want] = []
    by_id = ctx.version >= 13
    for index, t in enumerate(request.topics):
        if by_id:
            tid = t.topic_id
            name = topic_name(ctx.broker, tid) if tid is not None else None
        else:
            tid, name = None, t.topic
        for p in t.partitions:
            cle = int(p.current_leader_epoch) if ctx.version >= 9 else -1
            out.append(_Want(index, name, tid, int(p.partition), int(p.fetch_offset),
                             int(p.partition_max_bytes), cle))
    return out


@dataclass
class _RemoteAsk:
    """A remote read started for one partition before the request's partitions are read in
    order (every remote read of a request runs in parallel)."""

    future: Future[Any] | None
    started: float
    #: the read could not start (the reader pool refused it)
    error: BaseException | None = None
    #: the fetch quota is exceeded: no read, no records, no error
    throttled: bool = False


def _remote_partition(ctx: RequestContext, w: _Want) -> TopicPartition | None:
    """``w``'s partition when it needs the remote tier now (the checks of
    :func:`_read_one` repeated cheaply), else None."""
    broker = ctx.broker
    lm = broker.log_manager
    if getattr(broker, "rlm", None) is None or lm is None or w.topic is None or w.denied:
        return None
    tp, _ = topic_partition_or_error(w.topic, w.partition)
    if tp is None:
        return None
    lg = lm.get_log(tp)  # the cheap test first: most fetches read the local log
    if lg is None or not lg.log_start_offset <= w.offset < lg.local_log_start_offset:
        return None
    try:
        leads, epoch = broker.leadership(tp)
    except Exception:
        return None
    if (not leads or (w.current_leader_epoch >= 0 and w.current_leader_epoch != epoch)
            or not broker.tiered(tp)):
        return None
    return tp


def _start_remote_read(ctx: RequestContext, tp: TopicPartition, w: _Want, budget: int
                       ) -> _RemoteAsk:
    """Start ``w``'s remote read of ``budget`` bytes (> 0) on the reader pool, unless the
    fetch quota is exceeded now (checked per read: every read started before counts, as
    its budget is reserved against the quota when it starts)."""
    rlm = ctx.broker.rlm
    assert rlm is not None  # _remote_partition checked it
    if rlm.fetch_throttled():
        return _RemoteAsk(None, time.monotonic(), throttled=True)
    try:
        return _RemoteAsk(rlm.submit_read(tp, w.offset, budget), time.monotonic())
    except Exception as exc:  # the pool refused it: this partition's retriable error
        return _RemoteAsk(None, time.monotonic(), error=exc)


def _cut_batches(data: bytes, budget: int, min_one: bool) -> bytes:
    """The longest prefix of whole batches of ``data`` within ``budget`` bytes (the first
    batch whatever its size when ``min_one``)."""
    if len(data) <= budget:
        return data
    pos = 0
    while pos + LOG_OVERHEAD <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + LOG_OVERHEAD
        if pos + size > len(data) or (pos + size > budget and not (min_one and pos == 0)):
            break
        pos += size
    return data[:pos]


def _read_all(ctx: RequestContext, wants: list[_Want], limit: int, *,
              remote_allowed: bool) -> _Pass:
    """Read every partition once within the response's byte budget, split in request order
    BEFORE any remote read starts: a local partition takes what it read; a remote one
    reserves ``min(partition_max_bytes, what is left)`` and its read starts at once with
    that budget (never with 0: then it gets no records; the first partition that may have
    data still gets one whole batch, KIP-74). Every remote read is started before any is
    waited for (they run in parallel); then each is waited for and cut to its budget."""
    got: list[_Got] = []
    remote: dict[int, tuple[_RemoteAsk | None, int, bool]] = {}
    min_one = True
    for i, w in enumerate(wants):
        tp = _remote_partition(ctx, w) if remote_allowed else None
        if tp is not None:
            budget = max(0, min(w.max_bytes, limit))
            ask = None
            if budget > 0 or min_one:
                ask = _start_remote_read(ctx, tp, w, max(budget, 1))
            remote[i] = (ask, budget, min_one)
            got.append(_Got())  # answered below, once every read has started
            if ask is not None and not ask.throttled and ask.error is None:
                min_one = False  # it brings at least one batch (or nothing and no room)
                limit -= budget
            continue
        g = _read_safely(ctx, w, limit, min_one, remote_allowed=remote_allowed, ask=None)
        got.append(g)
        if g.size > 0:
            min_one = False
            limit = max(0, limit - g.size)
    for i, (ask, budget, first) in remote.items():  # ask None: no room left, no read
        got[i] = _read_safely(ctx, wants[i], budget, first, remote_allowed=ask is not None,
                              ask=ask)
    result = _Pass()
    result.got = got
    result.remote_read = any(g.remote for g in got)
    return result


def _read_safely(ctx: RequestContext, w: _Want, limit: int, min_one: bool, *,
                 remote_allowed: bool, ask: _RemoteAsk | None) -> _Got:
    """:func:`_read_one`, a failure being the partition's error code."""
    try:
        return _read_one(ctx, w, limit, min_one, remote_allowed=remote_allowed, ask=ask)
    except ResourceExhaustedError as exc:  # out of descriptors: retriable
        log.warning("kafka fetch: reading %s-%s: %s", w.topic, w.partition, exc)
        return _Got(KAFKA_STORAGE_ERROR)
    except Exception as exc:  # one partition's failure is that partition's answer
        code, message = error_of(exc)
        if code == UNKNOWN_SERVER_ERROR:
            log.exception("kafka fetch: reading %s-%s failed", w.topic, w.partition)
        else:
            log.debug("kafka fetch: %s-%s: %s", w.topic, w.partition, message)
        return _Got(code if code != UNKNOWN_SERVER_ERROR else KAFKA_STORAGE_ERROR)


def _read_one(ctx: RequestContext, w: _Want, limit: int, min_one: bool, *,
              remote_allowed: bool, ask: _RemoteAsk | None = None) -> _Got:
    """One partition's answer. ``ask``: its remote read, started by :func:`_read_all`
    (None: none was started; ``remote_allowed`` False: none may be, as when the response
    has no room left for it: no records, no error)."""
    broker = ctx.broker
    if w.topic is None:
        return _Got(UNKNOWN_TOPIC_ID)
    if w.denied:
        return _Got(TOPIC_AUTHORIZATION_FAILED)
    tp, refused = topic_partition_or_error(w.topic, w.partition)
    if tp is None:
        assert refused is not None
        return _Got(refused[0])
    try:
        leads, epoch = broker.leadership(tp)
    except Exception as exc:  # UnknownTopicError: UNKNOWN_TOPIC_OR_PARTITION
        code, _ = error_of(exc)
        lm = broker.log_manager
        if lm is not None and tp in lm.offline_partitions:  # its files failed to load
            code = KAFKA_STORAGE_ERROR
        return _Got(code)
    if not leads:
        return _Got(NOT_LEADER_OR_FOLLOWER, leader=_leader_of(ctx, tp))
    if w.current_leader_epoch >= 0 and w.current_leader_epoch != epoch:
        if w.current_leader_epoch < epoch:
            return _Got(FENCED_LEADER_EPOCH, leader=_leader_of(ctx, tp))
        return _Got(UNKNOWN_LEADER_EPOCH)
    lm = broker.log_manager
    lg = lm.get_log(tp) if lm is not None else None
    if lm is None or lg is None:
        offline = lm is not None and tp in lm.offline_partitions
        return _Got(KAFKA_STORAGE_ERROR if offline else UNKNOWN_TOPIC_OR_PARTITION)
    max_bytes = max(0, min(w.max_bytes, limit))
    if w.offset < 0 or w.offset > lg.log_end_offset:
        return _out_of_range(lg.high_watermark)
    if w.offset >= lg.local_log_start_offset:
        if max_bytes == 0 and not min_one:
            return _Got(high_watermark=lg.high_watermark, log_start_offset=lg.log_start_offset)
        try:
            region = lm.read_region(tp, w.offset, max_bytes, isolation="high_watermark",
                                    min_one_batch=min_one)
        except OffsetOutOfRangeError:
            if w.offset >= lg.local_log_start_offset or not broker.tiered(tp):
                return _out_of_range(lg.high_watermark)
        else:
            g = _Got(high_watermark=region.high_watermark,
                     log_start_offset=min(region.log_start_offset, lg.log_start_offset))
            if region.size > 0:
                g.region = region
            return g
    # below the local log: the remote tier (tiered topics), read in parallel with the
    # request's other remote partitions (started by _read_all)
    if not broker.tiered(tp):
        return _out_of_range(lg.high_watermark)
    if ask is None:  # no room for it, or it was not below the local log when _read_all looked
        if remote_allowed and w.offset < lg.log_start_offset:
            return _Got(OFFSET_OUT_OF_RANGE, high_watermark=lg.high_watermark, remote=True)
        return _Got(high_watermark=lg.high_watermark, log_start_offset=lg.log_start_offset)
    return _remote_answer(ctx, tp, lg, w, ask, max_bytes, min_one)


def _remote_answer(ctx: RequestContext, tp: TopicPartition, lg: Log, w: _Want,
                   ask: _RemoteAsk, budget: int, min_one: bool) -> _Got:
    """A remote partition's answer: its read's batches cut to ``budget``, or its error."""
    rlm = ctx.broker.rlm
    if ask.throttled:  # KIP-956: no records, no error; the client asks again
        return _Got(high_watermark=lg.high_watermark, log_start_offset=lg.log_start_offset,
                    remote=True)
    try:
        if ask.error is not None:
            raise ask.error
        assert ask.future is not None and rlm is not None
        left_ms = rlm.fetch_timeout_ms - (time.monotonic() - ask.started) * 1000
        res = rlm.wait_read(tp, w.offset, ask.future, left_ms)
    except RemoteResourceNotFoundError:
        return _Got(OFFSET_OUT_OF_RANGE, high_watermark=lg.high_watermark, remote=True)
    except RemoteStorageError as exc:
        log.warning("kafka fetch: remote read of %s at offset %d failed: %s", tp, w.offset,
                    exc)
        return _Got(KAFKA_STORAGE_ERROR, remote=True)
    return _Got(high_watermark=lg.high_watermark,
                log_start_offset=min(res.segment.start_offset, lg.log_start_offset),
                data=_cut_batches(res.records, budget, min_one), remote=True)


def _out_of_range(high_watermark: int) -> _Got:
    return _Got(OFFSET_OUT_OF_RANGE, high_watermark=high_watermark)


def _leader_of(ctx: RequestContext, tp: TopicPartition) -> tuple[int, int] | None:
    """KIP-951's current leader hint (v12+), from the cluster state; None when unknown."""
    if ctx.version < 12:
        return None
    try:
        view = ClusterState(ctx.broker, ctx.listener).partition(tp)
    except Exception:
        return None
    if view is None or view.leader < 0:
        return None
    return view.leader, view.leader_epoch


# ---------------------------------------------------------------------- encoding
def _encode(ctx: RequestContext, request: Any, wants: list[_Want], result: _Pass,
            top_error: int, session_id: int = 0) -> RawBody:
    """The response body: kafka-python's FetchResponse with placeholders spliced into file
    regions (see the module docstring)."""
    v = ctx.version
    resp_cls = codec.response_class(FETCH_KEY, v)
    topic_cls = resp_cls.FetchableTopicResponse
    part_cls = topic_cls.PartitionData
    salt = os.urandom(_TOKEN_SIZE - 4)
    slots: list[tuple[bytes, FileRegion | bytes]] = []
    topics: list[Any] = []
    leaders: set[int] = set()
    read_committed = int(request.isolation_level) == 1
    last_index = -1
    for w, g in zip(wants, result.got, strict=True):
        records: bytes = g.data
        if g.region is not None:
            records = salt + struct.pack(">I", len(slots))
            slots.append((records, FileRegion(g.region.fd, g.region.position,
                                              g.region.size)))
            g.region = None  # the FileRegion owns the descriptor now
        elif len(records) >= _SPLICE_MIN:  # remote bytes: spliced in, never re-encoded
            slots.append((salt + struct.pack(">I", len(slots)), records))
            records = slots[-1][0]
        hw = g.high_watermark
        fields: dict[str, Any] = {
            "partition_index": w.partition, "error_code": g.error, "high_watermark": hw,
            "last_stable_offset": hw if g.error == NONE else -1,
            "log_start_offset": g.log_start_offset,
            "aborted_transactions": [] if read_committed and g.error == NONE else None,
            "preferred_read_replica": -1, "records": records}
        part = part_cls(version=v, **fields)
        if g.leader is not None and v >= 12:
            part.current_leader = part_cls.LeaderIdAndEpoch(version=v, leader_id=g.leader[0],
                                                            leader_epoch=g.leader[1])
            leaders.add(g.leader[0])
        if w.topic_index != last_index:
            topics.append(topic_cls(version=v, topic=w.topic or "",
                                    topic_id=w.topic_id or uuid.UUID(int=0), partitions=[]))
            last_index = w.topic_index
        topics[-1].partitions.append(part)
    resp = resp_cls(throttle_time_ms=0, error_code=top_error, session_id=session_id,
                    responses=topics)
    if v >= 16 and leaders:
        resp.node_endpoints = _endpoints(ctx, resp_cls, leaders)
    try:
        encoded = bytes(resp.encode(version=v))
        return RawBody(_splice(encoded, slots, codec.flexible(FETCH_KEY, v)))
    except BaseException:
        for _token, region in slots:
            if isinstance(region, FileRegion):
                region.close()
        raise


def _endpoints(ctx: RequestContext, resp_cls: Any, ids: set[int]) -> list[Any]:
    try:
        brokers = ClusterState(ctx.broker, ctx.listener).brokers()
    except Exception:
        return []
    return [resp_cls.NodeEndpoint(version=ctx.version, node_id=b.node_id, host=b.host,
                                  port=b.port, rack=b.rack)
            for b in brokers if b.node_id in ids]


def records_prefix(size: int, flexible: bool) -> bytes:
    """The length prefix of a ``records`` field of ``size`` bytes (non-null), by the
    library's codecs: int32 (classic versions) or unsigned varint ``size + 1`` (compact)."""
    return bytes(UnsignedVarInt32.encode(size + 1) if flexible else Int32.encode(size))


def _splice(encoded: bytes, slots: list[tuple[bytes, FileRegion | bytes]], flexible: bool
            ) -> list[bytes | bytearray | memoryview | FileRegion]:
    """``encoded`` with each placeholder (and its prefix) replaced by the region's (or the
    bytes') prefix and the region (or the bytes themselves, not copied), in order.

    Raises:
        AssertionError: a placeholder is missing (the encoder changed the layout).
    """
    parts: list[bytes | bytearray | memoryview | FileRegion] = []
    view = memoryview(encoded)
    cursor = 0
    for token, region in slots:
        needle = records_prefix(len(token), flexible) + token
        at = encoded.find(needle, cursor)
        if at < 0:
            raise AssertionError("a records placeholder is missing from the encoded "
                                 "FetchResponse")
        parts.append(view[cursor:at])
        parts.append(records_prefix(len(region), flexible))
        parts.append(region)
        cursor = at + len(needle)
    parts.append(view[cursor:])
    return parts


__all__ = ["FETCH_KEY", "MAX_VERSION", "MIN_VERSION", "fetch", "records_prefix"]
