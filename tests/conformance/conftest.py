"""Fixtures of the conformance suite's own tests: a helper that runs the placer suite in-process
and reads which rules its report says are broken.

The test modules that use pytester enable it themselves (``pytest_plugins = ["pytester"]`` in
the module): a ``pytest_plugins`` in this non-root conftest is refused by pytest when the whole
project's tests run from the repository root."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

_BROKEN = re.compile(r"^broken rule\(s\): (.+)$", re.MULTILINE)


@dataclass
class SuiteRun:
    """One run of the placer suite: exit status, output and the rules reported broken."""

    ret: int
    output: str
    broken: set[str]
    outcomes: dict[str, int]


@pytest.fixture
def run_suite(pytester: pytest.Pytester):
    """Run the placer suite in-process against a placer: ``run_suite(name, *pytest_args)``."""

    def run(placer: str, *args: str) -> SuiteRun:
        # other plugins of this environment only slow the nested runs down
        result = pytester.runpytest("--kt-placer", placer, "-p", "no:cacheprovider",
                                    "-p", "no:hypothesispytest", "-p", "no:benchmark", *args)
        out = result.stdout.str()
        broken = {r.strip() for line in _BROKEN.findall(out) for r in line.split(",")}
        return SuiteRun(int(result.ret), out, broken, result.parseoutcomes())

    return run


__all__ = ["SuiteRun", "run_suite"]
