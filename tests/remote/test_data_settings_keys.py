"""The data path's key namespaces (``chunk.``, ``compression.``, ``encryption.``, ``fetch.chunk.``,
``fetch.manifest.``) belong to the core: a key there that the data path does not read is one
ConfigError naming it and the nearest known key, at configure time (the plugin, the broker's
start, the ``remote`` commands), so a misspelt ``encryption.enable=true`` never gives a plain
tier. Keys outside them are the store's (a near miss only warns). A private key file others
may read loads with one warning naming the file."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.broker.broker import Broker
from kafka_tiers.objectstore.data_settings import (
    DATA_KEYS,
    RESERVED_PREFIXES,
    DataSettings,
    check_data_keys,
)
from kafka_tiers.remote.local import LocalRemoteStorageManager
from tests.cli_run import kt
from tests.remote.data_path_helpers import key_pair_files

PLUGIN_DIRS = sorted(Path(__file__).resolve().parents[2].glob("plugins/*/src"))


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return key_pair_files(tmp_path_factory.mktemp("keys"), "k1")


def pair_keys(pub: Path, priv: Path) -> dict[str, str]:
    return {"encryption.key.pairs": "k1", "encryption.key.pair.id": "k1",
            "encryption.key.pairs.k1.public.key.file": str(pub),
            "encryption.key.pairs.k1.private.key.file": str(priv)}


@pytest.mark.parametrize(("typo", "nearest"), [
    ("encryption.enable", "encryption.enabled"),
    ("Encryption.Enabled", "encryption.enabled"),
    ("encryption.key.pair", "encryption.key.pairs"),
    ("encryption.keypair.id", "encryption.key.pair.id"),
    ("compression.enable", "compression.enabled"),
    ("compression.zstd.levl", "compression.zstd.level"),
    ("chunk.sizes", "chunk.size"),
    ("fetch.chunk.cache.clas", "fetch.chunk.cache.class"),
    ("fetch.chunk.download.thread", "fetch.chunk.download.threads"),
    ("fetch.manifest.cache.sise", "fetch.manifest.cache.size"),
    ("encryption.key.pairs.k1.privat.key.file", "encryption.key.pairs.k1.private.key.file"),
])
def test_a_misspelt_data_path_key_is_one_error_naming_it_and_the_nearest_key(
        tmp_path: Path, key_pair: tuple[Path, Path], typo: str, nearest: str) -> None:
    config = {"dir": str(tmp_path / "tier"), **pair_keys(*key_pair), typo: "true"}
    rsm = LocalRemoteStorageManager()
    with pytest.raises(ConfigError) as err:
        rsm.configure(config)
    message = str(err.value)
    assert f"unknown data-path setting {typo};" in message
    assert f"did you mean {nearest}?" in message
    assert "\n" not in message and err.value.key == typo
    assert not (tmp_path / "tier").exists() or not any((tmp_path / "tier").rglob("*.log"))


def test_a_key_file_of_an_unlisted_pair_is_refused(key_pair: tuple[Path, Path]) -> None:
    pub, priv = key_pair
    config = {**pair_keys(pub, priv), "encryption.key.pairs.k2.private.key.file": str(priv)}
    with pytest.raises(ConfigError) as err:
        DataSettings.from_config(config)
    assert "names key pair 'k2', which encryption.key.pairs does not list (k1)" in str(err.value)
    assert err.value.key == "encryption.key.pairs.k2.private.key.file"
    # listed, it is a key pair like any other
    listed = DataSettings.from_config({**config, "encryption.key.pairs": "k1,k2"})
    assert listed.key_ring is not None and listed.key_ring.ids == ["k1", "k2"]


def test_every_known_key_and_the_stores_own_keys_pass() -> None:
    config = {key: "" for key in DATA_KEYS}
    config.update({"dir": "/x", "key.prefix": "kt", "s3.bucket.name": "b",
                   "azure.download.chunk.size": "1", "hdfs.upload.chunk.size": "1",
                   "encryption.key.pairs": "a.b,c",
                   "encryption.key.pairs.a.b.public.key.file": "/p",
                   "encryption.key.pairs.c.private.key.file": "/q"})
    check_data_keys(config)


def test_no_first_party_store_uses_a_reserved_prefix() -> None:
    """Third-party stores are told not to use the prefixes; the project's own stores don't:
    no string literal of their sources starts with one."""
    assert PLUGIN_DIRS
    import ast
    for src in PLUGIN_DIRS:
        for path in src.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    assert not node.value.lower().startswith(RESERVED_PREFIXES), (path,
                                                                                  node.value)


@pytest.mark.parametrize(("key", "nearest"), [("compresion.enabled", "compression.enabled"),
                                              ("chunk_size", "chunk.size")])
def test_a_near_miss_outside_the_namespaces_warns_and_is_left_to_the_store(
        caplog: pytest.LogCaptureFixture, key: str, nearest: str) -> None:
    caplog.set_level(logging.WARNING, "kafka_tiers.objectstore.data_settings")
    assert DataSettings.from_config({key: "1"}) == DataSettings()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and key in lines[0] and f"did you mean {nearest}?" in lines[0]


def test_the_broker_does_not_start_with_a_misspelt_key(tmp_path: Path) -> None:
    broker = Broker({"log.dirs": str(tmp_path / "x"), "remote.log.storage.enable": "true",
                     "remote.storage.manager.class": "local",
                     "rsm.config.dir": str(tmp_path / "remote"),
                     "rsm.config.encryption.enable": "true"}, background=False)
    try:
        with pytest.raises(ConfigError, match=r"did you mean encryption\.enabled"):
            broker.start()
    finally:
        broker.shutdown()


def test_the_remote_commands_refuse_a_misspelt_key(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("remote.storage.manager.class=local\n"
                      f"rsm.config.dir={tmp_path / 'remote'}\n"
                      "rsm.config.fetch.chunk.cache.clas=none\n")
    ran = kt("remote", "ls", "--config", str(config), "--topic", "t")
    assert ran.code == 2, (ran.out, ran.err)
    assert len(ran.err_lines) == 1
    assert "fetch.chunk.cache.clas" in ran.err and "fetch.chunk.cache.class" in ran.err


def test_a_private_key_file_others_can_read_loads_with_one_warning(
        tmp_path: Path, key_pair: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    pub, priv = key_pair
    shared = tmp_path / "shared-k1.pem"
    shared.write_bytes(priv.read_bytes())
    os.chmod(shared, 0o640)
    caplog.set_level(logging.WARNING, "kafka_tiers.objectstore.data_settings")
    DataSettings.from_config(pair_keys(pub, priv))
    assert not caplog.records  # 0600: no warning
    for _ in range(2):
        settings = DataSettings.from_config(pair_keys(pub, shared))
        assert settings.key_ring is not None and settings.key_ring.ids == ["k1"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and str(shared) in lines[0] and "640" in lines[0]
    assert "PRIVATE KEY" not in lines[0] and shared.read_text()[40:80] not in lines[0]
