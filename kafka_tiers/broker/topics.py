"""Topic configuration, written once for the standalone broker and the cluster's controller:
the topic-level keys, their validation and resolution against the broker config, the overrides
a topic's local logs run with, and the standalone broker's topics file.

Topic-level keys
    the log engine's (:data:`~kafka_tiers.log.config.LOG_TOPIC_KEYS`: ``segment.bytes``,
    ``retention.ms``, ...) and the tiering keys (:data:`~kafka_tiers.remote.config.TOPIC_KEYS`:
    ``remote.storage.enable``, ``local.retention.ms``, ...). Any other key is refused.
Local overrides
    a topic's local logs take its log keys; the local logs of a tiered topic keep everything
    (``retention.ms=-1``, ``retention.bytes=-1``): the remote log manager applies local
    retention to segments once they are committed remotely, and the total retention through
    the remote tier; they also get ``remote.storage.enable=true``, so a tiered log keeps its
    log start offset below its first local segment across restarts.
The topics file (a standalone broker's topic metadata)
    ``<first log dir>/kafka-tiers-topics.json``, a small versioned JSON document
    (``{"version": 1, "topics": {"orders": {"partitions": 3, "config": {...},
    "topic_id": "<uuid>"}}}``; a topic written before topic ids existed has none until a
    client first needs it, then it is given one and the file written back) replaced
    crash-safely on every change (temporary file, fsync, rename, fsync of the directory). A
    file of a newer ``version`` is refused. In a cluster the metadata store holds topics.

This module imports nothing of the broker assembly or the cluster layer, so the controller is
handed a :class:`TopicConfigs` without depending on the broker.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.log.checkpoints import write_atomic
from kafka_tiers.log.config import LOG_TOPIC_KEYS, LogConfig
from kafka_tiers.log.errors import LogDirError
from kafka_tiers.remote.config import (
    TOPIC_KEYS,
    TopicTiering,
    check_tiering_change,
    resolve_topic_tiering,
)

TOPICS_FILE = "kafka-tiers-topics.json"
TOPICS_FORMAT_VERSION = 1

#: Every topic-level key a topic may set.
TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(LOG_TOPIC_KEYS) | frozenset(TOPIC_KEYS)


@dataclass(frozen=True)
class TopicInfo:
    """A topic of this broker.

    Attributes:
        name: the topic.
        partitions: how many partitions it has.
        config: its topic-level overrides as given.
        tiering: its resolved tiering settings.
        topic_id: its topic id (a UUID string, given at creation), or None for a topic
            created before topic ids existed that has not been given one yet.
    """

    name: str
    partitions: int
    config: Mapping[str, str]
    tiering: TopicTiering
    topic_id: str | None = None

    @property
    def tiered(self) -> bool:
        """Whether the topic uses the remote tier."""
        return self.tiering.remote_storage_enable


class TopicConfigs:
    """Validates and resolves topic-level configs against one broker config.

    Args:
        broker: the broker config (its log defaults, ``remote.log.storage.enable`` and the
            tiering defaults).

    Resolutions are cached per distinct config (thread-safe); every method is a pure function
    of the broker config and its arguments.
    """

    def __init__(self, broker: Mapping[str, Any]) -> None:
        self.broker = broker
        self._cache: dict[tuple[tuple[str, str], ...], TopicTiering] = {}
        self._lock = threading.Lock()

    @staticmethod
    def normalize(config: Mapping[str, Any] | None) -> dict[str, str]:
        """``config`` with keys and values as strings (as stored and sent)."""
        return {str(k): str(v) for k, v in (config or {}).items()}

    def tiering(self, topic: str, config: Mapping[str, Any] | None) -> TopicTiering:
        """Validate ``config`` for ``topic`` and return its resolved tiering settings.

        Raises:
            ConfigError: an unknown key, a malformed value, ``remote.storage.enable=true``
                without tiered storage on the broker, or a local retention above the total
                one (one line naming the key).
        """
        cfg = self.normalize(config)
        key = tuple(sorted(cfg.items()))
        with self._lock:
            known = self._cache.get(key)
        if known is not None:
            return known
        unknown = sorted(set(cfg) - TOPIC_CONFIG_KEYS)
        if unknown:
            raise ConfigError(f"unknown topic config key {unknown[0]} for topic {topic} "
                              f"(known: {', '.join(sorted(TOPIC_CONFIG_KEYS))})",
                              key=unknown[0])
        log_config = LogConfig.from_broker(self.broker, cfg)
        tiering = resolve_topic_tiering(self.broker, cfg, retention_ms=log_config.retention_ms,
                                        retention_bytes=log_config.retention_bytes)
        with self._lock:
            self._cache[key] = tiering
        return tiering

    def check_new_partitions(self, topic: str, partitions: Any, *, existing: int = 0,
                             broker_holds: int | None = None) -> int:
        """Check a request for ``partitions`` new partitions of ``topic`` (which has
        ``existing``) against the broker's bounds, before anything is created:
        ``max.request.partitions``, ``max.topic.partitions`` and, when ``broker_holds`` (the
        partitions this broker holds now) is given, ``max.broker.partitions``.

        Returns:
            ``partitions`` as an int.

        Raises:
            LimitExceededError: ``INVALID_PARTITIONS`` or ``POLICY_VIOLATION`` (see
                :mod:`kafka_tiers.placement.limits`).
        """
        from kafka_tiers.placement.limits import check_broker_partitions, check_new_partitions

        n = check_new_partitions(self.broker, partitions, existing=existing, topic=topic)
        if broker_holds is not None:
            me = int(self.broker.get("broker.id", 0) or 0)
            check_broker_partitions(self.broker, {me: broker_holds}, [[me]] * n)
        return n

    def validate(self, topic: str, config: Mapping[str, Any] | None) -> dict[str, str]:
        """The normalized ``config`` of a new topic, once it is valid.

        Raises:
            ConfigError: as :meth:`tiering`.
        """
        cfg = self.normalize(config)
        self.tiering(topic, cfg)
        return cfg

    def validate_change(self, topic: str, current: Mapping[str, Any] | None,
                        config: Mapping[str, Any] | None) -> dict[str, str]:
        """The normalized ``config`` replacing an existing topic's ``current`` one, once it is
        valid (as :meth:`validate`) and a change the topic can take
        (:func:`~kafka_tiers.remote.config.check_tiering_change`, KIP-950):
        ``remote.storage.enable`` may be turned off only with
        ``remote.log.delete.on.disable=true`` (the remote data is then deleted), and cannot
        be turned on for an existing topic.

        Raises:
            ConfigError: as :meth:`tiering`, or a refused ``remote.storage.enable`` change.
        """
        cfg = self.validate(topic, config)
        check_tiering_change(topic, self.tiering(topic, self.normalize(current)),
                             self.tiering(topic, cfg))
        return cfg

    def info(self, topic: str, partitions: int, config: Mapping[str, Any] | None,
             topic_id: str | None = None) -> TopicInfo:
        """A :class:`TopicInfo` with the resolved tiering.

        Raises:
            ConfigError: as :meth:`tiering`.
        """
        cfg = self.normalize(config)
        return TopicInfo(topic, partitions, cfg, self.tiering(topic, cfg), topic_id)

    def local_overrides(self, config: Mapping[str, Any] | None, topic: str = "?"
                        ) -> dict[str, str]:
        """The overrides of a topic's local logs (see the module docstring).

        Raises:
            ConfigError: as :meth:`tiering`.
        """
        cfg = self.normalize(config)
        out = {k: v for k, v in cfg.items() if k in LOG_TOPIC_KEYS}
        out.pop("remote.storage.enable", None)
        if self.tiering(topic, cfg).remote_storage_enable:
            out.update({"retention.ms": "-1", "retention.bytes": "-1",
                        "remote.storage.enable": "true"})
        return out


class TopicsFile:
    """A standalone broker's topic metadata (see the module docstring).

    Args:
        path: the file (``<first log dir>/kafka-tiers-topics.json``).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[str, tuple[int, dict[str, str], str | None]]:
        """``{topic: (partitions, config, topic id or None)}``; empty when the file does not
        exist.

        Raises:
            LogDirError: the file cannot be read, is not a topics file, or has another
                format version.
        """
        path = self.path
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
        except (ValueError, KeyError, TypeError, RecursionError):
            raise LogDirError(f"{path} is not a kafka-tiers topics file", path=str(path)) from None
        if version != TOPICS_FORMAT_VERSION:
            raise LogDirError(f"{path} has format version {version}; this kafka-tiers reads "
                              f"version {TOPICS_FORMAT_VERSION} (written by a newer release?)",
                              path=str(path))
        try:
            return {str(name): (int(entry["partitions"]),
                                TopicConfigs.normalize(entry.get("config", {})),
                                str(entry["topic_id"]) if entry.get("topic_id") else None)
                    for name, entry in topics.items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            raise LogDirError(f"{path} is not a kafka-tiers topics file", path=str(path)) from None

    def write(self, topics: Mapping[str, TopicInfo]) -> None:
        """Replace the file with ``topics`` crash-safely.

        Raises:
            OSError: the file could not be written (the old one is intact).
        """
        doc = {"version": TOPICS_FORMAT_VERSION,
               "topics": {name: {"partitions": info.partitions, "config": dict(info.config),
                                 **({"topic_id": info.topic_id} if info.topic_id else {})}
                          for name, info in sorted(topics.items())}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(doc, indent=2, sort_keys=True).encode())


__all__ = [
    "TOPICS_FILE",
    "TOPICS_FORMAT_VERSION",
    "TOPIC_CONFIG_KEYS",
    "TopicConfigs",
    "TopicInfo",
    "TopicsFile",
]
