"""Balance of leaders and replicas across brokers over a topic, for rack-aware placers (rules
``leader-balance``, ``replica-balance``; the bounds are in :mod:`..rules`).

For a multi-level placer only one-level racks (and no racks) are used here; its tree shapes are
checked in :mod:`.test_multi_level` with the tree's own notion of equal-sized.
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
from kafka_tiers.conformance.placer.rules import check_broker_balance
from kafka_tiers.conformance.placer.shapes import Case


def balance_cases(case_list: list[Case], requirements: Requirements) -> list[Case]:
    """Every case for a rack-aware placer; all but the tree shapes for a multi-level one."""
    if requirements.multi_level.enabled:
        return [c for c in case_list if c.shape.family != "tree"]
    return list(case_list)


class BalanceTests(PlacerSuiteBase):
    """Leaders and replicas are spread evenly over the brokers."""

    def _check(self, request: pytest.FixtureRequest, run: PlacementRun, case_list: list[Case],
               rule: str) -> None:
        found = Findings((rule,))
        for case, result in placements(run, case_list):
            found.checked += 1
            found.add(case, check_broker_balance(case.shape, case.spec.replication_factor,
                                                 result, tree=False))
        found.fail_if_any(request)

    @requires("rack_aware")
    def test_leader_balance(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                            kt_cases: list[Case], kt_requirements: Requirements) -> None:
        """Leaders per broker: ``max - min <= 1`` when equal-sized and divisible, else 2."""
        self._check(request, kt_run, balance_cases(kt_cases, kt_requirements), "leader-balance")

    @requires("rack_aware")
    def test_replica_balance(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                             kt_cases: list[Case], kt_requirements: Requirements) -> None:
        """Replicas per broker: ``max - min <= 1`` when equal-sized and divisible, else
        ``max(2, RF)``."""
        self._check(request, kt_run, balance_cases(kt_cases, kt_requirements),
                    "replica-balance")


class TestBalance(BalanceTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["BalanceTests", "balance_cases"]
