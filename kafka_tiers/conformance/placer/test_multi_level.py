"""Multi-level racks (paths ``/dc/rack``, any depth): spread at every node of the rack tree
within each partition, and balance at every equal-sized level over a topic (rules
``level-span``, ``level-even``, ``level-replica-balance``, ``level-leader-balance``, and
``leader-balance`` / ``replica-balance`` on tree shapes)."""

from __future__ import annotations

import pytest

from kafka_tiers.conformance.placer.base import (
    Findings,
    PlacementRun,
    PlacerSuiteBase,
    placements,
    requires,
)
from kafka_tiers.conformance.placer.rules import (
    check_broker_balance,
    check_level_balance,
    check_spread,
)
from kafka_tiers.conformance.placer.shapes import Case


def tree_cases(case_list: list[Case]) -> list[Case]:
    """The cases whose racks are paths of depth 2 or more."""
    return [c for c in case_list if c.shape.family == "tree"]


class MultiLevelTests(PlacerSuiteBase):
    """The rack rules hold at every level of the rack tree."""

    def _spread(self, request: pytest.FixtureRequest, run: PlacementRun,
                case_list: list[Case], rule: str) -> None:
        found = Findings((rule,))
        for case, result in placements(run, tree_cases(case_list)):
            found.checked += 1
            found.add(case, check_spread(case.shape, case.spec, result, tree=True))
        found.fail_if_any(request)

    @requires("multi_level")
    def test_level_span(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                        kt_cases: list[Case]) -> None:
        """At every node, a partition's replicas under it span as many children as they can."""
        self._spread(request, kt_run, kt_cases, "level-span")

    @requires("multi_level")
    def test_level_even(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                        kt_cases: list[Case]) -> None:
        """At every node, a partition's replicas per child differ by at most one."""
        self._spread(request, kt_run, kt_cases, "level-even")

    @requires("multi_level")
    def test_level_balance(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                           kt_cases: list[Case]) -> None:
        """Every domain of every equal-sized level holds its fair share of replicas and of
        leaders, within one."""
        found = Findings(("level-replica-balance", "level-leader-balance"))
        for case, result in placements(kt_run, tree_cases(kt_cases)):
            found.checked += 1
            found.add(case, check_level_balance(case.shape, case.spec.replication_factor,
                                                result))
        found.fail_if_any(request)

    @requires("multi_level")
    def test_tree_broker_balance(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                                 kt_cases: list[Case]) -> None:
        """Leaders and replicas per broker meet the balance bounds, with the layout
        equal-sized only when every level of the tree is."""
        found = Findings(("leader-balance", "replica-balance"))
        for case, result in placements(kt_run, tree_cases(kt_cases)):
            found.checked += 1
            found.add(case, check_broker_balance(case.shape, case.spec.replication_factor,
                                                 result, tree=True))
        found.fail_if_any(request)


class TestMultiLevel(MultiLevelTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["MultiLevelTests", "tree_cases"]
