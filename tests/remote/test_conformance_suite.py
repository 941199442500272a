"""The storage conformance suite, run in-process (fsspec style) against the ``local`` backend,
an object-store backend with multi-part uploads, and a plugin of the direct level."""

from __future__ import annotations

import uuid

import pytest

from kafka_tiers.conformance.storage import StorageSuite, StorageTarget
from kafka_tiers.remote.local import LocalRemoteStorageManager
from tests.remote.backends import MemoryMultipartStorage, MemoryStorage


class TestLocalBackend(StorageSuite):
    """The built-in ``local`` backend passes the whole suite."""

    LARGE_SEGMENT_BYTES = 16 * 1024 * 1024

    @pytest.fixture
    def storage_target(self, tmp_path):
        return StorageTarget.from_class(LocalRemoteStorageManager,
                                        {"dir": str(tmp_path / "remote")})


class TestMultipartObjectStore(StorageSuite):
    """An object store with multi-part uploads passes, the multi-part checks included."""

    LARGE_SEGMENT_BYTES = 2 * 1024 * 1024

    @pytest.fixture
    def storage_target(self):
        return StorageTarget.from_class(MemoryMultipartStorage,
                                        {"name": uuid.uuid4().hex, "part": "4096"})


class TestDirectLevelPlugin(StorageSuite):
    """A plugin that implements RemoteStorageManager directly passes the generic checks; the
    object-store ones are skipped with the reason."""

    @pytest.fixture
    def storage_target(self):
        return StorageTarget.from_class(MemoryStorage, {"name": uuid.uuid4().hex})
