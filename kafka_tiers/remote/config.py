"""Tiered storage configuration: the broker keys of the remote log manager and the per-topic
retention keys, resolved and validated.

:data:`REMOTE_KEYS` is the section registered in :data:`kafka_tiers.config.SECTIONS` (names per
DECISIONS.md: the design document's name first, Kafka's shipped name as alias).

Per topic (``create_topic(..., config={...})``), resolved by :func:`resolve_topic_tiering`:

* ``remote.storage.enable`` (Kafka): tier this topic; needs ``remote.log.storage.enable=true``
  on the broker.
* ``local.retention.ms`` / ``local.retention.bytes`` (Kafka): how long / how much stays on the
  local disk once copied; ``-2`` (the default) means "the total retention" (``retention.ms`` /
  ``retention.bytes``), ``-1`` unlimited. Must not exceed the total retention.
* ``remote.retention.period`` / ``remote.retention.bytes`` (document 004): the total retention
  of a tiered partition (remote tier included); ``-2`` (the default) means ``retention.ms`` /
  ``retention.bytes``, ``-1`` unlimited. Must not be below the local retention.
* ``remote.log.copy.disable`` (Kafka, KIP-950, default false): copy nothing new of a tiered
  topic; its remote data stays readable and remote retention still applies; its local
  segments are kept by the total retention. As Kafka, ``local.retention.ms`` /
  ``.bytes`` must then be ``-2`` or equal to the total retention.
* ``remote.log.delete.on.disable`` (Kafka, KIP-950, default false): turning
  ``remote.storage.enable`` off is accepted only with it true, and deletes the topic's remote
  data (:func:`check_tiering_change`).

Broker-wide defaults of the four retention keys are ``log.local.retention.ms``,
``log.local.retention.bytes`` (Kafka), ``log.remote.retention.period`` and
``log.remote.retention.bytes``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.config import Bool, ConfigKey, Int, String, ValueType
from kafka_tiers.remote.quota import UNLIMITED

#: "use the total retention" (Kafka's -2 for local retention).
USE_TOTAL_RETENTION = -2

#: Kafka's default retention (7 days): the minimum age of orphans when retention is unlimited.
DEFAULT_ORPHAN_AGE_MS = 7 * 24 * 3600 * 1000


class Float(ValueType):
    """A decimal number within ``[min, max]``."""

    def __init__(self, min: float, max: float) -> None:
        self.min, self.max = min, max
        self.expected = f"a number from {min} to {max}"

    def parse(self, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError(self.expected) from None
        if not self.min <= value <= self.max:
            raise ValueError(self.expected)
        return value


def _plugin_name(value: str) -> str | None:
    if re.fullmatch(r"[A-Za-z0-9_.-]+(:[A-Za-z_][A-Za-z0-9_.]*)?", value):
        return None
    return "an entry-point name (local) or an import path (pkg.module:Class)"


def _retention(name: str, doc: str) -> ConfigKey:
    return ConfigKey(name, Int(min=-2), USE_TOTAL_RETENTION, doc)


REMOTE_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("remote.log.storage.enable", Bool(), False,
              "Enable tiered storage on this broker (topics opt in with "
              "remote.storage.enable).", aliases=("remote.log.storage.system.enable",)),
    ConfigKey("remote.storage.manager.class", String(), "local",
              "The RemoteStorageManager plugin: an entry-point name or pkg.module:Class; its "
              "settings are the rsm.config.* keys.",
              aliases=("remote.log.storage.manager.class.name",), check=_plugin_name),
    ConfigKey("remote.log.manager.task.interval.ms", Int(min=1), 30000,
              "How often each partition's copy / retention task runs."),
    ConfigKey("remote.log.manager.task.retry.backoff.ms", Int(min=1), 500,
              "The first wait before retrying a failed remote log manager task."),
    ConfigKey("remote.log.manager.task.retry.backoff.max.ms", Int(min=1), 30000,
              "The longest wait between retries (the backoff doubles up to it)."),
    ConfigKey("remote.log.manager.task.retry.jitter", Float(0.0, 0.5), 0.2,
              "Random fraction (+/-) applied to each backoff."),
    ConfigKey("remote.log.manager.thread.pool.size", Int(min=1, bits=32), 2,
              "Threads copying segments and applying retention."),
    ConfigKey("remote.log.reader.threads", Int(min=1, bits=32), 10,
              "Threads of the dedicated remote read pool."),
    ConfigKey("remote.log.reader.max.pending.tasks", Int(min=1, bits=32), 100,
              "Remote reads that may wait for a reader thread; more are refused "
              "(retriable)."),
    ConfigKey("remote.log.index.file.cache.total.size.bytes", Int(min=1), 1073741824,
              "Bytes of remote offset indexes kept in the local cache."),
    ConfigKey("remote.fetch.max.wait.ms", Int(min=1, bits=32), 500,
              "How long a remote read may take before it fails with a retriable error."),
    ConfigKey("remote.log.manager.copy.max.bytes.per.second", Int(min=1), UNLIMITED,
              "Bytes per second all segment copies of this broker may upload together "
              "(KIP-956; the default, Long.MAX_VALUE, is unlimited). A copy waits for the rate "
              "to fall under it, then uploads whole."),
    ConfigKey("remote.log.manager.copy.quota.window.num", Int(min=1, bits=32), 11,
              "Windows the copy rate is measured over."),
    ConfigKey("remote.log.manager.copy.quota.window.size.seconds", Int(min=1, bits=32), 1,
              "Length of each window of the copy rate."),
    ConfigKey("remote.log.manager.fetch.max.bytes.per.second", Int(min=1), UNLIMITED,
              "Bytes per second all remote reads of this broker may download together "
              "(KIP-956; the default, Long.MAX_VALUE, is unlimited). Over it, a fetch skips "
              "the remote read (no records, no error: the client asks again)."),
    ConfigKey("remote.log.manager.fetch.quota.window.num", Int(min=1, bits=32), 11,
              "Windows the remote fetch rate is measured over."),
    ConfigKey("remote.log.manager.fetch.quota.window.size.seconds", Int(min=1, bits=32), 1,
              "Length of each window of the remote fetch rate."),
    _retention("log.local.retention.ms",
               "Default local.retention.ms of tiered topics (-2: the total retention)."),
    _retention("log.local.retention.bytes",
               "Default local.retention.bytes of tiered topics (-2: the total retention)."),
    _retention("log.remote.retention.period",
               "Default remote.retention.period of tiered topics (-2: retention.ms)."),
    _retention("log.remote.retention.bytes",
               "Default remote.retention.bytes of tiered topics (-2: retention.bytes)."),
)

#: topic-level tiering key -> the broker key holding its default.
TOPIC_KEYS: dict[str, str | None] = {
    "remote.storage.enable": None,
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
    "remote.retention.period": "log.remote.retention.period",
    "remote.retention.bytes": "log.remote.retention.bytes",
    "remote.log.copy.disable": None,
    "remote.log.delete.on.disable": None,
}

#: the topic-level tiering keys that are booleans (default false); the others are longs.
BOOLEAN_TOPIC_KEYS: frozenset[str] = frozenset(
    {"remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable"})


@dataclass(frozen=True)
class TopicTiering:
    """The resolved tiering settings of one topic (-1 means unlimited everywhere).

    Attributes:
        remote_storage_enable: the topic is tiered.
        retention_ms, retention_bytes: the topic's total retention (``retention.ms/bytes``).
        local_retention_ms, local_retention_bytes: local retention of copied segments.
        remote_retention_ms, remote_retention_bytes: total retention of a tiered partition,
            applied by deleting the oldest remote segments.
        copy_disable: ``remote.log.copy.disable`` (KIP-950): nothing new is copied.
        delete_on_disable: ``remote.log.delete.on.disable`` (KIP-950).
    """

    remote_storage_enable: bool = False
    retention_ms: int = -1
    retention_bytes: int = -1
    local_retention_ms: int = -1
    local_retention_bytes: int = -1
    remote_retention_ms: int = -1
    remote_retention_bytes: int = -1
    copy_disable: bool = False
    delete_on_disable: bool = False

    @property
    def orphan_min_age_ms(self) -> int:
        """How old unreferenced remote objects must be before they are collected: the remote
        retention time, or 7 days when it is unlimited."""
        return self.remote_retention_ms if self.remote_retention_ms >= 0 \
            else DEFAULT_ORPHAN_AGE_MS


def _int(key: str, raw: Any, minimum: int = -2) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ConfigError(f"invalid value {raw!r} for {key}: expected an integer >= {minimum}",
                          key=key, value=str(raw), expected=f"an integer >= {minimum}")
    return value


def _bool(key: str, raw: Any) -> bool:
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"invalid value {raw!r} for {key}: expected true or false",
                          key=key, value=str(raw), expected="true or false")
    return text == "true"


def _not_above(name: str, value: int, total_name: str, total: int) -> None:
    """``value`` (a local retention) must not exceed ``total``; -1 is unlimited."""
    if total == -1:
        return
    if value == -1 or value > total:
        shown = "-1 (unlimited)" if value == -1 else str(value)
        raise ConfigError(f"{name}={shown} exceeds {total_name}={total}: the local retention "
                          f"must not exceed the total retention", key=name, value=str(value),
                          expected=f"at most {total}")


def resolve_topic_tiering(broker: Mapping[str, Any], overrides: Mapping[str, str] | None,
                          *, retention_ms: int, retention_bytes: int) -> TopicTiering:
    """Resolve and validate a topic's tiering keys.

    Args:
        broker: the broker config (``remote.log.storage.enable`` and the retention defaults).
        overrides: the topic-level config given at topic creation.
        retention_ms, retention_bytes: the topic's total retention (its ``LogConfig``).

    Raises:
        ConfigError: one line naming the key: a malformed value, ``remote.storage.enable``
            without tiered storage on the broker, or a local retention above the total one.
    """
    overrides = dict(overrides or {})

    def get(key: str) -> int:
        if key in overrides:
            return _int(key, overrides[key])
        default_key = TOPIC_KEYS[key]
        assert default_key is not None
        try:
            return int(broker[default_key])
        except KeyError:
            return USE_TOTAL_RETENTION

    def flag(key: str) -> bool:
        return _bool(key, overrides[key]) if key in overrides else False

    enable = flag("remote.storage.enable")
    copy_disable = flag("remote.log.copy.disable")
    delete_on_disable = flag("remote.log.delete.on.disable")
    if enable and not broker.get("remote.log.storage.enable", False):
        raise ConfigError("remote.storage.enable=true needs tiered storage on the broker: set "
                          "remote.log.storage.enable=true", key="remote.storage.enable",
                          value="true", expected="false while the broker has no remote tier")
    local_ms = get("local.retention.ms")
    local_bytes = get("local.retention.bytes")
    remote_ms = get("remote.retention.period")
    remote_bytes = get("remote.retention.bytes")
    remote_ms = retention_ms if remote_ms == USE_TOTAL_RETENTION else remote_ms
    remote_bytes = retention_bytes if remote_bytes == USE_TOTAL_RETENTION else remote_bytes
    if enable and copy_disable:  # Kafka's validateRetentionConfigsWhenRemoteCopyDisabled
        for key, local, total_key, total in (
                ("local.retention.bytes", local_bytes, "retention.bytes", remote_bytes),
                ("local.retention.ms", local_ms, "retention.ms", remote_ms)):
            if local != USE_TOTAL_RETENTION and local != total:
                raise ConfigError(
                    f"When `remote.log.copy.disable` is set to true, the `{key}` and "
                    f"`{total_key}` must be set to the identical value because there will be "
                    f"no more logs copied to the remote storage ({key}={local}, total "
                    f"{total}: set {key}=-2)", key=key, value=str(local),
                    expected=f"-2 or {total}")
    local_ms = remote_ms if local_ms == USE_TOTAL_RETENTION else local_ms
    local_bytes = remote_bytes if local_bytes == USE_TOTAL_RETENTION else local_bytes
    if enable:
        _not_above("local.retention.ms", local_ms, "remote.retention.period", remote_ms)
        _not_above("local.retention.bytes", local_bytes, "remote.retention.bytes",
                   remote_bytes)
    return TopicTiering(enable, retention_ms, retention_bytes, local_ms, local_bytes,
                        remote_ms, remote_bytes, copy_disable, delete_on_disable)


#: Kafka's refusal of turning tiering off without deleting the remote data (KIP-950).
DISABLE_WITHOUT_DELETE = (
    "It is invalid to disable remote storage without deleting remote data. If you want to "
    "keep the remote data and turn to read only, please set "
    "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote "
    "storage and delete all remote data, please set "
    "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")


def check_tiering_change(topic: str, before: TopicTiering, after: TopicTiering) -> None:
    """Whether an existing topic may go from ``before`` to ``after`` (KIP-950, Kafka's
    ``LogConfig.validateTurningOffRemoteStorageWithDelete``): turning
    ``remote.storage.enable`` off needs ``remote.log.delete.on.disable=true`` in the new
    config (the remote data is then deleted); turning it on for an existing topic is not
    supported here.

    Raises:
        ConfigError: the change is refused (Kafka's message for the first case).
    """
    if before.remote_storage_enable and not after.remote_storage_enable:
        if not after.delete_on_disable:
            raise ConfigError(DISABLE_WITHOUT_DELETE, key="remote.storage.enable",
                              value="false", expected="true, or "
                              "remote.log.delete.on.disable=true with it")
    elif after.remote_storage_enable and not before.remote_storage_enable:
        raise ConfigError(
            f"remote.storage.enable of topic {topic} cannot change from false to true: "
            "tiering an existing topic is not supported (create a new topic with "
            "remote.storage.enable=true)", key="remote.storage.enable", value="true",
            expected="false")


def validate_broker(broker: Mapping[str, Any]) -> None:
    """Cross-key checks of the broker's tiering keys.

    Raises:
        ConfigError: the backoff maximum is below the first backoff, or a broker-wide local
            retention default exceeds the remote one.
    """
    first = broker["remote.log.manager.task.retry.backoff.ms"]
    most = broker["remote.log.manager.task.retry.backoff.max.ms"]
    if most < first:
        raise ConfigError(
            f"remote.log.manager.task.retry.backoff.max.ms={most} is below "
            f"remote.log.manager.task.retry.backoff.ms={first}",
            key="remote.log.manager.task.retry.backoff.max.ms", value=str(most),
            expected=f"at least {first}")
    for local, remote in (("log.local.retention.ms", "log.remote.retention.period"),
                          ("log.local.retention.bytes", "log.remote.retention.bytes")):
        lv, rv = broker[local], broker[remote]
        if lv >= -1 and rv >= -1:
            _not_above(local, lv, remote, rv)


__all__ = [
    "BOOLEAN_TOPIC_KEYS",
    "DEFAULT_ORPHAN_AGE_MS",
    "DISABLE_WITHOUT_DELETE",
    "REMOTE_KEYS",
    "TOPIC_KEYS",
    "USE_TOTAL_RETENTION",
    "Float",
    "TopicTiering",
    "check_tiering_change",
    "resolve_topic_tiering",
    "validate_broker",
]
