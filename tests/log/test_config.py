"""The log section of the broker config and per-log settings."""

from __future__ import annotations

import pytest

from kafka_tiers.api import ConfigError
from kafka_tiers.config import BrokerConfig
from kafka_tiers.log.config import LONG_MAX, LogConfig


def test_kafka_defaults() -> None:
    cfg = BrokerConfig({})
    assert cfg["log.segment.bytes"] == 1073741824
    assert cfg["log.index.interval.bytes"] == 4096
    assert cfg["log.index.size.max.bytes"] == 10485760
    assert cfg["sanity.check.all.logs.enabled"] is True
    log = LogConfig.from_broker(cfg)
    assert log.retention_ms == 168 * 3600 * 1000
    assert log.segment_ms == 168 * 3600 * 1000
    assert log.flush_interval_messages == LONG_MAX


def test_alias_and_precedence() -> None:
    cfg = BrokerConfig({"log.dir": "/data/a", "log.retention.minutes": "5",
                        "log.roll.ms": "1000", "log.retention.bytes": "100"})
    assert cfg["log.dirs"] == ["/data/a"]
    log = LogConfig.from_broker(cfg)
    assert (log.retention_ms, log.segment_ms, log.retention_bytes) == (300000, 1000, 100)
    assert LogConfig.from_broker(BrokerConfig({"log.retention.hours": "-1"})).retention_ms == -1


def test_bad_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"log\.segment\.bytes"):
        BrokerConfig({"log.segment.bytes": "ten"})
    with pytest.raises(ConfigError, match=r"sanity\.check\.all\.logs\.enabled"):
        BrokerConfig({"sanity.check.all.logs.enabled": "maybe"})
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        LogConfig().with_overrides({"segment.bytes": "-5"})


def test_topic_overrides() -> None:
    log = LogConfig().with_overrides({"segment.bytes": "2048", "retention.ms": "-1",
                                      "message.timestamp.type": "LogAppendTime",
                                      "unrelated": "x"})
    assert (log.segment_bytes, log.retention_ms, log.log_append_time) == (2048, -1, True)
