"""The fixtures every storage suite class shares.

A test class of the suite inherits :class:`StorageSuiteBase`. The plugin under test comes from
the ``storage_target`` fixture: by default built from the ``--kt-storage`` /
``--kt-storage-config`` / ``--kt-storage-set`` options, or overridden by a third party's own
test class (fsspec style)::

    from kafka_tiers.conformance.storage import StorageSuite, StorageTarget

    class TestMyStorage(StorageSuite):
        @pytest.fixture
        def storage_target(self, tmp_path):
            return StorageTarget.from_class(MyStorage, {"path": str(tmp_path)})

Every test gets a fresh root (:meth:`StorageTarget.with_fresh_root`) and a random topic; at its
end the suite deletes every partition it used, then everything left under its root.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_tiers.api import RemoteStorageManager
from kafka_tiers.conformance.storage import harness
from kafka_tiers.conformance.storage.harness import (
    REQUIRES_ATTRIBUTE,
    SegmentBuilder,
    StorageTarget,
)
from kafka_tiers.conformance.storage.requirements import StorageRequirements
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager

_TARGETS: dict[tuple[Any, ...], StorageTarget | str] = {}


def target_from_options(config: Any) -> StorageTarget | None:
    """The plugin named by ``--kt-storage`` with its ``--kt-storage-config`` file (either
    dialect of :mod:`kafka_tiers.remote.storage_config`) and ``--kt-storage-set`` overrides, or
    None when ``--kt-storage`` is absent.

    Calls ``pytest.fail`` (once per run, cached) when the plugin cannot be loaded or the
    config file cannot be read.
    """
    name = config.getoption("kt_storage", None)
    if not name:
        return None
    path = config.getoption("kt_storage_config", None)
    sets = tuple(config.getoption("kt_storage_set", None) or ())
    cache_key = (id(config), name, path, sets)
    if cache_key not in _TARGETS:
        from kafka_tiers.api import KafkaTiersError
        from kafka_tiers.conformance.pytest_plugin import parse_pairs
        from kafka_tiers.remote.storage_config import storage_settings

        try:
            settings = storage_settings(name, path or None,
                                        parse_pairs(list(sets), "--kt-storage-set"),
                                        storage_option="--kt-storage")
            _TARGETS[cache_key] = StorageTarget.from_plugin(settings.plugin,
                                                            dict(settings.config))
        except (KafkaTiersError, ValueError) as exc:
            _TARGETS[cache_key] = str(exc)
    target = _TARGETS[cache_key]
    if isinstance(target, str):
        pytest.fail(f"--kt-storage {name}: {target}", pytrace=False)
    return target


class StorageSuiteBase:
    """Fixtures of the storage conformance suite (see the module docstring)."""

    #: the size of the "large segment" checks (bytes); lower it for slow backends.
    LARGE_SEGMENT_BYTES = 24 * 1024 * 1024

    @pytest.fixture
    def storage_target(self, request: pytest.FixtureRequest) -> StorageTarget:
        """The plugin under test. Override in your own test class."""
        target = target_from_options(request.config)
        if target is None:
            pytest.skip("no storage plugin under test: give --kt-storage NAME_OR_PATH, or "
                        "override the storage_target fixture")
        return target

    @pytest.fixture
    def storage_requirements(self, storage_target: StorageTarget) -> StorageRequirements:
        """The capabilities checked. Override to return your ``StorageRequirements``
        subclass."""
        return StorageRequirements(storage_target.plugin_class)

    @pytest.fixture
    def fresh_target(self, storage_target: StorageTarget) -> Iterator[StorageTarget]:
        """The plugin under test over a fresh, empty root."""
        target = storage_target.with_fresh_root()
        yield target
        target.cleanup()

    @pytest.fixture
    def segments(self, tmp_path: Any) -> SegmentBuilder:
        """Makes segments for a random topic of this test."""
        return SegmentBuilder(tmp_path / "segments", f"ktc-{uuid.uuid4().hex[:10]}",
                              seed=uuid.uuid4().int & 0xFFFF)

    @pytest.fixture
    def make_rsm(self, fresh_target: StorageTarget, segments: SegmentBuilder
                 ) -> Iterator[Callable[[], RemoteStorageManager]]:
        """Creates configured instances over the test's root; all are closed, and the root
        emptied, at the end of the test."""
        made: list[RemoteStorageManager] = []

        def factory() -> RemoteStorageManager:
            instance = fresh_target.create()
            made.append(instance)
            return instance

        yield factory
        _clean_root(fresh_target, segments)
        for instance in made:
            with contextlib.suppress(Exception):  # closing must not mask the test's result
                instance.close()

    @pytest.fixture
    def rsm(self, make_rsm: Callable[[], RemoteStorageManager]) -> RemoteStorageManager:
        """A configured instance of the plugin under test (raw: no core wrapper)."""
        return make_rsm()

    @pytest.fixture
    def guarded_rsm(self, fresh_target: StorageTarget, make_rsm: Any
                    ) -> Iterator[RemoteStorageManager]:
        """An instance behind the core's wrapper, over the same root as :meth:`rsm`."""
        instance = fresh_target.guarded()
        yield instance
        instance.close()

    @pytest.fixture(autouse=True)
    def _kt_protocol(self, request: pytest.FixtureRequest, storage_target: StorageTarget,
                     storage_requirements: StorageRequirements) -> Iterator[None]:
        props = request.node.user_properties
        function = request.function
        area = function.__module__.rpartition(".")[2]
        requires = tuple(getattr(function, REQUIRES_ATTRIBUTE, ()))
        props.append(("kt_suite", "storage"))
        props.append(("kt_area", area))
        props.append(("kt_plugin", storage_target.label))
        for req in storage_requirements.all():
            props.append(("kt_capability",
                          f"{req.name}|{'yes' if req.declared else 'no'}|"
                          f"{'yes' if req.enabled else 'no'}|{req.reason}"))
        if requires:
            props.append(("kt_requires", ",".join(requires)))
        for name in requires:
            req = storage_requirements.get(name)
            if not req.enabled:
                pytest.skip(f"needs {name}: {req.reason}")
        harness._CURRENT.node = request.node
        try:
            yield
        finally:
            harness._CURRENT.node = None


def _clean_root(target: StorageTarget, segments: SegmentBuilder) -> None:
    """Delete every partition the test used, then everything under an object-store root."""
    try:
        instance = target.create()
    except Exception:
        return
    try:
        for tp in sorted(segments.partitions):
            try:
                instance.delete_topic_partition(tp)
            except Exception:  # best effort; the root is purged below
                continue
        if isinstance(instance, ObjectStoreRemoteStorageManager) and instance.key_prefix:
            store = instance.object_store
            keys = sorted(i.key for i in store.list(instance.key_prefix + "/"))
            batch = max(1, store.max_delete_batch)
            for i in range(0, len(keys), batch):
                store.delete_many(keys[i:i + batch])
    finally:
        instance.close()


__all__ = ["StorageSuiteBase", "target_from_options"]
