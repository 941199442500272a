"""Error behaviour: impossible requests are refused with ``InvalidReplicationFactorError``;
fenced brokers count as registered (rules ``refuses-non-positive-rf``,
``refuses-rf-above-allowed``, ``refuses-without-unfenced``, ``fenced-count-as-registered``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kafka_tiers.api import (
    BrokerInfo,
    InvalidReplicationFactorError,
    PlacementSpec,
    ReplicaPlacer,
)
from kafka_tiers.conformance.placer.base import (
    Findings,
    PlacerSuiteBase,
    call_place,
    describe_outcome,
)
from kafka_tiers.conformance.placer.rules import Violation, check_size
from kafka_tiers.conformance.placer.shapes import Case, Shape


def _small(shapes: list[Shape]) -> list[Shape]:
    return [s for s in shapes if len(s.brokers) < 40]


def _all_fenced(shape: Shape) -> Shape:
    brokers = tuple(BrokerInfo(b.broker_id, b.rack, True) for b in shape.brokers)
    return replace(shape, name=f"{shape.name}-all-fenced", brokers=brokers)


class ErrorTests(PlacerSuiteBase):
    """Impossible requests raise ``InvalidReplicationFactorError`` (a subclass is fine);
    returning a placement, returning None or raising anything else fails."""

    def _refused(self, found: Findings, placer: ReplicaPlacer, case: Case, rule: str) -> None:
        found.checked += 1
        outcome = call_place(placer, case, self.place_timeout)
        if outcome.kind == "raised" and isinstance(outcome.error, InvalidReplicationFactorError):
            return
        found.add(case, [Violation(rule, f"{describe_outcome(outcome)}; expected "
                                         "InvalidReplicationFactorError")])

    def test_refuses_non_positive_rf(self, request: pytest.FixtureRequest,
                                     placer_obj: ReplicaPlacer, kt_shapes: list[Shape]) -> None:
        """RF 0 and RF -1 are refused on every (small) shape."""
        found = Findings(("refuses-non-positive-rf",))
        for shape in _small(kt_shapes):
            for rf in (0, -1):
                self._refused(found, placer_obj, Case(shape, PlacementSpec(3, rf)),
                              "refuses-non-positive-rf")
        found.fail_if_any(request)

    def test_refuses_rf_above_allowed(self, request: pytest.FixtureRequest,
                                      placer_obj: ReplicaPlacer, kt_shapes: list[Shape]) -> None:
        """RF = allowed registered brokers (fenced included) + 1 is refused, also when the
        subset is smaller than the cluster."""
        found = Findings(("refuses-rf-above-allowed",))
        for shape in _small(kt_shapes):
            spec = PlacementSpec(3, len(shape.allowed) + 1)
            self._refused(found, placer_obj, Case(shape, spec), "refuses-rf-above-allowed")
        found.fail_if_any(request)

    def test_refuses_without_unfenced(self, request: pytest.FixtureRequest,
                                      placer_obj: ReplicaPlacer, kt_shapes: list[Shape]) -> None:
        """No unfenced allowed broker: every broker fenced, a subset of only fenced brokers, a
        subset of only unknown ids, no broker at all."""
        found = Findings(("refuses-without-unfenced",))
        small = _small(kt_shapes)
        targets: list[Case] = []
        for shape in small[:8]:
            fenced = _all_fenced(shape)
            targets.append(Case(fenced, PlacementSpec(3, 1)))
            if len(fenced.brokers) > 1:
                targets.append(Case(fenced, PlacementSpec(3, len(fenced.brokers))))
        with_fenced = next((s for s in small if s.fenced and s.subset is None), None)
        if with_fenced is not None:
            only = replace(with_fenced, name=f"{with_fenced.name}-fenced-subset",
                           subset=with_fenced.fenced)
            targets.append(Case(only, PlacementSpec(3, 1)))
        base = small[0]
        targets.append(Case(replace(base, name=f"{base.name}-unknown-subset",
                                    subset=(990, 991)), PlacementSpec(3, 1)))
        targets.append(Case(Shape("empty-cluster", base.family, ()), PlacementSpec(3, 1)))
        for case in targets:
            self._refused(found, placer_obj, case, "refuses-without-unfenced")
        found.fail_if_any(request)

    def test_fenced_count_as_registered(self, request: pytest.FixtureRequest,
                                        placer_obj: ReplicaPlacer, kt_shapes: list[Shape]) -> None:
        """With fenced brokers, RF = all allowed brokers (fenced included) is placed."""
        found = Findings(("fenced-count-as-registered",))
        for shape in _small(kt_shapes):
            if not any(b.fenced for b in shape.allowed) or not shape.usable:
                continue
            case = Case(shape, PlacementSpec(4, len(shape.allowed)))
            found.checked += 1
            outcome = call_place(placer_obj, case, self.place_timeout)
            if outcome.kind in ("raised", "timeout"):
                found.add(case, [Violation("fenced-count-as-registered",
                                           describe_outcome(outcome))])
            elif outcome.kind == "ok" and check_size(case.spec, outcome.result):
                found.add(case, [Violation("fenced-count-as-registered",
                                           "the placement has the wrong size: "
                                           + check_size(case.spec, outcome.result)[0].detail)])
        found.fail_if_any(request)


class TestErrors(ErrorTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["ErrorTests"]
