"""The remote storage conformance suite.

Run it against an installed plugin (or an import path)::

    kafka-tiers conformance storage local --set dir={tmp}
    pytest --kt-storage local --kt-storage-set 'dir={tmp}'
    pytest --kt-storage my_pkg.storage:MyStorage --kt-storage-config my.properties

``--kt-storage-config FILE`` is a broker's ``server.properties`` (its ``rsm.config.*`` keys) or a
properties file of the plugin's own keys (as they appear after ``rsm.config.``), read by
:func:`kafka_tiers.remote.storage_config.storage_settings`; ``--kt-storage-set key=value`` adds
or overrides one. ``{tmp}`` in a value
becomes a fresh temporary directory per test. Object-store plugins also get a random
``key.prefix`` below the configured one per test, so every run starts from an empty root;
the suite deletes what it wrote at the end of every test.

Or inherit it in your own tests (fsspec style) and say how to build your plugin::

    import pytest
    from kafka_tiers.conformance.storage import StorageSuite, StorageTarget

    class TestMyStorage(StorageSuite):
        @pytest.fixture
        def storage_target(self, tmp_path):
            return StorageTarget.from_class(MyStorage, {"path": str(tmp_path)})

One module per behaviour area: ``copy_fetch``, ``ranges``, ``not_found``, ``idempotency``,
``listing``, ``faults``, ``concurrency``, ``large``, ``leaks``, ``orphans``, ``core_wrapper``,
``rlm``, and the data path's ``chunking``, ``compression``, ``encryption`` and ``cache``.
Tests needing an optional capability (:class:`StorageRequirements`) are skipped, with the
reason, when the plugin does not declare it. A failing test names the rule that was broken.

The ``rlm`` area runs the whole remote-log-manager path on top of the backend: an in-process
broker produces, rolls, copies, applies local retention, reads old offsets back through the
remote tier (also after a restart) and applies remote retention.

The data-path areas run for plugins declaring ``data_transforms`` (the storage manager the core
builds around every object store): each test reconfigures the plugin with data-path keys
(``chunk.size``, ``compression.enabled``, ``encryption.*``, ``fetch.chunk.cache.*``) on top of
the target's config, and reads what it stored raw through its object store.
"""

from __future__ import annotations

from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.cache import CacheTests
from kafka_tiers.conformance.storage.chunking import ChunkingTests
from kafka_tiers.conformance.storage.compression import CompressionTests
from kafka_tiers.conformance.storage.concurrency import ConcurrencyTests
from kafka_tiers.conformance.storage.copy_fetch import CopyFetchTests
from kafka_tiers.conformance.storage.core_wrapper import CoreWrapperTests
from kafka_tiers.conformance.storage.data_path import DataPath
from kafka_tiers.conformance.storage.encryption import EncryptionTests
from kafka_tiers.conformance.storage.faults import FaultTests
from kafka_tiers.conformance.storage.harness import (
    ConformanceFailure,
    FaultyObjectStore,
    Segment,
    SegmentBuilder,
    StorageTarget,
    TrackingObjectStore,
    encryption_settings,
    write_key_pair,
)
from kafka_tiers.conformance.storage.idempotency import IdempotencyTests
from kafka_tiers.conformance.storage.large import LargeSegmentTests
from kafka_tiers.conformance.storage.leaks import LeakTests
from kafka_tiers.conformance.storage.listing import ListingTests
from kafka_tiers.conformance.storage.not_found import NotFoundTests
from kafka_tiers.conformance.storage.orphans import OrphanTests
from kafka_tiers.conformance.storage.ranges import RangeTests
from kafka_tiers.conformance.storage.requirements import Requirement, StorageRequirements
from kafka_tiers.conformance.storage.rlm import RemoteLogManagerTests


class StorageSuite(
    CopyFetchTests,
    RangeTests,
    NotFoundTests,
    IdempotencyTests,
    ListingTests,
    FaultTests,
    ConcurrencyTests,
    LargeSegmentTests,
    LeakTests,
    OrphanTests,
    CoreWrapperTests,
    RemoteLogManagerTests,
    ChunkingTests,
    CompressionTests,
    EncryptionTests,
    CacheTests,
):
    """Every storage conformance test: inherit it in a ``Test*`` class and override the
    ``storage_target`` fixture (and optionally ``storage_requirements``)."""


__all__ = [
    "CacheTests",
    "ChunkingTests",
    "CompressionTests",
    "ConcurrencyTests",
    "ConformanceFailure",
    "CopyFetchTests",
    "CoreWrapperTests",
    "DataPath",
    "EncryptionTests",
    "FaultTests",
    "FaultyObjectStore",
    "IdempotencyTests",
    "LargeSegmentTests",
    "LeakTests",
    "ListingTests",
    "NotFoundTests",
    "OrphanTests",
    "RangeTests",
    "RemoteLogManagerTests",
    "Requirement",
    "Segment",
    "SegmentBuilder",
    "StorageRequirements",
    "StorageSuite",
    "StorageSuiteBase",
    "StorageTarget",
    "TrackingObjectStore",
    "encryption_settings",
    "write_key_pair",
]
