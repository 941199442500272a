"""The storage suite's data-path areas run only for plugins declaring ``data_transforms``; the
others skip every one of them with the reason. And the harness pieces they use: settings on top
of a target's config over the same root, key pair files the core's key ring reads."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafka_tiers.api import StorageCapability
from kafka_tiers.conformance.storage import StorageRequirements, StorageTarget
from kafka_tiers.conformance.storage.harness import encryption_settings
from kafka_tiers.objectstore.data_settings import DataSettings
from kafka_tiers.remote.local import LocalRemoteStorageManager
from tests.remote.backends import MemoryStorage
from tests.remote.test_suite_catches_broken import Collector


class Undeclared(LocalRemoteStorageManager):
    """The ``local`` backend without the ``data_transforms`` capability."""

    CAPABILITIES = LocalRemoteStorageManager.CAPABILITIES - {StorageCapability.DATA_TRANSFORMS}


def test_object_store_managers_declare_data_transforms() -> None:
    req = StorageRequirements(LocalRemoteStorageManager).data_transforms
    assert req.enabled and req.declared and req.name == "data_transforms"


@pytest.mark.parametrize(("plugin", "reason"), [
    (MemoryStorage, "the plugin is not built on the object-store level"),
    (Undeclared, "not declared in the plugin's CAPABILITIES"),
])
def test_requirement_is_off_with_its_reason(plugin: type, reason: str) -> None:
    req = StorageRequirements(plugin).data_transforms
    assert not req.enabled and not req.declared
    assert req.reason == reason


SUITE_FILE = """
import pytest
from kafka_tiers.conformance.storage import (CacheTests, ChunkingTests, CompressionTests,
                                             EncryptionTests, StorageTarget)
from tests.remote.test_conformance_data_path import Undeclared

class TestUndeclared(ChunkingTests, CompressionTests, EncryptionTests, CacheTests):
    @pytest.fixture
    def storage_target(self, tmp_path):
        return StorageTarget.from_class(Undeclared, {"dir": str(tmp_path / "remote")})
"""


def test_undeclared_plugin_skips_every_data_path_test(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    test_file = tmp_path / f"test_undeclared_{uuid.uuid4().hex[:8]}.py"
    test_file.write_text(SUITE_FILE)
    collector = Collector()
    code = pytest.main([str(test_file), "-q", "-rs", "-p", "no:cacheprovider", "--rootdir",
                        str(tmp_path)], plugins=[collector])
    out = capsys.readouterr().out
    assert code == 0, out
    assert len(collector.outcomes) >= 20
    assert set(collector.outcomes.values()) == {"skipped"}, collector.outcomes
    assert ("needs data_transforms: not declared in the plugin's CAPABILITIES" in out), out
    assert "result: PASS" in out


def test_settings_go_on_top_of_the_target_over_the_same_root(tmp_path: Path) -> None:
    target = StorageTarget.from_class(LocalRemoteStorageManager,
                                      {"dir": str(tmp_path), "chunk.size": "9"})
    fresh = target.with_fresh_root()
    configured = fresh.with_settings({"chunk.size": "4096", "compression.enabled": "true"})
    assert configured.config["key.prefix"] == fresh.config["key.prefix"]
    assert configured.config["chunk.size"] == "4096"
    assert fresh.config["chunk.size"] == "9"  # the target itself is left alone
    rsm = configured.create()
    try:
        assert isinstance(rsm, LocalRemoteStorageManager)
        assert rsm.data_settings.chunk_size == 4096 and rsm.data_settings.compression
        assert rsm.key_prefix == fresh.config["key.prefix"]
    finally:
        rsm.close()
        fresh.cleanup()


def test_key_pair_files_are_read_by_the_key_ring(tmp_path: Path) -> None:
    settings = encryption_settings(tmp_path, "k2", ["k1", "k2"])
    assert settings["encryption.enabled"] == "true"
    ring = DataSettings.from_config(settings).key_ring
    assert ring is not None and ring.ids == ["k1", "k2"] and ring.active_id == "k2"
    key_id, wrapped = ring.wrap(b"\x01" * 32)
    assert key_id == "k2" and ring.unwrap(key_id, wrapped) == b"\x01" * 32
    private = Path(settings["encryption.key.pairs.k1.private.key.file"])
    assert private.stat().st_mode & 0o077 == 0  # private keys are not readable by others
    reader = encryption_settings(tmp_path / "reader", None, ["k2"])
    assert reader["encryption.enabled"] == "false" and "encryption.key.pair.id" not in reader
    assert DataSettings.from_config(reader).key_ring.unwrap("k2", wrapped) == b"\x01" * 32


OWN_DATA_KEYS_FILE = """
import pytest
from kafka_tiers.conformance.storage import ChunkingTests, StorageTarget
from kafka_tiers.remote.local import LocalRemoteStorageManager

class TestOwnDataKeys(ChunkingTests):
    @pytest.fixture
    def storage_target(self, tmp_path):
        return StorageTarget.from_class(LocalRemoteStorageManager, {
            "dir": str(tmp_path / "remote"), "compression.enabled": "true",
            "chunk.size": "7", "fetch.chunk.cache.class": "disk"})
"""


def test_the_targets_own_data_keys_do_not_change_the_tests(tmp_path: Path) -> None:
    """A target configured like a broker with compression, a 7-byte chunk size and a disk cache
    (without its path): the plain layout tests still get exactly their own settings."""
    test_file = tmp_path / f"test_own_keys_{uuid.uuid4().hex[:8]}.py"
    test_file.write_text(OWN_DATA_KEYS_FILE)
    collector = Collector()
    code = pytest.main([str(test_file), "-q", "-p", "no:cacheprovider", "--rootdir",
                        str(tmp_path), "-k", "plain"], plugins=[collector])
    assert code == 0
    assert set(collector.outcomes.values()) == {"passed"} and len(collector.outcomes) == 3
