"""The controller (document 003): one broker at a time, elected through the ephemeral
``/controller`` node, decides every leadership change, creates and deletes topics, places
replicas through the configured ``ReplicaPlacer`` and drives reassignment.

Everything the controller does runs on one event thread, in order: store notifications
(brokers coming and going, reassignment requests), requests from clients and brokers (create
topic, controlled shutdown, ...) and a periodic tick. Decisions are written to the metadata
store first (the source of truth; each write checks the controller epoch node, so a deposed
controller's writes fail), then sent to the affected brokers as LeaderAndIsr / StopReplica
requests carrying the controller epoch (brokers refuse older epochs).

Leader election (Kafka's rules)
    the first replica in assignment order that is alive, not shutting down and in the ISR;
    with ``unclean.leader.election.enable`` and no such replica, the first live replica (a
    WARNING names the partition: committed records may be lost); otherwise the partition
    goes offline (leader -1) until an ISR replica returns. Preferred election moves the
    leadership to the first assigned replica when it is alive and in the ISR.
Failover batching
    the partition states of a broker failure are written in atomic multi-writes of
    ``controller.batch.size`` (``controller.batch.writes=false``: one write per partition),
    then one LeaderAndIsr request per broker, sent to all brokers in parallel.
Events
    typed values (:data:`ControllerEvent`): :class:`Elect`, :class:`Resign`,
    :class:`BrokersChanged`, :class:`ReassignmentsChanged`, :class:`TopicDeletionsRequested`,
    :class:`Tick` and :class:`Call` (a request run on the event thread).
Topic configuration
    is the broker's: the controller is handed a :class:`TopicConfigPolicy` (the broker's
    :class:`~kafka_tiers.broker.topics.TopicConfigs`) that validates a new topic's config and
    gives the overrides of its local logs; the cluster layer imports nothing of the broker.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kafka_tiers.api.cluster import BrokerInfo, ClusterView, TopicPartition
from kafka_tiers.cluster.metadata_store import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    DELETE_TOPICS,
    REASSIGN,
    BadVersionError,
    BrokerRegistration,
    ClusterMetadata,
    ControllerMovedError,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    Op,
    PartitionState,
    SessionEvent,
    TopicAssignment,
    new_topic_id,
    topic_path,
)
from kafka_tiers.cluster.request_schemas import CONTROLLER_REQUEST_MAX_PARTITIONS
from kafka_tiers.cluster.transport import ApiError, ApiKey, Client, ErrorCode, TransportError
from kafka_tiers.placement.limits import (
    LimitExceededError,
    as_count,
    check_broker_partitions,
    check_new_partitions,
    check_partition_index,
    check_replication_factor,
    check_request_entries,
)
from kafka_tiers.placement.service import PlacementService

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Kafka's error codes of an ElectLeaders answer that the transport does not name
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83


class TopicConfigPolicy(Protocol):
    """What the controller needs of topic configuration (the broker's ``TopicConfigs``)."""

    def validate(self, topic: str, config: Mapping[str, Any] | None) -> dict[str, str]:
        """The normalized config of a new topic; raises ``ConfigError`` when it is invalid."""
        ...

    def local_overrides(self, config: Mapping[str, Any] | None, topic: str = "?"
                        ) -> dict[str, str]:
        """The overrides the topic's local logs run with."""
        ...


# ---------------------------------------------------------------------- events

@dataclass(frozen=True)
class Elect:
    """Take part in the controller election (``/controller`` changed, or a new session)."""


@dataclass(frozen=True)
class Resign:
    """The store session was lost: this broker is no longer the controller."""


@dataclass(frozen=True)
class BrokersChanged:
    """``/brokers/ids`` changed: brokers came or went."""


@dataclass(frozen=True)
class ReassignmentsChanged:
    """``/admin/reassign_partitions`` changed."""


@dataclass(frozen=True)
class TopicDeletionsRequested:
    """``/admin/delete_topics`` has new requests."""


@dataclass(frozen=True)
class Tick:
    """The periodic tick (no event for a while): reassignment progress, preferred leaders,
    and an election when ``/controller`` is empty."""


@dataclass(frozen=True, eq=False)
class Call:
    """Run ``fn`` on the event thread and complete ``future`` with its result (requests)."""

    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]


#: every event of the controller's thread.
ControllerEvent = (Elect | Resign | BrokersChanged | ReassignmentsChanged
                   | TopicDeletionsRequested | Tick | Call)


@dataclass
class FailoverStats:
    """The figures of the last broker-failure handling (for the benchmark and describe)."""

    brokers: list[int] = field(default_factory=list)
    partitions: int = 0
    #: time spent writing to the store
    write_seconds: float = 0.0
    #: time from the last write to the last broker acknowledgement
    send_seconds: float = 0.0
    total_seconds: float = 0.0
    store_writes: int = 0
    batched: bool = True


def address_of(reg: BrokerRegistration) -> str:
    return f"{reg.host}:{reg.port}"


class Controller:
    """The controller role of one broker (every broker runs one; one is active).

    Args:
        broker_id: this broker.
        metadata: the cluster metadata over this broker's store session.
        client: the transport client for requests to brokers.
        core: the placement service (config, hooks, placer).
        topic_configs: validates new topics' configs and gives their local log overrides.
        remote_deleter: deletes the remote-tier data of partitions of a deleted tiered topic
            (the broker's remote log manager through its storage plugin); None: this broker
            has no remote tier.
    """

    def __init__(self, broker_id: int, metadata: ClusterMetadata, client: Client,
                 core: PlacementService, *, topic_configs: TopicConfigPolicy,
                 remote_deleter: Callable[[str, list[TopicPartition]], None] | None = None
                 ) -> None:
        self.broker_id = broker_id
        self.remote_deleter = remote_deleter
        self.metadata = metadata
        self.store = metadata.store
        self.client = client
        self.core = core
        self.topic_config_policy = topic_configs
        self.hooks = core.hooks
        cfg = core.config
        self.unclean = bool(cfg["unclean.leader.election.enable"])
        self.batch = bool(cfg["controller.batch.writes"])
        self.batch_size = int(cfg["controller.batch.size"])
        self.request_timeout = int(cfg["request.timeout.ms"]) / 1000.0
        self.rebalance = bool(cfg["auto.leader.rebalance.enable"])
        self.rebalance_interval = int(cfg["leader.imbalance.check.interval.seconds"])
        self.active = False
        self.epoch = 0
        self._epoch_version = -1
        self.live: dict[int, BrokerRegistration] = {}
        self.shutting_down: set[int] = set()
        self.assignments: dict[TopicPartition, tuple[int, ...]] = {}
        #: replicas per broker over ``assignments`` (None: to be counted again)
        self._held: dict[int, int] | None = None
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.topic_versions: dict[str, int] = {}
        self.states: dict[TopicPartition, PartitionState] = {}
        self.reassigning: dict[TopicPartition, dict[str, Any]] = {}
        self.last_failover: FailoverStats | None = None
        self.failover_listeners: list[Callable[[FailoverStats], None]] = []
        self._events: queue.Queue[ControllerEvent | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        #: set while the process is "stopped" (in-process SIGSTOP): no events handled.
        self.paused = threading.Event()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8,
                                                           thread_name_prefix="controller-send")
        self._last_rebalance = time.monotonic()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the event thread and take part in the election."""
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"controller-{self.broker_id}")
        self._thread.start()
        self.store.watch_data(CONTROLLER, lambda _p: self.enqueue(Elect()))
        self.store.watch_children(BROKER_IDS, lambda _p: self.enqueue(BrokersChanged()))
        self.store.watch_data(REASSIGN, lambda _p: self.enqueue(ReassignmentsChanged()))
        self.store.watch_children(DELETE_TOPICS,
                                  lambda _p: self.enqueue(TopicDeletionsRequested()))
        self.store.on_session_event(self._on_session)

    def _on_session(self, event: SessionEvent) -> None:
        self.enqueue(Resign() if event is SessionEvent.EXPIRED else Elect())

    def stop(self) -> None:
        """Stop the event thread (resigning: the ephemeral node goes with the session)."""
        self._stopped.set()
        self._events.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.active = False

    def enqueue(self, event: ControllerEvent) -> None:
        """Queue ``event`` for the event thread (dropped once stopped)."""
        if not self._stopped.is_set():
            self._events.put(event)

    def call(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        """Run ``fn`` on the controller thread and return its result (requests).

        Raises:
            ApiError: ``NOT_CONTROLLER`` when this broker is not the active controller,
                ``REQUEST_TIMED_OUT``; or what ``fn`` raised.
        """
        if not self.active:
            raise ApiError(f"broker {self.broker_id} is not the controller",
                           ErrorCode.NOT_CONTROLLER)
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.enqueue(Call(fn, fut))
        try:
            return fut.result(timeout=timeout or self.request_timeout * 2)
        except concurrent.futures.TimeoutError:
            raise ApiError("the controller did not answer in time",
                           ErrorCode.REQUEST_TIMED_OUT) from None

    def _run(self) -> None:
        while not self._stopped.is_set():
            if self.paused.is_set():
                self._stopped.wait(0.05)
                continue
            try:
                event = self._events.get(timeout=0.2)
            except queue.Empty:
                event = Tick()
            if event is None:
                return
            try:
                self._handle(event)
            except ControllerMovedError:
                log.warning("broker %s: another controller took over; resigning",
                            self.broker_id)
                self.active = False
            except MetadataStoreError as exc:
                log.warning("broker %s: controller event %s failed on the store: %s",
                            self.broker_id, type(event).__name__, exc)
                if isinstance(event, Call):
                    event.future.set_exception(ApiError(str(exc), ErrorCode.REQUEST_TIMED_OUT))
                else:
                    self.enqueue_later(event)
            except Exception as exc:
                if isinstance(event, Call) and not event.future.done():
                    event.future.set_exception(exc)
                else:
                    log.exception("broker %s: controller event %s failed", self.broker_id,
                                  type(event).__name__)

    def enqueue_later(self, event: ControllerEvent, delay: float = 0.2) -> None:
        """Queue ``event`` after ``delay`` seconds (a retry after a store error)."""
        t = threading.Timer(delay, self.enqueue, (event,))
        t.daemon = True
        t.start()

    def _handle(self, event: ControllerEvent) -> None:
        match event:
            case Elect():
                self._elect()
            case Resign():
                if self.active:
                    log.warning("broker %s: session lost; no longer the controller",
                                self.broker_id)
                self.active = False
            case BrokersChanged():
                if self.active:
                    self._on_brokers_changed()
            case TopicDeletionsRequested():
                if self.active:
                    self._delete_requested_topics()
            case ReassignmentsChanged() | Tick():
                tick = isinstance(event, Tick)
                if self.active:
                    self._check_still_controller()
                    self._drive_reassignments()
                    if (tick and self.rebalance and time.monotonic() -
                            self._last_rebalance > self.rebalance_interval):
                        self._last_rebalance = time.monotonic()
                        self.elect_preferred(None)
                elif tick and self.store.exists(CONTROLLER) is None:
                    self._elect()
            case Call(fn=fn, future=fut):
                if fut.done():
                    return
                if not self.active:
                    fut.set_exception(ApiError(f"broker {self.broker_id} is not the controller",
                                               ErrorCode.NOT_CONTROLLER))
                    return
                try:
                    fut.set_result(fn())
                except BaseException as exc:
                    fut.set_exception(exc)

    def _check_still_controller(self) -> None:
        current = self.metadata.controller()
        if current is None or current != (self.broker_id, self.epoch):
            log.warning("broker %s: /controller is %s; resigning", self.broker_id, current)
            self.active = False

    # ------------------------------------------------------------------ election
    def _elect(self) -> None:
        current = self.metadata.controller()
        if current is not None:
            if self.active and current != (self.broker_id, self.epoch):
                log.warning("broker %s: controller %s elected; resigning", self.broker_id,
                            current)
                self.active = False
            return
        self.active = False
        try:
            epoch = self.metadata.try_become_controller(self.broker_id)
        except MetadataStoreError as exc:
            log.warning("broker %s: controller election failed: %s", self.broker_id, exc)
            return
        if epoch is None:
            return
        got = self.store.get(CONTROLLER_EPOCH)
        self.epoch, self._epoch_version = epoch, got[1]
        log.info("broker %s is the controller (epoch %d)", self.broker_id, epoch)
        self._on_failover()

    def _guard(self) -> Op:
        return Op.check(CONTROLLER_EPOCH, self._epoch_version)

    def _on_failover(self) -> None:
        """Document 003 section D: load everything, repair what changed while there was no
        controller, resend the whole state to every broker."""
        self.metadata.ensure_layout()
        self.live = self.metadata.live_brokers()
        self.shutting_down = set()
        self.assignments, self.states, self.topic_configs = {}, {}, {}
        self._held = None
        topics = self.metadata.topics()  # pipelined reads: two round trips' latency in all
        for topic, got in zip(topics, self.store.get_many([topic_path(t) for t in topics]),
                              strict=True):
            if got is None or got[0] is None:
                continue
            asg = TopicAssignment.from_json(topic, got[0], got[1])
            if asg.topic_id is None:
                asg = self._give_topic_id(asg)
            self.topic_configs[topic] = dict(asg.config)
            self.topic_versions[topic] = asg.version
            for p, reps in asg.partitions.items():
                self.assignments[TopicPartition(topic, p)] = reps
        for tp, st in self.metadata.partition_states(list(self.assignments)).items():
            if st is not None:
                self.states[tp] = st
        self.reassigning = {}
        self.active = True
        for b, reg in sorted(self.live.items()):  # a new controller reports what it finds
            self.hooks.broker_up(b, reg.rack)
        self._last_rebalance = time.monotonic()
        # leaders lost while nobody was controller
        dead = {b for st in self.states.values() for b in (st.leader, *st.isr)
                if b >= 0 and b not in self.live}
        offline = {tp for tp, st in self.states.items() if st.leader < 0}
        self._handle_failures(dead, extra=offline)
        self._send_full_state(self.live)
        self._drive_reassignments()
        self._delete_requested_topics()

    # ------------------------------------------------------------------ brokers
    def _on_brokers_changed(self) -> None:
        now = self.metadata.live_brokers()
        # a broker registered again since the last look died in between (a bounce): it is
        # handled as a failure, then as a new broker (Kafka does the same)
        bounced = {b for b in now if b in self.live and now[b] != self.live[b]}
        gone = (set(self.live) - set(now)) | bounced
        came = {b for b in now if b not in self.live} | bounced
        if bounced:
            self.live = {b: r for b, r in self.live.items() if b not in bounced}
            for b in sorted(bounced):
                self.hooks.broker_down(b)
            self._handle_failures(bounced)
            gone -= bounced
        self.live = now
        self.shutting_down -= gone | came
        for b in sorted(gone):
            log.info("controller %s: broker %s is down", self.broker_id, b)
            self.hooks.broker_down(b)
        for b in sorted(came):
            log.info("controller %s: broker %s is up", self.broker_id, b)
            self.hooks.broker_up(b, now[b].rack)
        if gone:
            self._handle_failures(gone)
            self._send_brokers_update()
        if came:
            offline = {tp for tp, st in self.states.items() if st.leader < 0}
            if offline:
                self._handle_failures(set(), extra=offline)
            self._send_full_state({b: now[b] for b in came})
            self._send_brokers_update(exclude=came)

    def _eligible(self, b: int) -> bool:
        return b in self.live and b not in self.shutting_down

    def elect_leader(self, tp: TopicPartition, isr: Sequence[int],
                     exclude: Iterable[int] = ()) -> tuple[int, tuple[int, ...], bool]:
        """``(leader, isr, unclean)`` by Kafka's rules (see the module docstring)."""
        skip = set(exclude)
        reps = self.assignments.get(tp, ())
        for r in reps:
            if r in isr and self._eligible(r) and r not in skip:
                return r, tuple(b for b in isr if b not in skip), False
        if self.unclean:
            for r in reps:
                if self._eligible(r) and r not in skip:
                    log.warning("UNCLEAN LEADER ELECTION for %s: no in-sync replica is alive "
                                "(ISR %s); broker %s, which is not in the ISR, becomes the "
                                "leader. Records committed by the old ISR may be LOST.",
                                tp, list(isr), r)
                    return r, (r,), True
        return -1, tuple(isr), False

    def _handle_failures(self, dead: set[int], extra: Iterable[TopicPartition] = ()) -> None:
        """Elect new leaders for partitions led by ``dead`` brokers (and ``extra`` ones) and
        drop dead brokers from every ISR; batched writes, then LeaderAndIsr."""
        t0 = time.monotonic()
        changes: dict[TopicPartition, PartitionState] = {}
        wanted = set(extra)
        for tp, st in self.states.items():
            if tp in wanted or st.leader in dead or dead.intersection(st.isr):
                new = self._failover_state(tp, st, dead)
                if new is not None:
                    changes[tp] = new
        if not changes:
            return
        writes_before = len(changes)
        written = self._write(changes, lambda tp, cur: self._failover_state(tp, cur, dead))
        t1 = time.monotonic()
        write_time = t1 - t0
        self._commit_states(written)
        # only decisions already in the store are sent (document 003: publish, then tell)
        self._send_leader_and_isr(written)
        t2 = time.monotonic()
        if dead:
            stats = FailoverStats(sorted(dead), len(written), write_time, t2 - t1, t2 - t0,
                                  writes_before if not self.batch else
                                  -(-writes_before // self.batch_size), self.batch)
            self.last_failover = stats
            log.info("controller %s: failover of brokers %s: %d partitions, store %.3fs, "
                     "brokers %.3fs", self.broker_id, sorted(dead), len(written),
                     stats.write_seconds, stats.send_seconds)
            for cb in list(self.failover_listeners):
                cb(stats)

    def _failover_state(self, tp: TopicPartition, st: PartitionState, dead: set[int]
                        ) -> PartitionState | None:
        isr = tuple(b for b in st.isr if b not in dead)
        if st.leader >= 0 and st.leader not in dead and self._eligible(st.leader):
            if isr == st.isr:
                return None
            return PartitionState(st.leader, st.leader_epoch, isr, self.epoch, st.version)
        leader, new_isr, _ = self.elect_leader(tp, isr)
        if leader < 0:
            keep = isr or ((st.leader,) if st.leader >= 0 else st.isr)
            if st.leader == -1 and keep == st.isr:
                return None
            return PartitionState(-1, st.leader_epoch + 1, keep, self.epoch, st.version)
        return PartitionState(leader, st.leader_epoch + 1, new_isr, self.epoch, st.version)

    def _write(self, changes: Mapping[TopicPartition, PartitionState],
               decide: Callable[[TopicPartition, PartitionState], PartitionState | None]
               ) -> dict[TopicPartition, PartitionState]:
        """Conditional writes; partitions whose version moved (a leader changed the ISR
        since the controller read it) are re-read and ``decide``d again on the fresh state."""
        written: dict[TopicPartition, PartitionState] = {}
        pending = dict(changes)
        for _ in range(5):
            done, failed = self.metadata.write_states(pending, batch=self.batch,
                                                      batch_size=self.batch_size,
                                                      guard=self._guard())
            written.update(done)
            if not failed:
                break
            pending = {}
            for tp in failed:
                cur = self.metadata.partition_state(tp)
                if cur is None:
                    continue
                self.states[tp] = cur
                again = decide(tp, cur)
                if again is not None:
                    pending[tp] = again
        return written

    def _commit_states(self, written: Mapping[TopicPartition, PartitionState]) -> None:
        for tp, st in written.items():
            old = self.states.get(tp)
            self.states[tp] = st
            if st.leader >= 0 and (old is None or old.leader != st.leader
                                   or old.leader_epoch != st.leader_epoch):
                self.hooks.leader_elected(tp, st.leader, st.leader_epoch, list(st.isr))
            if old is not None and old.isr != st.isr:
                self.hooks.isr_changed(tp, list(st.isr), st.leader_epoch)

    # ------------------------------------------------------------------ requests to brokers
    def _brokers_map(self) -> dict[str, str]:
        return {str(b): address_of(r) for b, r in self.live.items()}

    def _entry(self, tp: TopicPartition, st: PartitionState, log_dir: str | None = None
               ) -> dict[str, Any]:
        e: dict[str, Any] = {
            "topic": tp.topic, "partition": tp.partition, "leader": st.leader,
            "leader_epoch": st.leader_epoch, "isr": list(st.isr),
            "replicas": list(self.assignments.get(tp, ())), "version": st.version}
        topic_config = self.topic_configs.get(tp.topic)
        if topic_config:  # absent means none
            e["config"] = self.topic_config_policy.local_overrides(topic_config, tp.topic)
            e["topic_config"] = topic_config
        if log_dir is not None:
            e["log_dir"] = log_dir
        return e

    def _send_leader_and_isr(self, states: Mapping[TopicPartition, PartitionState],
                             to: Iterable[int] | None = None,
                             log_dirs: Mapping[tuple[TopicPartition, int], str] | None = None,
                             failures: dict[tuple[TopicPartition, int], str] | None = None,
                             new_replicas: Collection[tuple[TopicPartition, int]] = ()
                             ) -> dict[int, bool]:
        """Send LeaderAndIsr for ``states`` to their live replicas; returns which brokers
        answered. ``failures`` (when given) receives ``(partition, broker) -> reason`` for
        every replica a broker did not apply (its answer's per-partition error, or no answer).
        ``new_replicas``: the ``(partition, broker)`` replicas being created now (a new topic's,
        a reassignment's added ones): their entries carry ``is_new`` (Kafka's ``isNew``); a
        broker never creates a replica that is not new while one of its log dirs is offline.
        """
        per: dict[int, list[dict[str, Any]]] = {b: [] for b in self.live}
        only = set(to) if to is not None else None
        live = self.live
        for tp, st in states.items():
            shared = None  # one entry object for every broker, unless log dirs differ
            for b in self.assignments.get(tp, ()):
                if b in live and (only is None or b in only):
                    if log_dirs:
                        entry = self._entry(tp, st, log_dirs.get((tp, b)))
                    else:
                        entry = shared = shared or self._entry(tp, st)
                    if (tp, b) in new_replicas:
                        entry = {**entry, "is_new": True}
                    per[b].append(entry)
        sent = {b: e for b, e in per.items() if e}
        answers: dict[int, Mapping[str, Any]] | None = {} if failures is not None else None
        ok = self._broadcast(ApiKey.LEADER_AND_ISR, sent, answers=answers)
        if failures is not None and answers is not None:
            for b, entries in sent.items():
                if not ok.get(b):
                    for e in entries:
                        failures[(TopicPartition(e["topic"], e["partition"]), b)] = \
                            f"broker {b} did not answer"
                    continue
                for r in answers.get(b, {}).get("partitions", ()):
                    if int(r.get("error", 0)) != ErrorCode.NONE:
                        code = ErrorCode(int(r["error"])) if int(r["error"]) in \
                            ErrorCode._value2member_map_ else r["error"]
                        name = getattr(code, "name", code)
                        failures[(TopicPartition(r["topic"], int(r["partition"])), b)] = \
                            f"broker {b}: {name}: {r.get('message', '')}".rstrip(": ")
        return ok

    def _broadcast(self, api: ApiKey, per: Mapping[int, list[dict[str, Any]]],
                   extra: Mapping[str, Any] | None = None,
                   answers: dict[int, Mapping[str, Any]] | None = None) -> dict[int, bool]:
        brokers = self._brokers_map()
        fenced = sorted(self.shutting_down)  # leaders never add these to an ISR

        def send(b: int, parts: list[dict[str, Any]]) -> bool:
            reg = self.live.get(b)
            if reg is None:
                return False
            # a broker's share goes in requests of at most CONTROLLER_REQUEST_MAX_PARTITIONS
            # entries (the bound brokers hold controller requests to), one after another:
            # each request is answered within the request timeout
            n = CONTROLLER_REQUEST_MAX_PARTITIONS
            chunks = [parts[i:i + n] for i in range(0, len(parts), n)] or [parts]
            answered: list[Any] = []
            resp = None
            for chunk in chunks:
                body = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                        "brokers": brokers, "fenced": fenced, "partitions": chunk,
                        **(extra or {})}
                try:
                    resp = self.client.send(address_of(reg), api, body,
                                            timeout=self.request_timeout)
                except TransportError as exc:
                    log.warning("controller %s: %s to broker %s failed: %s", self.broker_id,
                                api.name, b, exc)
                    return False
                answered.extend(resp.body.get("partitions") or ())
            if answers is not None and resp is not None:
                answers[b] = {**resp.body, "partitions": answered}
            return True

        futures = {b: self._pool.submit(send, b, parts) for b, parts in per.items()}
        return {b: f.result() for b, f in futures.items()}

    def _send_full_state(self, to: Mapping[int, BrokerRegistration]) -> None:
        per: dict[int, list[dict[str, Any]]] = {b: [] for b in to}
        for tp, st in self.states.items():
            for b in self.assignments.get(tp, ()):
                if b in per:
                    per[b].append(self._entry(tp, st))
        self._broadcast(ApiKey.LEADER_AND_ISR, per)

    def _send_brokers_update(self, exclude: Iterable[int] = ()) -> None:
        skip = set(exclude)
        self._broadcast(ApiKey.LEADER_AND_ISR, {b: [] for b in self.live if b not in skip})

    # ------------------------------------------------------------------ topics
    def cluster_view(self) -> ClusterView:
        """The live brokers (shutting-down ones fenced) and the current assignments."""
        return ClusterView([BrokerInfo(b, r.rack, b in self.shutting_down)
                            for b, r in sorted(self.live.items())], self.assignments)

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     config: Mapping[str, str] | None = None, *,
                     broker_ids: Sequence[int] | None = None, force_simple: bool = False,
                     assignment: Mapping[int, Sequence[int]] | None = None,
                     validate_only: bool = False) -> dict[int, list[int]]:
        """Create ``topic`` through the configured placer; returns its partitions' replicas.
        Runs on the controller thread (use :meth:`call`), so of two concurrent creations of
        one name exactly one succeeds: creating never grows a topic that exists (growing is
        :meth:`add_partitions`, which names the new total). A manual ``assignment`` is
        checked like a placer's output (``validate_placement``: one replication factor,
        distinct registered brokers, ...). ``validate_only``: every check and the placement
        run, nothing is written or sent (Kafka's ``validateOnly``).

        Every count is checked against its bound (:mod:`kafka_tiers.placement.limits`) before
        anything is placed or written: a refusal raises
        :class:`~kafka_tiers.placement.limits.LimitExceededError` carrying its Kafka error code
        (``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``, ``POLICY_VIOLATION``,
        ``INVALID_REQUEST``).

        Raises:
            ApiError: ``TOPIC_ALREADY_EXISTS`` when ``topic`` exists (nothing is changed).
        """
        from kafka_tiers.log.names import validate_topic

        validate_topic(topic)
        if topic in self.topic_configs:
            raise ApiError(f"topic {topic!r} exists already", ErrorCode.TOPIC_ALREADY_EXISTS)
        return self._place_partitions(topic, 0, partitions, replication_factor, config,
                                      broker_ids=broker_ids, force_simple=force_simple,
                                      assignment=assignment, validate_only=validate_only)

    def add_partitions(self, topic: str, total: int, *,
                       broker_ids: Sequence[int] | None = None, force_simple: bool = False,
                       assignment: Sequence[Sequence[int]] | None = None,
                       validate_only: bool = False) -> dict[int, list[int]]:
        """Grow ``topic`` to ``total`` partitions (Kafka's CreatePartitions: the new count,
        not a number to add, so a repeated request never grows it twice); the new partitions
        keep the topic's replication factor and are placed by the configured placer
        (``start_partition`` continuing the topic) or by a manual ``assignment``: the
        replicas of each new partition, in order. Returns the new partitions' replicas. Runs
        on the controller thread (use :meth:`call`).

        Raises:
            ApiError: ``UNKNOWN_TOPIC_OR_PARTITION`` (no such topic), ``INVALID_PARTITIONS``
                (``total`` not above the current count: partitions are never removed),
                ``INVALID_REPLICA_ASSIGNMENT`` (not one assignment per new partition, or
                another replication factor than the topic's); the bounds and checks of
                :meth:`create_topic`. Nothing is changed on a refusal.
        """
        if topic not in self.topic_configs:
            raise ApiError(f"unknown topic {topic!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        existing = sum(1 for tp in self.assignments if tp.topic == topic)
        total = as_count(total, f"the partition count of topic {topic}", minimum=1,
                         error_code="INVALID_PARTITIONS")
        if total <= existing:
            raise ApiError(f"topic {topic} has {existing} partitions: the new count {total} "
                           "must be above it (partitions are never removed)",
                           ErrorCode.INVALID_PARTITIONS)
        rf = len(self.assignments.get(TopicPartition(topic, 0), ())) or 1
        plan = None
        if assignment is not None:
            given = check_request_entries(self.core.config, assignment,
                                          f"assignments of {topic}")
            if len(given) != total - existing:
                raise ApiError(f"topic {topic}: {len(given)} assignments for "
                               f"{total - existing} new partitions (partitions {existing} to "
                               f"{total - 1})", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            odd = sorted({len(r) for r in given} - {rf})
            if odd:
                raise ApiError(f"topic {topic} has replication factor {rf}; the assignments "
                               f"of the new partitions give {odd} replicas (one factor per "
                               "topic)", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            plan = {existing + i: reps for i, reps in enumerate(given)}
        return self._place_partitions(topic, existing, total - existing, rf, None,
                                      broker_ids=broker_ids, force_simple=force_simple,
                                      assignment=plan, validate_only=validate_only)

    def _place_partitions(self, topic: str, existing: int, partitions: int,
                          replication_factor: int, config: Mapping[str, str] | None, *,
                          broker_ids: Sequence[int] | None, force_simple: bool,
                          assignment: Mapping[int, Sequence[int]] | None,
                          validate_only: bool) -> dict[int, list[int]]:
        """Place, write and start ``partitions`` new partitions of ``topic`` after its
        ``existing`` ones (a new topic, 0, or more partitions of an existing one:
        :meth:`create_topic` and :meth:`add_partitions` decided which and counted them)."""
        exists = topic in self.topic_configs
        limits = self.core.config
        if assignment is not None:
            if not isinstance(assignment, Mapping):
                raise LimitExceededError("assignment must map partitions to replica lists",
                                         key="", limit=0, value=None,
                                         error_code="INVALID_REQUEST")
            check_new_partitions(limits, len(assignment), existing=existing, topic=topic)
        else:  # the checked counts from here on (a string of digits is converted once)
            partitions = check_new_partitions(limits, partitions, existing=existing,
                                              topic=topic)
            replication_factor = check_replication_factor(limits, replication_factor)
        if broker_ids is not None:
            check_request_entries(limits, broker_ids, "broker ids")
        if not exists:
            config = self.topic_config_policy.validate(topic, config)
        view = self.cluster_view()
        if assignment is not None:
            plan = {}
            for p, r in assignment.items():
                index = check_partition_index(limits, p, f"partition of topic {topic}")
                reps = check_request_entries(limits, r, f"replicas of {topic}-{index}")
                check_replication_factor(limits, len(reps) or 1)
                plan[TopicPartition(topic, index)] = [
                    as_count(b, "a broker id", minimum=0,
                             error_code="INVALID_REPLICA_ASSIGNMENT") for b in reps]
            wanted = range(existing, existing + len(plan))  # Kafka: consecutive partitions
            if sorted(tp.partition for tp in plan) != list(wanted):
                raise ApiError(f"a manual assignment of {topic} must give partitions "
                               f"{wanted.start} to {wanted.stop - 1}, one each; got "
                               f"{sorted(tp.partition for tp in plan)[:10]}",
                               ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            self._check_manual_assignment(topic, existing, plan, view)
        else:
            plan = self.core.plan_topic(view, topic, partitions, replication_factor,
                                        broker_ids=broker_ids, force_simple=force_simple)
        check_broker_partitions(limits, self._replica_counts(), plan.values())
        if validate_only:
            return {tp.partition: list(r) for tp, r in plan.items()}
        states: dict[int, PartitionState] = {}
        for tp, reps in plan.items():
            leader = next((b for b in reps if self._eligible(b)), -1)
            isr = tuple(b for b in reps if b in self.live)
            states[tp.partition] = PartitionState(leader, 0, isr, self.epoch, 0)
        if exists:
            cur = self.metadata.topic(topic)
            assert cur is not None
            parts = dict(cur.partitions)
            parts.update({tp.partition: tuple(r) for tp, r in plan.items()})
            asg = TopicAssignment(topic, parts, cur.config, cur.version,
                                  cur.topic_id or new_topic_id())
        else:
            asg = TopicAssignment(topic, {tp.partition: tuple(r) for tp, r in plan.items()},
                                  dict(config or {}), topic_id=new_topic_id())
        try:
            self.store.multi([self._guard(), *self.metadata.create_topic_ops(asg, states,
                                                                             exists=exists)])
        except NodeExistsError:
            raise ApiError(f"topic {topic!r} exists already",
                           ErrorCode.TOPIC_ALREADY_EXISTS) from None
        except BadVersionError as exc:
            if exc.path == CONTROLLER_EPOCH:
                raise ControllerMovedError("another controller was elected") from None
            raise
        self._count_replicas(plan.values())
        self.topic_configs[topic] = dict(asg.config)
        new_states = {}
        for tp, reps in plan.items():
            self.assignments[tp] = tuple(reps)
            new_states[tp] = states[tp.partition]
        self._commit_states(new_states)
        failures: dict[tuple[TopicPartition, int], str] = {}
        self._send_leader_and_isr(new_states, failures=failures,
                                  new_replicas={(tp, b) for tp, r in plan.items() for b in r})
        self.core.topic_created(topic, {tp: r for tp, r in plan.items()})
        self._refuse_uncreated(topic, plan, failures)
        return {tp.partition: list(r) for tp, r in plan.items()}

    def _check_manual_assignment(self, topic: str, existing: int,
                                 plan: Mapping[TopicPartition, Sequence[int]],
                                 view: ClusterView) -> None:
        """A manual assignment is checked like a placer's output (``validate_placement``):
        one replication factor for every partition given, distinct registered brokers, an
        unfenced leader; a broker that is registered but not live is refused too (its replica
        could not be created).

        Raises:
            InvalidReplicaAssignmentError: the first rule broken, naming the partition.
        """
        from kafka_tiers.api.errors import InvalidReplicaAssignmentError
        from kafka_tiers.api.placement import PlacementSpec
        from kafka_tiers.placement.validation import validate_placement

        ordered = [list(plan[TopicPartition(topic, existing + i)]) for i in range(len(plan))]
        rf = len(ordered[0]) if ordered else 0
        if rf < 1:
            raise InvalidReplicaAssignmentError(
                f"manual assignment: partition {existing}: no replicas given", partition=existing)
        spec = PlacementSpec(len(ordered), rf, existing, topic)
        try:
            validate_placement(ordered, spec, view)
        except InvalidReplicaAssignmentError as exc:
            raise InvalidReplicaAssignmentError(
                "manual assignment" + str(exc).removeprefix("placement"),
                partition=exc.partition) from None
        for i, reps in enumerate(ordered):
            down = sorted(b for b in reps if b not in self.live)
            if down:
                raise InvalidReplicaAssignmentError(
                    f"manual assignment: partition {existing + i}: brokers {down} of "
                    f"replicas {reps} are not live (live: {sorted(self.live)})",
                    partition=existing + i)

    def _refuse_uncreated(self, topic: str, plan: Mapping[TopicPartition, Sequence[int]],
                          failures: Mapping[tuple[TopicPartition, int], str]) -> None:
        """CreateTopics never answers OK for a partition no replica could be created for:
        raises ``KAFKA_STORAGE_ERROR`` (retriable in Kafka's clients) naming those partitions
        and the first broker's reason. The topic stays in the metadata (as in Kafka, whose
        failed replicas show as offline partitions); a partition with at least one created
        replica is served and only under-replicated.

        Raises:
            ApiError: ``KAFKA_STORAGE_ERROR`` when some partition has no created replica.
        """
        dead = [tp for tp, reps in plan.items()
                if reps and all((tp, b) in failures or b not in self.live for b in reps)]
        if not dead:
            return
        dead.sort(key=lambda tp: tp.partition)
        first = dead[0]
        reason = next((failures[(first, b)] for b in plan[first] if (first, b) in failures),
                      "no live replica")
        shown = ", ".join(str(tp.partition) for tp in dead[:10]) + (
            f" and {len(dead) - 10} more" if len(dead) > 10 else "")
        log.error("controller %s: %d of %d new partitions of %s could not be created on any "
                  "replica: %s", self.broker_id, len(dead), len(plan), topic, reason)
        raise ApiError(
            f"topic {topic!r}: {len(dead)} of {len(plan)} partitions could not be created on "
            f"any replica (partitions {shown}; {reason}); they stay offline until a replica "
            "can be created: free the resource named, then restart that broker",
            ErrorCode.KAFKA_STORAGE_ERROR)

    def _replica_counts(self) -> dict[int, int]:
        """Replicas each broker holds (counted once, then kept up to date by creations;
        reset when assignments are reloaded, moved or deleted)."""
        if self._held is None:
            held: dict[int, int] = {}
            for reps in self.assignments.values():
                for b in reps:
                    held[b] = held.get(b, 0) + 1
            self._held = held
        return self._held

    def _count_replicas(self, new_replicas: Iterable[Sequence[int]]) -> None:
        if self._held is not None:
            for reps in new_replicas:
                for b in reps:
                    self._held[b] = self._held.get(b, 0) + 1

    def delete_topic(self, topic: str) -> None:
        """StopReplica (delete) to every replica, then remove the topic's nodes.

        A tiered topic's remote data goes first (document 004): its replicas are stopped
        (StopReplica without delete: no copy runs any more), then every remote segment of
        every partition is deleted through :attr:`remote_deleter`; should that fail, the
        replicas are restarted (LeaderAndIsr of their current states), the topic stays and
        ``KAFKA_STORAGE_ERROR`` is raised (repeat the deletion). Only then are the local
        replicas deleted and the nodes removed.

        Raises:
            ApiError: ``UNKNOWN_TOPIC_OR_PARTITION``; ``KAFKA_STORAGE_ERROR`` (see above).
        """
        if topic not in self.topic_configs:
            raise ApiError(f"unknown topic {topic!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        tps = [tp for tp in self.assignments if tp.topic == topic]
        per: dict[int, list[dict[str, Any]]] = {}
        for tp in tps:
            for b in self.assignments[tp]:
                per.setdefault(b, []).append({"topic": tp.topic, "partition": tp.partition})
        live_per = {b: p for b, p in per.items() if b in self.live}
        tiered = str(self.topic_configs[topic].get("remote.storage.enable", "")
                     ).strip().lower() == "true"
        if tiered and self.remote_deleter is not None:
            self._broadcast(ApiKey.STOP_REPLICA, live_per, {"delete": False})
            try:
                self.remote_deleter(topic, sorted(tps))
            except Exception as exc:
                self._send_leader_and_isr({tp: self.states[tp] for tp in tps
                                           if tp in self.states})
                raise ApiError(f"the remote data of topic {topic!r} could not be deleted "
                               f"({exc}); the topic stays: repeat the deletion once the "
                               "remote tier answers", ErrorCode.KAFKA_STORAGE_ERROR) from None
        elif tiered:
            log.warning("controller %s: topic %s is tiered but this broker has no remote "
                        "tier: its remote data is left in place", self.broker_id, topic)
        self._broadcast(ApiKey.STOP_REPLICA, live_per, {"delete": True})
        self.metadata.delete_topic(topic)
        for tp in tps:
            self.assignments.pop(tp, None)
            self._held = None
            self.states.pop(tp, None)
            self.reassigning.pop(tp, None)
        self.topic_configs.pop(topic, None)

    def alter_topic_config(self, topic: str,
                           update: Callable[[dict[str, str]], Mapping[str, str]], *,
                           validate_only: bool = False) -> dict[str, str]:
        """Replace a topic's config with ``update(current config)``, validated by the topic
        config policy as a new topic's; written to the topic's node (at its version, under
        the controller epoch guard), then sent to every live replica as a LeaderAndIsr of
        the partitions' current states (the same leader epoch: no role changes; the broker
        applies the new local log overrides and tiering settings at once). Runs on the
        controller thread (use :meth:`call`). Returns the new config (also with
        ``validate_only``, when nothing is written or sent).

        Raises:
            ApiError: ``UNKNOWN_TOPIC_OR_PARTITION``.
            ConfigError: ``update`` or the policy refused the new config.
        """
        if topic not in self.topic_configs:
            raise ApiError(f"unknown topic {topic!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = dict(self.topic_configs[topic])
        new = self.topic_config_policy.validate(topic, update(dict(current)))
        if validate_only or new == current:
            return new
        for _ in range(5):
            asg = self.metadata.topic(topic)
            if asg is None:
                raise ApiError(f"unknown topic {topic!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            stored = TopicAssignment(topic, asg.partitions, new, asg.version,
                                     asg.topic_id or new_topic_id())
            try:
                self.store.multi([self._guard(), Op.set(topic_path(topic), stored.to_json(),
                                                        asg.version)])
            except BadVersionError as exc:
                if exc.path == CONTROLLER_EPOCH:
                    raise ControllerMovedError("another controller was elected") from None
                continue
            break
        else:
            raise MetadataStoreError(f"could not update the config of topic {topic}")
        self.topic_configs[topic] = dict(new)
        log.info("controller %s: topic %s config is now %s", self.broker_id, topic, new)
        tps = [tp for tp in self.assignments if tp.topic == topic]
        states: dict[TopicPartition, PartitionState] = {}
        for tp, st in self.metadata.partition_states(tps).items():
            if st is not None:
                self.states[tp] = states[tp] = st
        self._send_leader_and_isr(states)
        return new

    def _delete_requested_topics(self) -> None:
        """Document 003's topic deletion path: ``/admin/delete_topics/<topic>`` nodes written
        by an admin; each topic is deleted, then its request node. A tiered topic whose
        remote data cannot be deleted now keeps its request node and is tried again in 5 s."""
        for topic in self.store.children_or_empty(DELETE_TOPICS):
            if topic in self.topic_configs:
                log.info("controller %s: deleting topic %s (admin request)", self.broker_id,
                         topic)
                try:
                    self.delete_topic(topic)
                except ApiError as exc:
                    log.warning("controller %s: deleting topic %s failed (%s); retrying in "
                                "5 s", self.broker_id, topic, exc)
                    self.enqueue_later(TopicDeletionsRequested(), 5.0)
                    continue
            with contextlib.suppress(NoNodeError):
                self.store.delete(f"{DELETE_TOPICS}/{topic}")

    def create_replica_placement(self, partitions: int, replication_factor: int, *,
                                 force_simple: bool = False,
                                 broker_ids: Sequence[int] | None = None,
                                 start_partition: int = 0, topic: str | None = None
                                 ) -> list[list[int]]:
        """Document 001's admin operation: a placement from the cluster's placer for the
        live cluster, recorded nowhere."""
        return self.core.create_replica_placement(
            self.cluster_view(), partitions, replication_factor, force_simple=force_simple,
            broker_ids=broker_ids, start_partition=start_partition, topic=topic)

    # ------------------------------------------------------------------ elections
    def elect_preferred(self, tps: Iterable[TopicPartition] | None) -> dict[str, str]:
        """Move leadership to the preferred (first assigned) replica where it is alive and
        in the ISR (:meth:`elect_leaders`' preferred election); returns ``{partition:
        outcome}`` in words.

        Raises:
            LimitExceededError: ``INVALID_REQUEST``: more partitions than
                ``max.request.partitions``.
        """
        out: dict[str, str] = {}
        for tp, (code, _, old) in self._elections(tps, unclean=False).items():
            if code == 0:
                out[str(tp)] = f"leader {old} -> {self.assignments[tp][0]}"
            elif code == ErrorCode.ELECTION_NOT_NEEDED:
                out[str(tp)] = "election not needed"
            elif code == PREFERRED_LEADER_NOT_AVAILABLE:
                out[str(tp)] = (f"preferred replica {self.assignments[tp][0]} not alive or "
                                "not in the ISR")
            elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                out[str(tp)] = "unknown partition"
            else:
                out[str(tp)] = "not elected (the state kept changing)"
        return out

    def elect_leaders(self, tps: Iterable[TopicPartition] | None, unclean: bool = False
                      ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Kafka's ElectLeaders (KIP-460), run on the controller's thread (:meth:`call`).

        Preferred (``unclean`` False): the leadership moves to the first assigned replica
        when it is alive and in the ISR. Unclean (on request, whatever
        ``unclean.leader.election.enable`` says): a partition without a leader gets the first
        live ISR replica, or, only when no ISR replica is alive, the first live replica
        outside the ISR (a WARNING names it: records committed by the old ISR may be lost).

        Args:
            tps: the partitions; None: every partition.

        Returns:
            ``{partition: (Kafka error code, message or None)}``: 0 (elected),
            ``ELECTION_NOT_NEEDED`` (already the preferred leader; unclean: it has a leader),
            ``PREFERRED_LEADER_NOT_AVAILABLE``, ``ELIGIBLE_LEADERS_NOT_AVAILABLE``,
            ``UNKNOWN_TOPIC_OR_PARTITION``, or ``REQUEST_TIMED_OUT`` when the state kept
            changing under the store writes.

        Raises:
            LimitExceededError: ``INVALID_REQUEST``: more partitions than
                ``max.request.partitions``.
        """
        return {tp: (code, msg)
                for tp, (code, msg, _) in self._elections(tps, unclean).items()}

    def _elections(self, tps: Iterable[TopicPartition] | None, unclean: bool
                   ) -> dict[TopicPartition, tuple[int, str | None, int]]:
        """:meth:`elect_leaders`, each answer with the leader the partition had before it."""
        if tps is not None:
            tps = check_request_entries(self.core.config, list(tps), "partitions to elect")
        out: dict[TopicPartition, tuple[int, str | None, int]] = {}
        changes: dict[TopicPartition, PartitionState] = {}

        def decide(tp: TopicPartition, st: PartitionState) -> PartitionState | None:
            reps = self.assignments[tp]
            if not unclean:
                pref = reps[0]
                if st.leader == pref:
                    out[tp] = (int(ErrorCode.ELECTION_NOT_NEEDED),
                               f"broker {pref} is already the preferred leader", st.leader)
                elif pref in st.isr and self._eligible(pref):
                    out[tp] = (0, None, st.leader)
                    return PartitionState(pref, st.leader_epoch + 1, st.isr, self.epoch,
                                          st.version)
                else:
                    out[tp] = (PREFERRED_LEADER_NOT_AVAILABLE,
                               f"the preferred replica {pref} is not alive or not in the ISR "
                               f"{list(st.isr)}", st.leader)
                return None
            if st.leader >= 0 and self._eligible(st.leader):
                out[tp] = (int(ErrorCode.ELECTION_NOT_NEEDED),
                           f"broker {st.leader} leads it: an unclean election is only for a "
                           "partition without a leader", st.leader)
                return None
            clean = next((r for r in reps if r in st.isr and self._eligible(r)), -1)
            if clean >= 0:
                out[tp] = (0, None, st.leader)
                return PartitionState(clean, st.leader_epoch + 1, st.isr, self.epoch,
                                      st.version)
            live = next((r for r in reps if self._eligible(r)), -1)
            if live < 0:
                out[tp] = (ELIGIBLE_LEADERS_NOT_AVAILABLE,
                           f"no replica of {list(reps)} is alive", st.leader)
                return None
            log.warning("UNCLEAN LEADER ELECTION for %s (requested): no in-sync replica is "
                        "alive (ISR %s); broker %s, which is not in the ISR, becomes the "
                        "leader. Records committed by the old ISR may be LOST.", tp,
                        list(st.isr), live)
            out[tp] = (0, None, st.leader)
            return PartitionState(live, st.leader_epoch + 1, (live,), self.epoch, st.version)

        for tp in (list(self.states) if tps is None else list(tps)):
            st = self.states.get(tp)
            if st is None or not self.assignments.get(tp):
                out[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                           f"unknown partition {tp}", -1)
                continue
            # the ISR may be newer in the store (no read where the preferred replica leads
            # already: nothing to elect, whatever the ISR)
            fresh = st if not unclean and st.leader == self.assignments[tp][0] else \
                self.metadata.partition_state(tp)
            if fresh is not None:
                self.states[tp] = fresh
                new = decide(tp, fresh)
                if new is not None:
                    changes[tp] = new
        if changes:
            written = self._write(changes, decide)
            for tp in changes:
                if tp not in written and out.get(tp, (0, None, -1))[0] == 0:
                    out[tp] = (int(ErrorCode.REQUEST_TIMED_OUT),
                               "not elected: the partition's state kept changing; retry", -1)
            self._commit_states(written)
            self._send_leader_and_isr(written)
        return out

    def controlled_shutdown(self, broker_id: int) -> dict[str, Any]:
        """Move every leadership away from ``broker_id`` and drop it from the ISRs; returns
        the partitions it still leads (no other ISR replica)."""
        self.shutting_down.add(broker_id)
        changes: dict[TopicPartition, PartitionState] = {}

        def decide(tp: TopicPartition, st: PartitionState) -> PartitionState | None:
            if st.leader == broker_id:
                leader, isr, _ = self.elect_leader(tp, st.isr, exclude=[broker_id])
                if leader < 0:
                    return None
                return PartitionState(leader, st.leader_epoch + 1, isr, self.epoch, st.version)
            if broker_id in st.isr and st.leader >= 0:
                return PartitionState(st.leader, st.leader_epoch,
                                      tuple(b for b in st.isr if b != broker_id),
                                      self.epoch, st.version)
            return None

        for tp in list(self.states):
            if broker_id not in self.assignments.get(tp, ()):
                continue
            fresh = self.metadata.partition_state(tp)
            if fresh is None:
                continue
            self.states[tp] = fresh
            new = decide(tp, fresh)
            if new is not None:
                changes[tp] = new
        written = self._write(changes, decide) if changes else {}
        self._commit_states(written)
        self._send_leader_and_isr(written)
        self._send_brokers_update()  # every leader learns the broker is fenced
        # it stops following (so it cannot rejoin an ISR before it goes)
        following = [{"topic": tp.topic, "partition": tp.partition}
                     for tp, reps in self.assignments.items()
                     if broker_id in reps and tp in self.states
                     and self.states[tp].leader != broker_id]
        if following and broker_id in self.live:
            self._broadcast(ApiKey.STOP_REPLICA, {broker_id: following}, {"delete": False})
        remaining = [str(tp) for tp, st in self.states.items() if st.leader == broker_id]
        return {"remaining": remaining, "moved": len(written)}

    # ------------------------------------------------------------------ reassignment
    def _drive_reassignments(self) -> None:
        """Document 003 section F: AR+RAR, catch-up, leader move, old replicas removed."""
        entries, version = self.metadata.reassignments()
        if not entries and not self.reassigning:
            return
        finished: list[tuple[str, int]] = []
        for e in entries:
            tp = TopicPartition(e["topic"], int(e["partition"]))
            target = tuple(int(b) for b in e["replicas"])
            dirs = list(e.get("log_dirs") or ["any"] * len(target))
            if tp not in self.assignments or not target or len(set(target)) != len(target):
                log.error("controller %s: reassignment of %s to %s refused (unknown "
                          "partition or bad replica list)", self.broker_id, tp, list(target))
                finished.append((tp.topic, tp.partition))
                continue
            if self._reassign_step(tp, target, dirs):
                finished.append((tp.topic, tp.partition))
        if finished:
            self._remove_reassignments(finished, version)

    def _reassign_step(self, tp: TopicPartition, target: tuple[int, ...], dirs: list[str]
                       ) -> bool:
        ar = self.assignments[tp]
        log_dirs = {(tp, b): d for b, d in zip(target, dirs, strict=False) if d != "any"}
        cur = self.reassigning.get(tp)
        if cur is None or cur["target"] != target:
            if set(ar) == set(target) and ar[:1] == target[:1] and not log_dirs:
                self._set_assignment(tp, target)
                return True
            union = tuple(target) + tuple(b for b in ar if b not in target)
            self._set_assignment(tp, union)
            st = self.states[tp]
            self._send_leader_and_isr({tp: st}, log_dirs=log_dirs,
                                      new_replicas={(tp, b) for b in target if b not in ar})
            self.reassigning[tp] = {"target": target, "old": ar, "started": time.monotonic()}
            log.info("controller %s: reassigning %s from %s to %s", self.broker_id, tp,
                     list(ar), list(target))
            return False
        fresh = self.metadata.partition_state(tp)
        if fresh is None:
            return True
        self.states[tp] = st = fresh
        if not set(target) <= set(st.isr):
            return False  # still catching up
        leader = st.leader
        epoch = st.leader_epoch + 1
        if leader not in target or not self._eligible(leader):
            leader = next((b for b in target if b in st.isr and self._eligible(b)), -1)
            if leader < 0:
                return False
        new = PartitionState(leader, epoch, tuple(b for b in st.isr if b in target),
                             self.epoch, st.version)
        written = self._write({tp: new}, lambda _tp, _cur: None)
        if tp not in written:
            return False
        removed = [b for b in self.assignments[tp] if b not in target]
        self._set_assignment(tp, target)
        self._commit_states(written)
        self._send_leader_and_isr(written)
        if removed:
            self._broadcast(ApiKey.STOP_REPLICA,
                            {b: [{"topic": tp.topic, "partition": tp.partition}]
                             for b in removed if b in self.live}, {"delete": True})
        self.reassigning.pop(tp, None)
        log.info("controller %s: reassignment of %s to %s done", self.broker_id, tp,
                 list(target))
        return True

    def _give_topic_id(self, asg: TopicAssignment) -> TopicAssignment:
        """A topic created before topic ids existed gets one, once: written with the
        topic's node version (a concurrent rewrite wins and this is read again), under the
        controller epoch guard; returns the assignment as stored."""
        for _ in range(5):
            new = TopicAssignment(asg.topic, asg.partitions, asg.config, asg.version,
                                  new_topic_id())
            try:
                (_, version) = self.store.multi([self._guard(), Op.set(
                    topic_path(asg.topic), new.to_json(), asg.version)])
            except NoNodeError:  # deleted meanwhile: nothing to give an id to
                return asg
            except BadVersionError as exc:
                if exc.path == CONTROLLER_EPOCH:
                    raise ControllerMovedError("another controller was elected") from None
                again = self.metadata.topic(asg.topic)
                if again is None or again.topic_id is not None:
                    return again or asg
                asg = again
                continue
            log.info("controller %s: topic %s has topic id %s", self.broker_id, asg.topic,
                     new.topic_id)
            return TopicAssignment(asg.topic, asg.partitions, asg.config,
                                   int(version if version is not None else asg.version + 1),
                                   new.topic_id)
        return asg

    def _set_assignment(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        for _ in range(5):
            asg = self.metadata.topic(tp.topic)
            if asg is None:
                raise NoNodeError(f"topic {tp.topic} vanished", topic_path(tp.topic))
            parts = dict(asg.partitions)
            parts[tp.partition] = replicas
            new = TopicAssignment(tp.topic, parts, asg.config, asg.version,
                                  asg.topic_id or new_topic_id())
            try:
                self.store.multi([self._guard(), Op.set(topic_path(tp.topic), new.to_json(),
                                                        asg.version)])
            except BadVersionError as exc:
                if exc.path == CONTROLLER_EPOCH:
                    raise ControllerMovedError("another controller was elected") from None
                continue
            self.assignments[tp] = replicas
            self._held = None
            return
        raise MetadataStoreError(f"could not update the assignment of {tp}")

    def _remove_reassignments(self, done: list[tuple[str, int]], version: int) -> None:
        gone = set(done)
        for _ in range(5):
            entries, version = self.metadata.reassignments()
            left = [e for e in entries if (e["topic"], int(e["partition"])) not in gone]
            try:
                if left:
                    self.store.set(REASSIGN, {"version": 1, "partitions": left}, version)
                else:
                    self.store.delete(REASSIGN, version)
                return
            except (BadVersionError, NoNodeError):
                continue

    # ------------------------------------------------------------------ inspection
    def describe(self) -> dict[str, Any]:
        """The controller's view: brokers, partitions, reassignments, last failover."""
        return {
            "controller": self.broker_id, "epoch": self.epoch,
            "brokers": {str(b): {"address": address_of(r), "rack": r.rack,
                                 "shutting_down": b in self.shutting_down}
                        for b, r in sorted(self.live.items())},
            "partitions": [{"topic": tp.topic, "partition": tp.partition,
                            "replicas": list(self.assignments.get(tp, ())),
                            "leader": st.leader, "leader_epoch": st.leader_epoch,
                            "isr": list(st.isr)} for tp, st in sorted(self.states.items())],
            "reassigning": [str(tp) for tp in sorted(self.reassigning)],
        }


__all__ = [
    "BrokersChanged",
    "Call",
    "Controller",
    "ControllerEvent",
    "Elect",
    "FailoverStats",
    "ReassignmentsChanged",
    "Resign",
    "Tick",
    "TopicConfigPolicy",
    "TopicDeletionsRequested",
    "address_of",
]
