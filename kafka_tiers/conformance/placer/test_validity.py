"""Validity of every replica list: distinct brokers, only allowed registered brokers, unfenced
leaders, fenced followers only when needed (rules ``distinct-replicas``, ``allowed-brokers``,
``unfenced-leader``, ``fenced-only-when-needed``)."""

from __future__ import annotations

import pytest

from kafka_tiers.conformance.placer.base import Findings, PlacementRun, PlacerSuiteBase, placements
from kafka_tiers.conformance.placer.rules import check_validity
from kafka_tiers.conformance.placer.shapes import Case


class ValidityTests(PlacerSuiteBase):
    """Each test checks one validity rule over every well-formed placement of the run."""

    def _check(self, request: pytest.FixtureRequest, run: PlacementRun, case_list: list[Case],
               rule: str) -> None:
        found = Findings((rule,))
        for case, result in placements(run, case_list, valid=False):
            found.checked += 1
            found.add(case, check_validity(case.shape, case.spec, result))
        found.fail_if_any(request)

    def test_distinct_replicas(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                               kt_cases: list[Case]) -> None:
        """No broker twice in one partition."""
        self._check(request, kt_run, kt_cases, "distinct-replicas")

    def test_allowed_brokers(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                             kt_cases: list[Case]) -> None:
        """Only registered brokers of the allowed subset; unknown subset ids ignored."""
        self._check(request, kt_run, kt_cases, "allowed-brokers")

    def test_unfenced_leader(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                             kt_cases: list[Case]) -> None:
        """The first replica is never a fenced broker."""
        self._check(request, kt_run, kt_cases, "unfenced-leader")

    def test_fenced_only_when_needed(self, request: pytest.FixtureRequest,
                                     kt_run: PlacementRun, kt_cases: list[Case]) -> None:
        """Fenced brokers only when the unfenced allowed ones are fewer than RF."""
        self._check(request, kt_run, kt_cases, "fenced-only-when-needed")


class TestValidity(ValidityTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["ValidityTests"]
