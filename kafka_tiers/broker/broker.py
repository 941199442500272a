"""The broker: the one composition root of kafka-tiers. One class serves a standalone broker and
a member of a cluster.

What is written once, here, for both
    the validated configuration; the log manager (``on_roll`` wired: a roll fires the
    ``segment_rolled`` hook and triggers the partition's remote copy at once instead of at the
    next ``remote.log.manager.task.interval.ms`` tick); the remote tier (the storage plugin
    loaded behind its guard, :class:`~kafka_tiers.remote.guarded.GuardedRemoteStorage`, with
    retry when the tier is down at start and secrets redacted from the messages; the
    :class:`~kafka_tiers.remote.remote_log_manager.RemoteLogManager` with the broker's
    metrics); the hooks; topic configuration (:mod:`kafka_tiers.broker.topics`); how the
    remote tier follows a replica's role; remote reads below the local log; the admin channel
    with the CLI (:mod:`kafka_tiers.broker.admin_channel`); start and stop order.

Standalone (the default)
    The broker leads all its partitions; topics are kept in
    ``<first log dir>/kafka-tiers-topics.json`` (:class:`~kafka_tiers.broker.topics.TopicsFile`,
    read as today's releases wrote it); :meth:`Broker.become_leader` /
    :meth:`Broker.become_follower` change a partition's role by hand; a produce is flushed
    and the high watermark moves to the log end offset.
Cluster member (``cluster=True``: ``kafka-tiers broker start``, ``cluster start``,
    :class:`~kafka_tiers.cluster.local_cluster.LocalCluster`)
    The broker adds a :class:`~kafka_tiers.cluster.member.ClusterMember`: the metadata-store
    session and registration, the transport endpoint, the replica manager and the controller
    role. Topics live in the metadata store; the controller decides roles, validating new
    topics with this broker's topic configuration; the replica manager tells the broker every
    role change (:class:`~kafka_tiers.cluster.replica_manager.ReplicaRole`), which the remote
    tier follows. Produce goes through the replica manager (``acks=all``).

Why a standalone broker is not a one-broker cluster on the embedded store
    (the other design the redesign allowed). The standalone broker's data path goes through
    the log manager, which follows a replica across a JBOD move's swap, while the replica
    manager holds a partition's ``Log`` object; its ``background=False`` mode runs no thread
    at all, which the storage conformance suite, the Spark tests and the benchmarks rely on
    for exact, repeatable tiering; and its topics file keeps being read as it is, with no
    migration step that a crash could interrupt. So both modes share everything above and
    differ only in who owns topics and roles.

Tiered topics
    A topic with ``remote.storage.enable=true`` (on a broker with
    ``remote.log.storage.enable=true``) is tiered: its local logs run without their own
    time/size retention (the remote log manager applies local retention to segments once they
    are committed remotely, and the total retention through the remote tier), and fetches below
    the local log start offset are served from the remote tier.

Remote storage down at start
    The broker starts anyway: when the plugin cannot be configured because the remote tier is
    unreachable (a storage error, or a failure inside ``configure``), loading is retried by the
    remote log manager's tasks (with backoff); local produce and fetch work meanwhile and
    tiering resumes when the remote tier is back. A bad plugin name or a refused configuration
    (``ConfigError``) still fails the start.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from kafka_tiers.api import (
    ConfigError,
    KafkaTiersError,
    PluginError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    Secret,
    TopicPartition,
)
from kafka_tiers.broker.admin_channel import AdminChannel
from kafka_tiers.broker.topics import (
    TOPIC_CONFIG_KEYS,
    TOPICS_FILE,
    TOPICS_FORMAT_VERSION,
    TopicConfigs,
    TopicInfo,
    TopicsFile,
)
from kafka_tiers.cluster.member import ClusterMember
from kafka_tiers.cluster.metadata_store import new_topic_id
from kafka_tiers.cluster.replica_manager import ReplicaRole
from kafka_tiers.cluster.transport import ApiError, ErrorCode, LoopbackNetwork
from kafka_tiers.config import BrokerConfig
from kafka_tiers.kafka.fetch_wait import DataArrived
from kafka_tiers.kafka.listeners_config import listener_specs
from kafka_tiers.kafka.security.authorizer_loader import start_authorizer
from kafka_tiers.kafka.server import KafkaServer
from kafka_tiers.log.errors import LogClosedError, OffsetOutOfRangeError
from kafka_tiers.log.handles import OpenFilesCollector
from kafka_tiers.log.log import AppendInfo, Log
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.names import validate_topic
from kafka_tiers.log.records import ProducerRecord, Record, RecordBatch, build_batch
from kafka_tiers.log.segment import SegmentInfo
from kafka_tiers.plugins.hooks import Hooks
from kafka_tiers.plugins.secrets import secret_config, secret_keys_of, storage_secret_keys
from kafka_tiers.remote.config import TopicTiering, validate_broker
from kafka_tiers.remote.guarded import GuardedRemoteStorage, secret_values
from kafka_tiers.remote.metrics import RemoteStorageMetrics
from kafka_tiers.remote.remote_log_manager import RemoteLogManager

log = logging.getLogger(__name__)

#: the broker's own working directory inside the first log dir (remote index cache).
WORK_DIR = "kafka-tiers-remote"


class BrokerError(KafkaTiersError):
    """A broker operation was refused (unknown topic, topic exists, not leader, stopped)."""


class UnknownTopicError(BrokerError):
    """The topic or partition does not exist on this broker."""

    #: the Kafka error code a Kafka-protocol answer carries
    kafka_error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class TopicExistsError(BrokerError):
    """A topic of that name exists already."""

    #: the Kafka error code a Kafka-protocol answer carries
    kafka_error_code = int(ErrorCode.TOPIC_ALREADY_EXISTS)


class NotLeaderError(BrokerError):
    """This broker is not the partition's leader (produce refused)."""

    #: the Kafka error code a Kafka-protocol answer carries
    kafka_error_code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


@dataclass(frozen=True)
class FetchResult:
    """A fetch: whole record batches from the one holding ``fetch_offset``.

    Attributes:
        fetch_offset: the offset asked for.
        records: the batches' bytes (empty when nothing is there yet).
        next_offset: the offset after the last batch returned.
        tier: ``"local"`` or ``"remote"``: where the batches came from.
        high_watermark, log_start_offset, local_log_start_offset, log_end_offset: the
            partition's offsets at the time of the fetch.
    """

    fetch_offset: int
    records: bytes
    next_offset: int
    tier: str
    high_watermark: int
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int

    def batches(self) -> list[RecordBatch]:
        """The record batches."""
        out, pos = [], 0
        while pos < len(self.records):
            batch = RecordBatch(self.records, pos)
            out.append(batch)
            pos += batch.size
        return out

    def records_list(self) -> list[Record]:
        """Every record of the batches, from ``fetch_offset`` on."""
        return [r for b in self.batches() for r in b.records() if r.offset >= self.fetch_offset]


@dataclass(frozen=True)
class SegmentRow:
    """One segment of a partition and where it is: locally, in the remote tier, or both."""

    base_offset: int
    end_offset: int
    size: int
    local: bool
    remote: bool
    segment_id: str | None = None


RecordInput = (ProducerRecord | tuple[Any, ...] | bytes | None)


@dataclass
class _Partition:
    """A standalone broker's partition role."""

    leader: bool = True
    leader_epoch: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Broker:
    """One broker, standalone or a cluster member (see the module docstring).

    Args:
        config: the broker configuration (validated here when given as raw strings).
        hooks: the hook facade; by default one with every installed hook plugin but those
            named by ``hook.plugins.blocked``.
        remote_storage: a storage plugin instance to use instead of loading
            ``remote.storage.manager.class`` (tests, tools); the broker wraps it in the core's
            wrapper and closes it at shutdown.
        time_fn: the clock (seconds) of the logs and the remote log manager.
        background: run the log maintenance and remote log manager schedulers (False: nothing
            of them runs unless called, e.g. :meth:`run_tiering`; a cluster member still
            replicates).
        cluster: be a member of a cluster (metadata store, controller, replication) instead
            of a standalone broker.
        network: (cluster) run in-process on this loopback network instead of TCP.
        embedded_server: (cluster) the in-process embedded metadata server to use
            (``metadata.store=embedded``); by default the one of ``metadata.dir``.
        placer: (cluster) a placer instance instead of ``broker.replica.placer`` (tests).

    Raises:
        ConfigError: an invalid configuration (one line naming the key).
    """

    def __init__(self, config: BrokerConfig | Mapping[str, str], *,
                 hooks: Hooks | None = None,
                 remote_storage: RemoteStorageManager | None = None,
                 time_fn: Callable[[], float] = time.time, background: bool = True,
                 cluster: bool = False, network: LoopbackNetwork | None = None,
                 embedded_server: Any = None, placer: Any = None) -> None:
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig(config)
        validate_broker(self.config)
        self.broker_id: int = self.config["broker.id"]
        self.rack: str | None = self.config["broker.rack"]
        self.hooks = (hooks if hooks is not None
                      else Hooks(blocked=self.config["hook.plugins.blocked"]))
        self.remote_enabled: bool = bool(self.config["remote.log.storage.enable"])
        self.cluster = cluster
        self.network = network
        self._embedded_server = embedded_server
        self._placer = placer
        self._given_storage = remote_storage
        self._time = time_fn
        self._background = background
        self.metrics = RemoteStorageMetrics()
        self.metrics.registry.register(OpenFilesCollector())  # log.open.files.max's gauges
        self.topic_configs = TopicConfigs(self.config)
        self.log_manager: LogManager | None = None
        self.rlm: RemoteLogManager | None = None
        self.member: ClusterMember | None = None
        #: the Kafka-protocol server (``listeners``), or None when none is configured
        self.kafka_server: KafkaServer | None = None
        #: records may have become readable (Kafka fetches waiting for min_bytes wait on it)
        self.data_arrived = DataArrived()
        self._storage: RemoteStorageManager | None = None
        self._topics: dict[str, TopicInfo] = {}
        #: (standalone) bumped whenever a topic is created, deleted or given its id
        self.topics_version = 0
        self._partitions: dict[TopicPartition, _Partition] = {}
        # Two locks, never held while waiting for another component (a thread, a pool, a
        # plugin call): the lifecycle one guards the phase only (a start or a stop runs
        # outside it: a stop holding it while the remote log manager waited for its tasks,
        # which wait for the topics lock, deadlocked); the topics one guards the topic map.
        # Reentrant: a signal handler may run on a thread that holds one.
        self._lifecycle = threading.RLock()
        self._lock = threading.RLock()
        self._started = False
        #: "stopped", "starting", "started" or "stopping" (under the lifecycle lock)
        self._phase = "stopped"
        #: a stop was asked for while starting: the start stops the broker at its end
        self._stop_asked: str | None = None
        #: set when the current start or stop is over (waited for outside every lock)
        self._settled = threading.Event()
        self._settled.set()
        #: the thread running the current start or stop (a call from it never waits)
        self._runner: int | None = None
        self._log_dir = Path(self.config["log.dirs"][0])
        self._topics_file = TopicsFile(self._log_dir / TOPICS_FILE)

    # ------------------------------------------------------------------ lifecycle

    def start(self, register_timeout: float | None = None) -> Self:
        """Load the logs, start the remote tier and the schedulers; standalone: load the
        topics and lead every partition; cluster member: join the cluster (returns once
        registered). Fires ``broker_started``. Never waits for the remote tier.

        Idempotent: a started broker returns at once; a call while another thread starts it
        returns once that start ended. A :meth:`shutdown` asked for during the start is done
        as soon as the start ends (the broker is then stopped).

        Args:
            register_timeout: (cluster) how long to wait for this broker id to be free in the
                metadata store (default: twice the session timeout plus 5 s).

        Raises:
            BrokerError: the broker is stopping (start it again once shutdown() returned).
            LogDirError: a log dir cannot be used, or the topics file is unreadable.
            ConfigError, PluginError: the storage plugin is unknown or refuses its config.
            MetadataStoreError: (cluster) the store is unreachable or the id stays taken.
        """
        with self._lifecycle:
            phase, me = self._phase, threading.get_ident()
            if phase == "stopping":
                raise BrokerError("the broker is stopping: start it again once shutdown() "
                                  "returned")
            other_starting = phase == "starting" and self._runner != me
            if phase == "stopped":
                self._phase, self._stop_asked, self._runner = "starting", None, me
                self._settled.clear()
        if other_starting:  # another thread is starting it: return once that start ended
            self._settled.wait()
        if phase != "stopped":  # started, or being started (by this thread: a hook)
            return self
        try:
            self._start(register_timeout)
        except BaseException:
            try:
                self._stop_all()
            finally:
                self._settle()
            raise
        with self._lifecycle:
            asked = self._stop_asked
            self._started = True
            self._phase = "stopping" if asked is not None else "started"
        if asked is not None:  # shutdown() or kill() came during the start: do it now
            log.info("broker %s: a stop was asked for during the start; stopping",
                     self.broker_id)
            self._run_stop(asked, None)
            return self
        self._settle()
        self.hooks.broker_started(self.broker_id, self.config)
        return self

    def _settle(self) -> None:
        """The current start or stop is over: the broker is started or stopped."""
        with self._lifecycle:
            if not self._started:  # a failed start, or a stop (_stop_all clears it)
                self._phase = "stopped"
            self._runner = None
            self._settled.set()

    def _start(self, register_timeout: float | None) -> None:
        # the embedded metadata store's dir (by default inside the first log dir) is no replica
        reserved = ([self.config["metadata.dir"] or f"{self.config['log.dirs'][0]}/metadata"]
                    if self.cluster else [])
        self.log_manager = LogManager.from_config(
            self.config, on_roll=self._on_roll, hooks=self.hooks,
            meta_properties={"version": "1", "node.id": str(self.broker_id)},
            time_fn=self._time, on_all_dirs_offline=self._all_dirs_offline,
            reserved_dirs=reserved)
        # every log dir locked and proven this broker's before anything in one is read or
        # made (the embedded store's dir is inside the first log dir by default)
        self.log_manager.claim_log_dirs()
        if self.cluster:
            self.member = ClusterMember(
                self.config, self.log_manager, hooks=self.hooks,
                topic_configs=self.topic_configs, on_role=self._on_role,
                remote_reader=self._read_remote, network=self.network,
                embedded_server=self._embedded_server, placer=self._placer,
                remote_deleter=self._delete_remote_data)
            self.member.open_session()
            if self.member.cluster_id is not None:  # log dirs must carry this cluster's id
                self.log_manager.adopt_cluster_id(self.member.cluster_id)
        if not self.cluster:
            self._topics = {name: self.topic_configs.info(name, partitions, cfg, tid)
                            for name, (partitions, cfg, tid)
                            in self._topics_file.read().items()}
            self.topics_version += 1
        self.log_manager.topic_overrides.update(
            {name: self.topic_configs.local_overrides(info.config, name)
             for name, info in self._topics.items()})
        # only replicas assigned to this broker are loaded (recovered): a cluster member's
        # from its metadata store (the others renamed -delete untouched), a standalone
        # broker's from its topics file (the others left alone)
        if self.member is not None:
            self.log_manager.startup(self.member.assigned_partitions(), delete_unassigned=True)
        else:
            self.log_manager.startup({TopicPartition(info.name, p)
                                      for info in self._topics.values()
                                      for p in range(info.partitions)})
        if self.remote_enabled:
            self._start_remote()
        if listener_specs(self.config):
            # bound now (its ports are registered), serving once the broker is up
            self.kafka_server = KafkaServer(self)
            # authorizer.class.name: loaded, configured and started with the ACL storage
            # before the ports open (closed with the server)
            self.kafka_server.authorizer = start_authorizer(self.kafka_server)
            endpoints = self.kafka_server.bind()
            if self.member is not None:
                self.member.kafka_endpoints = tuple((n, h, p) for n, (h, p)
                                                    in endpoints.items())
        if self.member is not None:
            self.member.join(register_timeout)
            if self.member.replicas is not None:  # leaders' high watermark moves wake fetches
                self.member.replicas.on_data = self.data_arrived.notify
                if self.rlm is not None:  # followers behind a tiered leader's local log
                    self.member.replicas.remote_tier_state = self.rlm.tier_state
                    self.member.replicas.on_topic_config = self.rlm.trigger
        else:
            for info in self._topics.values():
                for p in range(info.partitions):
                    tp = TopicPartition(info.name, p)
                    try:
                        self._open_partition(info, tp, is_new=False)
                    except KafkaTiersError as exc:  # one bad partition is one bad partition
                        log.error("broker %s: partition %s is offline: %s", self.broker_id,
                                  tp, exc)
        if self._background:
            AdminChannel(self.log_manager).attach()
            self.log_manager.start_scheduler()
            if self.rlm is not None:
                self.rlm.start()
        if self.kafka_server is not None:
            self.kafka_server.serve()

    def _start_remote(self) -> None:
        """The one place the remote tier is composed: the storage plugin behind its guard
        (loaded now, or retried by the remote log manager while the tier is down) and the
        remote log manager with the broker's metrics and hooks."""
        name = self.config["remote.storage.manager.class"]
        # the plugin's declared secret keys held as Secret from here on (kafka_tiers.api.Secret)
        given_keys = (secret_keys_of(self._given_storage) if self._given_storage is not None
                      else storage_secret_keys(name))
        rsm_config = secret_config(self.config.prefixed("rsm.config."), given_keys)
        secrets = secret_values(rsm_config)
        source: RemoteStorageManager | Callable[[], RemoteStorageManager]
        if self._given_storage is not None:
            given = self._given_storage
            source = given if isinstance(given, GuardedRemoteStorage) else GuardedRemoteStorage(
                given, type(given).__name__, secrets=secrets)
            self._storage = source
        else:
            def load() -> RemoteStorageManager:
                try:
                    storage = GuardedRemoteStorage.load(name, rsm_config)
                except (PluginError, RemoteStorageError) as exc:
                    if isinstance(exc, PluginError) and getattr(exc, "cause",
                                                                None) != "configure failed":
                        raise
                    raise RemoteStorageError(Secret.hide(str(exc), secrets), plugin=name,
                                             retriable=True) from None
                self._storage = storage
                return storage

            try:
                source = load()
            except RemoteStorageError as exc:
                log.warning("remote storage %r is not available at start (%s); the broker "
                            "starts and retries in the background", name, exc)
                source = load
        self.rlm = RemoteLogManager(
            source, self.config, broker_id=self.broker_id, log_of=self._log_or_none,
            tiering_of=self._tiering_of, work_dir=self._log_dir / WORK_DIR, hooks=self.hooks,
            metrics=self.metrics, time_fn=self._time)

    def _open_partition(self, info: TopicInfo, tp: TopicPartition, *,
                        is_new: bool = True) -> Log:
        """Standalone: open (or create) a partition's log and lead it (``is_new``: the
        partition is being created now; False at start-up: never recreated while a log dir
        is offline)."""
        assert self.log_manager is not None
        lg = self.log_manager.get_or_create_log(
            tp, overrides=self.topic_configs.local_overrides(info.config, info.name),
            is_new=is_new)
        lg.flush()
        lg.update_high_watermark(lg.log_end_offset)
        epoch = lg.leader_epoch_cache.latest_epoch
        state = _Partition(True, 0 if epoch is None else epoch)
        self._partitions[tp] = state
        self._on_role(tp, ReplicaRole.LEADER, state.leader_epoch)
        return lg

    def shutdown(self, controlled: bool | None = None) -> None:
        """Stop. A cluster member first moves its leaderships away through the controller
        when ``controlled.shutdown.enable`` (``controlled`` overrides the config). Then
        ``broker_stopping`` fires, the remote log manager stops (waiting for running copies
        and reads), the storage plugin is closed and the logs are shut down cleanly (each log
        dir gets its clean-shutdown marker). No thread of the broker is left running.

        Idempotent and safe from any thread: a call while another stop runs waits for it to
        end; a call during :meth:`start` makes that start stop the broker once it is up (and
        waits for that); a call from the thread running the start or stop itself (a signal
        handler on that thread, a hook) returns at once, the stop going on. No lock is held
        while waiting, so a component the stop waits for never waits for the caller.
        """
        self._stop("shutdown", controlled)

    def kill(self) -> None:
        """Die abruptly (in-process tests): a cluster member stops answering and loses its
        store session at once; no controlled shutdown, no ``broker_stopping``; every thread
        stops. Idempotent, like :meth:`shutdown`."""
        self._stop("kill", None)

    def _stop(self, how: str, controlled: bool | None) -> None:
        with self._lifecycle:
            phase, me = self._phase, threading.get_ident()
            if phase == "stopped":
                return
            run = phase == "started"
            if phase == "starting" and self._stop_asked is None:
                self._stop_asked = how
            if run:
                self._phase, self._runner = "stopping", me
                self._settled.clear()
            elif self._runner == me:
                return  # called from the start or stop in progress: it goes on
        if run:
            self._run_stop(how, controlled)
        else:
            self._settled.wait()

    def _run_stop(self, how: str, controlled: bool | None) -> None:
        """The stop itself, with no lock held (the phase is "stopping")."""
        try:
            if how == "kill":
                if self.member is not None:
                    self.member.kill_session()
            else:
                if self.member is not None:
                    self.member.leave(self.config["controlled.shutdown.enable"]
                                      if controlled is None else controlled)
                self.hooks.broker_stopping(self.broker_id, True)
            self._stop_all()
        finally:
            self._settle()

    def flush_logs(self) -> None:
        """Flush every local log to disk now (the recovery points advance); for a process
        that must exit before its shutdown ends. Logs closed meanwhile are skipped; never
        raises for a log dir that failed."""
        lm = self.log_manager
        if lm is not None:
            lm.flush_all()

    def pause(self) -> None:
        """(cluster) Freeze like SIGSTOP (in-process tests): no answers, no heartbeats, no
        fetching, no controller events.

        Raises:
            BrokerError: a standalone broker (nothing to freeze).
        """
        self._cluster_member().pause()

    def resume(self) -> None:
        """(cluster) Continue after :meth:`pause` (like SIGCONT).

        Raises:
            BrokerError: a standalone broker.
        """
        self._cluster_member().resume()

    def _stop_all(self) -> None:
        self._started = False
        server, self.kafka_server = self.kafka_server, None
        self.data_arrived.close()  # waiting fetches answer now
        if server is not None:  # clients first: nothing new reaches the parts that stop
            server.stop()
        self.data_arrived = DataArrived()
        if self.member is not None:
            self.member.stop()
        if self.rlm is not None:
            self.rlm.shutdown()
            self.rlm = None
        storage, self._storage = self._storage, None
        if storage is not None:
            try:
                storage.close()
            except Exception as exc:
                log.warning("closing the storage plugin failed: %s", exc)
        if self.log_manager is not None:
            self.log_manager.shutdown()
            self.log_manager = None
        self._partitions.clear()

    @property
    def started(self) -> bool:
        """Whether the broker is running."""
        return self._started

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ cluster membership

    def _cluster_member(self) -> ClusterMember:
        if self.member is None:
            raise BrokerError("a standalone broker is no cluster member (start it with "
                              "cluster=True)")
        return self.member

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the Kafka listeners ("" when none is configured)."""
        server = self.kafka_server
        return server.bootstrap() if server is not None else ""

    @property
    def address(self) -> str:
        """(cluster) ``host:port`` where the broker answers ("" when standalone)."""
        return self.member.address if self.member is not None else ""

    @property
    def controller(self) -> Any:
        """(cluster) This broker's controller role (active on one broker), or None."""
        return self.member.controller if self.member is not None else None

    @property
    def replicas(self) -> Any:
        """(cluster) The replica manager, or None."""
        return self.member.replicas if self.member is not None else None

    @property
    def metadata(self) -> Any:
        """(cluster) The cluster metadata over this broker's store session, or None."""
        return self.member.metadata if self.member is not None else None

    @property
    def store(self) -> Any:
        """(cluster) This broker's metadata-store session, or None."""
        return self.member.store if self.member is not None else None

    # ------------------------------------------------------------------ topic metadata

    @property
    def topics_file(self) -> Path:
        """Where a standalone broker keeps its topic metadata."""
        return self._topics_file.path

    def _tiering_of(self, tp: TopicPartition) -> TopicTiering:
        """The resolved tiering settings of a partition's topic.

        Raises:
            UnknownTopicError: (standalone) no such topic.
        """
        if self.member is None:
            return self._topic(tp.topic).tiering
        return self.topic_configs.tiering(tp.topic, self.member.topic_config(tp))

    def tiered(self, tp: TopicPartition) -> bool:
        """Whether reads of ``tp`` below its local log start are served from the remote tier
        (its topic has ``remote.storage.enable=true`` and the broker a remote tier)."""
        return self._tiered(tp)

    def _tiered(self, tp: TopicPartition) -> bool:
        if self.rlm is None:
            return False
        try:
            return self._tiering_of(tp).remote_storage_enable
        except (BrokerError, ConfigError):
            return False

    def _topic(self, name: str) -> TopicInfo:
        with self._lock:
            info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return info

    def topics(self) -> dict[str, TopicInfo]:
        """The topics of this broker by name (a cluster member: of the cluster)."""
        if self.member is not None and self.member.metadata is not None:
            md = self.member.metadata
            out = {}
            for name in md.topics():
                asg = md.topic(name)
                if asg is not None:
                    out[name] = self.topic_configs.info(name, len(asg.partitions), asg.config,
                                                        asg.topic_id)
            return out
        with self._lock:
            return dict(self._topics)

    def topic(self, name: str) -> TopicInfo:
        """One topic.

        Raises:
            UnknownTopicError: no such topic.
        """
        if self.member is not None:
            info = self.topics().get(name)
            if info is None:
                raise UnknownTopicError(f"unknown topic {name!r}")
            return info
        return self._topic(name)

    def _put_topic(self, name: str, info: TopicInfo) -> None:
        """(under the topics lock) Make ``info`` topic ``name``'s and write the topics file;
        a failed write puts back what was there (nothing half-changed)."""
        old = self._topics.get(name)
        self._topics[name] = info
        try:
            self._topics_file.write(self._topics)
        except BaseException:
            if old is None:
                del self._topics[name]
            else:
                self._topics[name] = old
            raise
        finally:
            self.topics_version += 1

    def _standalone(self, what: str) -> None:
        if self.member is not None:
            raise BrokerError(f"{what} is the controller's in a cluster: use a ClusterClient "
                              "(kafka_tiers.cluster.client) or `kafka-tiers topics`")

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, str] | None = None) -> list[TopicPartition]:
        """(standalone) Create a topic with topic-level ``config`` overrides
        (``segment.bytes``, ``retention.ms``, ``remote.storage.enable``,
        ``local.retention.ms``, ...), persist it, lead its partitions and fire
        ``topic_created``.

        Raises:
            InvalidTopicError: an illegal name.
            TopicExistsError: the topic exists.
            ConfigError: an unknown key or an invalid value (one line naming the key).
            BrokerError: a cluster member (the controller creates topics).
        """
        self._require_started()
        self._standalone("creating a topic")
        validate_topic(name)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise ConfigError(f"partitions must be an integer >= 1, got {partitions!r}",
                              key="partitions")
        self.topic_configs.check_new_partitions(name, partitions,
                                                broker_holds=len(self._partitions))
        info = self.topic_configs.info(name, partitions, config, new_topic_id())
        with self._lock:  # the topic map and its file only: opening logs waits for I/O
            if name in self._topics:
                raise TopicExistsError(f"topic {name!r} exists already")
            self._put_topic(name, info)
            assert self.log_manager is not None
            self.log_manager.topic_overrides[name] = \
                self.topic_configs.local_overrides(info.config, name)
        tps = [TopicPartition(name, p) for p in range(partitions)]
        with self._logs().batched_creation():  # one fsync of the log dir, not one each
            for tp in tps:
                self._open_partition(info, tp)
        self.hooks.topic_created(name, {tp.partition: [self.broker_id] for tp in tps})
        return tps

    def delete_topic(self, name: str) -> None:
        """(standalone) Delete a topic: its remote data first (every remote segment, hooks
        ``remote_segment_deleted``), then its local logs and its metadata.

        Raises:
            UnknownTopicError: no such topic.
            RemoteStorageError: the remote deletion failed; nothing local was deleted and the
                topic still exists (repeat the call).
            BrokerError: a cluster member (the controller deletes topics).
        """
        self._require_started()
        self._standalone("deleting a topic")
        info = self._topic(name)
        tps = [TopicPartition(name, p) for p in range(info.partitions)]
        rlm = self.rlm
        if rlm is not None:
            try:
                for tp in tps:
                    rlm.stop_partition(tp, delete=info.tiered)
            except RemoteStorageError:
                for tp in tps:  # the topic stays: its partitions go on being tiered
                    state = self._partitions.get(tp)
                    if info.tiered and state is not None and tp not in rlm.partitions():
                        if state.leader:
                            rlm.become_leader(tp, state.leader_epoch)
                        else:
                            rlm.become_follower(tp)
                raise
        lm = self._logs()
        for tp in tps:  # outside the topics lock: a delete waits for a move's cancellation
            self._partitions.pop(tp, None)
            lm.delete_log(tp)
        with self._lock:
            assert self.log_manager is not None
            self._topics.pop(name, None)
            self.topics_version += 1
            self.log_manager.topic_overrides.pop(name, None)
            self._topics_file.write(self._topics)

    def _delete_remote_data(self, topic: str, tps: list[TopicPartition]) -> None:
        """(cluster, as the controller) Delete every remote segment of ``tps`` of the deleted
        tiered topic ``topic`` through this broker's remote log manager and storage plugin
        (hooks ``remote_segment_deleted``); the remote tier is shared, so any broker can.

        Raises:
            RemoteStorageError: the deletion failed (the controller keeps the topic).
        """
        rlm = self.rlm
        if rlm is None:
            log.warning("broker %s: topic %s is tiered but this broker has no remote tier: "
                        "its remote data is left in place", self.broker_id, topic)
            return
        for tp in tps:
            rlm.stop_partition(tp, delete=True)
        log.info("broker %s: remote data of deleted topic %s deleted (%d partitions)",
                 self.broker_id, topic, len(tps))

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False
                       ) -> list[TopicPartition]:
        """(standalone) Grow topic ``name`` to ``total`` partitions (Kafka's
        CreatePartitions): the new ones are persisted, created and led, and
        ``topic_created`` fires with them. ``validate_only``: the checks only. Returns the
        new partitions.

        Raises:
            UnknownTopicError: no such topic.
            LimitExceededError: ``INVALID_PARTITIONS`` when ``total`` is not above the current
                count, or a bound (``max.topic.partitions``, ...) is exceeded.
            BrokerError: a cluster member (the controller adds partitions).
        """
        from kafka_tiers.placement.limits import LimitExceededError, as_count

        self._require_started()
        self._standalone("adding partitions")
        total = as_count(total, f"the partition count of topic {name}",
                         error_code="INVALID_PARTITIONS")
        with self._lock:  # the topic map and its file only: opening logs waits for I/O
            info = self._topic(name)
            current = info.partitions
            if total <= current:
                raise LimitExceededError(
                    f"topic {name} has {current} partitions: the new count {total} must be "
                    f"above it (partitions are never removed)", key="", limit=current,
                    value=total, error_code="INVALID_PARTITIONS")
            self.topic_configs.check_new_partitions(name, total - current, existing=current,
                                                    broker_holds=len(self._partitions))
            tps = [TopicPartition(name, p) for p in range(current, total)]
            if validate_only:
                return tps
            grown = dataclasses.replace(info, partitions=total)
            self._put_topic(name, grown)
        with self._logs().batched_creation():
            for tp in tps:
                self._open_partition(grown, tp)
        self.hooks.topic_created(name, {tp.partition: [self.broker_id] for tp in tps})
        return tps

    def alter_topic_config(self, name: str, config: Mapping[str, str], *,
                           validate_only: bool = False) -> TopicInfo:
        """(standalone) Replace topic ``name``'s config overrides with ``config``: validated
        as a new topic's (:meth:`TopicConfigs.validate_change`), persisted, and applied at
        once to every local log of the topic and to the remote tier's settings (read on each
        of its task runs). ``validate_only``: the checks only. Returns the topic as it is now.

        Raises:
            UnknownTopicError: no such topic.
            ConfigError: an unknown key, a bad value, or a change the topic cannot take
                (one line naming the key).
            BrokerError: a cluster member (the controller alters topic configs).
        """
        self._require_started()
        self._standalone("altering a topic config")
        with self._lock:
            info = self._topic(name)
            cfg = self.topic_configs.validate_change(name, info.config, config)
            new = self.topic_configs.info(name, info.partitions, cfg, info.topic_id)
            if validate_only or dict(info.config) == cfg:
                return new if validate_only else info
            self._put_topic(name, new)
            lm = self._logs()
            overrides = self.topic_configs.local_overrides(cfg, name)
            lm.topic_overrides[name] = overrides
        log_config = lm.config.with_overrides(overrides)
        for p in range(new.partitions):
            tp = TopicPartition(name, p)
            lg = lm.get_log(tp)
            if lg is not None:
                lg.config = log_config
            if self.rlm is not None:  # KIP-950 switches take effect now, not at the interval
                self.rlm.trigger(tp)
        log.info("broker %s: topic %s config is now %s", self.broker_id, name, cfg)
        return new

    def assign_topic_id(self, name: str) -> str | None:
        """(standalone) The topic id of ``name``; a topic created before topic ids existed
        is given one now, once, and the topics file written back (crash-safely: a crash
        before the write leaves the file as it was, and the next call gives it one). None
        when there is no such topic. Nothing is written for a topic that has its id.

        Raises:
            OSError: the topics file could not be written (the topic keeps no id).
        """
        with self._lock:
            info = self._topics.get(name)
            if info is None or info.topic_id is not None:
                return None if info is None else info.topic_id
            self._put_topic(name, dataclasses.replace(info, topic_id=new_topic_id()))
            return self._topics[name].topic_id

    # ------------------------------------------------------------------ partitions

    def _require_started(self) -> None:
        if not self._started:
            raise BrokerError("the broker is not started")

    def _logs(self) -> LogManager:
        lm = self.log_manager
        if lm is None:
            raise BrokerError("the broker is not started")
        return lm

    def _log_or_none(self, tp: TopicPartition) -> Log | None:
        lm = self.log_manager
        return None if lm is None else lm.get_log(tp)

    def log(self, tp: TopicPartition) -> Log:
        """The local log of a partition.

        Raises:
            UnknownTopicError: no such partition here.
        """
        self._require_started()
        lg = self._log_or_none(tp)
        if lg is None:
            raise UnknownTopicError(f"unknown partition {tp}")
        return lg

    def _state(self, tp: TopicPartition) -> _Partition:
        state = self._partitions.get(tp)
        if state is None:
            raise UnknownTopicError(f"unknown partition {tp}")
        return state

    def leadership(self, tp: TopicPartition) -> tuple[bool, int]:
        """Whether this broker leads ``tp`` now, and the leader epoch it knows (what a Kafka
        fetch or OffsetForLeaderEpoch checks; standalone or cluster member alike).

        Raises:
            UnknownTopicError: no replica of ``tp`` here.
        """
        if self.member is None:
            state = self._state(tp)
            return state.leader, state.leader_epoch
        rm = self.member.replicas
        p = rm.partitions.get(tp) if rm is not None else None
        if p is None:
            raise UnknownTopicError(f"broker {self.broker_id} has no replica of {tp}")
        with p.lock:
            return p.is_leader, p.leader_epoch

    def become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """(standalone) Lead ``tp`` in ``leader_epoch`` (produce allowed; a tiered partition
        copies and applies retention, continuing after the highest remote offset).

        Raises:
            UnknownTopicError: no such partition here.
            ValueError: a stale leader epoch.
            BrokerError: a cluster member (the controller decides leadership).
        """
        self._require_started()
        self._standalone("leadership")
        state = self._state(tp)
        if leader_epoch < state.leader_epoch:
            raise ValueError(f"stale leader epoch {leader_epoch} for {tp}: the current one "
                             f"is {state.leader_epoch}")
        self._on_role(tp, ReplicaRole.LEADER, leader_epoch)
        state.leader, state.leader_epoch = True, leader_epoch

    def become_follower(self, tp: TopicPartition) -> None:
        """(standalone) Follow ``tp``: produce is refused, the remote log manager stops
        copying and deleting for it (a copy in progress finishes) and only refreshes its
        remote list.

        Raises:
            UnknownTopicError: no such partition here.
            BrokerError: a cluster member (the controller decides leadership).
        """
        self._require_started()
        self._standalone("leadership")
        state = self._state(tp)
        state.leader = False
        self._on_role(tp, ReplicaRole.FOLLOWER, state.leader_epoch)

    def _on_role(self, tp: TopicPartition, role: ReplicaRole, epoch: int) -> None:
        """The remote tier follows a replica's role: only the leader copies; followers
        refresh the remote listing; a new leader continues after the highest remote offset;
        a stopped replica is no longer managed."""
        rlm = self.rlm
        if rlm is None:
            return
        if role is ReplicaRole.STOPPED:
            rlm.stop_partition(tp)
        elif self._tiered(tp):
            if role is ReplicaRole.LEADER:
                rlm.become_leader(tp, epoch)
            else:
                rlm.become_follower(tp)
        elif role is ReplicaRole.LEADER and self._remote_cleanup_due(tp):
            # KIP-950: the topic config is the durable intent of a delete on disable, so a
            # leader (after a restart or a move too) takes the partition for one cleanup run
            # (retried with backoff until done), which releases it
            rlm.clean_up_disabled(tp, epoch)
        else:  # tiering turned off (KIP-950): a partition still managed runs its task now
            rlm.trigger(tp)

    def _remote_cleanup_due(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s topic has tiering turned off with
        ``remote.log.delete.on.disable=true`` (KIP-950): its leader deletes what is left of
        its remote data (nothing when there is none)."""
        try:
            tiering = self._tiering_of(tp)
        except (BrokerError, ConfigError):
            return False
        return not tiering.remote_storage_enable and tiering.delete_on_disable

    def _on_roll(self, lg: Log, info: SegmentInfo) -> None:
        """A segment rolled: the ``segment_rolled`` hook, and the partition's remote copy is
        triggered now (not at the next task interval)."""
        tp = lg.topic_partition
        if tp is None:
            return
        self.hooks.segment_rolled(tp, info.base_offset, info.next_offset)
        rlm = self.rlm
        if rlm is not None:
            rlm.trigger(tp)

    def _read_remote(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes | None:
        """(cluster) Batches below the local log of a tiered partition, from the remote
        tier; None when the partition is not tiered or the offset is not there."""
        rlm = self.rlm
        if rlm is None or not self._tiered(tp):
            return None
        try:
            return bytes(rlm.read(tp, offset, max_bytes).records)
        except RemoteResourceNotFoundError:
            return None

    # ------------------------------------------------------------------ produce / fetch

    def _all_dirs_offline(self, error: BaseException) -> None:
        """Every log dir is offline: the broker cannot serve anything and stops (as Kafka
        does), from a thread of its own so the failing I/O path is not blocked."""
        log.error("broker %s: every log dir is offline (%s); stopping", self.broker_id, error)
        self.hooks.broker_stopping(self.broker_id, clean=False)
        threading.Thread(target=self.shutdown, name=f"broker-{self.broker_id}-fatal-stop",
                         daemon=True).start()

    def produce(self, tp: TopicPartition, records: bytes | bytearray | memoryview
                | Sequence[RecordInput], *, batch_records: int = 500) -> int:
        """Append records as the leader and return the base offset of the first.

        Args:
            records: encoded record batches, or records: ``(key, value)``,
                ``(key, value, headers)``, ``(key, value, headers, timestamp)`` tuples,
                :class:`~kafka_tiers.log.records.ProducerRecord` values or bare values.
            batch_records: the most records per batch built from a record list.

        Standalone: the log is flushed and the high watermark moves to the log end offset. A
        cluster member appends through its replica manager with ``acks=all`` (returns once
        the in-sync replicas have the records).

        Raises:
            UnknownTopicError: no such partition.
            NotLeaderError: this broker follows the partition.
            InvalidRecordError, RecordTooLargeError: bad or too large input.
            ApiError: (cluster) not enough in-sync replicas, or a timeout.
        """
        self._require_started()
        state = self._state(tp) if self.member is None else None
        lg = self.log(tp)
        if state is not None and not state.leader:
            raise NotLeaderError(f"broker {self.broker_id} is not the leader of {tp}")
        if isinstance(records, bytes | bytearray | memoryview):
            chunks = [bytes(records)]
        else:
            chunks = self._build_batches([_as_record(r) for r in records], batch_records,
                                         min(lg.config.max_message_bytes,
                                             lg.config.segment_bytes))
        if state is None:
            return self._produce_replicated(tp, chunks)
        with state.lock:
            first = None
            for chunk in chunks:
                # through the log manager: it follows the replica across a JBOD move's swap
                # and raises only when nothing was written
                info = self._logs().append(tp, chunk, leader_epoch=state.leader_epoch)
                if first is None:
                    first = info.first_offset
            self._flush_and_advance(tp)
        assert first is not None
        return first

    def append_client_batches(self, tp: TopicPartition,
                              records: bytes | bytearray | memoryview,
                              **append: Any) -> AppendInfo:
        """(standalone) Append a Kafka client's record batches as the leader of ``tp`` (the
        Produce path): every batch's header and CRC are checked by the log engine, records
        are never decoded; ``append`` goes to ``Log.append`` (``origin``). The high watermark
        moves to the log end at once (this broker is the only replica); nothing is flushed
        here (``flush.messages`` / ``flush.ms`` decide, as in Kafka).

        Raises:
            UnknownTopicError: no such partition.
            NotLeaderError: this broker follows the partition.
            InvalidRecordError, RecordTooLargeError, LogDirError: what ``Log.append``
                raises (nothing written).
            BrokerError: a cluster member (its replica manager appends).
        """
        self._require_started()
        self._standalone("appending as the only replica")
        state = self._state(tp)
        with state.lock:
            if not state.leader:
                raise NotLeaderError(f"broker {self.broker_id} is not the leader of {tp}")
            info = self._logs().append(tp, records, leader_epoch=state.leader_epoch, **append)
            lg = self.log(tp)  # the current one, after a JBOD move's swap
            lg.update_high_watermark(lg.log_end_offset)
        self.data_arrived.notify()
        return info

    def _produce_replicated(self, tp: TopicPartition, chunks: list[bytes]) -> int:
        replicas = self._cluster_member().replicas
        assert replicas is not None
        first = None
        for chunk in chunks:
            try:
                base, _ = replicas.produce(tp, chunk, acks=-1)
            except ApiError as exc:
                if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    raise NotLeaderError(str(exc)) from None
                if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise UnknownTopicError(str(exc)) from None
                raise
            first = base if first is None else first
        assert first is not None
        return first

    def _flush_and_advance(self, tp: TopicPartition) -> None:
        """Flush the partition's current log and move its high watermark to the log end,
        following the replica when a JBOD move swaps its log meanwhile."""
        for _ in range(10):
            lg = self.log(tp)
            try:
                lg.flush()
                lg.update_high_watermark(lg.log_end_offset)
                self.data_arrived.notify()
                return
            except LogClosedError:
                if self.log(tp) is lg:
                    raise
        raise LogClosedError(f"{tp} kept being replaced during the flush")

    @staticmethod
    def _build_batches(recs: list[ProducerRecord], per_batch: int, limit: int) -> list[bytes]:
        if not recs:
            raise ValueError("nothing to produce: no records given")
        out: list[bytes] = []
        pending = [recs[i:i + max(per_batch, 1)] for i in range(0, len(recs), max(per_batch, 1))]
        while pending:
            group = pending.pop(0)
            batch = build_batch(group)
            if len(batch) > limit and len(group) > 1:
                half = len(group) // 2
                pending[:0] = [group[:half], group[half:]]
                continue
            out.append(batch)
        return out

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int = 1 << 20) -> FetchResult:
        """Read whole batches from ``offset``: locally, or from the remote tier below the
        local log start offset (tiered topics). At least one batch is returned when there is
        one; reads stop at the high watermark.

        Raises:
            UnknownTopicError: no such partition.
            OffsetOutOfRangeError: ``offset`` is below the log start offset or above the log
                end offset (or below the local log start of a topic that is not tiered).
            RetriableRemoteStorageError: a remote read took longer than
                ``remote.fetch.max.wait.ms`` or the reader pool is full.
            RemoteStorageError: the remote read failed.
        """
        lg = self.log(tp)
        tiered = self._tiered(tp)
        # a tiered log's start offset is the partition's (below its local log: in the remote
        # tier); below it nothing is served (DeleteRecords, remote retention)
        if offset > lg.log_end_offset or offset < 0 or offset < lg.log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range [{lg.log_start_offset}, "
                f"{lg.log_end_offset}] of {tp}", offset=offset,
                log_start_offset=lg.log_start_offset, log_end_offset=lg.log_end_offset)
        if offset >= lg.local_log_start_offset:
            try:
                data = self._logs().read(tp, offset, max_bytes, isolation="high_watermark")
                return FetchResult(offset, bytes(data.records), data.next_offset, "local",
                                   data.high_watermark, data.log_start_offset,
                                   lg.local_log_start_offset, data.log_end_offset)
            except OffsetOutOfRangeError:
                if offset >= lg.local_log_start_offset:
                    raise  # not moved by local retention meanwhile
        if self.rlm is None or not tiered:
            raise OffsetOutOfRangeError(
                f"offset {offset} of {tp} is below the local log start offset "
                f"{lg.local_log_start_offset} and the topic is not tiered", offset=offset,
                log_start_offset=lg.local_log_start_offset, log_end_offset=lg.log_end_offset)
        try:
            result = self.rlm.read(tp, offset, max_bytes)
        except RemoteResourceNotFoundError:
            raise OffsetOutOfRangeError(
                f"offset {offset} of {tp} is in neither the local log (from "
                f"{lg.local_log_start_offset}) nor the remote tier", offset=offset,
                log_start_offset=self.log_start_offset(tp),
                log_end_offset=lg.log_end_offset) from None
        return FetchResult(offset, result.records, result.next_offset, "remote",
                           lg.high_watermark, min(result.segment.start_offset,
                                                  lg.log_start_offset),
                           lg.local_log_start_offset, lg.log_end_offset)

    def log_start_offset(self, tp: TopicPartition) -> int:
        """The first offset of the partition, remote tier included (for a tiered topic, the
        start of the first remote segment this broker knows of, when below the local log's,
        and never below the log start offset: DeleteRecords and remote retention move it).

        Raises:
            UnknownTopicError: no such partition.
        """
        lg = self.log(tp)
        if self.rlm is not None and self._tiered(tp):
            try:
                segs = self.rlm.remote_segments(tp)
            except RemoteStorageError:
                segs = []
            if segs:
                return max(lg.log_start_offset,
                           min(segs[0].start_offset, lg.local_log_start_offset))
        return lg.log_start_offset

    def delete_records(self, tp: TopicPartition, offset: int, timeout: float = 30.0) -> int:
        """Kafka's DeleteRecords on the leader of ``tp``: the log start offset moves up to
        ``offset`` (-1: the high watermark), local segments wholly below it are deleted and
        the log dir's log start offset checkpoint is written; for a tiered topic the remote
        log manager then deletes the remote segments wholly below it (on the partition's
        task, triggered now) and nothing below it is served any more. Followers apply it
        from the leader's fetch answers; a cluster member returns once every replica on a
        live broker reported it (Kafka's low watermark), waiting at most ``timeout``
        seconds. An offset at or below the current log start offset changes nothing.
        Idempotent.

        Returns:
            the low watermark: the lowest log start offset of the live replicas (standalone:
            the log start offset).

        Raises:
            UnknownTopicError: no such partition.
            NotLeaderError: this broker does not lead it.
            OffsetOutOfRangeError: ``offset`` is negative (but -1) or above the high
                watermark.
            ApiError: ``REQUEST_TIMED_OUT``: a live replica did not follow within
                ``timeout`` (the leader moved; the followers go on following).
        """
        self._require_started()
        if self.member is not None:
            rm = self.member.replicas
            p = rm.partitions.get(tp) if rm is not None else None
            if p is None:
                if tp.topic in self.topics():
                    raise NotLeaderError(f"broker {self.broker_id} hosts no replica of {tp}")
                raise UnknownTopicError(f"unknown partition {tp}")
            with p.lock:
                if not p.is_leader:
                    raise NotLeaderError(f"broker {self.broker_id} is not the leader of {tp}")
                start = _advance_log_start(tp, p.log, offset)
        else:
            state = self._state(tp)
            with state.lock:
                if not state.leader:
                    raise NotLeaderError(f"broker {self.broker_id} is not the leader of {tp}")
                start = _advance_log_start(tp, self.log(tp), offset)
        lm = self._logs()
        log_dir = lm.log_dir_of(tp)
        if log_dir is not None:
            lm.checkpoint([log_dir])
        if self.rlm is not None and self._tiered(tp):
            self.rlm.delete_below(tp, start)
        rm = self.member.replicas if self.member is not None else None
        if rm is None:
            return start
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:  # Kafka's DelayedDeleteRecords: until every live replica followed
            try:
                low = rm.low_watermark(tp)
            except ApiError as exc:
                if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    raise NotLeaderError(str(exc)) from None
                raise
            if low >= start:
                return low
            if time.monotonic() >= deadline:
                raise ApiError(f"{tp}: the log start offset moved to {start} on the leader, "
                               f"but a live replica is still at {low} after {timeout:g} s; "
                               "the followers go on following (retry to wait again)",
                               ErrorCode.REQUEST_TIMED_OUT)
            time.sleep(0.02)

    # ------------------------------------------------------------------ tiering tools

    def run_tiering(self, topics: Iterable[str] | None = None) -> dict[TopicPartition, Any]:
        """Run the remote log manager's task of every tiered partition (of ``topics``) now,
        in this thread; returns each partition's ``TaskResult``."""
        self._require_started()
        out: dict[TopicPartition, Any] = {}
        if self.rlm is None:
            return out
        wanted = set(topics) if topics is not None else None
        for tp in self.rlm.partitions():
            if wanted is None or tp.topic in wanted:
                out[tp] = self.rlm.run_once(tp)
        return out

    def segments(self, tp: TopicPartition) -> list[SegmentRow]:
        """Every segment of ``tp``, local and remote, with where it is, by base offset.

        Raises:
            UnknownTopicError: no such partition.
            RemoteStorageError: the remote list could not be read.
        """
        lg = self.log(tp)
        rows: dict[int, SegmentRow] = {}
        for seg in lg.segments():
            rows[seg.base_offset] = SegmentRow(seg.base_offset, seg.next_offset - 1, seg.size,
                                               True, False)
        if self.rlm is not None and self._tiered(tp):
            for md in self.rlm.remote_segments(tp):
                local = rows.get(md.start_offset)
                rows[md.start_offset] = SegmentRow(md.start_offset, md.end_offset,
                                                   md.segment_size_in_bytes,
                                                   local is not None, True, md.segment_id)
        return [rows[k] for k in sorted(rows)]

    def metrics_text(self) -> str:
        """The broker's tiered storage metrics in the Prometheus text format."""
        return self.metrics.text()


def _advance_log_start(tp: TopicPartition, lg: Log, offset: int) -> int:
    """DeleteRecords on one log (see :meth:`Broker.delete_records`)."""
    hw = lg.high_watermark
    target = hw if offset == -1 else offset
    if target < 0 or target > hw:
        raise OffsetOutOfRangeError(
            f"cannot delete the records of {tp} below offset {offset}: it must be -1 (the high "
            f"watermark) or from 0 to the high watermark {hw}", offset=offset,
            log_start_offset=lg.log_start_offset, log_end_offset=lg.log_end_offset)
    lg.advance_log_start_offset(target)
    return lg.log_start_offset


def _as_record(item: RecordInput) -> ProducerRecord:
    if isinstance(item, ProducerRecord):
        return item
    if item is None or isinstance(item, bytes | bytearray):
        return ProducerRecord(None if item is None else bytes(item))
    if isinstance(item, tuple) and 1 <= len(item) <= 4:
        key, value, headers, timestamp = (*item, *([None] * (4 - len(item))))[:4] \
            if len(item) >= 2 else (None, item[0], None, None)
        return ProducerRecord(_bytes(value), _bytes(key), tuple(headers or ()), timestamp)
    raise ValueError(f"a record must be (key, value[, headers[, timestamp]]), bytes or a "
                     f"ProducerRecord, got {type(item).__name__}")


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"record keys and values must be bytes or str, got {type(value).__name__}")


__all__ = [
    "TOPICS_FILE",
    "TOPICS_FORMAT_VERSION",
    "TOPIC_CONFIG_KEYS",
    "WORK_DIR",
    "Broker",
    "BrokerError",
    "FetchResult",
    "NotLeaderError",
    "SegmentRow",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicError",
]
