"""The replicas of one broker: leader and follower state per partition (document 003 sections
C and G).

Leader
    Appends produced batches stamped with its leader epoch; tracks every follower's log end
    offset from its fetches; the high watermark is the minimum log end offset over the ISR (a
    follower whose offset is not known yet holds it back). A follower not caught up for
    ``replica.lag.time.max.ms`` leaves the ISR; one that reaches the high watermark (and the
    start of the current epoch) joins it again. ISR changes are conditional writes of the
    partition state at the version this leader last saw: when the controller changed the state
    meanwhile (a new leader epoch) the write fails and this broker stops acting as leader
    (document 003 discussion 3: a zombie leader cannot commit). ``acks=all`` produce waits
    until the high watermark passes the records, and needs ``min.insync.replicas`` in the ISR
    (the topic's override, else the broker's).
Follower
    One fetcher thread per leader broker pulls batches for all partitions it follows from that
    leader (long-polled by ``replica.fetch.wait.max.ms``). After a leader change it first asks
    the leader where its own latest epoch ends (OffsetForLeaderEpoch) and truncates there,
    so records a deposed leader never committed disappear. Its high watermark is the
    leader's, bounded by its own log end offset.
Consumers
    read from the leader only, up to the high watermark.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.metadata_store import (
    BadVersionError,
    ClusterMetadata,
    MetadataStoreError,
    NoNodeError,
    PartitionState,
    state_path,
)
from kafka_tiers.cluster.transport import (
    ApiError,
    ApiKey,
    Client,
    ErrorCode,
    TransportError,
)
from kafka_tiers.log.errors import OffsetOutOfRangeError
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_dir_failure import (
    LogDirOfflineError,
    is_resource_exhaustion,
    resource_error,
)
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.producer_state import AppendOrigin
from kafka_tiers.log.records import RecordBatch
from kafka_tiers.placement.limits import check_request_entries
from kafka_tiers.plugins.hooks import Hooks

if TYPE_CHECKING:
    from kafka_tiers.remote.remote_log_manager import RemoteTierState

log = logging.getLogger(__name__)

class ReplicaRole(enum.Enum):
    """The role of a hosted replica, as told to the :data:`RoleListener`."""

    LEADER = "leader"
    FOLLOWER = "follower"
    #: no longer hosted here (StopReplica); its leader epoch is given as -1
    STOPPED = "stopped"


#: callback for role changes: (partition, role, leader epoch).
RoleListener = Callable[[TopicPartition, ReplicaRole, int], None]
#: reads record batches of a tiered partition from the remote tier (below the local log):
#: (partition, offset, max bytes) -> batches, or None when the partition is not tiered.
RemoteReader = Callable[[TopicPartition, int, int], bytes | None]


@dataclass
class _Follower:
    leo: int = -1  # -1: not known since this broker became leader
    last_caught_up: float = 0.0
    last_fetch_leo: int = -1
    last_fetch_time: float = 0.0
    #: the log start offset its last fetch reported (-1: not reported)
    log_start: int = -1


@dataclass
class Partition:
    """One hosted replica's state (read it under :attr:`lock`)."""

    tp: TopicPartition
    log: Log
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    version: int = -1
    controller_epoch: int = 0
    is_leader: bool = False
    epoch_start_offset: int = 0
    topic_config: dict[str, str] = field(default_factory=dict)
    followers: dict[int, _Follower] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    cond: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)


@dataclass
class _FetchState:
    leader_epoch: int
    truncated: bool = False
    backoff_until: float = 0.0


@dataclass
class _RoleBatch:
    """What the role changes of one LeaderAndIsr request leave to do once, after every
    partition of it changed role (Kafka's ``makeLeaders`` / ``makeFollowers`` passes): the
    fetcher table is updated in one pass, the role listener and the log line come last."""

    changed: list[Partition] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, p: Partition) -> None:
        with self.lock:
            self.changed.append(p)


class _Fetcher:
    """Pulls from one leader broker for every partition this broker follows there."""

    def __init__(self, rm: ReplicaManager, leader_id: int) -> None:
        self.rm = rm
        self.leader_id = leader_id
        self.parts: dict[TopicPartition, _FetchState] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"replica-fetcher-{rm.broker_id}-from-{leader_id}")
        self.thread.start()

    def add(self, tp: TopicPartition, epoch: int) -> None:
        with self.lock:
            self.parts[tp] = _FetchState(epoch)

    def remove(self, tp: TopicPartition) -> None:
        with self.lock:
            self.parts.pop(tp, None)

    def update(self, drop: list[TopicPartition],
               put: list[tuple[TopicPartition, int]]) -> None:
        """One pass for a whole LeaderAndIsr batch (Kafka's ``removeFetcherForPartitions`` /
        ``addFetcherForPartitions``): drop the states of ``drop``, then fetch each of ``put``
        in its leader epoch (a state already in that epoch is kept as it is)."""
        with self.lock:
            kept = dict(put)
            for tp in drop:
                if tp not in kept:
                    self.parts.pop(tp, None)
            for tp, epoch in put:
                cur = self.parts.get(tp)
                if cur is None or cur.leader_epoch != epoch:
                    self.parts[tp] = _FetchState(epoch)

    def stop(self) -> None:
        self.stop_event.set()

    def _run(self) -> None:
        rm = self.rm
        while not self.stop_event.is_set() and not rm._stopped.is_set():
            if rm.paused.is_set():
                self.stop_event.wait(0.05)
                continue
            with self.lock:
                items = [(tp, st) for tp, st in self.parts.items()
                         if st.backoff_until <= time.monotonic()]
            if not items:
                self.stop_event.wait(0.05)
                continue
            address = rm.address_of(self.leader_id)
            if address is None:
                self.stop_event.wait(0.1)
                continue
            try:
                pending = [(tp, st) for tp, st in items if not st.truncated]
                if pending:
                    self._truncate(address, pending)
                ready = [(tp, st) for tp, st in items if st.truncated]
                if ready:
                    self._fetch(address, ready)
            except TransportError as exc:
                log.debug("broker %s: fetch from %s failed: %s", rm.broker_id,
                          self.leader_id, exc)
                self.stop_event.wait(0.1)
            except Exception:
                log.exception("broker %s: fetcher from %s failed", rm.broker_id,
                              self.leader_id)
                self.stop_event.wait(0.2)

    def _still(self, tp: TopicPartition, st: _FetchState) -> Partition | None:
        with self.lock:
            if self.parts.get(tp) is not st:
                return None
        p = self.rm.partitions.get(tp)
        if p is None or p.is_leader or p.leader_epoch != st.leader_epoch:
            return None
        return p

    def _truncate(self, address: str, items: list[tuple[TopicPartition, _FetchState]]) -> None:
        rm = self.rm
        req: list[dict[str, Any]] = []
        for tp, st in items:
            p = rm.partitions.get(tp)
            if p is None:
                continue
            latest = p.log.leader_epoch_cache.latest_epoch
            req.append({"topic": tp.topic, "partition": tp.partition,
                        "leader_epoch": -1 if latest is None else latest,
                        "current_leader_epoch": st.leader_epoch})
        if not req:
            return
        resp = rm.client.send(address, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                              {"replica_id": rm.broker_id, "partitions": req},
                              timeout=rm.request_timeout)
        asked = {(e["topic"], e["partition"]): e["leader_epoch"] for e in req}
        states = dict(items)
        for entry in resp.body["partitions"]:
            tp = TopicPartition(entry["topic"], entry["partition"])
            found = states.get(tp)
            if found is None:
                continue
            st = found
            if entry["error"] != ErrorCode.NONE:
                st.backoff_until = time.monotonic() + 0.1
                continue
            with rm._lock_of(tp):
                p = self._still(tp, st)
                if p is None:
                    continue
                self._truncate_one(p, st, int(asked[(tp.topic, tp.partition)]),
                                   int(entry["leader_epoch"]), int(entry["end_offset"]))

    def _truncate_one(self, p: Partition, st: _FetchState, asked: int, epoch: int,
                      end: int) -> None:
        """Kafka's rule (KIP-101/279): truncate to where the leader's log leaves ours. When
        the leader answers with an older epoch than the one asked, truncate to the smaller
        of its end and ours for that epoch, then ask again with our new latest epoch."""
        lg = p.log
        leo = lg.log_end_offset
        if end < 0:  # the leader knows no epoch of ours: keep what is committed
            target, done = min(lg.high_watermark, leo), True
        elif epoch == asked:
            target, done = min(end, leo), True
        else:
            _, ours = lg.leader_epoch_cache.end_offset_for(epoch, leo)
            target = min(end, leo) if ours < 0 else min(end, ours, leo)
            done = target >= leo
        if target < leo:
            log.info("broker %s: %s truncates from %d to %d (leader %s, leader epoch %d, "
                     "asked epoch %d answered %d)", self.rm.broker_id, p.tp, leo, target,
                     self.leader_id, st.leader_epoch, asked, epoch)
            lg.truncate_to(target)
        st.truncated = done

    def _fetch(self, address: str, items: list[tuple[TopicPartition, _FetchState]]) -> None:
        rm = self.rm
        req = []
        for tp, st in items:
            p = rm.partitions.get(tp)
            if p is None:
                continue
            req.append({"topic": tp.topic, "partition": tp.partition,
                        "offset": p.log.log_end_offset, "current_leader_epoch": st.leader_epoch,
                        "log_start": p.log.log_start_offset})
        if not req:
            return
        resp = rm.client.send(address, ApiKey.FETCH,
                              {"replica_id": rm.broker_id, "max_wait_ms": rm.fetch_wait_ms,
                               "max_bytes": rm.fetch_max_bytes, "partitions": req},
                              timeout=rm.request_timeout + rm.fetch_wait_ms / 1000.0)
        pos = 0
        states = dict(items)
        for entry in resp.body["partitions"]:
            tp = TopicPartition(entry["topic"], entry["partition"])
            size = int(entry.get("size", 0))
            data = resp.payload[pos:pos + size]
            pos += size
            found = states.get(tp)
            if found is None:
                continue
            st = found
            err = entry["error"]
            if err == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(tp, st, entry)
                continue
            if err != ErrorCode.NONE:
                st.backoff_until = time.monotonic() + 0.05
                continue
            with rm._lock_of(tp):
                p = self._still(tp, st)
                if p is None:
                    continue
                if data:
                    self._append(p, data)
                p.log.update_high_watermark(min(int(entry["hw"]), p.log.log_end_offset))
                # the leader's log start offset (DeleteRecords, remote retention) is followed,
                # never above what this replica has committed (Kafka's rule)
                start = min(int(entry.get("log_start", 0)), p.log.high_watermark)
                if start > p.log.log_start_offset:
                    p.log.advance_log_start_offset(start)

    def _out_of_range(self, tp: TopicPartition, st: _FetchState,
                      entry: Mapping[str, Any]) -> None:
        """The leader answered OFFSET_OUT_OF_RANGE to our log end offset.

        Above the leader's log end: truncate again (OffsetForLeaderEpoch). Below the leader's
        local log start: the local log restarts empty there, and the log start offset is the
        leader's (the partition's), never the leader's local log start: no path but
        DeleteRecords and retention moves a replica's log start above the partition's true
        log start (``Log.truncate_fully_and_start_at``), else a replica that once caught up
        this way and later leads makes every remote offset unreadable. A tiered partition's
        follower builds its state from the remote tier first (KIP-405): it starts after the
        remote segment holding the record before the leader's local log, with that segment's
        leader epochs and producer snapshot (``remote_tier_state``); while the remote tier
        cannot answer, the partition backs off and retries."""
        rm = self.rm
        leader_start = int(entry.get("log_start", 0))
        local_start = int(entry.get("local_log_start", leader_start))
        with rm._lock_of(tp):
            p = self._still(tp, st)
            if p is None:
                return
            if p.log.log_end_offset >= local_start:
                st.truncated = False  # above the leader's log end: find where ours leaves it
                return
            if local_start <= leader_start:  # nothing below the leader's local log
                p.log.truncate_fully_and_start_at(local_start, log_start_offset=local_start)
                return
        source = rm.remote_tier_state
        try:
            if source is None:
                raise RuntimeError("this broker has no remote log manager")
            state = source(tp, local_start)  # remote I/O: no partition lock held
        except Exception as exc:
            log.warning("broker %s: %s is behind the leader's local log start %d and cannot "
                        "take its state from the remote tier yet (%s: %s); retrying",
                        rm.broker_id, tp, local_start, type(exc).__name__, exc)
            st.backoff_until = time.monotonic() + 1.0
            return
        with rm._lock_of(tp):
            p = self._still(tp, st)
            if p is None or p.log.log_end_offset >= local_start:
                return
            start = min(leader_start, state.next_offset)
            p.log.start_after_remote(state.next_offset, start, state.leader_epochs,
                                     state.producer_snapshot)
            log.info("broker %s: %s starts its local log at %d after remote segment %d-%d "
                     "(log start %d, leader's local log start %d)", rm.broker_id, tp,
                     state.next_offset, state.segment.start_offset, state.segment.end_offset,
                     start, local_start)

    @staticmethod
    def _append(p: Partition, data: bytes) -> None:
        leo = p.log.log_end_offset
        keep, pos = bytearray(), 0
        while pos < len(data):
            batch = RecordBatch(data, pos)
            if batch.last_offset >= leo:
                if batch.base_offset < leo:  # our log ends inside it: cut ours back
                    p.log.truncate_to(batch.base_offset)
                    leo = batch.base_offset
                keep += data[pos:pos + batch.size]
            pos += batch.size
        if keep:
            p.log.append(bytes(keep), assign_offsets=False)


class ReplicaManager:
    """The partitions of one broker (see the module docstring).

    Args:
        broker_id: this broker.
        log_manager: its logs.
        metadata: the cluster metadata (ISR writes).
        client: the transport client (fetches from leaders).
        config: the broker config (replication keys).
        hooks: for ``isr_changed``.
        on_role: called after every role change (tiered storage follows it).
        remote_reader: serves consumer reads below the local log of tiered partitions.
    """

    def __init__(self, broker_id: int, log_manager: LogManager, metadata: ClusterMetadata,
                 client: Client, config: Mapping[str, Any], *, hooks: Hooks | None = None,
                 on_role: RoleListener | None = None,
                 remote_reader: RemoteReader | None = None) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.client = client
        self.hooks = hooks
        self.on_role = on_role
        self.remote_reader = remote_reader
        #: a tiered partition's state in the remote tier for a follower behind the leader's
        #: local log start (``(tp, leader's local log start) -> RemoteTierState``, may raise;
        #: the broker sets it to its remote log manager's ``tier_state``)
        self.remote_tier_state: Callable[[TopicPartition, int], RemoteTierState] | None = None
        #: called (without locks) after a topic config change reached a hosted partition's
        #: log: the broker's remote log manager runs the partition's task (KIP-950 switches)
        self.on_topic_config: Callable[[TopicPartition], None] | None = None
        #: called whenever a led partition's high watermark moves (with the partition's lock
        #: held: it must not block): Kafka-protocol fetches waiting for data wake up
        self.on_data: Callable[[], None] | None = None
        self.lag_ms = int(config["replica.lag.time.max.ms"])
        self.fetch_wait_ms = int(config["replica.fetch.wait.max.ms"])
        self.fetch_max_bytes = int(config["replica.fetch.max.bytes"])
        #: the limits a fetch request is held to (kafka_tiers.placement.limits)
        self.limits = config
        self.fetch_response_max_bytes = int(config.get("fetch.max.bytes", 57671680))
        self.min_isr = int(config["min.insync.replicas"])
        self.request_timeout = int(config["request.timeout.ms"]) / 1000.0
        self.partitions: dict[TopicPartition, Partition] = {}
        self.brokers: dict[int, str] = {}
        #: brokers in controlled shutdown: never added to an ISR
        self.fenced: set[int] = set()
        self.controller_epoch = 0
        self._lock = threading.RLock()
        # a JBOD move swaps a replica's log: the partition follows (no lock taken: the
        # mover holds the old log's lock, which an append under a partition's lock waits for)
        log_manager.add_log_replaced_listener(self._log_replaced)
        self._fetchers: dict[int, _Fetcher] = {}
        self._data = threading.Condition()
        self._stopped = threading.Event()
        #: set while the process is "stopped" (in-process SIGSTOP): no fetching, no checks.
        self.paused = threading.Event()
        self._isr_thread = threading.Thread(target=self._isr_loop, daemon=True,
                                            name=f"isr-expiration-{broker_id}")
        self._isr_thread.start()

    # ------------------------------------------------------------------ helpers
    def _log_replaced(self, tp: TopicPartition, log: Log) -> None:
        p = self.partitions.get(tp)
        if p is not None:
            p.log = log

    def address_of(self, broker_id: int) -> str | None:
        return self.brokers.get(broker_id)

    def _lock_of(self, tp: TopicPartition) -> threading.RLock:
        p = self.partitions.get(tp)
        return p.lock if p is not None else threading.RLock()

    def _partition(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            raise ApiError(f"broker {self.broker_id} has no replica of {tp}",
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, nothing_done=True)
        return p

    def _now(self) -> float:
        return time.monotonic()

    # ------------------------------------------------------------------ controller commands
    def check_controller_epoch(self, body: Mapping[str, Any], api: str,
                               peer: str = "loopback") -> int:
        """The controller epoch of a controller request (LeaderAndIsr, StopReplica), checked.

        An epoch below the latest one this broker obeyed is stale (an old controller). An
        epoch above the metadata store's ``/controller_epoch`` was never given to any
        controller (a forged or corrupt request): it is refused with one WARN line naming
        the peer and never remembered, so it cannot make the real controller's requests
        look stale. The store is read only when the epoch is new to this broker.

        Raises:
            ApiError: ``STALE_CONTROLLER_EPOCH`` in both cases; nothing was done.
        """
        cepoch = int(body.get("controller_epoch", 0))
        if cepoch < self.controller_epoch:
            raise ApiError(f"controller epoch {cepoch} < {self.controller_epoch}",
                           ErrorCode.STALE_CONTROLLER_EPOCH, nothing_done=True)
        if cepoch > self.controller_epoch:
            current = self.metadata.controller_epoch()
            if cepoch > current:
                log.warning("broker %s: refused %s from %s: controller epoch %d is above the "
                            "metadata store's %d (no controller was given it): ignored",
                            self.broker_id, api, peer, cepoch, current)
                raise ApiError(f"controller epoch {cepoch} is above the metadata store's "
                               f"controller epoch {current}: the request is not from an "
                               "elected controller", ErrorCode.STALE_CONTROLLER_EPOCH,
                               nothing_done=True)
        return cepoch

    def leader_and_isr(self, body: Mapping[str, Any], peer: str = "loopback"
                       ) -> dict[str, Any]:
        """Apply a LeaderAndIsr request: become leader or follower of each partition.

        Entries older than what this broker knows (a lower leader epoch) are refused with
        ``FENCED_LEADER_EPOCH``; a request from an older controller, or with an epoch no
        controller was given, with ``STALE_CONTROLLER_EPOCH``
        (:meth:`check_controller_epoch`)."""
        cepoch = self.check_controller_epoch(body, "LeaderAndIsr", peer)
        with self._lock:
            self.controller_epoch = max(self.controller_epoch, cepoch)
        self._learn_brokers(body)
        entries = list(body.get("partitions", []))
        batch = _RoleBatch()

        def one(e: Mapping[str, Any]) -> dict[str, Any]:
            tp = TopicPartition(e["topic"], int(e["partition"]))
            message = None
            try:
                self._apply(tp, e, cepoch, batch)
                code = ErrorCode.NONE
            except ApiError as exc:
                code, message = exc.code, str(exc)
            except (LogDirOfflineError, OSError, MemoryError) as exc:
                # the replica could not be created or opened here (an offline dir, or out of
                # descriptors / memory / space): the controller reports it, never "OK"
                code, message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
                log.warning("broker %s: replica %s not available: %s", self.broker_id, tp, exc)
            except Exception as exc:
                if is_resource_exhaustion(exc) is None:
                    log.exception("broker %s: LeaderAndIsr for %s failed", self.broker_id, tp)
                    code = ErrorCode.UNKNOWN
                else:
                    code = ErrorCode.KAFKA_STORAGE_ERROR
                message = str(exc)
            out: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition,
                                   "error": int(code)}
            if message is not None:
                out["message"] = message[:500]
            return out

        try:
            # One pass on this thread. A role change is a few assignments in memory (the new
            # epoch's checkpoint entry is written before the first append in it, see
            # produce); a replica to create is Python work plus files whose directory entries
            # are made durable by one fsync per log dir when the batch ends (before the
            # answer), not one per replica: threads would only contend for the interpreter.
            with self.log_manager.batched_creation():
                answers = [one(e) for e in entries]
            return {"partitions": answers}
        finally:
            self._finish_roles(batch)

    def _learn_brokers(self, body: Mapping[str, Any]) -> None:
        if "brokers" in body:
            self.brokers = {int(k): str(v) for k, v in body["brokers"].items()}
        if "fenced" in body:
            self.fenced = {int(b) for b in body["fenced"]}

    def _apply(self, tp: TopicPartition, e: Mapping[str, Any], cepoch: int,
               batch: _RoleBatch) -> None:
        leader, epoch = int(e["leader"]), int(e["leader_epoch"])
        isr = tuple(int(b) for b in e["isr"])
        replicas = tuple(int(b) for b in e["replicas"])
        version = int(e.get("version", -1))
        move_to = None
        with self._lock:
            p = self.partitions.get(tp)
            if p is None:
                log_dir = e.get("log_dir")
                lg = self.log_manager.get_or_create_log(
                    tp, log_dir=None if log_dir in (None, "any") else log_dir,
                    overrides=e.get("config") or None,
                    is_new=bool(e.get("is_new", False)))  # Kafka's LeaderAndIsr isNew
                p = Partition(tp, lg)
                self.partitions[tp] = p
            else:
                log_dir = e.get("log_dir")
                if log_dir not in (None, "any"):
                    current = self.log_manager.log_dir_of(tp)
                    target = self.log_manager.resolve_log_dir(log_dir)
                    if target is not None and current is not None and target != current:
                        move_to = target
        if move_to is not None:  # outside the lock: it may wait for a cancelled move to end
            self.log_manager.alter_replica_log_dirs({tp: move_to})
        p.topic_config = dict(e.get("topic_config") or {})
        live = self.log_manager.get_log(tp)  # a topic config change applies at once
        if live is not None:
            new_config = self.log_manager.config.with_overrides(e.get("config") or {})
            changed = new_config != live.config
            live.config = new_config
            if changed and self.on_topic_config is not None:
                self.on_topic_config(tp)
        with p.lock:
            if epoch < p.leader_epoch:
                raise ApiError(f"{tp}: leader epoch {epoch} < {p.leader_epoch}",
                               ErrorCode.FENCED_LEADER_EPOCH)
            same_epoch = epoch == p.leader_epoch
            p.replicas, p.controller_epoch = replicas, cepoch
            if same_epoch and leader == p.leader and (leader == self.broker_id) == p.is_leader:
                if version >= p.version:  # an ISR-only update from the controller
                    p.isr, p.version = isr, version
                    self._maybe_advance_hw(p)
                return
            p.leader, p.leader_epoch, p.isr, p.version = leader, epoch, isr, version
            if leader == self.broker_id:
                self._become_leader(p)
            else:
                self._become_follower(p)
        batch.add(p)

    def _become_leader(self, p: Partition) -> None:
        """Lead ``p`` in its new epoch (the caller holds ``p.lock``): it serves fetches at
        once. Memory only: the epoch's checkpoint entry is made durable before the first
        append in it (:meth:`produce`), the fetcher table is updated per batch
        (:meth:`_finish_roles`); a fetcher still holding ``p`` ignores it meanwhile (it
        checks the role and epoch under ``p.lock`` before touching the log)."""
        p.is_leader = True
        p.log.leader_epoch_cache.assign(p.leader_epoch, p.log.log_end_offset)
        p.epoch_start_offset = p.log.log_end_offset
        now = self._now()
        p.followers = {r: _Follower(last_caught_up=now) for r in p.replicas
                       if r != self.broker_id}
        self._maybe_advance_hw(p)
        p.cond.notify_all()
        log.debug("broker %s leads %s in epoch %d (isr %s)", self.broker_id, p.tp,
                  p.leader_epoch, list(p.isr))

    def _become_follower(self, p: Partition) -> None:
        """Follow ``p.leader`` (the caller holds ``p.lock``); the fetcher from it starts
        fetching ``p`` when the batch finishes (:meth:`_finish_roles`)."""
        p.is_leader = False
        p.followers = {}
        p.cond.notify_all()

    def _finish_roles(self, batch: _RoleBatch) -> None:
        """After the role changes of one LeaderAndIsr request: one fetcher-table pass for
        the whole batch, then the role listener per partition and one log line.

        The fetcher table is made to match each partition's role as it is now (read under
        its lock), so a later request that changed the role again meanwhile is not undone:
        a partition is fetched only from its current leader, in its current epoch."""
        if not batch.changed:
            return
        drop: list[TopicPartition] = []
        put: dict[int, list[tuple[TopicPartition, int]]] = {}
        roles: list[tuple[TopicPartition, ReplicaRole, int]] = []
        for p in batch.changed:
            with p.lock:
                if self.partitions.get(p.tp) is not p:  # stopped meanwhile
                    continue
                drop.append(p.tp)
                if p.is_leader:
                    roles.append((p.tp, ReplicaRole.LEADER, p.leader_epoch))
                else:
                    if p.leader >= 0:
                        put.setdefault(p.leader, []).append((p.tp, p.leader_epoch))
                    roles.append((p.tp, ReplicaRole.FOLLOWER, p.leader_epoch))
        with self._lock:
            for leader_id in put:
                f = self._fetchers.get(leader_id)
                if f is None or f.stop_event.is_set():
                    self._fetchers[leader_id] = _Fetcher(self, leader_id)
            fetchers = dict(self._fetchers)
        for leader_id, f in fetchers.items():
            mine = put.get(leader_id, [])
            f.update(drop, mine)
        if self.on_role is not None:
            for tp, role, epoch in roles:
                self.on_role(tp, role, epoch)
        leads = sum(1 for _, role, _ in roles if role is ReplicaRole.LEADER)
        log.info("broker %s: %d partitions changed role (%d now led, %d followed)",
                 self.broker_id, len(roles), leads, len(roles) - leads)

    def _remove_from_fetchers(self, tp: TopicPartition) -> None:
        with self._lock:
            for f in self._fetchers.values():
                f.remove(tp)

    def stop_replica(self, body: Mapping[str, Any], peer: str = "loopback"
                     ) -> dict[str, Any]:
        """Stop (and with ``delete``, delete) replicas: document 003's StopReplica. The
        controller epoch is checked first (:meth:`check_controller_epoch`); every replica
        deleted is logged at WARN with the controller epoch and the peer."""
        cepoch = self.check_controller_epoch(body, "StopReplica", peer)
        self._learn_brokers(body)
        out = []
        for e in body.get("partitions", []):
            tp = TopicPartition(e["topic"], int(e["partition"]))
            self._remove_from_fetchers(tp)
            with self._lock:
                p = self.partitions.pop(tp, None)
            if p is not None:
                with p.lock:
                    p.is_leader = False
                    p.cond.notify_all()
            if self.on_role is not None:
                self.on_role(tp, ReplicaRole.STOPPED, -1)
            if body.get("delete"):
                log.warning("broker %s: StopReplica with delete from %s (controller epoch %d):"
                            " deleting the replica %s", self.broker_id, peer, cepoch, tp)
                self.log_manager.delete_log(tp)
            out.append({"topic": tp.topic, "partition": tp.partition, "error": 0})
        return {"partitions": out}

    # ------------------------------------------------------------------ leader side
    def _maybe_advance_hw(self, p: Partition) -> None:
        if not p.is_leader:
            return
        ends = [p.log.log_end_offset]
        for r in p.isr:
            if r == self.broker_id:
                continue
            f = p.followers.get(r)
            if f is None or f.leo < 0:
                return
            ends.append(f.leo)
        new = min(ends)
        if new > p.log.high_watermark:
            p.log.update_high_watermark(new)
            p.cond.notify_all()
            if self.on_data is not None:
                self.on_data()

    def min_insync_replicas(self, p: Partition) -> int:
        """The ISR size an ``acks=all`` produce to ``p`` needs: its topic's
        ``min.insync.replicas`` (validated by the controller, sent with LeaderAndIsr, so an
        altered value applies at once), else the broker's."""
        raw = p.topic_config.get("min.insync.replicas")
        return self.min_isr if raw is None else int(raw)

    def produce(self, tp: TopicPartition, records: bytes, acks: int,
                timeout: float | None = None, *,
                origin: AppendOrigin | None = None) -> tuple[int, int]:
        """Append as leader; returns ``(base offset, last offset)``.

        ``acks``: 0 or 1 return after the local append; -1 (all) waits until the high
        watermark passes the records. ``origin=AppendOrigin.CLIENT`` (a Kafka client's
        Produce) checks producer epochs and sequences (``Log.append``); a duplicate returns
        the original batch's offsets, once they are committed for ``acks=-1``.

        Raises:
            ApiError: ``NOT_LEADER_OR_FOLLOWER``, ``NOT_ENOUGH_REPLICAS`` (ISR below
                ``min.insync.replicas``, nothing appended), ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``,
                ``REQUEST_TIMED_OUT`` (appended, not known to be committed),
                ``INVALID_REQUIRED_ACKS``.
        """
        if acks not in (-1, 0, 1):
            raise ApiError(f"acks must be -1, 0 or 1, got {acks}", ErrorCode.INVALID_REQUIRED_ACKS)
        p = self._partition(tp)
        deadline = self._now() + (self.request_timeout if timeout is None else timeout)
        with p.lock:
            if not p.is_leader:
                raise ApiError(f"broker {self.broker_id} is not the leader of {tp}",
                               ErrorCode.NOT_LEADER_OR_FOLLOWER, nothing_done=True)
            min_isr = self.min_insync_replicas(p)
            if acks == -1 and len(p.isr) < min_isr:
                raise ApiError(f"{tp}: ISR {list(p.isr)} is smaller than "
                               f"min.insync.replicas={min_isr}",
                               ErrorCode.NOT_ENOUGH_REPLICAS, nothing_done=True)
            epoch = p.leader_epoch
            try:
                # the epoch's checkpoint entry is durable before the first append in it (as
                # Kafka); becoming leader left it in memory, so a failover writes nothing
                p.log.leader_epoch_cache.flush()
                info = p.log.append(records, leader_epoch=epoch, origin=origin)
            except (OSError, MemoryError) as exc:
                resource = is_resource_exhaustion(exc)
                if resource is None:
                    raise
                # refused, retriable; the replica and the dir stay online
                raise ApiError(str(resource_error(exc, resource, f"producing to {tp}",
                                                  partition=tp)),
                               ErrorCode.KAFKA_STORAGE_ERROR, nothing_done=True) from exc
            self._maybe_advance_hw(p)
        with self._data:
            self._data.notify_all()
        if acks != -1:
            return info.first_offset, info.last_offset
        with p.lock:
            while True:
                if p.log.high_watermark > info.last_offset and p.leader_epoch == epoch:
                    if len(p.isr) < min_isr:
                        raise ApiError(f"{tp}: ISR shrank below min.insync.replicas",
                                       ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
                    return info.first_offset, info.last_offset
                if not p.is_leader or p.leader_epoch != epoch:
                    raise ApiError(f"broker {self.broker_id} lost the leadership of {tp} "
                                   f"before the records were committed",
                                   ErrorCode.NOT_LEADER_OR_FOLLOWER)
                left = deadline - self._now()
                if left <= 0:
                    raise ApiError(f"{tp}: records not replicated to the ISR in time",
                                   ErrorCode.REQUEST_TIMED_OUT)
                p.cond.wait(min(left, 0.5))

    def fetch(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], bytes]:
        """Serve a fetch: a follower's (``replica_id`` >= 0: reads up to the log end and
        reports the follower's position) or a consumer's (-1: up to the high watermark)."""
        replica_id = int(body.get("replica_id", -1))
        # bounded: bytes per partition and per response by fetch.max.bytes, the wait by
        # request.timeout.ms, the partitions by max.request.partitions
        max_bytes = min(int(body.get("max_bytes", 1 << 20)), self.fetch_response_max_bytes)
        max_wait = min(int(body.get("max_wait_ms", 0)) / 1000.0, self.request_timeout)
        parts = check_request_entries(self.limits, body["partitions"], "partitions to fetch")
        deadline = self._now() + max_wait
        while True:
            entries, payload = self._fetch_once(replica_id, parts, max_bytes)
            if payload or max_wait <= 0 or self._now() >= deadline or self._stopped.is_set():
                return {"partitions": entries}, payload
            if any(e["error"] != ErrorCode.NONE for e in entries):
                return {"partitions": entries}, payload
            with self._data:
                self._data.wait(min(0.05, max(0.0, deadline - self._now())))

    def _fetch_once(self, replica_id: int, parts: list[Mapping[str, Any]], max_bytes: int
                    ) -> tuple[list[dict[str, Any]], bytes]:
        entries: list[dict[str, Any]] = []
        chunks: list[bytes] = []
        budget = self.fetch_response_max_bytes  # of the whole response (fetch.max.bytes)
        counted = 0
        for e in parts:
            while counted < len(chunks):  # the first data may pass it by a batch (Kafka's rule)
                budget -= len(chunks[counted])
                counted += 1
                max_bytes = min(max_bytes, budget)
            tp = TopicPartition(e["topic"], int(e["partition"]))
            offset = int(e["offset"])
            out: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition,
                                   "error": 0, "size": 0}
            entries.append(out)
            p = self.partitions.get(tp)
            if p is None:
                out["error"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            with p.lock:
                if not p.is_leader:
                    out["error"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    continue
                cur = e.get("current_leader_epoch")
                if cur is not None and int(cur) >= 0 and int(cur) != p.leader_epoch:
                    out["error"] = int(ErrorCode.FENCED_LEADER_EPOCH if int(cur) < p.leader_epoch
                                       else ErrorCode.UNKNOWN_LEADER_EPOCH)
                    continue
                lg = p.log
                out.update(leo=lg.log_end_offset, log_start=lg.log_start_offset,
                           local_log_start=lg.local_log_start_offset, hw=lg.high_watermark)
                if offset > lg.log_end_offset or offset < lg.log_start_offset:
                    out["error"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                    continue
                if replica_id >= 0:
                    self._follower_fetched(p, replica_id, offset, e.get("log_start"))
                    if offset < lg.local_log_start_offset:  # the follower starts locally
                        out["error"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                        continue
                if max_bytes <= 0:  # fetch.max.bytes spent: no data for the rest
                    continue
                # a consumer's offset below the local log is read from the remote tier, after
                # the partition's lock is released (the read waits up to
                # remote.fetch.max.wait.ms for the reader pool); local retention may also
                # remove the segment between the check above and the local read
                remote_wanted = (replica_id < 0 and offset < lg.local_log_start_offset
                                 and self.remote_reader is not None)
                if not remote_wanted:
                    try:
                        data = lg.read(offset, max_bytes, isolation="log_end"
                                       if replica_id >= 0 else "high_watermark")
                    except (OSError, MemoryError) as exc:
                        resource = is_resource_exhaustion(exc)
                        if resource is None:
                            raise
                        # out of descriptors / memory: this partition's read is refused
                        # (retriable), the others of the request are served
                        resource_error(exc, resource, f"reading {tp}", partition=tp)
                        out["error"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                        continue
                    except OffsetOutOfRangeError:
                        remote_wanted = (replica_id < 0
                                         and offset < lg.local_log_start_offset
                                         and self.remote_reader is not None)
                        if not remote_wanted:
                            out["error"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                            out["hw"] = lg.high_watermark
                            continue
                    else:
                        records = bytes(data.records)
                        out.update(hw=lg.high_watermark, size=len(records))
                        chunks.append(records)
                        continue
            assert self.remote_reader is not None
            remote = self.remote_reader(tp, offset, max_bytes)
            if remote is not None:
                out.update(size=len(remote), tier="remote")
                chunks.append(remote)
            else:
                out["error"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                out["hw"] = lg.high_watermark
        return entries, b"".join(chunks)

    def _follower_fetched(self, p: Partition, r: int, offset: int,
                          log_start: Any = None) -> None:
        f = p.followers.get(r)
        if f is None:
            if r not in p.replicas:
                return
            f = p.followers[r] = _Follower()
        if isinstance(log_start, int) and not isinstance(log_start, bool):
            f.log_start = log_start
        now = self._now()
        leo = p.log.log_end_offset
        if offset >= leo:
            f.last_caught_up = now
        elif offset >= f.last_fetch_leo >= 0:
            f.last_caught_up = max(f.last_caught_up, f.last_fetch_time)
        f.leo, f.last_fetch_leo, f.last_fetch_time = offset, leo, now
        if (r not in p.isr and r in p.replicas and r in self.brokers
                and r not in self.fenced
                and offset >= p.log.high_watermark and offset >= p.epoch_start_offset):
            self._write_isr(p, lambda isr: tuple(sorted({*isr, r})), f"{r} caught up")
        self._maybe_advance_hw(p)

    def low_watermark(self, tp: TopicPartition) -> int:
        """Kafka's low watermark of a partition this broker leads: the lowest log start
        offset of its replicas on live brokers, as their fetches report it (a follower that
        has not reported one counts as 0).

        Raises:
            ApiError: ``UNKNOWN_TOPIC_OR_PARTITION`` or ``NOT_LEADER_OR_FOLLOWER``.
        """
        p = self._partition(tp)
        with p.lock:
            if not p.is_leader:
                raise ApiError(f"broker {self.broker_id} is not the leader of {tp}",
                               ErrorCode.NOT_LEADER_OR_FOLLOWER)
            low = p.log.log_start_offset
            for r in p.replicas:
                if r != self.broker_id and r in self.brokers and r not in self.fenced:
                    f = p.followers.get(r)
                    low = min(low, max(f.log_start, 0) if f is not None else 0)
            return low

    def _write_isr(self, p: Partition, change: Callable[[tuple[int, ...]], tuple[int, ...]],
                   why: str) -> bool:
        """Conditionally write ``change(current ISR)`` (the caller holds ``p.lock``). False
        when the write failed; when it failed because another leader epoch was written, this
        broker stops leading (a zombie)."""
        for _ in range(3):
            new_isr = change(p.isr)
            if new_isr == p.isr or self.broker_id not in new_isr:
                return False
            st = PartitionState(self.broker_id, p.leader_epoch, new_isr, p.controller_epoch,
                                p.version)
            try:
                version = self.metadata.store.set(state_path(p.tp), st.to_json(), p.version)
            except BadVersionError:
                try:
                    cur = self.metadata.partition_state(p.tp)
                except MetadataStoreError:
                    return False
                if cur is not None and cur.leader == self.broker_id and \
                        cur.leader_epoch == p.leader_epoch:
                    p.isr, p.version = cur.isr, cur.version  # the controller edited the ISR
                    continue
                log.warning("broker %s: cannot change the ISR of %s: leader epoch %d was "
                            "replaced (now %s); it stops leading (fenced zombie leader)",
                            self.broker_id, p.tp, p.leader_epoch,
                            None if cur is None else cur.leader_epoch)
                p.is_leader = False
                p.cond.notify_all()
                return False
            except (NoNodeError, MetadataStoreError) as exc:
                log.warning("broker %s: ISR write for %s failed: %s", self.broker_id, p.tp, exc)
                return False
            old = p.isr
            p.isr, p.version = new_isr, version
            log.info("broker %s: ISR of %s %s -> %s (%s)", self.broker_id, p.tp, list(old),
                     list(new_isr), why)
            if self.hooks is not None:
                self.hooks.isr_changed(p.tp, list(new_isr), p.leader_epoch)
            self._maybe_advance_hw(p)
            p.cond.notify_all()
            return True
        return False

    def _isr_loop(self) -> None:
        interval = max(self.lag_ms / 2000.0, 0.02)
        while not self._stopped.wait(interval):
            if self.paused.is_set():
                continue
            try:
                self.check_isr()
            except Exception:
                log.exception("broker %s: ISR check failed", self.broker_id)

    def check_isr(self) -> None:
        """Shrink the ISR of every led partition by the followers not caught up for
        ``replica.lag.time.max.ms``."""
        now = self._now()
        for p in list(self.partitions.values()):
            with p.lock:
                if not p.is_leader:
                    continue
                lagging = [r for r in p.isr if r != self.broker_id and
                           now - p.followers.get(r, _Follower()).last_caught_up
                           > self.lag_ms / 1000.0]
                if lagging:
                    out = tuple(lagging)

                    def shrink(isr: tuple[int, ...], out: tuple[int, ...] = out
                               ) -> tuple[int, ...]:
                        return tuple(r for r in isr if r not in out)

                    self._write_isr(p, shrink, f"{lagging} not caught up for {self.lag_ms} ms")

    def offsets_for_leader_epoch(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Where each requested epoch ends in the leader's log (follower truncation)."""
        out = []
        for e in body["partitions"]:
            tp = TopicPartition(e["topic"], int(e["partition"]))
            entry: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition, "error": 0}
            out.append(entry)
            p = self.partitions.get(tp)
            if p is None:
                entry["error"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            with p.lock:
                cur = int(e.get("current_leader_epoch", -1))
                if not p.is_leader:
                    entry["error"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    continue
                if cur >= 0 and cur != p.leader_epoch:
                    entry["error"] = int(ErrorCode.FENCED_LEADER_EPOCH if cur < p.leader_epoch
                                         else ErrorCode.UNKNOWN_LEADER_EPOCH)
                    continue
                epoch, end = p.log.leader_epoch_cache.end_offset_for(
                    int(e["leader_epoch"]), p.log.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
        return {"partitions": out}

    # ------------------------------------------------------------------ inspection
    def describe(self) -> list[dict[str, Any]]:
        """Every hosted replica: role, epoch, ISR, offsets."""
        out = []
        for tp, p in sorted(self.partitions.items()):
            with p.lock:
                out.append({"topic": tp.topic, "partition": tp.partition,
                            "leader": p.leader, "leader_epoch": p.leader_epoch,
                            "is_leader": p.is_leader, "isr": list(p.isr),
                            "replicas": list(p.replicas),
                            "log_end_offset": p.log.log_end_offset,
                            "high_watermark": p.log.high_watermark,
                            "log_dir": str(self.log_manager.log_dir_of(tp) or "")})
        return out

    def shutdown(self) -> None:
        """Stop the fetchers and the ISR checker, wake every waiting produce."""
        self._stopped.set()
        with self._lock:
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
        for f in fetchers:
            f.stop()
        for p in list(self.partitions.values()):
            with p.lock:
                p.is_leader = False
                p.cond.notify_all()
        with self._data:
            self._data.notify_all()
        for f in fetchers:
            if f.thread is not threading.current_thread():
                f.thread.join(timeout=10)
        self._isr_thread.join(timeout=5)


__all__ = ["Partition", "RemoteReader", "ReplicaManager", "ReplicaRole", "RoleListener"]
