"""Nothing in a config file is accepted silently: unknown keys warn with the closest known key,
Kafka's names are aliases or listed as ignored, duplicates and contradictions are errors,
plugin names must be installed; ``config show``, ``broker start`` and ``cluster start`` say
the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.api import ConfigError
from kafka_tiers.cli import cli
from kafka_tiers.config import (
    KAFKA_BROKER_KEYS,
    BrokerConfig,
    all_keys,
    is_kafka_broker_key,
    read_properties,
)


def write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "server.properties"
    f.write_text(text)
    return f


def test_a_typo_warns_with_the_closest_key() -> None:
    cfg = BrokerConfig({"broker.replica.placr": "simple", "retention.ms": "5"})
    assert cfg.warnings == [
        "unknown key broker.replica.placr (did you mean broker.replica.placer?): it is ignored",
        "unknown key retention.ms (did you mean log.retention.ms?): it is ignored",
    ]
    assert BrokerConfig({"zzzz.qqqq": "1"}).warnings == ["unknown key zzzz.qqqq: it is ignored"]


def test_plugin_prefixed_keys_are_not_unknown() -> None:
    cfg = BrokerConfig({"placer.seed": "7", "rsm.config.dir": "/x", "rlmm.config.a": "1",
                        "remote.log.metadata.manager.x": "y"})
    assert cfg.warnings == []
    assert cfg.prefixed("placer.") == {"seed": "7"}


def test_kafka_keys_we_do_not_implement_are_listed_as_ignored() -> None:
    cfg = BrokerConfig({"num.network.threads": "3", "num.io.threads": "8",
                        "ssl.keymanager.algorithm": "SunX509", "broker.id": "1"})
    assert cfg.warnings == ["Kafka broker keys kafka-tiers does not implement, ignored: "
                            "num.io.threads, num.network.threads, ssl.keymanager.algorithm"]


def test_node_id_is_an_alias_of_broker_id(tmp_path: Path) -> None:
    cfg = BrokerConfig.from_file(write(tmp_path, "node.id=5\n"))
    assert cfg["broker.id"] == 5 and cfg.warnings == []
    assert BrokerConfig({"node.id": "5", "broker.id": "5"})["broker.id"] == 5
    with pytest.raises(ConfigError, match=r"broker\.id and node\.id are the same setting"):
        BrokerConfig({"node.id": "5", "broker.id": "0"})
    # an override replaces the key under every name
    assert cfg.with_overrides({"broker.id": "7"})["broker.id"] == 7
    assert cfg.with_overrides({"node.id": "8"})["broker.id"] == 8
    assert BrokerConfig.from_file(write(tmp_path, "node.id=5\n"),
                                  {"broker.id": "2"})["broker.id"] == 2


def test_a_key_given_twice_in_a_file_is_an_error(tmp_path: Path) -> None:
    f = write(tmp_path, "# c\nbroker.id=1\nlog.dirs=/a\nbroker.id=2\n")
    with pytest.raises(ConfigError) as err:
        read_properties(f)
    assert "key broker.id is given twice (lines 2 and 4)" in str(err.value)
    assert err.value.key == "broker.id"
    with pytest.raises(ConfigError, match="given twice"):
        BrokerConfig.from_file(f)


@pytest.mark.parametrize(("values", "fragment"), [
    ({"log.dirs": "/a,/a"}, "log.dirs names the directory '/a' twice"),
    ({"log.dirs": "/a,/b,/a/"}, "log.dirs names the directory '/a' and '/a/' twice"),
    ({"log.dir": "/a", "log.dirs": "/a"}, "log.dirs and log.dir are both given"),
    ({"log.dir": "/a", "log.dirs": "/b"}, "log.dirs and log.dir are the same setting"),
    ({"broker.replica.placer": "simple", "replica.placer.class.name": "rack-aware"},
     "are the same setting and disagree"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9093", "port": "9093"},
     "port (9093) is the brokers' internal transport and cannot be a Kafka listener's port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9093,PLAINTEXT://:9094"},
     "listener name(s) ['PLAINTEXT'] given more than once"),
    # a protocol not served (SUPPORTED_PROTOCOLS): tests/security/test_tls.py
    ({"listeners": "127.0.0.1:9093"}, "is not NAME://HOST:PORT"),
    ({"default.replication.factor": "40"},
     "default.replication.factor 40 exceeds max.replication.factor 32"),
    ({"num.partitions": "8", "max.topic.partitions": "4"},
     "num.partitions 8 exceeds max.topic.partitions 4"),
])
def test_contradictions_are_errors(values: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        BrokerConfig(values)
    assert fragment in str(err.value)


def test_an_unknown_plugin_name_names_the_installed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        BrokerConfig({"broker.replica.placer": "rack-awre"}).check_plugins()
    msg = str(err.value)
    assert "unknown replica placer 'rack-awre'" in msg and "did you mean rack-aware?" in msg
    assert "installed: " in msg and "simple" in msg
    with pytest.raises(ConfigError, match="unknown remote storage manager 'nope'"):
        BrokerConfig({"remote.log.storage.enable": "true",
                      "remote.storage.manager.class": "nope"}).check_plugins()
    BrokerConfig({"broker.replica.placer": "simple"}).check_plugins()
    BrokerConfig({"broker.replica.placer": "pkg.mod:Cls"}).check_plugins()  # checked at load


def test_an_object_store_plugin_is_a_known_remote_storage_manager() -> None:
    """``local`` (the default) and every installed object store plugin pass the start-up check
    of ``broker start`` / ``cluster start`` (they were refused as 'installed: none')."""
    BrokerConfig({"remote.log.storage.enable": "true"}).check_plugins()
    BrokerConfig({"remote.log.storage.enable": "true",
                  "remote.storage.manager.class": "local"}).check_plugins()


def test_the_kafka_list_holds_names_only_and_covers_server_properties() -> None:
    # the keys of Kafka's shipped config/server.properties
    shipped = ["broker.id", "listeners", "num.network.threads", "num.io.threads",
               "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
               "socket.request.max.bytes", "log.dirs", "num.partitions",
               "num.recovery.threads.per.data.dir", "offsets.topic.replication.factor",
               "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
               "log.retention.hours", "log.segment.bytes", "log.retention.check.interval.ms",
               "zookeeper.connect", "zookeeper.connection.timeout.ms",
               "group.initial.rebalance.delay.ms", "process.roles", "node.id",
               "controller.quorum.voters", "inter.broker.listener.name",
               "advertised.listeners", "controller.listener.names",
               "listener.security.protocol.map", "log.flush.interval.messages"]
    assert all(is_kafka_broker_key(k) for k in shipped)
    assert all(" " not in k and k == k.strip() for k in KAFKA_BROKER_KEYS)
    keys = all_keys()
    known = set(keys) | {a for k in keys.values() for a in k.aliases}
    assert {"broker.id", "node.id", "socket.request.max.bytes", "num.partitions"} <= known
    cfg = BrokerConfig({k: "1" for k in shipped if k not in known})
    # what we declare is used, the rest is listed as ignored; nothing is unknown
    assert len(cfg.warnings) == 1
    ignored = cfg.warnings[0]
    assert ignored.startswith("Kafka broker keys kafka-tiers does not implement, ignored: ")
    assert "num.io.threads" in ignored and "process.roles" in ignored


def test_config_show_prints_the_warnings(tmp_path: Path) -> None:
    f = write(tmp_path, "broker.replica.placr=simple\nnum.network.threads=3\nnode.id=5\n")
    res = CliRunner().invoke(cli, ["config", "show", "--config", str(f), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["warnings"] == [
        "unknown key broker.replica.placr (did you mean broker.replica.placer?): it is ignored",
        "Kafka broker keys kafka-tiers does not implement, ignored: num.network.threads"]
    rows = {r["key"]: r for r in doc["settings"]}
    assert rows["broker.id"]["value"] == "5"
    assert "warning: unknown key broker.replica.placr (did you mean broker.replica.placer?)" \
        in res.stderr


@pytest.mark.parametrize(("text", "fragment"), [
    ("broker.id=1\nbroker.id=2\n", "given twice"),
    ("log.dirs=/a,/a\n", "twice"),
    ("broker.replica.placer=nosuch\n", "installed: "),
])
def test_config_show_refuses_duplicates_contradictions_and_unknown_plugins(
        tmp_path: Path, text: str, fragment: str) -> None:
    res = subprocess.run([sys.executable, "-m", "kafka_tiers", "config", "show", "--config",
                          str(write(tmp_path, text))], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0 and "valid" not in res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]


def test_broker_start_prints_the_same_warnings_before_starting(tmp_path: Path) -> None:
    """A config error stops broker start before the broker is built; the warnings come
    first."""
    f = write(tmp_path, f"log.dirs={tmp_path / 'logs'}\nbroker.replica.placr=simple\n"
                        "num.io.threads=8\nbroker.replica.placer=nosuch\n")
    res = CliRunner().invoke(cli, ["broker", "start", "--config", str(f)])
    assert res.exit_code != 0
    assert "warning: unknown key broker.replica.placr (did you mean broker.replica.placer?)" \
        in res.stderr
    assert "ignored: num.io.threads" in res.stderr
    assert "unknown replica placer 'nosuch'" in str(res.exception)
    assert not (tmp_path / "logs").exists()  # nothing was started
    f = write(tmp_path, "node.id=1\nnode.id=2\n")
    res = CliRunner().invoke(cli, ["cluster", "start", "--dir", str(tmp_path / "c"),
                                   "--config", str(f)])
    assert res.exit_code != 0 and "given twice" in str(res.exception)
    f = write(tmp_path, "num.io.threads=8\nbroker.replica.placer=nosuch\n")
    res = CliRunner().invoke(cli, ["cluster", "start", "--dir", str(tmp_path / "c"),
                                   "--config", str(f)])
    assert "ignored: num.io.threads" in res.stderr
    assert "unknown replica placer 'nosuch'" in str(res.exception)
    assert not (tmp_path / "c").exists()
