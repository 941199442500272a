"""Determinism: the same seed gives the same placement, from fresh placers, from one placer asked
twice, and in another interpreter (rules ``deterministic-seed``, ``no-hidden-state``,
``deterministic-across-processes``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from kafka_tiers.api import ReplicaPlacer
from kafka_tiers.conformance.placer.base import (
    Findings,
    Outcome,
    PlacerSuiteBase,
    PlacerTarget,
    call_place,
)
from kafka_tiers.conformance.placer.requirements import Requirements
from kafka_tiers.conformance.placer.rules import Violation
from kafka_tiers.conformance.placer.shapes import Case, cases, shapes


def _normal(outcome: Outcome) -> Any:
    """What must repeat: the placement as lists of ints, or which error type was raised."""
    if outcome.kind == "ok":
        try:
            return [[int(b) for b in reps] for reps in outcome.result]
        except (TypeError, ValueError):
            return repr(outcome.result)
    if outcome.kind == "raised":
        return f"raised {type(outcome.error).__name__}"
    return outcome.kind


def _diff(a: Any, b: Any) -> str:
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return f"partition {i}: {x} then {y}"
        return f"{len(a)} partitions then {len(b)}"
    return f"{a} then {b}"


#: run in a fresh interpreter: load the placer, place the listed cases, print JSON.
_CHILD = """
import json, sys
from kafka_tiers.conformance.placer.base import call_place
from kafka_tiers.conformance.placer.shapes import cases, shapes
from kafka_tiers.plugins import load_placer
job = json.loads(sys.stdin.read())
all_cases = {(c.shape.name, c.spec.num_partitions, c.spec.replication_factor): c
             for c in cases(shapes(**job["shapes"]))}
placer = load_placer(job["name"], job["config"])
out = []
for key in job["cases"]:
    o = call_place(placer, all_cases[tuple(key)], job["timeout"])
    out.append([[int(b) for b in r] for r in o.result] if o.kind == "ok" else
               (f"raised {type(o.error).__name__}" if o.kind == "raised" else o.kind))
print(json.dumps(out))
"""


class DeterminismTests(PlacerSuiteBase):
    """Same configuration (seed), same request, same placement."""

    def test_same_seed_same_result(self, request: pytest.FixtureRequest,
                                   make_placer: Callable[[], ReplicaPlacer],
                                   kt_cases: list[Case]) -> None:
        """Two fresh placers configured with the same seed agree on every case."""
        found = Findings(("deterministic-seed",))
        first, second = make_placer(), make_placer()
        for case in kt_cases:
            found.checked += 1
            a = _normal(call_place(first, case, self.place_timeout))
            b = _normal(call_place(second, case, self.place_timeout))
            if a != b:
                found.add(case, [Violation("deterministic-seed", "two placers with the same "
                                           f"seed differ: {_diff(a, b)}")])
        found.fail_if_any(request)

    def test_no_hidden_state(self, request: pytest.FixtureRequest,
                             make_placer: Callable[[], ReplicaPlacer],
                             kt_cases: list[Case]) -> None:
        """One placer asked every case, then every case again, answers the same."""
        found = Findings(("no-hidden-state",))
        placer = make_placer()
        sample = kt_cases
        before = [_normal(call_place(placer, c, self.place_timeout)) for c in sample]
        for case, a in zip(sample, before, strict=True):
            found.checked += 1
            b = _normal(call_place(placer, case, self.place_timeout))
            if a != b:
                found.add(case, [Violation("no-hidden-state", "the same placer answered "
                                           f"differently the second time: {_diff(a, b)}")])
        found.fail_if_any(request)

    def test_same_result_across_processes(self, request: pytest.FixtureRequest,
                                          kt_target: PlacerTarget,
                                          kt_requirements: Requirements,
                                          make_placer: Callable[[], ReplicaPlacer]) -> None:
        """A fresh interpreter with another ``PYTHONHASHSEED`` places like this one (a placer
        iterating over sets of strings or using ``hash()`` fails this)."""
        found = Findings(("deterministic-across-processes",))
        shape_args = {"path_racks": kt_requirements.multi_level.enabled,
                      "with_unracked": kt_requirements.places_brokers_without_racks.enabled,
                      "large": False}
        sample = [c for c in cases(shapes(**shape_args)) if c.spec.num_partitions >= 3][::4]
        job = {"name": kt_target.name, "config": dict(kt_target.config),
               "shapes": shape_args, "timeout": self.place_timeout,
               "cases": [[c.shape.name, c.spec.num_partitions, c.spec.replication_factor]
                         for c in sample]}
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = "7919" if env.get("PYTHONHASHSEED") != "7919" else "104729"
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
        proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(job),
                              capture_output=True, text=True, env=env,
                              timeout=60 + self.place_timeout * 2, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            pytest.skip(f"the placer could not be run in a fresh interpreter: {tail}")
        theirs = json.loads(proc.stdout.strip().splitlines()[-1])
        placer = make_placer()
        for case, b in zip(sample, theirs, strict=True):
            found.checked += 1
            a = _normal(call_place(placer, case, self.place_timeout))
            if a != b:
                found.add(case, [Violation(
                    "deterministic-across-processes",
                    f"PYTHONHASHSEED={env['PYTHONHASHSEED']} gives another placement: "
                    f"{_diff(a, b)}")])
        found.fail_if_any(request)


class TestDeterminism(DeterminismTests):
    """Run by ``pytest --kt-placer NAME`` (the placer comes from the option)."""


__all__ = ["DeterminismTests"]
