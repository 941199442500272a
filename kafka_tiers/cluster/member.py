"""The cluster membership of a broker: its metadata-store session and registration, its
transport endpoint, the replica manager, the controller role and the controlled shutdown.

A :class:`ClusterMember` is a part of the one broker (:class:`kafka_tiers.broker.Broker`), not a
broker of its own: the broker opens the logs, starts the remote tier, owns the hooks, the
metrics and the topic configuration, and hands the member what it needs (the log manager, a
role listener, a remote reader and the topic configuration for the controller). Nothing here
composes logs or the remote tier.

Startup (document 003 section E), in two steps the broker interleaves with its own:
:meth:`ClusterMember.open_session` opens the metadata-store session and learns the cluster id
(``/cluster/id``, created by the first broker; the broker checks its log dirs'
``meta.properties`` against it before loading them); :meth:`ClusterMember.join`
starts the replica manager and the endpoint, hands local replicas of partitions the store no
longer assigns to this broker to the log manager's stray-replica handling (renamed ``-delete``
with a WARN line, deleted after ``file.delete.delay.ms``; document 003 discussion 5),
registers ``/brokers/ids/<id>`` (ephemeral, with host, port and rack) and takes part in the
controller election; the controller then sends the broker its partitions' leaders and ISRs.
A broker whose session expired (a paused process) registers again when it runs again; the
controller then resends its state.

Shutdown: with ``controlled.shutdown.enable`` the broker first asks the controller to move
its leaderships away (ControlledShutdown, retried ``controlled.shutdown.max.retries`` times),
then stops. :meth:`ClusterMember.kill_session` is the abrupt in-process death (tests); a real
process is simply killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.controller import Controller, TopicConfigPolicy
from kafka_tiers.cluster.metadata_store import (
    BrokerRegistration,
    ClusterMetadata,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    SessionEvent,
    make_store,
)
from kafka_tiers.cluster.replica_manager import RemoteReader, ReplicaManager, RoleListener
from kafka_tiers.cluster.request_schemas import request_validator
from kafka_tiers.cluster.transport import (
    LOOPBACK,
    ApiError,
    ApiKey,
    Client,
    ErrorCode,
    HandlerTable,
    LoopbackClient,
    LoopbackNetwork,
    Request,
    Response,
    TcpClient,
    TcpServer,
    TransportError,
)
from kafka_tiers.cluster.transport_security import TlsChannel, channel_security
from kafka_tiers.config import BrokerConfig
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.placement.limits import as_count, check_reassignment_entries, check_request_entries
from kafka_tiers.placement.service import PlacementService
from kafka_tiers.plugins.hooks import Hooks

log = logging.getLogger(__name__)

#: host of in-process (loopback) brokers' addresses: ``inproc:<port>``.
INPROC_HOST = "inproc"


def listen_port(config: Mapping[str, Any]) -> int:
    """The internal transport's port (``port``; 0: any free port)."""
    return int(config["port"])


class ClusterMember:
    """The cluster part of one broker (see the module docstring).

    Args:
        config: the broker configuration.
        log_manager: the broker's logs (started).
        hooks: the broker's hook facade.
        topic_configs: the broker's topic configuration, for the controller.
        on_role: told every role change of a hosted replica (the broker's remote tier
            follows it).
        remote_reader: serves consumer reads below the local log of tiered partitions.
        network: run in-process on this loopback network instead of TCP on 127.0.0.1.
        embedded_server: the in-process embedded metadata server to use (``metadata.store=
            embedded``); by default the one of ``metadata.dir``.
        placer: a placer instance instead of ``broker.replica.placer`` (tests).
        remote_deleter: deletes a deleted tiered topic's remote data when this broker is the
            controller (:class:`~kafka_tiers.cluster.controller.Controller`).
    """

    def __init__(self, config: BrokerConfig, log_manager: LogManager, *, hooks: Hooks,
                 topic_configs: TopicConfigPolicy, on_role: RoleListener,
                 remote_reader: RemoteReader, network: LoopbackNetwork | None = None,
                 embedded_server: Any = None, placer: Any = None,
                 remote_deleter: Any = None) -> None:
        self.config = config
        self.remote_deleter = remote_deleter
        self.broker_id: int = int(config["broker.id"])
        self.rack: str | None = config["broker.rack"]
        self.log_manager = log_manager
        self.hooks = hooks
        self.topic_configs = topic_configs
        self.on_role = on_role
        self.remote_reader = remote_reader
        self.network = network
        self._embedded_server = embedded_server
        self._placer = placer
        self.core: PlacementService | None = None
        self.store: MetadataStore | None = None
        self.metadata: ClusterMetadata | None = None
        self.client: Client | None = None
        #: the internal transport's TLS (None: plaintext), from the inter-broker listener
        self.security: TlsChannel | None = None
        self.handlers = HandlerTable()
        self.server: TcpServer | None = None
        self.address = ""
        self.replicas: ReplicaManager | None = None
        self.controller: Controller | None = None
        self._register_lock = threading.Lock()
        self._stopping = False
        #: the cluster's id, known once :meth:`open_session` returned
        self.cluster_id: str | None = None
        #: the Kafka listeners registered for clients, ``(name, host, port)`` each (set by
        #: the broker before :meth:`join`)
        self.kafka_endpoints: tuple[tuple[str, str, int], ...] = ()

    # ------------------------------------------------------------------ lifecycle
    def open_session(self) -> None:
        """Open the metadata-store session (and the placement service and the client).

        Raises:
            MetadataStoreError: the store is unreachable.
            PluginError: the configured placer is unknown or cannot be loaded.
            ConfigError: the placer or the store settings are refused.
        """
        cfg = self.config
        # the inter-broker security first: a config it refuses stops the start here
        self.security = channel_security(cfg)
        if self.security is not None:
            self.handlers.require_authentication()
        self.core = PlacementService(cfg, hooks=self.hooks, placer=self._placer)
        # Every broker may become the controller, which places topics: a placer that cannot
        # be loaded refuses the start, not the first topic creation.
        _ = self.core.placer
        self.client = LoopbackClient(self.network) if self.network is not None \
            else TcpClient(security=self.security)
        self.store = make_store(cfg, embedded_server=self._embedded_server)
        self.store.start()
        self.metadata = ClusterMetadata(self.store)
        self.metadata.ensure_layout()
        self.cluster_id = self.metadata.cluster_id()

    def join(self, register_timeout: float | None = None) -> None:
        """Serve replicas, listen, register and take part in the controller election;
        returns once registered.

        Raises:
            MetadataStoreError: this broker id stays registered by another live session for
                ``register_timeout`` seconds (default: twice the session timeout plus 5 s).
        """
        cfg = self.config
        assert self.metadata is not None and self.client is not None and self.store is not None
        assert self.core is not None
        self.replicas = ReplicaManager(self.broker_id, self.log_manager, self.metadata,
                                       self.client, cfg, hooks=self.hooks,
                                       on_role=self.on_role, remote_reader=self.remote_reader)
        self._register_handlers()
        if self.network is not None:
            self.address = f"{INPROC_HOST}:{19000 + self.broker_id}"
            self.network.bind(self.address, self.handlers)
        else:
            self.server = TcpServer(self.handlers, listen_port(cfg),
                                    max_request_bytes=cfg["socket.request.max.bytes"],
                                    security=self.security).start()
            self.address = self.server.address
        self._delete_unassigned()
        self.controller = Controller(self.broker_id, self.metadata, self.client, self.core,
                                     topic_configs=self.topic_configs,
                                     remote_deleter=self.remote_deleter)
        self.store.on_session_event(self._on_session)
        timeout = register_timeout if register_timeout is not None else \
            cfg["zookeeper.session.timeout.ms"] / 1000.0 * 2 + 5
        self._register(timeout)
        self.controller.start()

    def topic_config(self, tp: TopicPartition) -> dict[str, str]:
        """The topic-level config of a hosted replica's topic, as the controller sent it
        (empty when the replica is not hosted here)."""
        part = self.replicas.partitions.get(tp) if self.replicas is not None else None
        return dict(part.topic_config) if part is not None else {}

    def assigned_partitions(self) -> set[TopicPartition]:
        """The partitions the metadata store assigns a replica of to this broker (after
        :meth:`open_session`): the only ones the log manager loads at start-up."""
        assert self.metadata is not None
        assigned: set[TopicPartition] = set()
        for topic in self.metadata.topics():
            asg = self.metadata.topic(topic)
            if asg is not None:
                assigned |= {TopicPartition(topic, p) for p, r in asg.partitions.items()
                             if self.broker_id in r}
        return assigned

    def _delete_unassigned(self) -> None:
        """Kafka's stray replicas: a loaded replica (a partition dir holding Kafka log files;
        nothing else in a log dir is ever a candidate) of a partition the store does not assign
        to this broker is renamed ``-delete`` and deleted after ``file.delete.delay.ms``, with
        a WARN line (:meth:`LogManager.delete_stray_replica`)."""
        assigned = self.assigned_partitions()
        for tp in list(self.log_manager.logs):
            if tp not in assigned:
                self.log_manager.delete_stray_replica(tp)

    def _registration(self) -> BrokerRegistration:
        host, _, port = self.address.rpartition(":")
        return BrokerRegistration(self.broker_id, host, int(port), self.rack,
                                  uuid.uuid4().hex, self.kafka_endpoints)

    def _register(self, timeout: float) -> None:
        assert self.metadata is not None
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self._register_lock:
                    self.metadata.register_broker(self._registration())
                return
            except NodeExistsError:
                if time.monotonic() > deadline:
                    raise MetadataStoreError(
                        f"broker id {self.broker_id} is registered by another live broker "
                        f"(or a dead one whose session has not expired yet)") from None
                time.sleep(0.1)

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.RECONNECTED and not self._stopping:
            log.info("broker %s: new session; registering again", self.broker_id)
            threading.Thread(target=self._reregister, daemon=True,
                             name=f"reregister-{self.broker_id}").start()

    def _reregister(self) -> None:
        try:
            self._register(self.config["zookeeper.session.timeout.ms"] / 1000.0 * 2 + 5)
        except MetadataStoreError as exc:
            log.error("broker %s: cannot register again: %s", self.broker_id, exc)

    def leave(self, controlled: bool) -> None:
        """Stop re-registering; first, with ``controlled``, move this broker's leaderships
        away through the controller (retried ``controlled.shutdown.max.retries`` times)."""
        self._stopping = True
        if controlled and self.metadata is not None and self.client is not None:
            self._controlled_shutdown()

    def kill_session(self) -> None:
        """Die abruptly (in-process tests): stop answering and lose the session at once."""
        self._stopping = True
        if self.network is not None and self.address:
            self.network.unbind(self.address)
        expire = getattr(self.store, "expire_now", None)
        if expire is not None:
            expire()

    def pause(self) -> None:
        """Freeze like SIGSTOP (in-process tests): no answers, no heartbeats, no fetching."""
        if self.network is not None:
            self.network.pause(self.address)
        if self.replicas is not None:
            self.replicas.paused.set()
        suspend = getattr(self.store, "suspend", None)
        if suspend is not None:
            suspend()
        if self.controller is not None:
            self.controller.paused.set()

    def resume(self) -> None:
        """Continue after :meth:`pause` (like SIGCONT)."""
        if self.controller is not None:
            self.controller.paused.clear()
        resume = getattr(self.store, "resume", None)
        if resume is not None:
            resume()
        if self.replicas is not None:
            self.replicas.paused.clear()
        if self.network is not None:
            self.network.resume(self.address)

    def _controlled_shutdown(self) -> None:
        assert self.metadata is not None and self.client is not None
        try:
            others = set(self.metadata.live_brokers()) - {self.broker_id}
        except MetadataStoreError:
            others = {-1}  # unknown: try the controller as usual
        if not others:
            log.info("broker %s: controlled shutdown: no other live broker can lead its "
                     "partitions; stopping", self.broker_id)
            return
        retries = int(self.config["controlled.shutdown.max.retries"])
        for attempt in range(retries + 1):
            try:
                ctl = self.metadata.controller()
                if ctl is None:
                    raise TransportError("no controller", ErrorCode.NOT_CONTROLLER)
                if ctl[0] == self.broker_id and self.controller is not None:
                    result = self.controller.call(self._move_leaders_here)
                else:
                    addr = self.metadata.live_brokers().get(ctl[0])
                    if addr is None:
                        raise TransportError("controller not registered",
                                             ErrorCode.NOT_CONTROLLER)
                    result = self.client.send(f"{addr.host}:{addr.port}",
                                              ApiKey.CONTROLLED_SHUTDOWN,
                                              {"broker_id": self.broker_id},
                                              timeout=10).body
                if not result.get("remaining"):
                    log.info("broker %s: controlled shutdown done (%s leaderships moved)",
                             self.broker_id, result.get("moved"))
                    return
                log.warning("broker %s: controlled shutdown attempt %d: still leading %s",
                            self.broker_id, attempt + 1, result["remaining"][:5])
            except (TransportError, MetadataStoreError) as exc:
                log.warning("broker %s: controlled shutdown attempt %d failed: %s",
                            self.broker_id, attempt + 1, exc)
            time.sleep(0.2)

    def _move_leaders_here(self) -> dict[str, Any]:
        assert self.controller is not None
        return self.controller.controlled_shutdown(self.broker_id)

    def stop(self) -> None:
        """Stop the controller, the endpoint, the replica manager, the store session, the
        client and the placement service (the broker stops its remote tier and logs after
        this). Safe to call twice."""
        self._stopping = True
        if self.controller is not None:
            self.controller.stop()
        if self.network is not None and self.address:
            self.network.unbind(self.address)
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.replicas is not None:
            self.replicas.shutdown()
        if self.store is not None:
            with contextlib.suppress(MetadataStoreError):
                self.store.close()
        if self.client is not None:
            self.client.close()
        if self.core is not None:
            self.core.close()

    # ------------------------------------------------------------------ request handlers
    def _register_handlers(self) -> None:
        """Every api with its handler and its body schema (a key without a schema in
        :data:`~kafka_tiers.cluster.request_schemas.REQUEST_SCHEMAS` fails here, at start)."""
        served: dict[ApiKey, Any] = {
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._epoch_end,
            ApiKey.LEADER_AND_ISR: self._leader_and_isr,
            ApiKey.STOP_REPLICA: self._stop_replica,
            ApiKey.METADATA: self._metadata,
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.CREATE_PARTITIONS: self._create_partitions,
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.CREATE_REPLICA_PLACEMENT: self._placement,
            ApiKey.ELECT_LEADERS: self._elect_leaders,
            ApiKey.CONTROLLED_SHUTDOWN: self._controlled_shutdown_request,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self._alter_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self._list_reassignments,
            ApiKey.DESCRIBE_LOG_DIRS: self._describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: self._alter_log_dirs,
        }
        for key, handler in served.items():
            self.handlers.register(key, handler,
                                   validate=request_validator(key, self.config))

    def _rm(self) -> ReplicaManager:
        if self.replicas is None:
            raise ApiError("broker not started", ErrorCode.BROKER_NOT_AVAILABLE)
        return self.replicas

    def _ctl(self) -> Controller:
        if self.controller is None:
            raise ApiError("broker not started", ErrorCode.BROKER_NOT_AVAILABLE)
        return self.controller

    def _produce(self, req: Request) -> Response:
        b = req.body
        tp = TopicPartition(b["topic"], int(b["partition"]))
        timeout = b.get("timeout_ms")
        first, last = self._rm().produce(tp, req.payload, int(b.get("acks", -1)),
                                         None if timeout is None else int(timeout) / 1000.0)
        return Response({"base_offset": first, "last_offset": last})

    def _fetch(self, req: Request) -> Response:
        body, payload = self._rm().fetch(req.body)
        return Response(body, payload)

    def _epoch_end(self, req: Request) -> Response:
        return Response(self._rm().offsets_for_leader_epoch(req.body))

    def _leader_and_isr(self, req: Request) -> Response:
        return Response(self._rm().leader_and_isr(req.body, req.peer))

    def _stop_replica(self, req: Request) -> Response:
        return Response(self._rm().stop_replica(req.body, req.peer))

    def _metadata(self, req: Request) -> Response:
        """Brokers, controller and partition states from the store (the routing truth)."""
        md = self.metadata
        if md is None:
            raise ApiError("broker not started", ErrorCode.BROKER_NOT_AVAILABLE)
        wanted = req.body.get("topics")
        if wanted is not None:
            wanted = check_request_entries(self.config, wanted, "topics", topics=True)
        topics: list[dict[str, Any]] = []
        for topic in (wanted if wanted is not None else md.topics()):
            asg = md.topic(topic)
            if asg is None:
                topics.append({"topic": topic, "error": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                               "partitions": []})
                continue
            parts = []
            states = md.partition_states([TopicPartition(topic, p) for p in
                                          sorted(asg.partitions)])
            for p, reps in sorted(asg.partitions.items()):
                st = states[TopicPartition(topic, p)]
                parts.append({"partition": p, "replicas": list(reps),
                              "leader": st.leader if st else -1,
                              "leader_epoch": st.leader_epoch if st else -1,
                              "isr": list(st.isr) if st else []})
            topics.append({"topic": topic, "error": 0, "config": dict(asg.config),
                           "partitions": parts})
        ctl = md.controller()
        out: dict[str, Any] = {
            "broker_id": self.broker_id,
            "controller": ctl[0] if ctl else -1,
            "controller_epoch": ctl[1] if ctl else 0,
            "brokers": [{"broker_id": b, "host": r.host, "port": r.port, "rack": r.rack}
                        for b, r in sorted(md.live_brokers().items())],
            "topics": topics}
        if req.body.get("local"):
            out["replicas"] = self.replicas.describe() if self.replicas else []
        return Response(out)

    def _create_topics(self, req: Request) -> Response:
        ctl = self._ctl()
        b = req.body
        cfg = self.config
        # absent (or Kafka's -1): the broker's default; 0 and other values are checked
        parts = b.get("partitions")
        parts = cfg["num.partitions"] if parts is None or parts == -1 else parts
        rf = b.get("replication_factor")
        rf = cfg["default.replication.factor"] if rf is None or rf == -1 else rf
        timeout = b.get("timeout_ms")
        result = ctl.call(lambda: ctl.create_topic(
            b["topic"], parts, rf, b.get("config") or {}, broker_ids=b.get("broker_ids"),
            force_simple=bool(b.get("force_simple")), assignment=b.get("assignment")),
            timeout=None if timeout is None else int(timeout) / 1000.0)
        return Response({"topic": b["topic"], "assignment": {str(k): v for k, v in
                                                              result.items()}})

    def _create_partitions(self, req: Request) -> Response:
        ctl = self._ctl()
        b = req.body
        timeout = b.get("timeout_ms")
        result = ctl.call(lambda: ctl.add_partitions(
            b["topic"], b["total"], broker_ids=b.get("broker_ids"),
            force_simple=bool(b.get("force_simple")), assignment=b.get("assignment")),
            timeout=None if timeout is None else int(timeout) / 1000.0)
        return Response({"topic": b["topic"], "assignment": {str(k): v for k, v in
                                                              result.items()}})

    def _delete_topics(self, req: Request) -> Response:
        ctl = self._ctl()
        ctl.call(lambda: ctl.delete_topic(req.body["topic"]))
        return Response({"topic": req.body["topic"]})

    def _placement(self, req: Request) -> Response:
        ctl = self._ctl()
        b = req.body
        placement = ctl.call(lambda: ctl.create_replica_placement(
            as_count(b.get("num_partitions"), "num_partitions",
                     error_code="INVALID_PARTITIONS"),
            as_count(b.get("replication_factor"), "replication_factor",
                     error_code="INVALID_REPLICATION_FACTOR"),
            force_simple=bool(b.get("force_simple")), broker_ids=b.get("broker_ids"),
            start_partition=as_count(b.get("start_partition", 0), "start_partition", minimum=0,
                                     error_code="INVALID_PARTITIONS"),
            topic=b.get("topic")))
        return Response({"placement": placement})

    def _elect_leaders(self, req: Request) -> Response:
        ctl = self._ctl()
        wanted = req.body.get("partitions")
        tps = None if wanted is None else [
            TopicPartition(p["topic"], as_count(p["partition"], "partition", minimum=0))
            for p in check_request_entries(self.config, wanted, "partitions")]
        kind = req.body.get("election_type")
        if kind is not None:  # Kafka's ElectLeaders forwarded: 0 preferred, 1 unclean
            kind = as_count(kind, "election_type", minimum=0, error_code="INVALID_REQUEST")
            done = ctl.call(lambda: ctl.elect_leaders(tps, unclean=kind == 1))
            return Response({"elections": [
                {"topic": tp.topic, "partition": tp.partition, "error": code,
                 "message": msg} for tp, (code, msg) in done.items()]})
        return Response({"results": ctl.call(lambda: ctl.elect_preferred(tps))})

    def _controlled_shutdown_request(self, req: Request) -> Response:
        ctl = self._ctl()
        broker = int(req.body["broker_id"])
        return Response(ctl.call(lambda: ctl.controlled_shutdown(broker)))

    def _alter_reassignments(self, req: Request) -> Response:
        assert self.metadata is not None
        entries = check_reassignment_entries(self.config, req.body.get("partitions"))
        # as Kafka: every target replica must be a registered broker (refused as a whole)
        registered = set(self.metadata.live_brokers())
        for i, e in enumerate(entries):
            unknown = sorted(set(e["replicas"]) - registered)
            if unknown:
                raise ApiError(
                    f"partitions[{i}] ({e['topic']}-{e['partition']}): replicas "
                    f"{e['replicas']} name broker(s) {unknown} that are not registered "
                    f"(registered: {sorted(registered)}); nothing was reassigned",
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, nothing_done=True)
        self.metadata.request_reassignment(entries)
        return Response({"accepted": len(entries)})

    def _list_reassignments(self, req: Request) -> Response:
        assert self.metadata is not None
        entries, _ = self.metadata.reassignments()
        return Response({"partitions": entries})

    def _describe_log_dirs(self, req: Request) -> Response:
        dirs, topics = req.body.get("log_dirs"), req.body.get("topics")
        if dirs is not None:
            check_request_entries(self.config, dirs, "log dirs", topics=True)
        if topics is not None:
            check_request_entries(self.config, topics, "topics", topics=True)
        rows = self.log_manager.describe_log_dirs(dirs, topics)
        return Response({"log_dirs": [_jsonable(dataclasses.asdict(r)) for r in rows]})

    def _alter_log_dirs(self, req: Request) -> Response:
        moves = {TopicPartition(m["topic"], as_count(m["partition"], "partition", minimum=0)):
                 m["log_dir"]
                 for m in check_request_entries(self.config, req.body["moves"], "moves")}
        result = self.log_manager.alter_replica_log_dirs(moves)
        return Response({"result": _jsonable(result)})


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    return str(value)


__all__ = ["INPROC_HOST", "LOOPBACK", "ClusterMember", "listen_port"]
