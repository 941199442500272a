"""Continuation: partitions added with ``start_partition`` (the topic's earlier partitions in the
``ClusterView``) are valid and, for rack-aware placers, as balanced as placing the topic at once
(rules ``continuation-count``, ``continuation-balance``)."""

from __future__ import annotations

import pytest

from kafka_tiers.api import PlacementSpec, TopicPartition
from kafka_tiers.conformance.placer.base import (
    Findings,
    PlacementRun,
    PlacerSuiteBase,
    describe_outcome,
    requires,
)
from kafka_tiers.conformance.placer.requirements import Requirements
from kafka_tiers.conformance.placer.rules import (
    Violation,
    check_broker_balance,
    check_level_balance,
    check_size,
    check_validity,
)
from kafka_tiers.conformance.placer.shapes import Case, Shape

TOPIC = "kt-conformance"


def _splits(shape: Shape) -> list[tuple[int, int, int]]:
    """(first, second, rf) call sizes: totals that divide by n (tight bounds) and some that
    do not."""
    n = max(1, len(shape.usable))
    rfs = sorted({rf for rf in (1, 2, 3, len(shape.usable)) if 1 <= rf <= len(shape.usable)})
    sizes = sorted({(n + 1, 2 * n - 1), (1, n - 1), (2, 3), (n, n)} - {(1, 0)})
    return [(a, b, rf) for rf in rfs for a, b in sizes if a > 0 and b > 0]


def two_calls(run: PlacementRun, shape: Shape, first: int, second: int, rf: int
              ) -> tuple[Case, Case, list | None, str]:
    """Place ``first`` partitions, then ``second`` more with ``start_partition=first`` and the
    first result in the ClusterView. Returns both cases, the combined placement (None when a
    call did not return a placement) and a note describing the two calls."""
    one = Case(shape, PlacementSpec(first, rf, 0, TOPIC))
    out1 = run.outcome(one)
    note = f"two calls: {first} partitions, then {second} with start_partition={first}"
    if out1.kind != "ok" or check_size(one.spec, out1.result):
        return one, one, None, note + f"; first call {describe_outcome(out1)}"
    first_result = [[int(b) for b in r] for r in out1.result]
    existing = {TopicPartition(TOPIC, i): r for i, r in enumerate(first_result)}
    two = Case(shape, PlacementSpec(second, rf, first, TOPIC), existing)
    out2 = run.outcome(two)
    if out2.kind != "ok" or check_size(two.spec, out2.result):
        return one, two, None, note + f"; second call {describe_outcome(out2)}"
    return one, two, first_result + [[int(b) for b in r] for r in out2.result], note


def _small(shapes: list[Shape]) -> list[Shape]:
    return [s for s in shapes if len(s.brokers) < 40]


class ContinuationTests(PlacerSuiteBase):
    """Adding partitions to a topic continues it."""

    def test_continuation_count_and_validity(self, request: pytest.FixtureRequest,
                                             kt_run: PlacementRun,
                                             kt_shapes: list[Shape]) -> None:
        """The second call returns ``num_partitions`` valid lists (not ``start + num``)."""
        found = Findings(("continuation-count",))
        for shape in _small(kt_shapes):
            for first, second, rf in _splits(shape):
                one, two, _combined, note = two_calls(kt_run, shape, first, second, rf)
                if two is one:
                    continue  # the first call's own problems are reported by other tests
                found.checked += 1
                outcome = kt_run.outcome(two)
                if outcome.kind in ("raised", "timeout"):
                    found.add(two, [Violation("continuation-count", describe_outcome(outcome))],
                              note)
                    continue
                if outcome.kind != "ok":
                    continue
                problems = check_size(two.spec, outcome.result)
                if not problems:
                    problems = check_validity(shape, two.spec, outcome.result)
                found.add(two, [Violation("continuation-count", f"{v.rule}: {v.detail}",
                                          v.partition, v.replicas) for v in problems], note)
        found.fail_if_any(request)

    def test_start_partition_without_history(self, request: pytest.FixtureRequest,
                                             kt_run: PlacementRun,
                                             kt_shapes: list[Shape]) -> None:
        """``start_partition=5`` on a cluster that does not know the topic still returns
        ``num_partitions`` valid lists."""
        found = Findings(("continuation-count",))
        for shape in _small(kt_shapes):
            case = Case(shape, PlacementSpec(4, min(2, len(shape.allowed)), 5, TOPIC))
            found.checked += 1
            outcome = kt_run.outcome(case)
            if outcome.kind in ("raised", "timeout"):
                found.add(case, [Violation("continuation-count", describe_outcome(outcome))])
                continue
            if outcome.kind != "ok":
                continue
            problems = check_size(case.spec, outcome.result) or check_validity(
                shape, case.spec, outcome.result)
            found.add(case, [Violation("continuation-count", f"{v.rule}: {v.detail}",
                                       v.partition, v.replicas) for v in problems])
        found.fail_if_any(request)

    @requires("rack_aware")
    def test_continuation_balance(self, request: pytest.FixtureRequest, kt_run: PlacementRun,
                                  kt_shapes: list[Shape],
                                  kt_requirements: Requirements) -> None:
        """The two calls together meet the leader and replica balance bounds of one call of
        ``first + second`` partitions (and, for multi-level placers, the level balance)."""
        found = Findings(("continuation-balance",))
        multi = kt_requirements.multi_level.enabled
        for shape in _small(kt_shapes):
            if shape.family == "no-racks" and multi:
                continue
            tree = multi and shape.family == "tree"
            for first, second, rf in _splits(shape):
                _one, two, combined, note = two_calls(kt_run, shape, first, second, rf)
                if combined is None:
                    continue
                if check_validity(shape, PlacementSpec(first + second, rf), combined):
                    continue
                found.checked += 1
                problems = check_broker_balance(shape, rf, combined, tree=tree)
                if tree:
                    problems += check_level_balance(shape, rf, combined)
                found.add(two, [Violation("continuation-balance", f"{v.rule}: {v.detail}")
                                for v in problems], note)
        found.fail_if_any(request)


class TestContinuation(ContinuationTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["ContinuationTests", "two_calls"]
