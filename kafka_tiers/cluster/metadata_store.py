"""The coordination interface of a cluster: a small tree of versioned nodes with sessions,
ephemeral nodes, conditional writes, atomic multi-writes and change notifications.

Two implementations share it: :class:`~kafka_tiers.cluster.zookeeper_store.ZooKeeperStore`
(a real ZooKeeper ensemble through kazoo) and
:class:`~kafka_tiers.cluster.embedded_store.EmbeddedStore` (one process, durable in a local
file). :class:`ClusterMetadata` builds document 003's layout on top of either:

``/cluster/id``                       ``{"version": "1", "id"}``: the cluster id (Kafka's),
                                      created once; every broker's log dirs carry it
``/controller``                       ephemeral ``{"broker_id", "epoch"}``
``/controller_epoch``                 ``{"epoch"}``, bumped by every new controller
``/brokers/ids/<id>``                 ephemeral ``{"host", "port", "rack"}``
``/brokers/topics/<topic>``           ``{"partitions": {"0": [1, 2, 3]}, "config": {...},
                                      "topic_id": "<uuid>"}``
``/brokers/topics/<topic>/partitions/<p>/state``
                                      ``{"leader", "leader_epoch", "isr", "controller_epoch"}``
``/admin/reassign_partitions``        ``{"version": 1, "partitions": [{"topic", "partition",
                                      "replicas", "log_dirs"}]}``
``/admin/delete_topics/<topic>``      a deletion request

Node data is JSON. Every write of a partition state is conditional on the version the writer
last read (zombie fencing, document 003 discussion 3).
"""

from __future__ import annotations

import abc
import base64
import contextlib
import enum
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import KafkaTiersError

#: Notification callback: called with the path that changed (from the store's own thread).
Watcher = Callable[[str], None]


class SessionEvent(enum.Enum):
    """What happened to a store session (given to :meth:`MetadataStore.on_session_event`)."""

    #: the session is gone and its ephemeral nodes with it
    EXPIRED = "expired"
    #: a new session replaced the expired one: the owner re-creates its ephemeral nodes
    RECONNECTED = "reconnected"


#: Session callback: called with each :class:`SessionEvent` (from the store's own thread).
SessionListener = Callable[[SessionEvent], None]


class MetadataStoreError(KafkaTiersError):
    """A metadata store operation failed (connection lost, session expired, bad data).

    Attributes:
        path: the node concerned, when known.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NoNodeError(MetadataStoreError):
    """The node does not exist."""


class NodeExistsError(MetadataStoreError):
    """A node of that path exists already."""


class BadVersionError(MetadataStoreError):
    """A conditional write found another version than the one expected."""


class NotEmptyError(MetadataStoreError):
    """A node with children cannot be deleted without ``recursive``."""


class SessionExpiredError(MetadataStoreError):
    """The session is gone (its ephemeral nodes were deleted)."""


@dataclass(frozen=True)
class Op:
    """One operation of an atomic :meth:`MetadataStore.multi`.

    Attributes:
        kind: ``"create"``, ``"set"``, ``"delete"`` or ``"check"``.
        path: the node.
        data: the JSON value for create/set.
        version: the expected version for set/delete/check (-1: any).
        ephemeral: for create.
    """

    kind: str
    path: str
    data: Any = None
    version: int = -1
    ephemeral: bool = False

    @staticmethod
    def create(path: str, data: Any, ephemeral: bool = False) -> Op:
        """Create ``path`` with ``data`` (fails when it exists)."""
        return Op("create", path, data, -1, ephemeral)

    @staticmethod
    def set(path: str, data: Any, version: int = -1) -> Op:
        """Replace the data of ``path`` when at ``version`` (-1: any)."""
        return Op("set", path, data, version)

    @staticmethod
    def delete(path: str, version: int = -1) -> Op:
        """Delete ``path`` (no children) when at ``version`` (-1: any)."""
        return Op("delete", path, None, version)

    @staticmethod
    def check(path: str, version: int) -> Op:
        """Fail the whole multi unless ``path`` is at ``version``."""
        return Op("check", path, None, version)


def encode(data: Any) -> bytes:
    """Node data as stored: compact JSON."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode(raw: bytes | None) -> Any:
    """The JSON value of a node (None for an empty node)."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MetadataStoreError(f"node data is not JSON: {str(exc)[:200]}") from None


def parent_of(path: str) -> str:
    """``/a/b`` -> ``/a``; ``/a`` -> ``/``."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


class MetadataStore(abc.ABC):
    """A session with a coordination service (see the module docstring).

    Contract shared by every implementation:

    * :meth:`start` opens the session; ephemeral nodes live as long as it. When the session
      expires the ephemeral nodes are deleted by the service and the callbacks given to
      :meth:`on_session_event` are called with :attr:`SessionEvent.EXPIRED` (then
      :attr:`SessionEvent.RECONNECTED` once a new session exists: the owner must re-create its
      ephemeral nodes).
    * Versions start at 0 on create and grow by one on every set; ``version=-1`` means any.
    * :meth:`multi` applies all operations or none (``BadVersionError``, ``NoNodeError``,
      ``NodeExistsError`` name the first failing one).
    * Watches are persistent: a children watch fires after any child is added or removed, a
      data watch after the node is created, changed or deleted. Callbacks run on the store's
      notification thread, one at a time; they must not block for long.
    """

    @abc.abstractmethod
    def start(self, timeout: float = 10.0) -> None:
        """Open the session. Raises ``MetadataStoreError`` when the service is unreachable."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the session (its ephemeral nodes go at once) and stop notifying. Idempotent."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int | str:
        """The current session's id."""

    @abc.abstractmethod
    def create(self, path: str, data: Any = None, *, ephemeral: bool = False,
               make_parents: bool = True) -> None:
        """Create a node. Raises ``NodeExistsError`` / ``NoNodeError`` (missing parent)."""

    @abc.abstractmethod
    def get(self, path: str) -> tuple[Any, int]:
        """``(data, version)``. Raises ``NoNodeError``."""

    @abc.abstractmethod
    def exists(self, path: str) -> int | None:
        """The node's version, or None when it does not exist."""

    @abc.abstractmethod
    def set(self, path: str, data: Any, version: int = -1) -> int:
        """Replace a node's data when its version is ``version`` (-1: any); returns the new
        version. Raises ``NoNodeError``, ``BadVersionError``."""

    @abc.abstractmethod
    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete a node (and its subtree when ``recursive``). Raises ``NoNodeError``,
        ``BadVersionError``, ``NotEmptyError``."""

    @abc.abstractmethod
    def children(self, path: str) -> list[str]:
        """The names of a node's children, sorted. Raises ``NoNodeError``."""

    @abc.abstractmethod
    def multi(self, ops: Sequence[Op]) -> list[int | None]:
        """Apply ``ops`` atomically; returns the new version of each set/create (None for
        delete/check). Raises the error of the first failing op; nothing is applied then."""

    def multi_many(self, batches: Sequence[Sequence[Op]]
                   ) -> list[list[int | None] | MetadataStoreError]:
        """Several independent :meth:`multi` calls, applied in order; each batch is atomic
        on its own. Returns each batch's result or its error. Implementations may pipeline
        them (one round trip's latency for all)."""
        out: list[list[int | None] | MetadataStoreError] = []
        for ops in batches:
            try:
                out.append(self.multi(ops))
            except MetadataStoreError as exc:
                out.append(exc)
        return out

    def get_many(self, paths: Sequence[str]) -> list[tuple[Any, int] | None]:
        """``get`` of several nodes (None for a missing one). Implementations may pipeline
        the reads."""
        return [self.get_or_none(p) for p in paths]

    @abc.abstractmethod
    def watch_children(self, path: str, callback: Watcher) -> None:
        """Call ``callback(path)`` whenever the children of ``path`` change (and once now)."""

    @abc.abstractmethod
    def watch_data(self, path: str, callback: Watcher) -> None:
        """Call ``callback(path)`` whenever ``path`` is created, changed or deleted (and once
        now)."""

    @abc.abstractmethod
    def on_session_event(self, callback: SessionListener) -> None:
        """Call ``callback(SessionEvent.EXPIRED)`` when the session is lost and
        ``callback(SessionEvent.RECONNECTED)`` when a new one replaced it."""

    # -------------------------------------------------------------- conveniences

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents (empty) when missing."""
        with contextlib.suppress(NodeExistsError):
            self.create(path, None, make_parents=True)

    def get_or_none(self, path: str) -> tuple[Any, int] | None:
        """``get`` or None when the node does not exist."""
        try:
            return self.get(path)
        except NoNodeError:
            return None

    def children_or_empty(self, path: str) -> list[str]:
        """``children`` or [] when the node does not exist."""
        try:
            return self.children(path)
        except NoNodeError:
            return []

    def __enter__(self) -> MetadataStore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------- document 003 layout

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
REASSIGN = "/admin/reassign_partitions"
DELETE_TOPICS = "/admin/delete_topics"


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<id>``."""
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>``."""
    return f"{TOPICS}/{topic}"


def state_path(tp: TopicPartition) -> str:
    """``/brokers/topics/<topic>/partitions/<p>/state``."""
    return f"{TOPICS}/{tp.topic}/partitions/{tp.partition}/state"


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as registered: id, address, rack, and ``incarnation`` (new at every
    registration, so a broker that died and registered again is told from one that stayed,
    even when the controller saw only the second registration)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    incarnation: str = ""
    #: the Kafka-protocol listeners clients are told of: ``(name, host, port)`` each
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The registration node's data."""
        return {"host": self.host, "port": self.port, "rack": self.rack,
                "incarnation": self.incarnation,
                "endpoints": [{"name": n, "host": h, "port": p} for n, h, p in self.endpoints]}

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """The advertised ``(host, port)`` of a Kafka listener name, or None."""
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


@dataclass(frozen=True)
class PartitionState:
    """The leader and ISR of a partition as stored (``version`` is the node's version).

    ``leader`` is -1 when the partition is offline (no eligible replica)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    version: int = -1

    def to_json(self) -> dict[str, Any]:
        return {"leader": self.leader, "leader_epoch": self.leader_epoch,
                "isr": list(self.isr), "controller_epoch": self.controller_epoch}

    @staticmethod
    def from_json(data: Mapping[str, Any], version: int) -> PartitionState:
        return PartitionState(int(data["leader"]), int(data["leader_epoch"]),
                              tuple(int(b) for b in data["isr"]),
                              int(data.get("controller_epoch", 0)), version)


def new_topic_id() -> str:
    """A new random topic id (a UUID in its canonical text form, never the all-zero one)."""
    while True:
        tid = uuid.uuid4()
        if tid.int > 1:  # Kafka reserves the zero UUID (no id) and UUID 1 (its metadata topic)
            return str(tid)


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment and topic-level config, as stored, and its topic id
    (a UUID string given at creation, stable for the topic's life; None only for a topic
    created before topic ids existed, until the controller gives it one). A writer that
    rewrites the node keeps ``topic_id`` (``dataclasses.replace`` does)."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    config: Mapping[str, str] = field(default_factory=dict)
    version: int = -1
    topic_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
            "config": dict(self.config)}
        if self.topic_id is not None:
            out["topic_id"] = self.topic_id
        return out

    @staticmethod
    def from_json(topic: str, data: Mapping[str, Any], version: int) -> TopicAssignment:
        parts = {int(p): tuple(int(b) for b in r) for p, r in data["partitions"].items()}
        tid = data.get("topic_id")
        return TopicAssignment(topic, parts, {str(k): str(v) for k, v in
                                              (data.get("config") or {}).items()}, version,
                               str(tid) if tid else None)


#: the most bytes of partition-state writes put in one multi (ZooKeeper refuses requests
#: above ``jute.maxbuffer``, 1 MiB by default)
MAX_MULTI_BYTES = 512 * 1024


class ControllerMovedError(MetadataStoreError):
    """Another broker is the controller (or became it meanwhile)."""


class ClusterMetadata:
    """Document 003's paths over any :class:`MetadataStore` (see the module docstring)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def ensure_layout(self) -> None:
        """Create the persistent parent nodes."""
        for path in (BROKER_IDS, TOPICS, "/admin", DELETE_TOPICS):
            self.store.ensure_path(path)

    def cluster_id(self) -> str:
        """The cluster id (``/cluster/id``, Kafka's layout), created by the first broker that
        asks (a random 22-character URL-safe base64 UUID, as Kafka makes one). Idempotent:
        every later call, from any broker, returns the same id.

        Raises:
            MetadataStoreError: the store failed, or the node holds no id.
        """
        got = self.store.get_or_none(CLUSTER_ID)
        if got is None:
            new = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            self.store.ensure_path("/cluster")
            with contextlib.suppress(NodeExistsError):
                self.store.create(CLUSTER_ID, {"version": "1", "id": new})
            got = self.store.get(CLUSTER_ID)
        data = got[0]
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
            raise MetadataStoreError(f"{CLUSTER_ID} holds no cluster id: {data!r}",
                                     path=CLUSTER_ID)
        return str(data["id"])

    # brokers
    def register_broker(self, reg: BrokerRegistration) -> None:
        """Create ``/brokers/ids/<id>`` (ephemeral). Raises ``NodeExistsError`` when a live
        session holds that id."""
        self.store.create(broker_path(reg.broker_id), reg.to_json(), ephemeral=True)

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        """Registered brokers by id."""
        out = {}
        for name in self.store.children_or_empty(BROKER_IDS):
            got = self.store.get_or_none(f"{BROKER_IDS}/{name}")
            if got is None or not isinstance(got[0], dict):
                continue
            data = got[0]
            endpoints = tuple((str(e["name"]), str(e["host"]), int(e["port"]))
                              for e in data.get("endpoints") or ()
                              if isinstance(e, dict) and {"name", "host", "port"} <= set(e))
            out[int(name)] = BrokerRegistration(int(name), str(data["host"]),
                                                int(data["port"]), data.get("rack"),
                                                str(data.get("incarnation", "")), endpoints)
        return out

    # controller
    def controller(self) -> tuple[int, int] | None:
        """``(broker id, controller epoch)`` of the current controller, or None."""
        got = self.store.get_or_none(CONTROLLER)
        if got is None or not isinstance(got[0], dict):
            return None
        return int(got[0]["broker_id"]), int(got[0]["epoch"])

    def try_become_controller(self, broker_id: int) -> int | None:
        """Create ``/controller`` (ephemeral) with the next controller epoch; the epoch when
        this broker won, None when another broker is the controller."""
        if self.store.exists(CONTROLLER) is not None:
            return None
        got = self.store.get_or_none(CONTROLLER_EPOCH)
        epoch = (int(got[0]["epoch"]) if got and got[0] else 0) + 1
        ops = [Op.create(CONTROLLER, {"broker_id": broker_id, "epoch": epoch}, ephemeral=True)]
        ops.append(Op.set(CONTROLLER_EPOCH, {"epoch": epoch}, got[1]) if got is not None
                   else Op.create(CONTROLLER_EPOCH, {"epoch": epoch}))
        try:
            self.store.multi(ops)
        except (NodeExistsError, BadVersionError):
            return None
        return epoch

    def controller_epoch(self) -> int:
        """The latest controller epoch (0 before the first controller)."""
        got = self.store.get_or_none(CONTROLLER_EPOCH)
        return int(got[0]["epoch"]) if got and got[0] else 0

    # topics
    def topics(self) -> list[str]:
        """Every topic's name."""
        return self.store.children_or_empty(TOPICS)

    def topic(self, topic: str) -> TopicAssignment | None:
        """A topic's assignment and config, or None."""
        got = self.store.get_or_none(topic_path(topic))
        if got is None or got[0] is None:
            return None
        return TopicAssignment.from_json(topic, got[0], got[1])

    def partition_states(self, tps: Sequence[TopicPartition]
                         ) -> dict[TopicPartition, PartitionState | None]:
        """Several partitions' states in one pipelined read."""
        got = self.store.get_many([state_path(tp) for tp in tps])
        return {tp: None if g is None or g[0] is None else PartitionState.from_json(*g)
                for tp, g in zip(tps, got, strict=True)}

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        """A partition's leader, epoch and ISR with the node version, or None."""
        got = self.store.get_or_none(state_path(tp))
        if got is None or got[0] is None:
            return None
        return PartitionState.from_json(got[0], got[1])

    def create_topic_ops(self, assignment: TopicAssignment,
                         states: Mapping[int, PartitionState], *, exists: bool = False
                         ) -> list[Op]:
        """The ops creating (or, with ``exists``, extending) a topic with its partition
        states."""
        ops = [Op.set(topic_path(assignment.topic), assignment.to_json(), assignment.version)
               if exists else Op.create(topic_path(assignment.topic), assignment.to_json())]
        base = topic_path(assignment.topic)
        if not exists:
            ops.append(Op.create(f"{base}/partitions", None))
        for p, st in sorted(states.items()):
            ops.append(Op.create(f"{base}/partitions/{p}", None))
            ops.append(Op.create(f"{base}/partitions/{p}/state", st.to_json()))
        return ops

    def write_states(self, states: Mapping[TopicPartition, PartitionState], *,
                     batch: bool = True, batch_size: int = 1000, guard: Op | None = None
                     ) -> tuple[dict[TopicPartition, PartitionState], list[TopicPartition]]:
        """Conditionally write partition states (each at the version it carries).

        With ``batch`` the writes go in atomic multis of ``batch_size``. A multi that fails on
        a version (a leader's ISR write landed first) is retried once without its stale
        states, found by reading the chunk's current versions in one batch; should that fail
        too (another write raced in), its states are written one by one, so the others still
        land. Without ``batch``, one write per partition. ``guard`` (the controller's check of
        its epoch node) goes into every write. Returns the states written (with their new
        versions) and the partitions whose write failed on a version (re-read them).

        Raises:
            ControllerMovedError: the guard failed (another controller was elected).
        """
        written: dict[TopicPartition, PartitionState] = {}
        failed: list[TopicPartition] = []
        items = sorted(states.items())
        head = [guard] if guard is not None else []

        def guarded(exc: MetadataStoreError) -> None:
            if guard is not None and exc.path == guard.path:
                raise ControllerMovedError("another controller was elected meanwhile",
                                           guard.path) from None

        def one(tp: TopicPartition, st: PartitionState) -> None:
            try:
                if head:
                    v = self.store.multi([*head, Op.set(state_path(tp), st.to_json(),
                                                        st.version)])[-1]
                else:
                    v = self.store.set(state_path(tp), st.to_json(), st.version)
            except (BadVersionError, NoNodeError) as exc:
                guarded(exc)
                failed.append(tp)
            else:
                written[tp] = _with_version(st, int(v or 0))

        if not batch:
            for tp, st in items:
                one(tp, st)
            return written, failed
        step = max(1, batch_size)
        chunks: list[list[tuple[TopicPartition, PartitionState]]] = [[]]
        size = 0
        for item in items:  # at most ``batch_size`` writes and MAX_MULTI_BYTES per multi
            cost = len(item[0].topic) + 120
            if chunks[-1] and (len(chunks[-1]) >= step or size + cost > MAX_MULTI_BYTES):
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += cost
        def ops(chunk: list[tuple[TopicPartition, PartitionState]]) -> list[Op]:
            return [*head, *(Op.set(state_path(tp), st.to_json(), st.version)
                             for tp, st in chunk)]

        def record(chunk: list[tuple[TopicPartition, PartitionState]],
                   result: list[int | None]) -> None:
            for (tp, st), v in zip(chunk, result[len(head):], strict=True):
                written[tp] = _with_version(st, int(v or 0))

        def without_stale(chunk: list[tuple[TopicPartition, PartitionState]]) -> None:
            current = self.store.get_many([state_path(tp) for tp, _ in chunk])
            fresh = []
            for (tp, st), got in zip(chunk, current, strict=True):
                if got is None or (st.version != -1 and got[1] != st.version):
                    failed.append(tp)
                else:
                    fresh.append((tp, st))
            if not fresh:
                return
            try:
                record(fresh, self.store.multi(ops(fresh)))
            except (BadVersionError, NoNodeError) as exc:  # raced again: one at a time
                guarded(exc)
                for tp, st in fresh:
                    one(tp, st)

        chunks = [chunk for chunk in chunks if chunk]  # nothing to write: no multi at all
        results = self.store.multi_many([ops(chunk) for chunk in chunks])
        for chunk, result in zip(chunks, results, strict=True):
            if isinstance(result, BadVersionError | NoNodeError):
                guarded(result)
                without_stale(chunk)
                continue
            if isinstance(result, MetadataStoreError):
                raise result
            record(chunk, result)
        return written, failed

    def delete_topic(self, topic: str) -> None:
        """Remove a topic's nodes (assignment and partition states)."""
        with contextlib.suppress(NoNodeError):
            self.store.delete(topic_path(topic), recursive=True)

    def request_topic_deletion(self, topic: str) -> None:
        """Write ``/admin/delete_topics/<topic>``; the controller deletes the topic and then
        the request."""
        with contextlib.suppress(NodeExistsError):
            self.store.create(f"{DELETE_TOPICS}/{topic}", None, make_parents=True)

    # reassignment
    def reassignments(self) -> tuple[list[dict[str, Any]], int]:
        """The pending reassignment entries and the node's version (-1: none pending)."""
        got = self.store.get_or_none(REASSIGN)
        if got is None or not got[0]:
            return [], -1 if got is None else got[1]
        return list(got[0].get("partitions", [])), got[1]

    def request_reassignment(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Add entries to ``/admin/reassign_partitions`` (created when missing); an entry
        replaces a pending one of the same partition."""
        new = [dict(e) for e in entries]
        for _ in range(20):
            got = self.store.get_or_none(REASSIGN)
            keys = {(e["topic"], int(e["partition"])) for e in new}
            if got is None:
                try:
                    self.store.create(REASSIGN, {"version": 1, "partitions": new})
                    return
                except NodeExistsError:
                    continue
            old = [e for e in (got[0] or {}).get("partitions", [])
                   if (e["topic"], int(e["partition"])) not in keys]
            try:
                self.store.set(REASSIGN, {"version": 1, "partitions": old + new}, got[1])
                return
            except (BadVersionError, NoNodeError):
                continue
        raise MetadataStoreError("could not write the reassignment request (contention)")


def _with_version(st: PartitionState, version: int) -> PartitionState:
    return PartitionState(st.leader, st.leader_epoch, st.isr, st.controller_epoch, version)


def make_store(config: Mapping[str, Any], *, embedded_server: Any = None) -> MetadataStore:
    """The store a broker config selects: ``metadata.store=embedded`` (with the given
    in-process :class:`~kafka_tiers.cluster.embedded_store.EmbeddedMetadataServer`, or one
    opened on ``metadata.dir``) or ``zookeeper`` (``zookeeper.connect``)."""
    kind = config["metadata.store"]
    timeout_ms = int(config["zookeeper.session.timeout.ms"])
    if kind == "zookeeper":
        from kafka_tiers.cluster.zookeeper_store import ZooKeeperStore

        connect = config["zookeeper.connect"]
        if not connect:
            from kafka_tiers.api.errors import ConfigError

            raise ConfigError("metadata.store=zookeeper needs zookeeper.connect",
                              key="zookeeper.connect")
        return ZooKeeperStore(connect, session_timeout_ms=timeout_ms)
    from kafka_tiers.cluster.embedded_store import EmbeddedMetadataServer, EmbeddedStore

    server = embedded_server
    if server is None:
        directory = config["metadata.dir"] or str(config["log.dirs"][0]) + "/metadata"
        server = EmbeddedMetadataServer.shared(directory)
    return EmbeddedStore(server, session_timeout_ms=timeout_ms)


__all__ = [
    "BROKER_IDS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "MAX_MULTI_BYTES",
    "REASSIGN",
    "TOPICS",
    "BadVersionError",
    "BrokerRegistration",
    "ClusterMetadata",
    "ControllerMovedError",
    "MetadataStore",
    "MetadataStoreError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "PartitionState",
    "SessionEvent",
    "SessionExpiredError",
    "SessionListener",
    "TopicAssignment",
    "Watcher",
    "broker_path",
    "decode",
    "encode",
    "make_store",
    "new_topic_id",
    "parent_of",
    "state_path",
    "topic_path",
]
