"""Configs through the Kafka admin APIs (DescribeConfigs v1-4, AlterConfigs v0-2,
IncrementalAlterConfigs v0-1) with confluent-kafka's AdminClient, kafka-python's
KafkaAdminClient and raw requests at every version: topic configs described with their
sources and synonyms, altered (stored, applied at once to every replica's log and to the
remote tier's settings), unknown keys refused; broker configs read-only, secrets never shown."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import KafkaAdminClient

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.kafka.codec import REQUESTS
from tests.broker import flaky_storage
from tests.kafka.clients import kafka_python_common
from tests.kafka.test_admin_topics import call, controller_of, others, wait_for

DESCRIBE, ALTER, INCREMENTAL = 32, 33, 44
TOPIC, BROKER = 2, 4
NONE, UNKNOWN_TOPIC, INVALID_CONFIG, INVALID_REQUEST, POLICY_VIOLATION = 0, 3, 40, 42, 44
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
BOOLEAN, INT, LONG = 1, 3, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def confluent_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


@contextlib.contextmanager
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(**kafka_python_common(bootstrap))
    try:
        yield admin
    finally:
        admin.close()


def outcome(futures: dict[Any, Any]) -> list[Any]:
    """The result (or the KafkaError) of each confluent-kafka future, in order."""
    out = []
    for fut in futures.values():
        try:
            out.append(fut.result())
        except Exception as exc:
            out.append(exc.args[0])
    return out


def describe(address: str, rtype: int, name: str, version: int = 4,
             keys: list[str] | None = None) -> Any:
    cls = REQUESTS[DESCRIBE][version]
    resp = call(address, DESCRIBE, version, resources=[cls.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=True, include_documentation=True)
    [result] = resp.results
    return result


def incremental(address: str, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                version: int = 1, validate_only: bool = False) -> Any:
    cls = REQUESTS[INCREMENTAL][version].AlterConfigsResource
    resp = call(address, INCREMENTAL, version, validate_only=validate_only, resources=[cls(
        resource_type=rtype, resource_name=name, configs=[cls.AlterableConfig(
            name=k, config_operation=op, value=v) for k, op, v in ops])])
    [row] = resp.responses
    return row


def alter(address: str, rtype: int, name: str, configs: dict[str, str | None],
          version: int = 2, validate_only: bool = False) -> Any:
    cls = REQUESTS[ALTER][version].AlterConfigsResource
    resp = call(address, ALTER, version, validate_only=validate_only, resources=[cls(
        resource_type=rtype, resource_name=name, configs=[cls.AlterableConfig(
            name=k, value=v) for k, v in configs.items()])])
    [row] = resp.responses
    return row


@pytest.fixture
def standalone(make_kafka_broker: Callable[..., Broker]) -> Broker:
    """A broker whose server.properties sets log.retention.hours (a static broker config)."""
    b = make_kafka_broker(background=False, **{"log.retention.hours": "48"})
    b.create_topic("orders", 2, {"segment.bytes": "1048576"})
    return b


# ---------------------------------------------------------------------- describe

@pytest.mark.parametrize("version", range(1, 5))
def test_describe_topic_configs_with_sources_synonyms_types_and_docs(standalone: Broker,
                                                                    version: int) -> None:
    result = describe(standalone.bootstrap_servers, TOPIC, "orders", version)
    assert result.error_code == NONE
    entries = {e.name: e for e in result.configs}
    assert set(entries) >= {"segment.bytes", "retention.ms", "remote.storage.enable",
                            "local.retention.ms", "max.message.bytes"}
    seg, ret, flush = entries["segment.bytes"], entries["retention.ms"], \
        entries["flush.messages"]
    assert (seg.value, seg.config_source, seg.read_only) == ("1048576", DYNAMIC_TOPIC_CONFIG,
                                                             False)
    assert (ret.value, ret.config_source) == (str(48 * 3600 * 1000), STATIC_BROKER_CONFIG)
    assert flush.config_source == DEFAULT_CONFIG
    assert [(s.name, s.value, s.source) for s in seg.synonyms] == [
        ("segment.bytes", "1048576", DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", "1073741824", DEFAULT_CONFIG)]
    assert [(s.name, s.value, s.source) for s in ret.synonyms] == [
        ("log.retention.hours", "48", STATIC_BROKER_CONFIG)]
    if version >= 3:
        assert (seg.config_type, ret.config_type) == (INT, LONG)
        assert entries["remote.storage.enable"].config_type == BOOLEAN
        assert seg.documentation and "segment" in seg.documentation
    only = describe(standalone.bootstrap_servers, TOPIC, "orders", version,
                    keys=["retention.ms", "no.such.key"])
    assert [e.name for e in only.configs] == ["retention.ms"]
    missing = describe(standalone.bootstrap_servers, TOPIC, "nope", version)
    assert missing.error_code == UNKNOWN_TOPIC


def test_describe_with_confluent_and_kafka_python(standalone: Broker) -> None:
    admin = confluent_admin(standalone.bootstrap_servers)
    [topic, broker] = outcome(admin.describe_configs([
        ConfigResource("topic", "orders"), ConfigResource("broker", "1")], request_timeout=10))
    assert topic["segment.bytes"].value == "1048576"
    assert topic["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert topic["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker["broker.id"].value == "1" and broker["broker.id"].is_read_only
    assert broker["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    with kp_admin(standalone.bootstrap_servers) as kp:
        got = kp.describe_configs([KpConfigResource("TOPIC", "orders")],
                                  config_filter="modified")
        assert set(got["topic"]["orders"]) == {"segment.bytes"}  # the dynamic override
        got = kp.describe_configs([KpConfigResource("BROKER", "1")], include_synonyms=True,
                                  config_filter="all")
        assert got["broker"]["1"]["log.retention.hours"]["value"] == "48"


def test_broker_configs_are_read_only_and_never_show_secrets(
        make_kafka_broker: Callable[..., Broker], tmp_path: Path) -> None:
    b = make_kafka_broker(background=False, **{
        "remote.log.storage.enable": "true",
        "remote.storage.manager.class": flaky_storage.PATH,
        "rsm.config.dir": str(tmp_path / "remote"), "rsm.config.password": "hunter2"})
    result = describe(b.bootstrap_servers, BROKER, "1")
    assert result.error_code == NONE and result.configs
    assert all(e.read_only for e in result.configs)
    assert "hunter2" not in repr(result)
    assert not [e.name for e in result.configs if e.name.startswith(("rsm.config.", "placer."))]
    assert describe(b.bootstrap_servers, BROKER, "").configs == []
    other = describe(b.bootstrap_servers, BROKER, "7")
    assert other.error_code == INVALID_REQUEST and "broker 1" in other.error_message
    row = incremental(b.bootstrap_servers, BROKER, "1", [("log.retention.ms", SET, "5")])
    assert row.error_code == POLICY_VIOLATION and "server.properties" in row.error_message
    row = alter(b.bootstrap_servers, BROKER, "1", {"log.retention.ms": "5"})
    assert row.error_code == POLICY_VIOLATION
    assert b.config["log.retention.ms"] is None


# ---------------------------------------------------------------------- alter (standalone)

@pytest.mark.parametrize("version", range(0, 2))
def test_incremental_alter_topic_config_applies_at_once(standalone: Broker,
                                                        version: int) -> None:
    addr = standalone.bootstrap_servers
    tp = TopicPartition("orders", 1)
    row = incremental(addr, TOPIC, "orders", [("segment.bytes", SET, "65536"),
                                              ("retention.ms", SET, "60000")], version)
    assert row.error_code == NONE, row.error_message
    assert standalone.topic("orders").config == {"segment.bytes": "65536",
                                                 "retention.ms": "60000"}
    assert standalone.log(tp).config.segment_bytes == 65536
    assert standalone.log(tp).config.retention_ms == 60000
    row = incremental(addr, TOPIC, "orders", [("segment.bytes", DELETE, None)], version)
    assert row.error_code == NONE
    assert standalone.topic("orders").config == {"retention.ms": "60000"}
    assert standalone.log(tp).config.segment_bytes == 1073741824
    # refusals name the key; nothing changes
    for ops, word in [([("no.such.key", SET, "1")], "no.such.key"),
                      ([("segment.bytes", SET, "tiny")], "segment.bytes"),
                      ([("segment.bytes", APPEND, "1")], "APPEND"),
                      ([("retention.ms", SUBTRACT, "1")], "SUBTRACT"),
                      ([("segment.bytes", SET, None)], "segment.bytes"),
                      ([("remote.storage.enable", SET, "true")], "remote.storage.enable")]:
        row = incremental(addr, TOPIC, "orders", ops, version)
        assert row.error_code == INVALID_CONFIG and word in row.error_message, ops
    row = incremental(addr, TOPIC, "orders", [("flush.ms", SET, "5"), ("flush.ms", DELETE,
                                                                       None)], version)
    assert row.error_code == INVALID_REQUEST
    row = incremental(addr, TOPIC, "orders", [("flush.ms", SET, "5")], version,
                      validate_only=True)
    assert row.error_code == NONE and "flush.ms" not in standalone.topic("orders").config
    row = incremental(addr, TOPIC, "nope", [("flush.ms", SET, "5")], version)
    assert row.error_code == UNKNOWN_TOPIC
    assert standalone.topic("orders").config == {"retention.ms": "60000"}


@pytest.mark.parametrize("version", range(0, 3))
def test_alter_configs_replaces_the_topic_overrides(standalone: Broker, version: int) -> None:
    addr = standalone.bootstrap_servers
    row = alter(addr, TOPIC, "orders", {"retention.ms": "1000"}, version, validate_only=True)
    assert row.error_code == NONE
    assert standalone.topic("orders").config == {"segment.bytes": "1048576"}
    row = alter(addr, TOPIC, "orders", {"retention.ms": "1000"}, version)
    assert row.error_code == NONE
    assert standalone.topic("orders").config == {"retention.ms": "1000"}  # segment.bytes reset
    assert standalone.log(TopicPartition("orders", 0)).config.segment_bytes == 1073741824
    for configs in ({"bogus": "1"}, {"retention.ms": None}, {"retention.ms": "x"}):
        assert alter(addr, TOPIC, "orders", configs, version).error_code == INVALID_CONFIG
    assert standalone.topic("orders").config == {"retention.ms": "1000"}


def test_altered_topic_config_survives_a_restart(make_kafka_broker: Callable[..., Broker],
                                                 tmp_path: Path) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("kept", 1)
    admin = confluent_admin(b.bootstrap_servers)
    [done] = outcome(admin.incremental_alter_configs([ConfigResource(
        "topic", "kept", incremental_configs=[ConfigEntry(
            "segment.bytes", "70000", incremental_operation=AlterConfigOpType.SET)])],
        request_timeout=10))
    assert done is None
    b.shutdown()
    again = Broker(dict(b.config.originals), background=False).start()
    try:
        assert again.topic("kept").config == {"segment.bytes": "70000"}
        assert again.log(TopicPartition("kept", 0)).config.segment_bytes == 70000
    finally:
        again.shutdown()


# ---------------------------------------------------------------------- cluster

def test_cluster_alter_reaches_every_replica_and_the_remote_tier(
        make_kafka_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    c = make_kafka_cluster(3, overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000"}, background=False)
    cl = c.client()
    cl.create_topic("tiered", 2, 3, {"remote.storage.enable": "true"})
    tps = [TopicPartition("tiered", p) for p in range(2)]
    # kafka-python sends alters to any broker: a non-controller forwards it
    with kp_admin(others(c)[0].bootstrap_servers) as kp:
        got = kp.alter_configs([KpConfigResource("TOPIC", "tiered", configs={
            "segment.bytes": "65536", "local.retention.ms": "1234"})])
        assert got["topic"]["tiered"] == "OK"

    def applied() -> bool:
        for b in c.brokers.values():
            for tp in tps:
                lg = b.log_manager.get_log(tp)
                if lg is None or lg.config.segment_bytes != 65536:
                    return False
                if b._tiering_of(tp).local_retention_ms != 1234:
                    return False
        return True

    wait_for(applied, 10, "every replica's log and tiering settings")
    for b in c.brokers.values():  # a tiered topic's local logs keep no retention of their own
        assert all(b.log_manager.get_log(tp).config.retention_ms == -1 for tp in tps)
    md = controller_of(c).metadata
    assert md.topic("tiered").config == {"remote.storage.enable": "true",
                                         "segment.bytes": "65536",
                                         "local.retention.ms": "1234"}
    admin = confluent_admin(c.bootstrap_servers)
    [described] = outcome(admin.describe_configs([ConfigResource("topic", "tiered")],
                                                 request_timeout=10))
    assert described["local.retention.ms"].value == "1234"
    [refused] = outcome(admin.incremental_alter_configs([ConfigResource(
        "topic", "tiered", incremental_configs=[ConfigEntry(
            "remote.storage.enable", "false",
            incremental_operation=AlterConfigOpType.SET)])], request_timeout=10))
    assert refused.code() == INVALID_CONFIG and "remote.storage.enable" in refused.str()
    [checked] = outcome(admin.incremental_alter_configs([ConfigResource(
        "topic", "tiered", incremental_configs=[ConfigEntry(
            "segment.bytes", "99999", incremental_operation=AlterConfigOpType.SET)])],
        validate_only=True, request_timeout=10))
    assert checked is None and md.topic("tiered").config["segment.bytes"] == "65536"
    for b in others(c):  # raw AlterConfigs to a non-controller: forwarded too
        row = alter(b.bootstrap_servers, TOPIC, "tiered",
                    {"remote.storage.enable": "true", "segment.bytes": "32768"})
        assert row.error_code == NONE, row.error_message
    assert md.topic("tiered").config == {"remote.storage.enable": "true",
                                         "segment.bytes": "32768"}
    wait_for(lambda: all(b._tiering_of(tps[0]).local_retention_ms != 1234
                         for b in c.brokers.values()), 10, "the old local retention gone")


def test_more_config_resources_than_max_request_topics_are_refused(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False, **{"max.request.topics": "1"})
    b.create_topic("a", 1)
    res = REQUESTS[DESCRIBE][4].DescribeConfigsResource
    resp = call(b.bootstrap_servers, DESCRIBE, 4, include_synonyms=False,
                include_documentation=False, resources=[
                    res(resource_type=TOPIC, resource_name="a", configuration_keys=None),
                    res(resource_type=BROKER, resource_name="1", configuration_keys=None)])
    assert [r.error_code for r in resp.results] == [INVALID_REQUEST, INVALID_REQUEST]
    assert "max.request.topics" in resp.results[0].error_message
    cls = REQUESTS[INCREMENTAL][1].AlterConfigsResource
    resp = call(b.bootstrap_servers, INCREMENTAL, 1, validate_only=False, resources=[
        cls(resource_type=TOPIC, resource_name="a", configs=[cls.AlterableConfig(
            name="retention.ms", config_operation=SET, value="5")])] * 2)
    assert [r.error_code for r in resp.responses] == [INVALID_REQUEST, INVALID_REQUEST]
    assert b.topic("a").config == {}


def test_a_secret_broker_key_is_described_without_its_value() -> None:
    """A declared secret key (``ConfigKey(secret=True)``) is sensitive, of type PASSWORD, and
    neither its value nor its default appears (entry or synonyms)."""
    from kafka_tiers.config import ConfigKey, String
    from kafka_tiers.kafka.apis.configs import PASSWORD, _broker_entry

    key = ConfigKey("some.password", String(), "default-secret", "A password.", secret=True)
    broker = {"some.password": "hunter2"}
    entry = _broker_entry(broker, {"some.password": "hunter2"}, "some.password", key)
    assert entry.sensitive and entry.value is None and entry.config_type == PASSWORD
    assert entry.source == STATIC_BROKER_CONFIG and entry.read_only
    assert "hunter2" not in repr(entry) and "default-secret" not in repr(entry)
