"""Object-store plugins (entry-point group ``kafka_tiers.object_store``): loaded inside the
core's storage manager, found by the names users give, and their optional operations
(orphan collection with the store's garbage hook, manifests, listing) reached only through the
guard."""

from __future__ import annotations

import importlib.metadata as md
import io
import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import pytest

from kafka_tiers.api import (
    ByteRange,
    ConfigError,
    ObjectInfo,
    ObjectStore,
    PluginError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    StorageCapability,
    TopicPartition,
)
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager
from kafka_tiers.plugins import (
    OBJECT_STORE_GROUP,
    discover,
    installed_names,
    load_remote_storage,
    loader,
)
from kafka_tiers.remote.guarded import (
    OPTIONAL_OPERATIONS,
    GuardedRemoteStorage,
    UnsupportedStorageOperationError,
    guard,
)
from kafka_tiers.remote.local import LocalObjectStore, LocalRemoteStorageManager
from tests.remote.backends import MemoryStorage

PATH = "tests.remote.test_object_store_plugins"


class GarbageStore(ObjectStore):
    """A dict store whose garbage hook records its calls and may fail with a secret in the
    message; it declares no concurrent_access, so the guard serialises its calls."""

    SUPPORTED_SPI: ClassVar[str] = ">=2.0,<3"
    calls: ClassVar[list[tuple[str, int, bool, bool]]] = []
    fail_with: ClassVar[str | None] = None

    @classmethod
    def from_config(cls, config: Any) -> GarbageStore:
        if "bad" in config:
            raise ConfigError("bad is not a key of this store", key="bad")
        return cls()

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.lock_held_in_hook: bool | None = None

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        self.objects[key] = data.read()
        return len(self.objects[key])

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        if key not in self.objects:
            raise RemoteResourceNotFoundError(key, resource=key)
        return io.BytesIO(self.objects[key])

    def delete_many(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.objects.pop(key, None)

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        return [ObjectInfo(k, len(v), 0) for k, v in self.objects.items() if k.startswith(prefix)]

    def collect_garbage(self, prefix: str, older_than_ms: int, dry_run: bool = False
                        ) -> list[str]:
        GarbageStore.calls.append((prefix, older_than_ms, dry_run,
                                   threading.current_thread() is threading.main_thread()))
        if GarbageStore.fail_with is not None:
            raise OSError(f"cannot list uploads with token {GarbageStore.fail_with}")
        return ["upload-1"]


class NotAStore:
    """Neither an ObjectStore nor a RemoteStorageManager."""


@pytest.fixture(autouse=True)
def _reset() -> Any:
    GarbageStore.calls.clear()
    GarbageStore.fail_with = None
    yield


def test_local_is_an_object_store_loaded_inside_the_core_manager(tmp_path: Path) -> None:
    assert "local" in installed_names(OBJECT_STORE_GROUP)
    with load_remote_storage("local", {"dir": str(tmp_path)}) as rsm:
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        assert type(rsm) is LocalRemoteStorageManager  # one manager class per store class
        assert isinstance(rsm.object_store, LocalObjectStore)
        assert StorageCapability.CONCURRENT_ACCESS in rsm.CAPABILITIES
        assert StorageCapability.ORPHAN_COLLECTION in rsm.CAPABILITIES
    listed = [p for p in discover() if p.group == OBJECT_STORE_GROUP and p.name == "local"]
    assert listed and listed[0].loads


def test_an_import_path_may_name_an_object_store_or_a_storage_manager(tmp_path: Path) -> None:
    with load_remote_storage(f"{PATH}:GarbageStore", {}) as rsm:
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        assert isinstance(rsm.object_store, GarbageStore)
        assert {StorageCapability.FAULT_INJECTION} <= rsm.CAPABILITIES
    with load_remote_storage("tests.remote.backends:MemoryStorage", {"name": "x"}) as rsm:
        assert isinstance(rsm, MemoryStorage)
    with pytest.raises(PluginError, match="ObjectStore") as info:
        load_remote_storage(f"{PATH}:NotAStore", {})
    assert "RemoteStorageManager" in str(info.value)
    with pytest.raises(ConfigError, match="bad is not a key"):
        load_remote_storage(f"{PATH}:GarbageStore", {"bad": "1"})


def test_a_name_in_both_groups_resolves_to_the_remote_storage_one(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    eps = {
        loader.STORAGE_GROUP: [md.EntryPoint("twin", "tests.remote.backends:MemoryStorage",
                                             loader.STORAGE_GROUP)],
        OBJECT_STORE_GROUP: [md.EntryPoint("twin", f"{PATH}:GarbageStore", OBJECT_STORE_GROUP),
                             md.EntryPoint("only-store", f"{PATH}:GarbageStore",
                                           OBJECT_STORE_GROUP)],
    }
    monkeypatch.setattr(loader, "_entry_points", lambda group: eps.get(group, []))
    monkeypatch.setattr(loader, "_load_with_stevedore",
                        lambda group, name, label, dist: next(
                            e for e in eps[group] if e.name == name).load())
    with caplog.at_level(logging.WARNING, logger=loader.__name__):
        cls, _ = loader.resolve_class(loader.STORAGE_GROUP, "twin")
    assert cls is MemoryStorage
    assert "both" in caplog.text and "twin" in caplog.text
    cls, label = loader.resolve_class(loader.STORAGE_GROUP, "only-store")
    assert issubclass(cls, ObjectStoreRemoteStorageManager) and cls.store_class is GarbageStore
    assert "remote storage plugin 'only-store'" in label  # as users name it
    with pytest.raises(PluginError, match="installed: only-store, twin"):
        loader.resolve_class(loader.STORAGE_GROUP, "nope")


def test_orphan_collection_runs_the_store_hook_through_the_guard_lock_and_redaction() -> None:
    guarded = GuardedRemoteStorage.load(f"{PATH}:GarbageStore", {})
    assert all(guarded.supports(op) for op in OPTIONAL_OPERATIONS)
    tp = TopicPartition("t", 0)
    assert guarded.collect_orphans(1000, tp, now_ms=5000, dry_run=True) == []
    assert GarbageStore.calls == [("t-0/", 4000, True, True)]  # the scope and the age
    assert guarded.list_topics() == [] and guarded.list_partitions("t") == []
    # no concurrent_access: the collection (and the hook in it) waits for the guard's lock
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(guarded.collect_orphans(0)))
    with guarded._lock:  # the guard's own lock, held here
        worker.start()
        worker.join(0.3)
        assert worker.is_alive() and len(GarbageStore.calls) == 1
    worker.join(10)
    assert result == [[]] and len(GarbageStore.calls) == 2
    GarbageStore.fail_with = "s3cr3t-t0ken"
    guarded = GuardedRemoteStorage(guarded_plugin(), "garbage", secrets=["s3cr3t-t0ken"])
    with pytest.raises(RemoteStorageError) as info:
        guarded.collect_orphans(0)
    message = str(info.value)
    assert "garbage" in message and "collect_orphans" in message
    assert "s3cr3t" not in message and "<hidden>" in message


def guarded_plugin() -> ObjectStoreRemoteStorageManager:
    return load_remote_storage(f"{PATH}:GarbageStore", {})


def test_a_plugin_without_an_optional_operation_gets_one_clear_error() -> None:
    plugin = MemoryStorage()
    plugin.configure({"name": "no-extras"})
    guarded = GuardedRemoteStorage(plugin, "memory")
    for op in OPTIONAL_OPERATIONS:
        assert not guarded.supports(op)
    with pytest.raises(UnsupportedStorageOperationError) as info:
        guarded.collect_orphans(0)
    assert info.value.operation == "collect_orphans" and info.value.plugin == "memory"
    assert "storage plugin 'memory' does not support collect_orphans" in str(info.value)
    assert not info.value.retriable
    with pytest.raises(UnsupportedStorageOperationError, match="read_manifest"):
        guarded.read_manifest(_any_metadata())
    with pytest.raises(ValueError, match="unknown optional storage operation"):
        guarded.supports("plugin")
    assert guard(guarded) is guarded and guard(plugin).name == "MemoryStorage"


def _any_metadata() -> Any:
    from kafka_tiers.api import RemoteLogSegmentId, RemoteLogSegmentMetadata

    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TopicPartition("t", 0)), 0, 9,
                                    0, 1, 0, 100, {0: 0})
