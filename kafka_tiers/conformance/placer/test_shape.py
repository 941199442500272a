"""Shape and size: possible requests are accepted, in time, with the right number of partitions
and replicas (rules ``accepts-possible-request``, ``terminates``, ``partition-count``,
``replication-factor``)."""

from __future__ import annotations

import pytest

from kafka_tiers.api import PlacementSpec, ReplicaPlacer
from kafka_tiers.conformance.placer.base import (
    Findings,
    PlacementRun,
    PlacerSuiteBase,
    call_place,
    describe_outcome,
)
from kafka_tiers.conformance.placer.rules import Violation, check_size, check_validity
from kafka_tiers.conformance.placer.shapes import Case, Shape


class ShapeSizeTests(PlacerSuiteBase):
    """Every generated case is placed, in time, with the requested partition count and RF."""

    def test_accepts_possible_requests(self, request: pytest.FixtureRequest,
                                       kt_run: PlacementRun, kt_cases: list[Case]) -> None:
        """Every generated case is possible, so the placer must not raise nor hang on any."""
        found = Findings(("accepts-possible-request", "terminates"))
        for case in kt_cases:
            found.checked += 1
            outcome = kt_run.outcome(case)
            if outcome.kind == "raised":
                found.add(case, [Violation("accepts-possible-request",
                                           describe_outcome(outcome))])
            elif outcome.kind == "timeout":
                found.add(case, [Violation("terminates", describe_outcome(outcome))])
        found.fail_if_any(request)

    def test_partition_count_and_replication_factor(
            self, request: pytest.FixtureRequest, kt_run: PlacementRun,
            kt_cases: list[Case]) -> None:
        """Exactly ``num_partitions`` lists of exactly ``replication_factor`` broker ids."""
        found = Findings(("partition-count", "replication-factor"))
        for case in kt_cases:
            outcome = kt_run.outcome(case)
            if outcome.kind != "ok":
                continue
            found.checked += 1
            found.add(case, check_size(case.spec, outcome.result))
        found.fail_if_any(request)

    def test_zero_partitions(self, request: pytest.FixtureRequest, placer_obj: ReplicaPlacer,
                             kt_shapes: list[Shape]) -> None:
        """``num_partitions=0`` returns an empty placement (or defers)."""
        found = Findings(("partition-count", "accepts-possible-request", "terminates"))
        for shape in kt_shapes[:6]:
            case = Case(shape, PlacementSpec(0, 1))
            found.checked += 1
            outcome = call_place(placer_obj, case, self.place_timeout)
            if outcome.kind == "raised":
                found.add(case, [Violation("accepts-possible-request",
                                           describe_outcome(outcome))])
            elif outcome.kind == "timeout":
                found.add(case, [Violation("terminates", describe_outcome(outcome))])
            elif outcome.kind == "ok":
                found.add(case, check_size(case.spec, outcome.result))
        found.fail_if_any(request)

    def test_one_broker_many_partitions_terminates(
            self, request: pytest.FixtureRequest, placer_obj: ReplicaPlacer,
            kt_shapes: list[Shape]) -> None:
        """One broker with 2000 partitions, and one unfenced broker among fenced ones with
        RF = all brokers, finish in time with a valid placement."""
        single = next(s for s in kt_shapes if len(s.brokers) == 1)
        mostly_fenced = next(s for s in kt_shapes if len(s.usable) == 1 and len(s.brokers) > 1)
        found = Findings(("terminates", "accepts-possible-request", "partition-count",
                          "replication-factor", "distinct-replicas", "unfenced-leader",
                          "fenced-only-when-needed", "allowed-brokers"))
        for case in (Case(single, PlacementSpec(2000, 1)),
                     Case(mostly_fenced, PlacementSpec(500, len(mostly_fenced.allowed)))):
            found.checked += 1
            outcome = call_place(placer_obj, case, self.place_timeout)
            if outcome.kind == "timeout":
                found.add(case, [Violation("terminates", describe_outcome(outcome))])
            elif outcome.kind == "raised":
                found.add(case, [Violation("accepts-possible-request",
                                           describe_outcome(outcome))])
            elif outcome.kind == "ok":
                size = check_size(case.spec, outcome.result)
                found.add(case, size)
                if not size:
                    found.add(case, check_validity(case.shape, case.spec, outcome.result))
        found.fail_if_any(request)


class TestShapeSize(ShapeSizeTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["ShapeSizeTests"]
