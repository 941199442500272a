"""Rack spread within each partition, for rack-aware placers (rules ``no-deferral``,
``rack-span``, ``rack-even``).

Racks are compared as opaque names. For a multi-level placer only one-level racks are used here;
its tree shapes are checked level by level in :mod:`.test_multi_level`.
"""

from __future__ import annotations

import pytest

from kafka_tiers.conformance.placer.base import (
    Findings,
    PlacementRun,
    PlacerSuiteBase,
    placements,
    requires,
)
from kafka_tiers.conformance.placer.requirements import Requirements
from kafka_tiers.conformance.placer.rules import Violation, check_spread
from kafka_tiers.conformance.placer.shapes import Case


def racked_cases(case_list: list[Case], requirements: Requirements) -> list[Case]:
    """The cases with racks that are checked with one-level rack rules: every racked shape for
    a rack-aware placer, the flat ones for a multi-level placer."""
    families = ("flat",) if requirements.multi_level.enabled else ("flat", "tree")
    return [c for c in case_list if c.shape.family in families]


class RackSpreadTests(PlacerSuiteBase):
    """Every partition is spread over as many racks as it can be, evenly."""

    @requires("rack_aware")
    def test_no_deferral(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                         kt_cases: list[Case], kt_requirements: Requirements) -> None:
        """A rack-aware placer never defers a racked cluster to the rack-unaware default."""
        found = Findings(("no-deferral",))
        for case in racked_cases(kt_cases, kt_requirements):
            found.checked += 1
            if kt_run.outcome(case).kind == "deferred":
                found.add(case, [Violation("no-deferral", "returned None (deferred to the "
                                           "rack-unaware default)")])
        found.fail_if_any(request)

    @requires("rack_aware")
    def test_rack_span(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                       kt_cases: list[Case], kt_requirements: Requirements) -> None:
        """Every partition spans ``min(#racks, RF)`` racks."""
        found = Findings(("rack-span",))
        for case, result in placements(kt_run, racked_cases(kt_cases, kt_requirements)):
            found.checked += 1
            found.add(case, check_spread(case.shape, case.spec, result, tree=False))
        found.fail_if_any(request)

    @requires("rack_aware")
    def test_rack_even(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                       kt_cases: list[Case], kt_requirements: Requirements) -> None:
        """Replicas per rack within a partition differ by at most one (unless the smaller rack
        is full)."""
        found = Findings(("rack-even",))
        for case, result in placements(kt_run, racked_cases(kt_cases, kt_requirements)):
            found.checked += 1
            found.add(case, check_spread(case.shape, case.spec, result, tree=False))
        found.fail_if_any(request)


class TestRackSpread(RackSpreadTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["RackSpreadTests", "racked_cases"]
