"""One in-process broker: a validated configuration, hooks, the log manager, the remote
storage plugin and the remote log manager.

Until the cluster issue lands, a broker is the leader of all its partitions and its high
watermark is the log end offset once a produce is flushed (no replication yet). The controller
to come drives leadership through :meth:`Broker.become_leader` / :meth:`Broker.become_follower`.

Topic metadata
    Topics (name, partition count, topic-level config) are kept in
    ``<first log dir>/kafka-tiers-topics.json``, a small versioned JSON document
    (``{"version": 1, "topics": {"orders": {"partitions": 3, "config": {...}}}}``) replaced
    crash-safely on every change (temporary file, fsync, rename, fsync of the directory). A
    file of a newer ``version`` is refused at start. The cluster issue will move topic metadata
    to a metadata store.

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

import json
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
    TopicPartition,
)
from kafka_tiers.broker.admin_channel import AdminChannel
from kafka_tiers.config import BrokerConfig
from kafka_tiers.log.checkpoints import write_atomic
from kafka_tiers.log.config import LOG_TOPIC_KEYS, LogConfig
from kafka_tiers.log.errors import LogClosedError, LogDirError, OffsetOutOfRangeError
from kafka_tiers.log.log import Log
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.names import validate_topic
from kafka_tiers.log.records import ProducerRecord, Record, RecordBatch, build_batch
from kafka_tiers.log.segment import SegmentInfo
from kafka_tiers.plugins.hooks import Hooks
from kafka_tiers.remote.config import (
    TOPIC_KEYS,
    TopicTiering,
    resolve_topic_tiering,
    validate_broker,
)
from kafka_tiers.remote.guarded import GuardedRemoteStorage, secret_values
from kafka_tiers.remote.metrics import RemoteStorageMetrics
from kafka_tiers.remote.remote_log_manager import RemoteLogManager

log = logging.getLogger(__name__)

TOPICS_FILE = "kafka-tiers-topics.json"
TOPICS_FORMAT_VERSION = 1
#: the broker's own working directory inside the first log dir (remote index cache).
WORK_DIR = "kafka-tiers-remote"


#: Every topic-level key a topic may set.
TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(LOG_TOPIC_KEYS) | frozenset(TOPIC_KEYS)


class BrokerError(KafkaTiersError):
    """A broker operation was refused (unknown topic, topic exists, not leader, stopped)."""


class UnknownTopicError(BrokerError):
    """The topic or partition does not exist on this broker."""


class TopicExistsError(BrokerError):
    """A topic of that name exists already."""


class NotLeaderError(BrokerError):
    """This broker is not the partition's leader (produce refused)."""


@dataclass(frozen=True)
class TopicInfo:
    """A topic of this broker.

    Attributes:
        name: the topic.
        partitions: how many partitions it has.
        config: its topic-level overrides as given.
        tiering: its resolved tiering settings.
    """

    name: str
    partitions: int
    config: Mapping[str, str]
    tiering: TopicTiering

    @property
    def tiered(self) -> bool:
        """Whether the topic uses the remote tier."""
        return self.tiering.remote_storage_enable


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
    leader: bool = True
    leader_epoch: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Broker:
    """One in-process broker (see the module docstring).

    Args:
        config: the broker configuration (validated here when given as raw strings).
        hooks: the hook facade; by default one with every installed hook plugin.
        remote_storage: a storage plugin instance to use instead of loading
            ``remote.storage.manager.class`` (tests, tools); the broker wraps it in the core's
            wrapper and closes it at shutdown.
        time_fn: the clock (seconds) of the logs and the remote log manager.
        background: run the log maintenance and remote log manager schedulers (False: nothing
            runs unless called, e.g. :meth:`run_tiering`).

    Raises:
        ConfigError: an invalid configuration (one line naming the key).
    """

    def __init__(self, config: BrokerConfig | Mapping[str, str], *,
                 hooks: Hooks | None = None,
                 remote_storage: RemoteStorageManager | None = None,
                 time_fn: Callable[[], float] = time.time, background: bool = True) -> None:
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig(config)
        validate_broker(self.config)
        self.broker_id: int = self.config["broker.id"]
        self.hooks = hooks if hooks is not None else Hooks()
        self.remote_enabled: bool = bool(self.config["remote.log.storage.enable"])
        self._given_storage = remote_storage
        self._time = time_fn
        self._background = background
        self.metrics = RemoteStorageMetrics()
        self.log_manager: LogManager | None = None
        self.rlm: RemoteLogManager | None = None
        self._storage: RemoteStorageManager | None = None
        self._topics: dict[str, TopicInfo] = {}
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._lock = threading.RLock()
        self._started = False
        self._log_dir = Path(self.config["log.dirs"][0])

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        """Load the topics and logs, start the remote tier and the schedulers, lead every
        partition, fire ``broker_started``. Never waits for the remote tier.

        Raises:
            LogDirError: a log dir cannot be used.
            ConfigError, PluginError: the storage plugin is unknown or refuses its config.
        """
        with self._lock:
            if self._started:
                return self
            self._topics = self._read_topics()
            overrides = {name: self._local_overrides(info) for name, info in
                         self._topics.items()}
            self.log_manager = LogManager.from_config(
                self.config, topic_overrides=overrides, on_roll=self._on_roll, hooks=self.hooks,
                meta_properties={"version": "1", "node.id": str(self.broker_id)},
                time_fn=self._time, on_all_dirs_offline=self._all_dirs_offline)
            self.log_manager.startup()
            try:
                if self.remote_enabled:
                    self._start_remote()
                for info in self._topics.values():
                    for p in range(info.partitions):
                        self._open_partition(info, TopicPartition(info.name, p))
            except BaseException:
                self._stop_all()
                raise
            if self._background:
                AdminChannel(self.log_manager).attach()
                self.log_manager.start_scheduler()
                if self.rlm is not None:
                    self.rlm.start()
            self._started = True
        self.hooks.broker_started(self.broker_id, self.config)
        return self

    def _start_remote(self) -> None:
        name = self.config["remote.storage.manager.class"]
        rsm_config = self.config.prefixed("rsm.config.")
        source: RemoteStorageManager | Callable[[], RemoteStorageManager]
        if self._given_storage is not None:
            given = self._given_storage
            source = given if isinstance(given, GuardedRemoteStorage) else GuardedRemoteStorage(
                given, type(given).__name__, secrets=secret_values(rsm_config))
            self._storage = source
        else:
            secrets = secret_values(rsm_config)

            def load() -> RemoteStorageManager:
                try:
                    storage = GuardedRemoteStorage.load(name, rsm_config)
                except (PluginError, RemoteStorageError) as exc:
                    if isinstance(exc, PluginError) and getattr(exc, "cause",
                                                                None) != "configure failed":
                        raise
                    message = str(exc)
                    for secret in secrets:
                        message = message.replace(secret, "<hidden>")
                    raise RemoteStorageError(message, plugin=name, retriable=True) from None
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
            tiering_of=lambda tp: self._topic(tp.topic).tiering,
            work_dir=self._log_dir / WORK_DIR, hooks=self.hooks, metrics=self.metrics,
            time_fn=self._time)

    def _open_partition(self, info: TopicInfo, tp: TopicPartition) -> Log:
        assert self.log_manager is not None
        lg = self.log_manager.get_or_create_log(tp, overrides=self._local_overrides(info))
        lg.flush()
        lg.update_high_watermark(lg.log_end_offset)
        epoch = lg.leader_epoch_cache.latest_epoch
        state = _Partition(True, 0 if epoch is None else epoch)
        self._partitions[tp] = state
        if info.tiered and self.rlm is not None:
            self.rlm.become_leader(tp, state.leader_epoch)
        return lg

    def shutdown(self) -> None:
        """Fire ``broker_stopping``, stop the remote log manager (waiting for running copies
        and reads), close the storage plugin, and shut the logs down cleanly. No thread of the
        broker is left running. Safe to call twice."""
        with self._lock:
            if not self._started:
                return
            self.hooks.broker_stopping(self.broker_id, True)
            self._stop_all()
            self._started = False

    def _stop_all(self) -> None:
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

    # ------------------------------------------------------------------ topic metadata

    @property
    def topics_file(self) -> Path:
        """Where the topic metadata is kept."""
        return self._log_dir / TOPICS_FILE

    def _read_topics(self) -> dict[str, TopicInfo]:
        path = self.topics_file
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise LogDirError(f"cannot read {path}: {exc.strerror or exc}",
                              path=str(path)) from None
        try:
            doc = json.loads(raw)
            version = doc["version"]
            topics = doc["topics"]
        except (ValueError, KeyError, TypeError):
            raise LogDirError(f"{path} is not a kafka-tiers topics file", path=str(path)) from None
        if version != TOPICS_FORMAT_VERSION:
            raise LogDirError(f"{path} has format version {version}; this kafka-tiers reads "
                              f"version {TOPICS_FORMAT_VERSION} (written by a newer release?)",
                              path=str(path))
        out = {}
        for name, entry in topics.items():
            config = {str(k): str(v) for k, v in entry.get("config", {}).items()}
            out[name] = TopicInfo(name, int(entry["partitions"]), config,
                                  self._resolve(name, config))
        return out

    def _write_topics(self) -> None:
        doc = {"version": TOPICS_FORMAT_VERSION,
               "topics": {name: {"partitions": info.partitions, "config": dict(info.config)}
                          for name, info in sorted(self._topics.items())}}
        self._log_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.topics_file, json.dumps(doc, indent=2, sort_keys=True).encode())

    def _resolve(self, name: str, config: Mapping[str, str]) -> TopicTiering:
        unknown = sorted(set(config) - TOPIC_CONFIG_KEYS)
        if unknown:
            raise ConfigError(f"unknown topic config key {unknown[0]} for topic {name} "
                              f"(known: {', '.join(sorted(TOPIC_CONFIG_KEYS))})",
                              key=unknown[0])
        log_config = LogConfig.from_broker(self.config, config)
        return resolve_topic_tiering(self.config, config, retention_ms=log_config.retention_ms,
                                     retention_bytes=log_config.retention_bytes)

    @staticmethod
    def _local_overrides(info: TopicInfo) -> dict[str, str]:
        overrides = {k: v for k, v in info.config.items() if k in LOG_TOPIC_KEYS}
        if info.tiered:  # the remote log manager applies retention to tiered logs
            overrides.update({"retention.ms": "-1", "retention.bytes": "-1"})
        return overrides

    def _topic(self, name: str) -> TopicInfo:
        with self._lock:
            info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return info

    def topics(self) -> dict[str, TopicInfo]:
        """The topics of this broker by name."""
        with self._lock:
            return dict(self._topics)

    def topic(self, name: str) -> TopicInfo:
        """One topic.

        Raises:
            UnknownTopicError: no such topic.
        """
        return self._topic(name)

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, str] | None = None) -> list[TopicPartition]:
        """Create a topic with topic-level ``config`` overrides (``segment.bytes``,
        ``retention.ms``, ``remote.storage.enable``, ``local.retention.ms``, ...), persist it,
        lead its partitions and fire ``topic_created``.

        Raises:
            InvalidTopicError: an illegal name.
            TopicExistsError: the topic exists.
            ConfigError: an unknown key or an invalid value (one line naming the key).
        """
        self._require_started()
        validate_topic(name)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise ConfigError(f"partitions must be an integer >= 1, got {partitions!r}",
                              key="partitions")
        cfg = {str(k): str(v) for k, v in (config or {}).items()}
        tiering = self._resolve(name, cfg)
        info = TopicInfo(name, partitions, cfg, tiering)
        with self._lock:
            if name in self._topics:
                raise TopicExistsError(f"topic {name!r} exists already")
            self._topics[name] = info
            try:
                self._write_topics()
            except BaseException:
                del self._topics[name]
                raise
            assert self.log_manager is not None
            self.log_manager.topic_overrides[name] = self._local_overrides(info)
            tps = [TopicPartition(name, p) for p in range(partitions)]
            for tp in tps:
                self._open_partition(info, tp)
        self.hooks.topic_created(name, {tp.partition: [self.broker_id] for tp in tps})
        return tps

    def delete_topic(self, name: str) -> None:
        """Delete a topic: its remote data first (every remote segment, hooks
        ``remote_segment_deleted``), then its local logs and its metadata.

        Raises:
            UnknownTopicError: no such topic.
            RemoteStorageError: the remote deletion failed; nothing local was deleted and the
                topic still exists (repeat the call).
        """
        self._require_started()
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
        with self._lock:
            assert self.log_manager is not None
            for tp in tps:
                self._partitions.pop(tp, None)
                self.log_manager.delete_log(tp)
            self._topics.pop(name, None)
            self.log_manager.topic_overrides.pop(name, None)
            self._write_topics()

    # ------------------------------------------------------------------ partitions

    def _require_started(self) -> None:
        if not self._started:
            raise BrokerError("the broker is not started")

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

    def become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """Lead ``tp`` in ``leader_epoch`` (produce allowed; a tiered partition copies and
        applies retention, continuing after the highest remote offset).

        Raises:
            UnknownTopicError: no such partition here.
            ValueError: a stale leader epoch.
        """
        self._require_started()
        state = self._state(tp)
        if leader_epoch < state.leader_epoch:
            raise ValueError(f"stale leader epoch {leader_epoch} for {tp}: the current one "
                             f"is {state.leader_epoch}")
        if self.rlm is not None and self._topic(tp.topic).tiered:
            self.rlm.become_leader(tp, leader_epoch)
        state.leader, state.leader_epoch = True, leader_epoch

    def become_follower(self, tp: TopicPartition) -> None:
        """Follow ``tp``: produce is refused, the remote log manager stops copying and
        deleting for it (a copy in progress finishes) and only refreshes its remote list.

        Raises:
            UnknownTopicError: no such partition here.
        """
        self._require_started()
        state = self._state(tp)
        state.leader = False
        if self.rlm is not None and self._topic(tp.topic).tiered:
            self.rlm.become_follower(tp)

    def _on_roll(self, lg: Log, info: SegmentInfo) -> None:
        tp = lg.topic_partition
        if tp is None:
            return
        self.hooks.segment_rolled(tp, info.base_offset, info.next_offset)
        rlm = self.rlm
        if rlm is not None:
            rlm.trigger(tp)

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

        The log is flushed and the high watermark moves to the log end offset.

        Raises:
            UnknownTopicError: no such partition.
            NotLeaderError: this broker follows the partition.
            InvalidRecordError, RecordTooLargeError: bad or too large input.
        """
        self._require_started()
        state = self._state(tp)
        lg = self.log(tp)
        if not state.leader:
            raise NotLeaderError(f"broker {self.broker_id} is not the leader of {tp}")
        if isinstance(records, bytes | bytearray | memoryview):
            chunks = [bytes(records)]
        else:
            chunks = self._build_batches([_as_record(r) for r in records], batch_records,
                                         min(lg.config.max_message_bytes,
                                             lg.config.segment_bytes))
        with state.lock:
            first = None
            for chunk in chunks:
                # through the log manager: it follows the replica across a JBOD move's swap
                # and raises only when nothing was written
                info = self.log_manager.append(tp, chunk, leader_epoch=state.leader_epoch)
                if first is None:
                    first = info.first_offset
            self._flush_and_advance(tp)
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
        tiered = self.rlm is not None and self._topic(tp.topic).tiered
        if offset > lg.log_end_offset or offset < 0 or (
                not tiered and offset < lg.log_start_offset):
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range [{lg.log_start_offset}, "
                f"{lg.log_end_offset}] of {tp}", offset=offset,
                log_start_offset=lg.log_start_offset, log_end_offset=lg.log_end_offset)
        if offset >= lg.local_log_start_offset:
            try:
                data = self.log_manager.read(tp, offset, max_bytes, isolation="high_watermark")
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
        start of the first remote segment this broker knows of, when below the local log's).

        Raises:
            UnknownTopicError: no such partition.
        """
        lg = self.log(tp)
        if self.rlm is not None and self._topic(tp.topic).tiered:
            try:
                segs = self.rlm.remote_segments(tp)
            except RemoteStorageError:
                segs = []
            if segs:
                return min(segs[0].start_offset, lg.log_start_offset)
        return lg.log_start_offset

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
        if self.rlm is not None and self._topic(tp.topic).tiered:
            for md in self.rlm.remote_segments(tp):
                local = rows.get(md.start_offset)
                rows[md.start_offset] = SegmentRow(md.start_offset, md.end_offset,
                                                   md.segment_size_in_bytes,
                                                   local is not None, True, md.segment_id)
        return [rows[k] for k in sorted(rows)]

    def metrics_text(self) -> str:
        """The broker's tiered storage metrics in the Prometheus text format."""
        return self.metrics.text()


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
