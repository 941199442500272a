"""The group coordinator of one broker (Kafka's classic-protocol ``GroupMetadataManager`` and
``OffsetMetadataManager``), a component of its Kafka server.

Which groups it coordinates
    A group lives in partition ``abs(hash(group id)) % n`` of ``__consumer_offsets``
    (:func:`~kafka_tiers.kafka.groups.partition_for`); this broker coordinates it while it
    leads that partition. The internal topic is created on the first FindCoordinator through
    the configured placer (a cluster: the controller, with
    ``offsets.topic.replication.factor`` replicas, COORDINATOR_NOT_AVAILABLE while fewer
    brokers are live; standalone: the broker, one replica) with
    ``offsets.topic.num.partitions`` partitions.
Loading and failover
    A partition is loaded (its log read into groups and offsets) by the loader thread once
    this broker has become its leader: the timer thread, which looks every
    :data:`OWNERSHIP_CHECK_S` seconds, a FindCoordinator answered with this broker, or the
    first request that needs it asks for the load, whichever comes first; again when its
    leader epoch changed. A request never waits for a load longer than :data:`LOAD_WAIT_S`:
    then it is answered COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers while a
    partition loads; a Heartbeat is answered NONE, as Kafka's classic coordinator does), so
    a big partition's load holds no handler thread. A partition this broker no longer leads
    is unloaded (its groups are dropped; parked requests get NOT_COORDINATOR). Every change
    is written to the partition with ``acks=all`` before it is answered (see :mod:`.store`),
    so the next leader loads the same groups and offsets.
Requests
    JoinGroup and SyncGroup park the connection's thread until the phase completes (the server
    serves one request at a time per connection, as Kafka mutes a channel). One timer thread
    expires sessions, pending members and pending syncs, ends join phases (the initial delay,
    the rebalance timeout) and expires offsets (``offsets.retention.minutes``).
Locks
    A group's lock, then its partition's lock (writes); never the other way round. The
    leader's SyncGroup and OffsetCommit take the partition's lock under the group's, then let
    the group's go while their replicated write waits (heartbeats and the timer thread go on;
    the partition's lock keeps the log's order), and take the group's again only after. Groups of
    a lost partition are marked Dead by the timer thread, which holds no other group lock.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.kafka.cluster_state import ClusterState
from kafka_tiers.kafka.groups import OFFSETS_TOPIC, partition_for
from kafka_tiers.kafka.groups.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_COMMIT_OFFSET_SIZE,
    INVALID_GROUP_ID,
    INVALID_REQUEST,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    REQUEST_TIMED_OUT,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    GroupError,
)
from kafka_tiers.kafka.groups.group import (
    Group,
    GroupState,
    JoinResult,
    Member,
    Protocols,
    SyncResult,
    Waiter,
)
from kafka_tiers.kafka.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from kafka_tiers.kafka.groups.store import OffsetsPartition
from kafka_tiers.kafka.security.audit import shown

if TYPE_CHECKING:
    from kafka_tiers.broker.broker import Broker
    from kafka_tiers.kafka.server import KafkaServer

log = logging.getLogger(__name__)

#: Kafka's time a new member may stay parked in a join before it is dropped (5 minutes)
NEW_MEMBER_JOIN_TIMEOUT_MS = 300000
#: how often the timer thread looks at the groups, seconds
TICK_S = 0.02
#: how often the timer thread checks which partitions of the offsets topic this broker leads
#: (loading the new ones, unloading the lost ones)
OWNERSHIP_CHECK_S = 0.25
#: how long a topic's partition count is trusted by OffsetCommit's check
TOPIC_CACHE_S = 1.0
#: how long a request waits for its partition's load before it is answered
#: COORDINATOR_LOAD_IN_PROGRESS (a small partition loads within it: no client retry)
LOAD_WAIT_S = 0.25


@dataclass(frozen=True)
class Coordinator:
    """Where a group's coordinator is: its broker as advertised on a listener."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class CommitEntry:
    """One partition of an OffsetCommit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True)
class MemberDescription:
    """A member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    """A group as DescribeGroups shows it (``error`` != 0: only ``group_id`` counts)."""

    error: int
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    message: str | None = None


class GroupCoordinator:
    """The coordinator of one broker's Kafka server (see the module docstring).

    Args:
        server: the Kafka server (its broker and configuration).
        time_fn: the wall clock (seconds) used for commit and state timestamps.
    """

    def __init__(self, server: KafkaServer, time_fn: Callable[[], float] = time.time) -> None:
        self.server = server
        self.broker: Broker = server.broker
        cfg = self.broker.config
        self.initial_delay_ms = int(cfg["group.initial.rebalance.delay.ms"])
        self.min_session_ms = int(cfg["group.min.session.timeout.ms"])
        self.max_session_ms = int(cfg["group.max.session.timeout.ms"])
        self.max_size = int(cfg["group.max.size"])
        self.num_partitions_config = int(cfg["offsets.topic.num.partitions"])
        self.replication_factor = int(cfg["offsets.topic.replication.factor"])
        self.segment_bytes = int(cfg["offsets.topic.segment.bytes"])
        self.retention_ms = int(cfg["offsets.retention.minutes"]) * 60000
        self.retention_check_s = int(cfg["offsets.retention.check.interval.ms"]) / 1000.0
        self.metadata_max_bytes = int(cfg["offset.metadata.max.bytes"])
        self.commit_timeout_s = int(cfg["offsets.commit.timeout.ms"]) / 1000.0
        self.snapshot_min_records = int(cfg["offsets.snapshot.min.records"])
        self.max_request_partitions = int(cfg["max.request.partitions"])
        self._time = time_fn
        self._lock = threading.Lock()
        #: partitions whose load is queued or running -> set when it ends
        self._loading: dict[int, threading.Event] = {}
        #: the error of a partition's last failed load (answered to the requests waiting)
        self._load_errors: dict[int, GroupError] = {}
        self._load_queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._topic_lock = threading.Lock()
        self._num_partitions: int | None = None
        self._partitions: dict[int, OffsetsPartition] = {}
        self._groups: dict[int, dict[str, Group]] = {}
        self._doomed: list[Group] = []
        self._topic_sizes: dict[str, tuple[float, int | None]] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"group-coordinator-{self.broker.broker_id}")
        self._thread.start()
        self._loader = threading.Thread(target=self._run_loader, daemon=True,
                                        name=f"group-loader-{self.broker.broker_id}")
        self._loader.start()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop the timer thread and drop every group (parked requests get
        NOT_COORDINATOR). Idempotent."""
        self._closed = True
        self._stop.set()
        self._wake.set()
        self._load_queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(5)
        if self._loader is not threading.current_thread():
            self._loader.join(5)
        with self._lock:
            parts = list(self._partitions)
        for p in parts:
            self._unload(p)
        self._kill_doomed()

    def loaded_partitions(self) -> list[int]:
        """The partitions of ``__consumer_offsets`` loaded here now (those this broker leads
        and has read), sorted."""
        with self._lock:
            return sorted(self._partitions)

    def _now_ms(self) -> int:
        return int(self._time() * 1000)

    # ------------------------------------------------------------------ the internal topic
    def num_partitions(self, *, create: bool) -> int | None:
        """The partitions of ``__consumer_offsets``; with ``create``, the topic is created
        when missing. None when it does not exist (and ``create`` is False).

        Raises:
            GroupError: COORDINATOR_NOT_AVAILABLE: it cannot be created now (too few live
                brokers, no controller, a timeout).
        """
        if self._num_partitions is not None:
            return self._num_partitions
        with self._topic_lock:
            if self._num_partitions is not None:
                return self._num_partitions
            topic = ClusterState(self.broker, "").topic(OFFSETS_TOPIC)
            if topic is None:
                if not create:
                    return None
                self._create_topic()
                topic = ClusterState(self.broker, "").topic(OFFSETS_TOPIC)
                if topic is None:
                    raise GroupError(COORDINATOR_NOT_AVAILABLE,
                                     f"{OFFSETS_TOPIC} is being created; retry")
            self._num_partitions = len(topic.partitions)
            return self._num_partitions

    def _topic_config(self) -> dict[str, str]:
        return {"segment.bytes": str(self.segment_bytes), "retention.ms": "-1",
                "retention.bytes": "-1"}

    def _create_topic(self) -> None:
        broker = self.broker
        n = self.num_partitions_config
        member = broker.member
        if member is None:
            from kafka_tiers.broker.broker import TopicExistsError
            with contextlib.suppress(TopicExistsError):
                broker.create_topic(OFFSETS_TOPIC, n, self._topic_config())
            log.info("group coordinator: created %s with %d partitions", OFFSETS_TOPIC, n)
            return
        live = ClusterState(broker, "").live_ids()
        if len(live) < self.replication_factor:
            raise GroupError(COORDINATOR_NOT_AVAILABLE,
                             f"{OFFSETS_TOPIC} needs offsets.topic.replication.factor="
                             f"{self.replication_factor} live brokers, {len(live)} live now: "
                             f"start {self.replication_factor - len(live)} more broker(s) or "
                             f"set offsets.topic.replication.factor={max(len(live), 1)} on "
                             "every broker")
        from kafka_tiers.cluster.client import ClusterClient
        from kafka_tiers.cluster.transport import ErrorCode, TransportError
        assert member.client is not None
        # over TCP a connection of its own: the member's shared one (one request at a time per
        # address) stays taken by this request while the controller, maybe this very broker,
        # sends its LeaderAndIsr back over it (a deadlock until the request timed out)
        # (the TCP connection secured as the member's own: a TLS internal transport refuses
        # a plaintext one)
        client = ClusterClient([member.address], timeout=10.0,
                               transport=member.client if broker.network is not None else None,
                               security=member.security)
        try:
            client.create_topic(OFFSETS_TOPIC, n, self.replication_factor,
                                self._topic_config(), wait=True, timeout=10.0)
            log.info("group coordinator: created %s with %d partitions, replication factor "
                     "%d", OFFSETS_TOPIC, n, self.replication_factor)
        except TransportError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return
            raise GroupError(COORDINATOR_NOT_AVAILABLE,
                             f"cannot create {OFFSETS_TOPIC} now: {exc}") from None
        finally:
            client.close()

    # ------------------------------------------------------------------ FindCoordinator
    def find(self, key: str, listener: str) -> Coordinator:
        """The coordinator of group ``key`` as advertised on ``listener`` (the internal
        topic is created on first need).

        Raises:
            GroupError: COORDINATOR_NOT_AVAILABLE (no leader yet, the topic cannot be created
                now, the leader does not advertise the listener). Any key is answered, the
                empty one too (as Kafka).
        """
        n = self.num_partitions(create=True)
        assert n is not None
        p = partition_for(key, n)
        cs = ClusterState(self.broker, listener)
        view = cs.partition(TopicPartition(OFFSETS_TOPIC, p))
        if view is None or view.leader < 0:
            raise GroupError(COORDINATOR_NOT_AVAILABLE,
                             f"{OFFSETS_TOPIC}-{p} (the coordinator partition of {key!r}) "
                             "has no leader now; retry")
        if view.leader == self.broker.broker_id and not self._closed:
            epoch = self._leader_epoch(TopicPartition(OFFSETS_TOPIC, p))
            if epoch is not None and self._current(p, epoch) is None:
                self._schedule_load(p)  # the group's requests follow: load it meanwhile
        for b in cs.brokers():
            if b.node_id == view.leader:
                return Coordinator(b.node_id, b.host, b.port)
        raise GroupError(COORDINATOR_NOT_AVAILABLE,
                         f"broker {view.leader}, the coordinator of {key!r}, is not reachable "
                         f"on listener {listener}")

    # ------------------------------------------------------------------ ownership, loading
    def _leader_epoch(self, tp: TopicPartition) -> int | None:
        from kafka_tiers.broker.broker import BrokerError
        try:
            leads, epoch = self.broker.leadership(tp)
        except BrokerError:
            return None
        return epoch if leads else None

    def _owned(self, group_id: str) -> tuple[OffsetsPartition, int]:
        """The loaded partition of ``group_id`` (loading it now if needed) and its index.

        Raises:
            GroupError: NOT_COORDINATOR (this broker does not lead it, or there is no
                offsets topic), COORDINATOR_NOT_AVAILABLE (closing).
        """
        if self._closed:
            raise GroupError(COORDINATOR_NOT_AVAILABLE, "the group coordinator is stopping")
        n = self.num_partitions(create=False)
        if n is None:
            raise GroupError(NOT_COORDINATOR, f"{OFFSETS_TOPIC} does not exist yet: ask "
                             "FindCoordinator first")
        p = partition_for(group_id, n)
        return self._load(p, group_id), p

    def _load(self, p: int, group_id: str | None = None, *,
              wait: float = LOAD_WAIT_S) -> OffsetsPartition:
        """Partition ``p`` as loaded in its current leader epoch: its load is asked of the
        loader thread when needed and waited for at most ``wait`` seconds.

        Raises:
            GroupError: NOT_COORDINATOR (this broker does not lead ``p``),
                COORDINATOR_LOAD_IN_PROGRESS (the load is not over after ``wait``), or the
                error of the load this request waited for.
        """
        tp = TopicPartition(OFFSETS_TOPIC, p)
        epoch = self._leader_epoch(tp)
        if epoch is None:
            self._unload(p)
            raise GroupError(NOT_COORDINATOR, f"broker {self.broker.broker_id} does not lead "
                             f"{tp}" + (f", the coordinator partition of group {group_id!r}"
                                        if group_id is not None else ""))
        part = self._current(p, epoch)
        if part is not None:
            return part
        done = self._schedule_load(p)
        if wait > 0:
            done.wait(wait)
        part = self._current(p, epoch)
        if part is not None:
            return part
        with self._lock:
            error = self._load_errors.get(p) if done.is_set() else None
        if error is not None:
            raise GroupError(error.kafka_error_code, str(error))
        raise GroupError(COORDINATOR_LOAD_IN_PROGRESS,
                         f"broker {self.broker.broker_id} is loading {tp}"
                         + (f", the coordinator partition of group {group_id!r}"
                            if group_id is not None else "") + "; retry")

    def _current(self, p: int, epoch: int) -> OffsetsPartition | None:
        """Partition ``p`` when it is loaded in ``epoch`` and sound, else None."""
        with self._lock:
            part = self._partitions.get(p)
        if part is not None and part.leader_epoch == epoch and not part.broken:
            return part
        return None

    def _schedule_load(self, p: int) -> threading.Event:
        """Ask the loader thread to load partition ``p`` (once: a load already queued or
        running is not asked again); returns the event set when that load ends."""
        with self._lock:
            done = self._loading.get(p)
            if done is None:
                done = self._loading[p] = threading.Event()
                self._load_queue.put(p)
            return done

    def _run_loader(self) -> None:
        """The loader thread: loads the partitions asked for, one at a time."""
        while True:
            p = self._load_queue.get()
            if p is None or self._closed:
                with self._lock:
                    waiting, self._loading = list(self._loading.values()), {}
                for event in waiting:
                    event.set()
                return
            error: GroupError | None = None
            try:
                self._load_now(p)
            except GroupError as exc:
                error = exc
            except Exception as exc:
                error = GroupError(COORDINATOR_NOT_AVAILABLE,
                                   f"loading {OFFSETS_TOPIC}-{p} failed: {exc}")
                with self._lock:
                    last = self._load_errors.get(p)
                if last is None or str(last) != str(error):  # once, not every retry
                    log.exception("group coordinator %s: loading %s-%d failed",
                                  self.broker.broker_id, OFFSETS_TOPIC, p)
            with self._lock:
                done = self._loading.pop(p, None)
                if error is None:
                    self._load_errors.pop(p, None)
                else:
                    self._load_errors[p] = error
            if done is not None:
                done.set()

    def _load_now(self, p: int) -> None:
        """(the loader thread) Read partition ``p`` into its groups, unless it is loaded in
        the current leader epoch already.

        Raises:
            GroupError: NOT_COORDINATOR (this broker does not lead it, or has no replica).
        """
        tp = TopicPartition(OFFSETS_TOPIC, p)
        epoch = self._leader_epoch(tp)
        if epoch is None:
            self._unload(p)
            raise GroupError(NOT_COORDINATOR, f"broker {self.broker.broker_id} does not lead "
                             f"{tp}")
        if self._current(p, epoch) is not None:
            return
        with self._lock:
            stale = p in self._partitions
        if stale:
            self._unload(p)
        part = OffsetsPartition(self.broker, tp, epoch,
                                commit_timeout_s=self.commit_timeout_s,
                                snapshot_min_records=self.snapshot_min_records)
        latest = part.load()
        groups = self._groups_from(latest)
        with self._lock:
            self._partitions[p] = part
            self._groups[p] = groups
        self._wake.set()

    def _groups_from(self, latest: dict[bytes, bytes]) -> dict[str, Group]:
        groups: dict[str, Group] = {}
        now_ms = self._now_ms()
        deadline = time.monotonic()
        for k, v in latest.items():
            try:
                key = decode_key(k)
                if isinstance(key, OffsetKey):
                    g = groups.get(key.group)
                    if g is None:
                        g = groups[key.group] = Group(key.group, now_ms)
                    g.offsets[(key.topic, key.partition)] = decode_offset_value(v)
                else:
                    g = groups.get(key.group)
                    if g is None:
                        g = groups[key.group] = Group(key.group, now_ms)
                    self._restore(g, decode_group_value(v), deadline)
            except RecordFormatError as exc:
                log.warning("group coordinator: skipping a record of %s: %s", OFFSETS_TOPIC,
                            exc)
        return groups

    @staticmethod
    def _restore(g: Group, value: GroupValue, now: float) -> None:
        """A group as its metadata record left it: Stable with its members (each given a
        full session from now), or Empty."""
        g.protocol_type = value.protocol_type or None
        g.generation = value.generation
        g.protocol_name = value.protocol
        g.leader_id = value.leader
        if value.current_state_timestamp >= 0:
            g.state_timestamp_ms = value.current_state_timestamp
        for mv in value.members:
            m = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
                       mv.rebalance_timeout, mv.session_timeout, value.protocol_type,
                       ((value.protocol or "", mv.subscription),), assignment=mv.assignment,
                       heartbeat_deadline=now + mv.session_timeout / 1000.0)
            g.members[m.member_id] = m
            if m.group_instance_id is not None:
                g.static_members[m.group_instance_id] = m.member_id
        g.state = GroupState.STABLE if g.members else GroupState.EMPTY
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members), None)

    def _unload(self, p: int) -> None:
        """Forget partition ``p``: its groups are marked Dead by the timer thread (parked
        requests get NOT_COORDINATOR)."""
        with self._lock:
            part = self._partitions.pop(p, None)
            groups = self._groups.pop(p, {})
            self._doomed.extend(groups.values())
        if part is not None:
            log.info("group coordinator: unloaded %s", part.tp)
        self._wake.set()

    def _kill_doomed(self) -> None:
        with self._lock:
            doomed, self._doomed = self._doomed, []
        for g in doomed:
            with g.lock:
                self._kill(g, NOT_COORDINATOR)

    def _kill(self, g: Group, error: int) -> None:
        if g.state is not GroupState.DEAD:
            g.transition(GroupState.DEAD, self._now_ms())
        for m in g.members.values():
            m.complete_join(JoinResult(error, m.member_id))
            m.complete_sync(SyncResult(error))
        g.join_deadline = g.sync_deadline = None

    def _group(self, p: int, group_id: str, create: bool) -> Group | None:
        with self._lock:
            groups = self._groups.get(p)
            if groups is None:
                raise GroupError(NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{p} was unloaded; retry")
            g = groups.get(group_id)
            if g is None and create:
                g = groups[group_id] = Group(group_id, self._now_ms())
            return g

    def _forget(self, p: int, g: Group) -> None:
        with self._lock:
            groups = self._groups.get(p)
            if groups is not None and groups.get(g.group_id) is g:
                del groups[g.group_id]

    # ------------------------------------------------------------------ writes
    def _write(self, part: OffsetsPartition, p: int,
               records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Write records to the group's partition (``acks=all``).

        Raises:
            GroupError: the write failed (NOT_COORDINATOR unloads the partition).
        """
        with part.lock:
            if part.broken:
                raise GroupError(NOT_COORDINATOR, f"{part.tp} is being reloaded; retry")
            try:
                part.append(records)
            except GroupError as exc:
                if exc.kafka_error_code == NOT_COORDINATOR:
                    part.broken = True
                    self._unload(p)
                raise

    def _group_record(self, g: Group, assignment: dict[str, bytes] | None = None
                      ) -> tuple[bytes, bytes]:
        members = tuple(
            MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout_ms, m.session_timeout_ms,
                        m.metadata(g.protocol_name),
                        (assignment.get(m.member_id, b"") if assignment is not None
                         else m.assignment))
            for m in g.members.values())
        value = GroupValue(g.protocol_type or "", g.generation, g.protocol_name, g.leader_id,
                           g.state_timestamp_ms, members)
        return encode_group_key(GroupKey(g.group_id)), encode_group_value(value)

    # ------------------------------------------------------------------ JoinGroup
    def join(self, *, group_id: str, member_id: str, group_instance_id: str | None,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: Protocols, client_id: str, client_host: str,
             require_known_member_id: bool) -> JoinResult:
        """A JoinGroup (blocks until the join phase completes for this member).

        Args:
            require_known_member_id: KIP-394 (JoinGroup v4+): a new dynamic member first
                gets MEMBER_ID_REQUIRED with its member id.
        """
        if not group_id:
            return JoinResult(INVALID_GROUP_ID, member_id)
        try:
            part, p = self._owned(group_id)
        except GroupError as exc:
            return JoinResult(exc.kafka_error_code, member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return JoinResult(INVALID_SESSION_TIMEOUT, member_id)
        unknown = member_id == ""
        try:
            group = self._group(p, group_id, create=unknown)
        except GroupError as exc:
            return JoinResult(exc.kafka_error_code, member_id)
        if group is None:
            return JoinResult(UNKNOWN_MEMBER_ID, member_id)
        now = time.monotonic()
        waiter: Waiter | None = None
        with group.lock:
            names = [n for n, _ in protocols]
            if group.state is GroupState.DEAD:
                return JoinResult(COORDINATOR_NOT_AVAILABLE, member_id)
            if not self._accept_joining(group, member_id):
                group.remove(member_id)
                return JoinResult(GROUP_MAX_SIZE_REACHED, "")
            if not group.supports_protocols(protocol_type, names):
                return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id)
            if unknown:
                new_id = f"{group_instance_id or client_id}-{uuid.uuid4()}"
                if group_instance_id is not None:
                    existing = group.static_member_id(group_instance_id)
                    if existing is not None:
                        waiter = self._replace_static(part, p, group, group_instance_id,
                                                      existing, new_id, protocols,
                                                      rebalance_timeout_ms,
                                                      session_timeout_ms)
                    else:
                        waiter = self._add_member(group, new_id, group_instance_id,
                                                  client_id, client_host,
                                                  rebalance_timeout_ms, session_timeout_ms,
                                                  protocol_type, protocols)
                elif require_known_member_id:
                    group.pending_members[new_id] = now + session_timeout_ms / 1000.0
                    self._wake.set()
                    return JoinResult(MEMBER_ID_REQUIRED, new_id)
                else:
                    waiter = self._add_member(group, new_id, None, client_id, client_host,
                                              rebalance_timeout_ms, session_timeout_ms,
                                              protocol_type, protocols)
            elif member_id in group.pending_members:
                waiter = self._add_member(group, member_id, None, client_id, client_host,
                                          rebalance_timeout_ms, session_timeout_ms,
                                          protocol_type, protocols)
            else:
                error = self._validate_member(group, member_id, group_instance_id)
                if error:
                    return JoinResult(error, member_id)
                member = group.members[member_id]
                if group.state is GroupState.PREPARING_REBALANCE:
                    waiter = self._update_member(group, member, protocols,
                                                 rebalance_timeout_ms, session_timeout_ms)
                elif group.state is GroupState.COMPLETING_REBALANCE:
                    if member.matches(protocols):
                        return self._current_join(group, member_id, leader_members=True)
                    waiter = self._update_member(group, member, protocols,
                                                 rebalance_timeout_ms, session_timeout_ms)
                elif group.state is GroupState.STABLE:
                    if group.is_leader(member_id) or not member.matches(protocols):
                        waiter = self._update_member(group, member, protocols,
                                                     rebalance_timeout_ms, session_timeout_ms)
                    else:
                        return self._current_join(group, member_id, leader_members=False)
                else:
                    return JoinResult(UNKNOWN_MEMBER_ID, member_id)
        if waiter is None:
            return JoinResult(UNKNOWN_SERVER_ERROR, member_id)
        result = self._await(waiter, rebalance_timeout_ms / 1000.0 + 60.0)
        if result is None:
            return JoinResult(REBALANCE_IN_PROGRESS, member_id)
        assert isinstance(result, JoinResult)
        return result

    def _await(self, waiter: Waiter, timeout: float) -> Any:
        """A parked request's response, None after ``timeout`` seconds or once the broker is
        stopping (its connections are being closed: nobody would read the answer)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            result = waiter.wait(min(max(left, 0.0), 0.1))
            if waiter.done:
                return result
            if left <= 0 or self._closed or not self.broker.started:
                return None

    def _accept_joining(self, g: Group, member_id: str) -> bool:
        if g.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if g.state is GroupState.PREPARING_REBALANCE:
            m = g.members.get(member_id)
            return (m is not None and m.awaiting_join) or g.num_awaiting_join() < self.max_size
        return member_id in g.members or len(g.members) < self.max_size

    @staticmethod
    def _validate_member(g: Group, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            existing = g.static_member_id(instance_id)
            if existing is None:
                return UNKNOWN_MEMBER_ID
            if existing != member_id:
                return FENCED_INSTANCE_ID
        return NONE if member_id in g.members else UNKNOWN_MEMBER_ID

    @staticmethod
    def _current_join(g: Group, member_id: str, *, leader_members: bool) -> JoinResult:
        return JoinResult(NONE, member_id, g.generation, g.protocol_type, g.protocol_name,
                          g.leader_id or "",
                          g.join_members() if leader_members and g.is_leader(member_id)
                          else [])

    def _add_member(self, g: Group, member_id: str, instance_id: str | None, client_id: str,
                    client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                    protocol_type: str, protocols: Protocols) -> Waiter:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, protocols, is_new=True,
                        heartbeat_deadline=time.monotonic()
                        + NEW_MEMBER_JOIN_TIMEOUT_MS / 1000.0)
        if (g.state is GroupState.PREPARING_REBALANCE
                and g.previous_state is GroupState.EMPTY):
            g.new_member_added = True
        waiter = Waiter()
        g.add(member, waiter)
        self._maybe_prepare_rebalance_or_complete_join(g, f"adding member {member_id}")
        return waiter

    def _update_member(self, g: Group, member: Member, protocols: Protocols,
                       rebalance_timeout_ms: int, session_timeout_ms: int) -> Waiter:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.complete_join(JoinResult(REBALANCE_IN_PROGRESS, member.member_id))
        waiter = Waiter()
        member.join_waiter = waiter
        self._maybe_prepare_rebalance_or_complete_join(
            g, f"member {member.member_id} rejoins")
        return waiter

    def _replace_static(self, part: OffsetsPartition, p: int, g: Group, instance_id: str,
                        old_id: str, new_id: str, protocols: Protocols,
                        rebalance_timeout_ms: int, session_timeout_ms: int) -> Waiter:
        """A known static member joins with an unknown member id (KIP-345): it takes the old
        member's place; a Stable group whose protocol would not change keeps its assignment
        (no rebalance), otherwise the group rebalances."""
        member = g.replace_static_member(instance_id, old_id, new_id)
        member.heartbeat_deadline = time.monotonic() + session_timeout_ms / 1000.0
        old_protocols = member.protocols
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        waiter = Waiter()
        if g.state is GroupState.STABLE and g.select_protocol() == g.protocol_name:
            try:
                self._write(part, p, [self._group_record(g)])
            except GroupError as exc:
                member.protocols = old_protocols
                g.replace_static_member(instance_id, new_id, old_id)
                waiter.complete(JoinResult(exc.kafka_error_code, ""))
                return waiter
            waiter.complete(JoinResult(NONE, new_id, g.generation, g.protocol_type,
                                       g.protocol_name, g.leader_id or "", []))
            return waiter
        member.join_waiter = waiter
        if g.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(g, f"static member {instance_id} replaced")
        else:
            self._maybe_prepare_rebalance_or_complete_join(
                g, f"static member {instance_id} replaced")
        return waiter

    # ------------------------------------------------------------------ the rebalance
    def _maybe_prepare_rebalance_or_complete_join(self, g: Group, reason: str) -> None:
        if g.can_rebalance():
            self._prepare_rebalance(g, reason)
        else:
            self._maybe_complete_join_phase(g)

    def _maybe_complete_join_phase(self, g: Group) -> None:
        if (g.state is GroupState.PREPARING_REBALANCE
                and g.previous_state is not GroupState.EMPTY
                and g.has_all_members_joined()):
            self._complete_join(g)

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate(g, REBALANCE_IN_PROGRESS)
        g.pending_sync.clear()
        g.sync_deadline = None
        initial = g.state is GroupState.EMPTY
        now = time.monotonic()
        if initial:
            delay = self.initial_delay_ms
            remaining = max(g.rebalance_timeout_ms() - delay, 0)
            g.initial_join = (delay, remaining)
            g.join_deadline = now + delay / 1000.0
        g.transition(GroupState.PREPARING_REBALANCE, self._now_ms())
        log.info("group %s: preparing to rebalance (generation %d): %s", shown(g.group_id),
                 g.generation, shown(reason))
        if not initial:
            g.initial_join = None
            if g.has_all_members_joined():
                self._complete_join(g)
            else:
                g.join_deadline = now + g.rebalance_timeout_ms() / 1000.0
        self._wake.set()

    def _complete_join(self, g: Group) -> None:
        g.join_deadline = None
        g.initial_join = None
        for m in g.not_yet_rejoined():
            if m.group_instance_id is None:
                g.remove(m.member_id)
        if g.state is GroupState.DEAD:
            return
        now = time.monotonic()
        if not g.maybe_elect_new_joined_leader() and g.members:
            g.join_deadline = now + g.rebalance_timeout_ms() / 1000.0
            return
        g.init_next_generation(self._now_ms())
        if g.state is GroupState.EMPTY:
            log.info("group %s: generation %d is empty", shown(g.group_id), g.generation)
            self._write_quietly(g, [self._group_record(g, {})])
            return
        log.info("group %s: generation %d with %d members (protocol %s)", shown(g.group_id),
                 g.generation, len(g.members), g.protocol_name)
        for m in g.members.values():
            m.complete_join(JoinResult(
                NONE, m.member_id, g.generation, g.protocol_type, g.protocol_name,
                g.leader_id or "", g.join_members() if g.is_leader(m.member_id) else []))
            m.heartbeat_deadline = now + m.session_timeout_ms / 1000.0
            m.is_new = False
            g.pending_sync.add(m.member_id)
        g.sync_deadline = now + g.rebalance_timeout_ms() / 1000.0

    def _write_quietly(self, g: Group, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """A write whose failure answers nobody (Kafka only warns)."""
        try:
            part, p = self._owned(g.group_id)
            self._write(part, p, records)
        except GroupError as exc:
            log.warning("group %s: writing its metadata failed: %s", shown(g.group_id), exc)

    def _reset_and_propagate(self, g: Group, error: int) -> None:
        for m in g.members.values():
            m.assignment = b""
        self._propagate(g, error)

    def _propagate(self, g: Group, error: int) -> None:
        now = time.monotonic()
        for m in g.members.values():
            ok = error == NONE
            if m.complete_sync(SyncResult(error, g.protocol_type if ok else None,
                                          g.protocol_name if ok else None, m.assignment)):
                m.heartbeat_deadline = now + m.session_timeout_ms / 1000.0

    def _remove_member_and_update(self, g: Group, m: Member) -> None:
        m.complete_join(JoinResult(UNKNOWN_MEMBER_ID, ""))
        g.remove(m.member_id)
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(
                g, f"member {m.member_id} removed")
        elif g.state is GroupState.PREPARING_REBALANCE and g.has_all_members_joined():
            self._complete_join(g)

    # ------------------------------------------------------------------ SyncGroup
    def sync(self, *, group_id: str, generation: int, member_id: str,
             group_instance_id: str | None, protocol_type: str | None,
             protocol_name: str | None, assignments: Iterable[tuple[str, bytes]]
             ) -> SyncResult:
        """A SyncGroup (blocks until the leader's assignment is stored)."""
        try:
            part, p = self._owned(group_id)
            group = self._group(p, group_id, create=False)
        except GroupError as exc:
            return SyncResult(exc.kafka_error_code)
        if group is None:
            return SyncResult(UNKNOWN_MEMBER_ID)
        with group.lock:
            if group.state is GroupState.DEAD:
                return SyncResult(COORDINATOR_NOT_AVAILABLE)
            if group.state is GroupState.EMPTY:
                return SyncResult(UNKNOWN_MEMBER_ID)
            error = self._validate_member(group, member_id, group_instance_id)
            if error:
                return SyncResult(error)
            if generation != group.generation:
                return SyncResult(ILLEGAL_GENERATION)
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                    protocol_name is not None and protocol_name != group.protocol_name):
                return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
            member = group.members[member_id]
            if group.state is GroupState.PREPARING_REBALANCE:
                return SyncResult(REBALANCE_IN_PROGRESS)
            if group.state is GroupState.STABLE:
                self._synced(group, member_id)
                return SyncResult(NONE, group.protocol_type, group.protocol_name,
                                  member.assignment)
            waiter = Waiter()
            member.complete_sync(SyncResult(REBALANCE_IN_PROGRESS))
            member.sync_waiter = waiter
            self._synced(group, member_id)
            record: tuple[bytes, bytes] | None = None
            if group.is_leader(member_id):
                given = dict(assignments)
                assignment = {mid: given.get(mid, b"") for mid in group.members}
                gen = group.generation
                record = self._group_record(group, assignment)
                # taken before the group's lock is let go: the log keeps the group's records
                # in the order of its states
                part.lock.acquire()
            timeout = group.rebalance_timeout_ms() / 1000.0 + 60.0
        if record is not None:
            # the replicated write (acks=all) waits without the group's lock: heartbeats,
            # the other members' requests and the timer thread go on meanwhile (a loaded
            # cluster's slow write stalled them all, as Kafka's purgatory does not)
            failed: GroupError | None = None
            try:
                self._write(part, p, [record])
            except GroupError as exc:
                failed = exc
            finally:
                part.lock.release()
            with group.lock:
                if (group.state is GroupState.COMPLETING_REBALANCE
                        and group.generation == gen):
                    if failed is not None:
                        self._reset_and_propagate(group, _sync_error(failed))
                        self._maybe_prepare_rebalance_or_complete_join(
                            group, f"storing the assignment failed: {failed}")
                    else:
                        for mid, m in group.members.items():
                            m.assignment = assignment.get(mid, b"")
                        self._propagate(group, NONE)
                        group.transition(GroupState.STABLE, self._now_ms())
                        log.info("group %s: generation %d is stable", shown(group_id), gen)
        result = self._await(waiter, timeout)
        if result is None:
            return SyncResult(REBALANCE_IN_PROGRESS)
        assert isinstance(result, SyncResult)
        return result

    @staticmethod
    def _synced(g: Group, member_id: str) -> None:
        g.pending_sync.discard(member_id)
        if not g.pending_sync:
            g.sync_deadline = None

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup
    def heartbeat(self, *, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None) -> int:
        """A Heartbeat; returns its error code (NONE while the group's partition loads,
        as Kafka's classic coordinator answers: the member's session is not known yet)."""
        try:
            _part, p = self._owned(group_id)
            group = self._group(p, group_id, create=False)
        except GroupError as exc:
            if exc.kafka_error_code == COORDINATOR_LOAD_IN_PROGRESS:
                return NONE
            return exc.kafka_error_code
        if group is None:
            return UNKNOWN_MEMBER_ID
        with group.lock:
            if group.state is GroupState.DEAD:
                return COORDINATOR_NOT_AVAILABLE
            error = self._validate_member(group, member_id, group_instance_id)
            if error:
                return error
            if generation != group.generation:
                return ILLEGAL_GENERATION
            if group.state is GroupState.EMPTY:
                return UNKNOWN_MEMBER_ID
            m = group.members[member_id]
            m.heartbeat_deadline = time.monotonic() + m.session_timeout_ms / 1000.0
            if group.state is GroupState.PREPARING_REBALANCE:
                return REBALANCE_IN_PROGRESS
            return NONE

    def leave(self, *, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """A LeaveGroup of ``(member id, group instance id)`` each; returns the top-level
        error and each member's."""
        try:
            _part, p = self._owned(group_id)
            group = self._group(p, group_id, create=False)
        except GroupError as exc:
            return exc.kafka_error_code, []
        if group is None:
            return NONE, [(mid, iid, UNKNOWN_MEMBER_ID) for mid, iid in members]
        out: list[tuple[str, str | None, int]] = []
        with group.lock:
            if group.state is GroupState.DEAD:
                return COORDINATOR_NOT_AVAILABLE, []
            left = False
            for mid, iid in members:
                if mid == "":
                    target = group.static_member_id(iid) if iid is not None else None
                    if target is None:
                        out.append((mid, iid, UNKNOWN_MEMBER_ID))
                        continue
                    self._remove_current(group, target)
                    out.append((mid, iid, NONE))
                    left = True
                elif mid in group.pending_members:
                    group.remove(mid)
                    out.append((mid, iid, NONE))
                    left = True
                else:
                    error = self._validate_member(group, mid, iid)
                    if error:
                        out.append((mid, iid, error))
                        continue
                    self._remove_current(group, mid)
                    out.append((mid, iid, NONE))
                    left = True
            if left:
                if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                    self._maybe_prepare_rebalance_or_complete_join(group, "members left")
                elif group.state is GroupState.PREPARING_REBALANCE:
                    self._maybe_complete_join_phase(group)
        return NONE, out

    @staticmethod
    def _remove_current(g: Group, member_id: str) -> None:
        m = g.members[member_id]
        log.info("group %s: member %s left", shown(g.group_id), shown(member_id))
        m.complete_join(JoinResult(UNKNOWN_MEMBER_ID, ""))
        g.remove(member_id)

    # ------------------------------------------------------------------ offsets
    def commit(self, *, group_id: str, generation: int, member_id: str,
               group_instance_id: str | None, entries: Sequence[CommitEntry]
               ) -> dict[tuple[str, int], int]:
        """An OffsetCommit; returns each partition's error code (every one INVALID_REQUEST
        when the request lists more than ``max.request.partitions``)."""
        def all_(code: int) -> dict[tuple[str, int], int]:
            return {(e.topic, e.partition): code for e in entries}

        if not group_id:
            return all_(INVALID_GROUP_ID)
        if len(entries) > self.max_request_partitions:
            return all_(INVALID_REQUEST)
        try:
            part, p = self._owned(group_id)
            group = self._group(p, group_id, create=generation < 0)
        except GroupError as exc:
            return all_(exc.kafka_error_code)
        if group is None:
            return all_(ILLEGAL_GENERATION)
        out: dict[tuple[str, int], int] = {}
        with group.lock:
            error = self._validate_commit(group, member_id, group_instance_id, generation)
            if error:
                return all_(error)
            now_ms = self._now_ms()
            sizes: dict[str, int | None] = {}
            records: list[tuple[bytes, bytes | None]] = []
            values: dict[tuple[str, int], OffsetValue] = {}
            for e in entries:
                key = (e.topic, e.partition)
                meta = e.metadata or ""
                if len(meta.encode("utf-8")) > self.metadata_max_bytes:
                    out[key] = OFFSET_METADATA_TOO_LARGE
                    continue
                if e.topic not in sizes:
                    sizes[e.topic] = self._partition_count(e.topic)
                n = sizes[e.topic]
                if n is None or not 0 <= e.partition < n:
                    out[key] = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                value = OffsetValue(e.offset, e.leader_epoch, meta, now_ms)
                values[key] = value
                records.append((encode_offset_key(OffsetKey(group_id, e.topic, e.partition)),
                                encode_offset_value(value)))
            if records:
                # taken before the group's lock is let go: the commits of the group reach
                # the log and its offsets in the same order
                part.lock.acquire()
        if records:
            # the replicated write (acks=all) waits without the group's lock: heartbeats and
            # the other members' requests go on meanwhile (a loaded cluster's slow commits
            # stalled heartbeats until sessions expired)
            try:
                self._write(part, p, records)
            except GroupError as exc:
                code = exc.kafka_error_code
                code = INVALID_COMMIT_OFFSET_SIZE if code == UNKNOWN_SERVER_ERROR else code
                for key in values:
                    out[key] = code
                return out
            else:
                group.offsets.update(values)  # under the partition's lock: the log's order
            finally:
                part.lock.release()
        for key in values:
            out[key] = NONE
        with group.lock:
            m = group.members.get(member_id)
            if m is not None and group.state is GroupState.STABLE:
                m.heartbeat_deadline = time.monotonic() + m.session_timeout_ms / 1000.0
        return out

    def _partition_count(self, topic: str) -> int | None:
        """How many partitions ``topic`` has (None: no such topic), cached for
        :data:`TOPIC_CACHE_S` (a commit must not read the metadata store every time)."""
        now = time.monotonic()
        with self._lock:
            hit = self._topic_sizes.get(topic)
        if hit is not None and now - hit[0] < TOPIC_CACHE_S:
            return hit[1]
        member = self.broker.member
        if member is not None and member.metadata is not None:
            asg = member.metadata.topic(topic)
            count = None if asg is None else len(asg.partitions)
        else:
            info = self.broker.topics().get(topic)
            count = None if info is None else info.partitions
        with self._lock:
            if len(self._topic_sizes) > 10000:
                self._topic_sizes.clear()
            self._topic_sizes[topic] = (now, count)
        return count

    @staticmethod
    def _validate_commit(g: Group, member_id: str, instance_id: str | None,
                         generation: int) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if g.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation < 0 and g.state is GroupState.EMPTY:
            return NONE
        if generation >= 0 or member_id or instance_id is not None:
            error = GroupCoordinator._validate_member(g, member_id, instance_id)
            if error:
                return error
            if generation != g.generation:
                return ILLEGAL_GENERATION
        elif g.state is not GroupState.EMPTY:
            return UNKNOWN_MEMBER_ID
        if g.state is GroupState.COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    def _check_partitions(self, partitions: Sequence[Any] | None) -> None:
        if partitions is not None and len(partitions) > self.max_request_partitions:
            raise GroupError(INVALID_REQUEST,
                             f"{len(partitions)} partitions in one request exceed "
                             f"max.request.partitions {self.max_request_partitions}; send "
                             "several requests")

    def fetch_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]] | None
                      ) -> list[tuple[str, int, OffsetValue | None]]:
        """Committed offsets of ``partitions`` (None: every committed one).

        Raises:
            GroupError: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND (a
                group being deleted), INVALID_REQUEST (more than ``max.request.partitions``).
        """
        self._check_partitions(partitions)
        _part, p = self._owned(group_id)
        group = self._group(p, group_id, create=False)
        if group is None:
            return [(t, n, None) for t, n in (partitions or [])]
        with group.lock:
            if group.state is GroupState.DEAD:
                raise GroupError(GROUP_ID_NOT_FOUND, f"group {group_id!r} is dead")
            if partitions is None:
                return [(t, n, v) for (t, n), v in sorted(group.offsets.items())]
            return [(t, n, group.offsets.get((t, n))) for t, n in partitions]

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]
                       ) -> dict[tuple[str, int], int]:
        """An OffsetDelete; returns each partition's error.

        Raises:
            GroupError: NOT_COORDINATOR, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_REQUEST
                (more than ``max.request.partitions``).
        """
        self._check_partitions(partitions)
        part, p = self._owned(group_id)
        group = self._group(p, group_id, create=False)
        if group is None:
            raise GroupError(GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist")
        out: dict[tuple[str, int], int] = {}
        with group.lock:
            if group.state is GroupState.DEAD:
                raise GroupError(GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist")
            subscribed: set[str] = set()
            if group.state is not GroupState.EMPTY:
                if group.protocol_type != "consumer":
                    raise GroupError(NON_EMPTY_GROUP, f"group {group_id!r} has members")
                subscribed = group.subscribed_topics() or {t for t, _ in partitions}
            records: list[tuple[bytes, bytes | None]] = []
            doomed = []
            for t, n in partitions:
                if t in subscribed:
                    out[(t, n)] = GROUP_SUBSCRIBED_TO_TOPIC
                    continue
                out[(t, n)] = NONE
                if (t, n) in group.offsets:
                    doomed.append((t, n))
                    records.append((encode_offset_key(OffsetKey(group_id, t, n)), None))
            if records:
                self._write(part, p, records)
            for key in doomed:
                group.offsets.pop(key, None)
        return out

    # ------------------------------------------------------------------ admin
    def _all_owned(self) -> list[int]:
        """The partitions this broker leads, every one loaded; returns their indexes.

        Raises:
            GroupError: COORDINATOR_LOAD_IN_PROGRESS: one of them is still loading after
                :data:`LOAD_WAIT_S` (Kafka's ListGroups answer while a partition loads).
        """
        n = self.num_partitions(create=False)
        if n is None:
            return []
        out, loading = [], []
        for p in range(n):
            try:
                self._load(p, wait=0)
                out.append(p)
            except GroupError as exc:
                if exc.kafka_error_code == COORDINATOR_LOAD_IN_PROGRESS:
                    loading.append(p)
        deadline = time.monotonic() + LOAD_WAIT_S
        for p in loading:
            try:
                self._load(p, wait=max(deadline - time.monotonic(), 0.0))
            except GroupError as exc:
                if exc.kafka_error_code == COORDINATOR_LOAD_IN_PROGRESS:
                    raise
                continue
            out.append(p)
        return sorted(out)

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        """``(group id, protocol type, state)`` of the groups this broker coordinates,
        filtered by state names (case-insensitive; empty: all).

        Raises:
            GroupError: COORDINATOR_LOAD_IN_PROGRESS while one of its partitions loads
                (the groups of that partition are not known yet).
        """
        wanted = {s.lower() for s in states}
        out = []
        for p in self._all_owned():
            with self._lock:
                groups = list(self._groups.get(p, {}).values())
            for g in groups:
                with g.lock:
                    if g.state is GroupState.DEAD:
                        continue
                    if wanted and g.state.value.lower() not in wanted:
                        continue
                    out.append((g.group_id, g.protocol_type or "", g.state.value))
        return sorted(out)

    def describe(self, group_id: str) -> GroupDescription:
        """A DescribeGroups entry (an unknown group: state Dead, no error)."""
        try:
            _part, p = self._owned(group_id)
            group = self._group(p, group_id, create=False)
        except GroupError as exc:
            return GroupDescription(exc.kafka_error_code, group_id, "", "", "", (), str(exc))
        if group is None:
            return GroupDescription(NONE, group_id, GroupState.DEAD.value, "", "", ())
        with group.lock:
            stable = group.state is GroupState.STABLE
            members = tuple(
                MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                  m.client_host,
                                  m.metadata(group.protocol_name) if stable else b"",
                                  m.assignment if stable else b"")
                for m in group.members.values())
            return GroupDescription(NONE, group_id, group.state.value,
                                    group.protocol_type or "",
                                    (group.protocol_name or "") if stable else "", members)

    def delete_group(self, group_id: str) -> int:
        """A DeleteGroups entry: tombstones for its offsets and metadata; returns its error
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR, ...)."""
        try:
            part, p = self._owned(group_id)
            group = self._group(p, group_id, create=False)
        except GroupError as exc:
            return exc.kafka_error_code
        if group is None:
            return GROUP_ID_NOT_FOUND
        with group.lock:
            if group.state is GroupState.DEAD:
                return GROUP_ID_NOT_FOUND
            if group.state is not GroupState.EMPTY:
                return NON_EMPTY_GROUP
            try:
                self._delete_group(part, p, group)
            except GroupError as exc:
                return exc.kafka_error_code
        return NONE

    def _delete_group(self, part: OffsetsPartition, p: int, g: Group) -> None:
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(OffsetKey(g.group_id, t, n)), None) for t, n in g.offsets]
        records.append((encode_group_key(GroupKey(g.group_id)), None))
        self._write(part, p, records)
        g.offsets.clear()
        self._kill(g, COORDINATOR_NOT_AVAILABLE)
        self._forget(p, g)
        log.info("group %s: deleted", shown(g.group_id))

    # ------------------------------------------------------------------ retention
    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Delete offsets past ``offsets.retention.minutes`` (Kafka's conditions: an Empty
        group's since it became empty; a group without protocol's since each commit; a
        consumer group's offsets of topics it no longer subscribes to since their commit);
        an Empty group without offsets (and without pending members) is deleted, as Kafka's
        periodic cleanup does. Returns how many offsets expired."""
        now_ms = self._now_ms() if now_ms is None else now_ms
        expired = 0
        with self._lock:
            items = [(p, list(gs.values())) for p, gs in self._groups.items()]
        for p, groups in items:
            with self._lock:
                part = self._partitions.get(p)
            if part is None:
                continue
            for g in groups:
                with g.lock:
                    if g.state is GroupState.DEAD:
                        continue
                    doomed = self._expired(g, now_ms)
                    try:
                        if doomed:
                            self._write(part, p, [
                                (encode_offset_key(OffsetKey(g.group_id, t, n)), None)
                                for t, n in doomed])
                            for key in doomed:
                                g.offsets.pop(key, None)
                            expired += len(doomed)
                        if (not g.offsets and g.state is GroupState.EMPTY
                                and not g.members and not g.pending_members):
                            if g.generation > 0 or doomed:  # records of it exist
                                self._delete_group(part, p, g)
                            else:  # never written (a join that went no further)
                                self._kill(g, COORDINATOR_NOT_AVAILABLE)
                                self._forget(p, g)
                    except GroupError as exc:
                        log.warning("group %s: expiring offsets failed: %s", shown(g.group_id), exc)
        return expired

    def _expired(self, g: Group, now_ms: int) -> list[tuple[str, int]]:
        if g.protocol_type is None and g.state is GroupState.EMPTY:
            return [k for k, v in g.offsets.items()
                    if v.commit_timestamp + self.retention_ms <= now_ms]
        if g.state is GroupState.EMPTY:
            if g.state_timestamp_ms + self.retention_ms <= now_ms:
                return list(g.offsets)
            return []
        if g.protocol_type == "consumer" and g.state is GroupState.STABLE:
            topics = g.subscribed_topics()
            if topics is None:
                return []
            return [k for k, v in g.offsets.items()
                    if k[0] not in topics and v.commit_timestamp + self.retention_ms <= now_ms]
        return []

    # ------------------------------------------------------------------ the timer thread
    def _run(self) -> None:
        last_owner_check = 0.0
        last_retention = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(TICK_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                now = time.monotonic()
                if now - last_owner_check >= OWNERSHIP_CHECK_S:
                    last_owner_check = now
                    self._check_ownership()
                self._kill_doomed()
                with self._lock:
                    groups = [g for gs in self._groups.values() for g in gs.values()
                              if g.members or g.pending_members
                              or g.join_deadline is not None or g.sync_deadline is not None]
                for g in groups:  # a group with nothing that can expire is skipped
                    with g.lock:
                        self._tick(g, time.monotonic())
                if now - last_retention >= self.retention_check_s:
                    last_retention = now
                    self.expire_offsets()
            except Exception:
                log.exception("group coordinator %s: timer pass failed",
                              self.broker.broker_id)

    def _check_ownership(self) -> None:
        """Unload the partitions this broker no longer leads (or leads in a new epoch) and
        load the ones it has become the leader of (Kafka loads on becoming leader)."""
        with self._lock:
            parts = dict(self._partitions)
        for p, part in parts.items():
            epoch = self._leader_epoch(part.tp)
            if epoch is None or epoch != part.leader_epoch:
                self._unload(p)
        n = self._num_partitions
        if n is None or self._closed:
            return
        for p in range(n):
            if p in parts and self._partitions.get(p) is parts[p]:
                continue
            epoch = self._leader_epoch(TopicPartition(OFFSETS_TOPIC, p))
            if epoch is None or self._current(p, epoch) is not None:
                continue
            self._schedule_load(p)  # the loader thread's: the timer never waits for it

    def _tick(self, g: Group, now: float) -> None:
        if g.state is GroupState.DEAD:
            return
        for mid, deadline in list(g.pending_members.items()):
            if now >= deadline:
                log.info("group %s: pending member %s expired", shown(g.group_id), shown(mid))
                g.remove(mid)
                if (g.state is GroupState.PREPARING_REBALANCE
                        and g.has_all_members_joined()):
                    self._complete_join(g)
        for m in list(g.members.values()):
            if (m.member_id in g.members and now >= m.heartbeat_deadline
                    and not m.has_satisfied_heartbeat()):
                log.info("group %s: member %s's session expired", shown(g.group_id),
                         shown(m.member_id))
                self._remove_member_and_update(g, m)
        if (g.state is GroupState.PREPARING_REBALANCE and g.join_deadline is not None
                and now >= g.join_deadline):
            if g.initial_join is not None:
                delay, remaining = g.initial_join
                if g.new_member_added and remaining != 0:
                    g.new_member_added = False
                    new_delay = min(self.initial_delay_ms, remaining)
                    g.initial_join = (new_delay, max(remaining - delay, 0))
                    g.join_deadline = now + new_delay / 1000.0
                    return
            self._complete_join(g)
        if (g.sync_deadline is not None and now >= g.sync_deadline
                and g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)):
            g.sync_deadline = None
            if g.pending_sync:
                missing = sorted(g.pending_sync)
                for mid in missing:
                    g.remove(mid)
                self._prepare_rebalance(g, f"members {missing} sent no SyncGroup in time")


def _sync_error(error: GroupError) -> int:
    """Kafka's answer to SyncGroup when storing the assignment failed: a write not known to
    be replicated in time is REBALANCE_IN_PROGRESS (the members join again), the others as
    the store maps them."""
    code = error.kafka_error_code
    return REBALANCE_IN_PROGRESS if code == REQUEST_TIMED_OUT else code


def coordinator_of(ctx: Any) -> GroupCoordinator:
    """The group coordinator of a request's server (made on first use)."""
    coordinator: GroupCoordinator = ctx.component("group-coordinator", GroupCoordinator)
    return coordinator


__all__ = ["CommitEntry", "Coordinator", "GroupCoordinator", "GroupDescription",
           "MemberDescription", "coordinator_of"]
