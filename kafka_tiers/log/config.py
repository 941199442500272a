"""Configuration of the log engine: broker keys (Kafka's names and defaults) and per-log
settings.

:data:`LOG_KEYS` is the section registered in :data:`kafka_tiers.config.SECTIONS`.
:class:`LogConfig` is what a :class:`~kafka_tiers.log.log.Log` runs with; build it from a broker
config (:meth:`LogConfig.from_broker`) with optional topic-level overrides under Kafka's topic
names (``segment.bytes``, ``retention.ms``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.config import Bool, Choice, ConfigKey, Int, List, String

LONG_MAX = (1 << 63) - 1
_TS_TYPES = ("CreateTime", "LogAppendTime")

LOG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("log.dirs", List(String(), min_items=1), ["/tmp/kafka-logs"],
              "The directories holding the log data.", aliases=("log.dir",)),
    ConfigKey("log.segment.bytes", Int(min=14, bits=32), 1073741824,
              "The largest size of a single log segment file."),
    ConfigKey("log.roll.ms", Int(min=1), None,
              "Roll a new segment after this long (overrides log.roll.hours)."),
    ConfigKey("log.roll.hours", Int(min=1, bits=32), 168,
              "Roll a new segment after this many hours."),
    ConfigKey("log.roll.jitter.ms", Int(min=0), None,
              "Jitter subtracted from the roll time (overrides log.roll.jitter.hours)."),
    ConfigKey("log.roll.jitter.hours", Int(min=0, bits=32), 0,
              "Jitter subtracted from the roll time, in hours."),
    ConfigKey("log.retention.ms", Int(min=-1), None,
              "Delete segments older than this; -1 keeps them forever."),
    ConfigKey("log.retention.minutes", Int(min=-1, bits=32), None,
              "Retention in minutes (used when log.retention.ms is unset)."),
    ConfigKey("log.retention.hours", Int(min=-1, bits=32), 168,
              "Retention in hours (used when the ms and minutes keys are unset)."),
    ConfigKey("log.retention.bytes", Int(min=-1), -1,
              "Delete old segments while the log is larger than this; -1 for no limit."),
    ConfigKey("log.index.interval.bytes", Int(min=0, bits=32), 4096,
              "Bytes of log between two offset index entries."),
    ConfigKey("log.index.size.max.bytes", Int(min=4, bits=32), 10485760,
              "The largest size of an offset or time index file."),
    ConfigKey("log.flush.interval.messages", Int(min=1), LONG_MAX,
              "Fsync the log after this many messages."),
    ConfigKey("log.flush.interval.ms", Int(min=0), None,
              "Fsync the log when its oldest unflushed message is this old."),
    ConfigKey("log.flush.scheduler.interval.ms", Int(min=0), LONG_MAX,
              "How often the flusher checks logs (and flush.ms when log.flush.interval.ms "
              "is unset)."),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", Int(min=0, bits=32), 60000,
              "How often the recovery points are checkpointed."),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", Int(min=0, bits=32), 60000,
              "How often the log start offsets are checkpointed."),
    ConfigKey("log.retention.check.interval.ms", Int(min=1), 300000,
              "How often retention is applied."),
    ConfigKey("log.message.timestamp.type", Choice(*_TS_TYPES), "CreateTime",
              "Whether record timestamps are the producer's or the broker's at append.",
              aliases=("message.timestamp.type",)),
    ConfigKey("message.max.bytes", Int(min=0, bits=32), 1048588,
              "The largest record batch the log accepts."),
    ConfigKey("sanity.check.all.logs.enabled", Bool(), True,
              "Check every segment at startup (KIP-263); false checks only active segments "
              "after a clean shutdown and the rest lazily."),
    ConfigKey("num.recovery.threads.per.data.dir", Int(min=1, bits=32), 2,
              "Threads per log dir for loading and recovering logs at startup."),
    ConfigKey("log.segment.delete.delay.ms", Int(min=0), 60000,
              "How long a renamed -delete dir (a deleted topic's, a moved or stray replica's) "
              "waits before it is deleted.", aliases=("file.delete.delay.ms",)),
    ConfigKey("num.replica.move.threads", Int(min=1, bits=32), None,
              "Threads moving replicas between log dirs (KIP-113); default: one per log dir.",
              aliases=("num.replica.alter.log.dirs.threads",)),
    ConfigKey("log.open.files.max", Int(min=8, bits=32), 512,
              "The most file descriptors all logs of the process keep open between uses "
              "(segment files and index maps, active segments included); the least recently "
              "used are closed beyond it and reopened on next use. Not a Kafka key: Kafka "
              "keeps every segment's files open."),
    ConfigKey("intra.broker.throttled.rate", Int(min=1), LONG_MAX,
              "Bytes per second all replica moves between log dirs share (KIP-113); "
              "default unlimited.",
              aliases=("replica.alter.log.dirs.io.max.bytes.per.second",)),
    ConfigKey("producer.id.expiration.ms", Int(min=1, bits=32), 86400000,
              "A producer id idle this long (by its last batch's timestamp) is dropped from "
              "a partition's producer state; its next batch is accepted at any sequence."),
    ConfigKey("producer.id.expiration.check.interval.ms", Int(min=1, bits=32), 600000,
              "How often a partition drops its expired producer ids (checked on append)."),
)

#: topic-level name -> (broker key, type) for per-topic overrides.
LOG_TOPIC_KEYS: dict[str, tuple[str, Any]] = {
    "segment.bytes": ("segment_bytes", Int(min=14, bits=32)),
    "segment.ms": ("segment_ms", Int(min=1)),
    "segment.jitter.ms": ("segment_jitter_ms", Int(min=0)),
    "segment.index.bytes": ("max_index_size", Int(min=4, bits=32)),
    "index.interval.bytes": ("index_interval_bytes", Int(min=0, bits=32)),
    "retention.ms": ("retention_ms", Int(min=-1)),
    "retention.bytes": ("retention_bytes", Int(min=-1)),
    "flush.messages": ("flush_interval_messages", Int(min=1)),
    "flush.ms": ("flush_interval_ms", Int(min=0)),
    "message.timestamp.type": ("message_timestamp_type", Choice(*_TS_TYPES)),
    "max.message.bytes": ("max_message_bytes", Int(min=0, bits=32)),
    "remote.storage.enable": ("remote_storage_enable", Bool()),
    "min.insync.replicas": ("min_insync_replicas", Int(min=1, bits=32)),
}


@dataclass(frozen=True)
class LogConfig:
    """The settings one log runs with (Kafka's topic-level settings)."""

    segment_bytes: int = 1073741824
    segment_ms: int = 168 * 3600 * 1000
    segment_jitter_ms: int = 0
    retention_ms: int = 168 * 3600 * 1000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    max_index_size: int = 10485760
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    max_message_bytes: int = 1048588
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    #: the topic is tiered: the log start offset may lie below the first local segment (in
    #: the remote tier), so the checkpointed one is kept at load (Kafka's rule)
    remote_storage_enable: bool = False
    #: replicas in the ISR an ``acks=all`` produce needs (Kafka's topic-level override of the
    #: broker's ``min.insync.replicas``; the replication layer reads it, the log does not)
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:
            raise ConfigError(f"segment.bytes must be >= 14, got {self.segment_bytes}",
                              key="segment.bytes")
        if self.message_timestamp_type not in _TS_TYPES:
            raise ConfigError(
                f"message.timestamp.type must be CreateTime or LogAppendTime, got "
                f"{self.message_timestamp_type!r}", key="message.timestamp.type")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_broker(cls, broker: Mapping[str, Any],
                    overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The defaults a broker config gives every log, then topic-level ``overrides``.

        Raises:
            ConfigError: an override with a bad value (unknown override keys are ignored).
        """
        def get(key: str, default: Any = None) -> Any:
            try:
                return broker[key]
            except KeyError:
                return default

        retention = get("log.retention.ms")
        if retention is None and get("log.retention.minutes") is not None:
            retention = get("log.retention.minutes") * 60000
        if retention is None:
            hours = get("log.retention.hours", 168)
            retention = -1 if hours == -1 else hours * 3600000
        roll = get("log.roll.ms")
        if roll is None:
            roll = get("log.roll.hours", 168) * 3600000
        jitter = get("log.roll.jitter.ms")
        if jitter is None:
            jitter = get("log.roll.jitter.hours", 0) * 3600000
        flush_ms = get("log.flush.interval.ms")
        if flush_ms is None:
            flush_ms = get("log.flush.scheduler.interval.ms", LONG_MAX)
        config = cls(
            segment_bytes=get("log.segment.bytes", 1073741824),
            segment_ms=roll,
            segment_jitter_ms=jitter,
            retention_ms=retention,
            retention_bytes=get("log.retention.bytes", -1),
            index_interval_bytes=get("log.index.interval.bytes", 4096),
            max_index_size=get("log.index.size.max.bytes", 10485760),
            flush_interval_messages=get("log.flush.interval.messages", LONG_MAX),
            flush_interval_ms=flush_ms,
            message_timestamp_type=get("log.message.timestamp.type", "CreateTime"),
            max_message_bytes=get("message.max.bytes", 1048588),
            producer_id_expiration_ms=get("producer.id.expiration.ms", 86400000),
            producer_id_expiration_check_interval_ms=get(
                "producer.id.expiration.check.interval.ms", 600000),
            min_insync_replicas=int(get("min.insync.replicas", 1)),
        )
        return config.with_overrides(overrides or {})

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """A copy with topic-level overrides (``segment.bytes=...``) applied.

        Raises:
            ConfigError: naming the key and what was expected.
        """
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            if key not in LOG_TOPIC_KEYS:
                continue
            field, kind = LOG_TOPIC_KEYS[key]
            try:
                changes[field] = kind.parse(str(raw))
            except ValueError:
                raise ConfigError(f"invalid value {raw!r} for {key}: expected {kind.expected}",
                                  key=key, value=raw, expected=kind.expected) from None
        return replace(self, **changes) if changes else self


__all__ = ["LOG_KEYS", "LOG_TOPIC_KEYS", "LONG_MAX", "LogConfig"]
