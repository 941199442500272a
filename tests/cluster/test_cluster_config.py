"""The cluster's config keys: defaults, validation, and the store a config selects."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.cluster.embedded_store import EmbeddedStore
from kafka_tiers.cluster.member import listen_port
from kafka_tiers.cluster.metadata_store import make_store
from kafka_tiers.cluster.zookeeper_store import ZooKeeperStore
from kafka_tiers.config import BrokerConfig


def test_defaults_and_validation(tmp_path: Path) -> None:
    cfg = BrokerConfig({"log.dirs": str(tmp_path)})
    assert cfg["metadata.store"] == "embedded"
    assert cfg["min.insync.replicas"] == 1 and cfg["unclean.leader.election.enable"] is False
    # the internal transport takes any free port unless told; Kafka clients use listeners
    assert cfg["replica.lag.time.max.ms"] == 30000 and listen_port(cfg) == 0
    assert listen_port(cfg.with_overrides({"port": "9500"})) == 9500
    assert listen_port(cfg.with_overrides({"listeners": "PLAINTEXT://127.0.0.1:9500"})) == 0
    with pytest.raises(ConfigError, match=r"metadata\.store"):
        BrokerConfig({"metadata.store": "etcd"})


def test_config_selects_the_store(tmp_path: Path) -> None:
    emb = make_store(BrokerConfig({"log.dirs": str(tmp_path / "d")}))
    assert isinstance(emb, EmbeddedStore)
    emb.start()
    emb.close()
    assert (tmp_path / "d" / "metadata").is_dir()
    zk = make_store(BrokerConfig({"metadata.store": "zookeeper",
                                  "zookeeper.connect": "127.0.0.1:1/x"}))
    assert isinstance(zk, ZooKeeperStore) and zk.hosts == "127.0.0.1:1/x"
    with pytest.raises(ConfigError, match=r"zookeeper\.connect"):
        make_store(BrokerConfig({"metadata.store": "zookeeper"}))
