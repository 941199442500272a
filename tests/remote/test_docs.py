"""The storage plugin guide documents every method, error, capability and suite area."""

from __future__ import annotations

import inspect
from pathlib import Path

import kafka_tiers.conformance.storage as suite
from kafka_tiers.api import (
    MultipartObjectStore,
    ObjectStore,
    RemoteStorageManager,
    StorageCapability,
    errors,
)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "storage-plugins.md").read_text()


def test_every_interface_method_has_a_section_with_its_signature():
    for name in sorted(RemoteStorageManager.__abstractmethods__):
        params = list(inspect.signature(getattr(RemoteStorageManager, name)).parameters)[1:]
        heading = f"### `{name}("
        assert heading in DOC, name
        line = DOC[DOC.index(heading):].splitlines()[0]
        for param in params:
            assert param in line, (name, param)


def test_object_store_operations_are_documented():
    for cls in (ObjectStore, MultipartObjectStore):
        for name in cls.__abstractmethods__:
            assert f"def {name}(" in DOC or f"`{name}`" in DOC, name


def test_storage_errors_capabilities_and_areas_are_documented():
    for name in ("RemoteStorageError", "RetriableRemoteStorageError",
                 "RemoteResourceNotFoundError", "InvalidRangeError", "ManifestError"):
        assert hasattr(errors, name) and f"| `{name}` |" in DOC, name
    for capability in StorageCapability:
        assert f"| `{capability.value}` |" in DOC, capability
    areas = {cls.__module__.rpartition(".")[2] for cls in suite.StorageSuite.__mro__
             if cls.__module__.startswith("kafka_tiers.conformance.storage.")
             and cls.__name__.endswith("Tests")}
    assert len(areas) >= 12  # every area of the suite, the rlm area included
    for area in areas:
        assert f"| `{area}` |" in DOC, area
