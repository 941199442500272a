"""Capabilities of the storage plugin under test, SQLAlchemy ``Requirements`` style.

:class:`StorageRequirements` has one property per optional behaviour (named after the
behaviour, never a vendor), each a :class:`Requirement` that is on or off with a reason. The
defaults come from the plugin's declared ``CAPABILITIES`` (and, for the behaviours that need
it, from whether the plugin is built on the object-store level). A third party subclasses it to
switch a behaviour off (or on) for its backend with its own reason, and returns the subclass
from its ``storage_requirements`` fixture. Tests that need a capability that is off are skipped
with the reason shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_tiers.api import StorageCapability
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager


@dataclass(frozen=True)
class Requirement:
    """One optional behaviour: whether the suite checks it, and why not.

    Attributes:
        name: the behaviour's name (a :class:`StorageCapability` value).
        declared: whether the plugin declares it in ``CAPABILITIES``.
        enabled: whether the suite checks it.
        reason: why it is off (empty when on).
    """

    name: str
    declared: bool
    enabled: bool
    reason: str = ""

    @classmethod
    def on(cls, name: str, declared: bool = True) -> Requirement:
        """A behaviour the suite checks."""
        return cls(name, declared, True)

    @classmethod
    def off(cls, name: str, reason: str, declared: bool = False) -> Requirement:
        """A behaviour the suite skips, with the reason shown in the report."""
        return cls(name, declared, False, reason)


class StorageRequirements:
    """The capabilities of one plugin class (see the module docstring).

    Args:
        plugin_class: the class of the plugin under test.
    """

    def __init__(self, plugin_class: type) -> None:
        self.plugin_class = plugin_class
        self.declared = frozenset(str(c) for c in getattr(plugin_class, "CAPABILITIES", ()))

    def _declared(self, capability: StorageCapability, *, object_store: bool = False
                  ) -> Requirement:
        name = str(capability)
        if object_store and not issubclass(self.plugin_class, ObjectStoreRemoteStorageManager):
            return Requirement.off(name, "the plugin is not built on the object-store level",
                                   declared=name in self.declared)
        if name not in self.declared:
            return Requirement.off(name, "not declared in the plugin's CAPABILITIES")
        return Requirement.on(name)

    @property
    def multipart_upload(self) -> Requirement:
        """Large objects go up in several parts; a failed upload is aborted."""
        return self._declared(StorageCapability.MULTIPART_UPLOAD, object_store=True)

    @property
    def concurrent_access(self) -> Requirement:
        """One instance serves copies and fetches from several threads at once."""
        return self._declared(StorageCapability.CONCURRENT_ACCESS)

    @property
    def large_segments(self) -> Requirement:
        """Segments of tens of MiB are copied and fetched within the suite's time."""
        return self._declared(StorageCapability.LARGE_SEGMENTS)

    @property
    def orphan_collection(self) -> Requirement:
        """Objects no manifest references are listed and deleted by ``collect_orphans``."""
        return self._declared(StorageCapability.ORPHAN_COLLECTION, object_store=True)

    @property
    def fault_injection(self) -> Requirement:
        """The suite may wrap the object store to fail mid-copy and to count open streams."""
        return self._declared(StorageCapability.FAULT_INJECTION, object_store=True)

    @property
    def data_transforms(self) -> Requirement:
        """Segments are stored as chunks of ``chunk.size``, optionally zstd-compressed and
        AES-256-GCM-encrypted, and read through a bounded chunk cache (the object-store level's
        data path): the suite reconfigures the plugin with those keys and reads the stored
        objects raw through its object store."""
        return self._declared(StorageCapability.DATA_TRANSFORMS, object_store=True)

    def get(self, name: str) -> Requirement:
        """The requirement called ``name``.

        Raises:
            KeyError: no such capability.
        """
        if name not in self.names():
            raise KeyError(name)
        return getattr(self, name)

    @staticmethod
    def names() -> list[str]:
        """Every capability name, sorted."""
        return sorted(str(c) for c in StorageCapability)

    def all(self) -> list[Requirement]:
        """Every requirement, sorted by name."""
        return [self.get(n) for n in self.names()]


__all__ = ["Requirement", "StorageRequirements"]
