"""What the placer under test claims to do: one property per capability (SQLAlchemy style).

A capability is named after a behaviour, never after a placer. Tests that need one are skipped,
with the reason shown in pytest's output and in the end-of-run summary, when the placer does not
have it. The defaults are derived from the placer class's declarations (``RACK_AWARE``,
``MULTI_LEVEL`` of :class:`~kafka_tiers.api.ReplicaPlacer`); a placer author can subclass
:class:`Requirements` and set ``requirements_class`` on the test class to change a default (for
example to declare that a multi-level placer also places brokers without racks).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capability:
    """Whether the placer under test has one capability.

    Attributes:
        name: the capability (a property name of :class:`Requirements`).
        declared: what the placer class declares (or the default derived from it).
        reason: why it is on or off, in words (shown for skipped tests).
        selects_cases: True when the capability chooses which generated cases run rather
            than which tests (shown as "cases included" / "cases left out" in the summary).
    """

    name: str
    declared: bool
    reason: str
    selects_cases: bool = False

    @property
    def enabled(self) -> bool:
        """True when tests needing this capability run."""
        return self.declared


class Requirements:
    """The capabilities of one placer class.

    Args:
        placer_cls: the placer class under test.
    """

    #: the capability properties, in the order the summary lists them.
    CAPABILITIES: tuple[str, ...] = ("rack_aware", "multi_level", "places_brokers_without_racks")

    def __init__(self, placer_cls: type) -> None:
        self.placer_cls = placer_cls

    @property
    def rack_aware(self) -> Capability:
        """The rack-spread and balance rules hold (``RACK_AWARE = True``; implied by
        ``MULTI_LEVEL``, whose rules hold at every level)."""
        declared = bool(getattr(self.placer_cls, "RACK_AWARE", False))
        multi = bool(getattr(self.placer_cls, "MULTI_LEVEL", False))
        if declared:
            return Capability("rack_aware", True, "placer declares RACK_AWARE")
        if multi:
            return Capability("rack_aware", True, "implied by MULTI_LEVEL")
        return Capability("rack_aware", False, "placer does not declare RACK_AWARE")

    @property
    def multi_level(self) -> Capability:
        """Racks are paths and the rack rules hold at every level of the tree
        (``MULTI_LEVEL = True``)."""
        if getattr(self.placer_cls, "MULTI_LEVEL", False):
            return Capability("multi_level", True, "placer declares MULTI_LEVEL")
        return Capability("multi_level", False, "placer does not declare MULTI_LEVEL")

    @property
    def places_brokers_without_racks(self) -> Capability:
        """Clusters whose brokers have no rack are placed (default: yes, unless the placer is
        multi-level, whose racks must be paths; it may refuse them with
        ``InvalidReplicaAssignmentError``)."""
        if getattr(self.placer_cls, "MULTI_LEVEL", False):
            return Capability("places_brokers_without_racks", False,
                              "multi-level placers need rack paths", selects_cases=True)
        return Capability("places_brokers_without_racks", True, "default for non multi-level",
                          selects_cases=True)

    def get(self, name: str) -> Capability:
        """The capability ``name``. Raises ``AttributeError`` for an unknown name."""
        cap = getattr(self, name)
        if not isinstance(cap, Capability):
            raise AttributeError(f"{name} is not a capability")
        return cap

    def all(self) -> list[Capability]:
        """Every capability, in :attr:`CAPABILITIES` order."""
        return [self.get(n) for n in self.CAPABILITIES]


__all__ = ["Capability", "Requirements"]
