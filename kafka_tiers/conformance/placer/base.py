"""The machinery of the placer suite: the placer under test, its fixtures, the cases, calling
``place`` with a time limit, and failure reports that name the rule and a minimal example.

A test class of the suite derives from :class:`PlacerSuiteBase`. The placer under test is the
class attribute :attr:`PlacerSuiteBase.placer` when set (how a placer author runs the suite from
their own test module), else pytest's ``--kt-placer`` option; without either, every test is
skipped.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import pytest

from kafka_tiers.api import ReplicaPlacer
from kafka_tiers.conformance.placer.requirements import Requirements
from kafka_tiers.conformance.placer.rules import RULES, Violation
from kafka_tiers.conformance.placer.shapes import Case, Shape, cases, shapes

F = TypeVar("F", bound=Callable[..., Any])

#: the seed handed to the placer (as config key ``seed``) unless the configuration has one.
DEFAULT_SEED = 20240917

#: the attribute :func:`requires` sets on a test function: the capabilities it needs
REQUIRES_ATTRIBUTE = "_kt_requires"


def requires(*capabilities: str) -> Callable[[F], F]:
    """Mark a test as needing ``capabilities`` (names of :class:`Requirements` properties); it
    is skipped, with the capability's reason, when the placer under test lacks one."""

    def mark(func: F) -> F:
        setattr(func, REQUIRES_ATTRIBUTE, tuple(capabilities))
        return func

    return mark


@dataclass(frozen=True)
class PlacerTarget:
    """The placer under test.

    Attributes:
        name: its entry-point name or import path.
        config: the configuration handed to ``configure`` (``seed`` included).
        placer_cls: its class.
        label: the plugin in words (name and distribution).
    """

    name: str
    config: Mapping[str, str]
    placer_cls: type
    label: str

    @property
    def key(self) -> tuple:
        """A hashable identity (name and configuration)."""
        return (self.name, tuple(sorted(self.config.items())))

    def describe(self) -> str:
        """Label, class and configuration in one line."""
        cfg = ", ".join(f"{k}={v}" for k, v in sorted(self.config.items()))
        cls = f"{self.placer_cls.__module__}:{self.placer_cls.__qualname__}"
        return f"{self.label} ({cls}); config: {cfg}"

    def create(self) -> ReplicaPlacer:
        """A fresh placer, created and configured as the broker would.

        Raises:
            PluginError, ConfigError: as :func:`kafka_tiers.plugins.load_placer`.
        """
        from kafka_tiers.plugins import load_placer

        return load_placer(self.name, self.config)


@dataclass
class Outcome:
    """What one ``place`` call did.

    Attributes:
        kind: ``"ok"`` (returned a placement), ``"deferred"`` (returned None), ``"raised"`` or
            ``"timeout"``.
        result: the returned value.
        error: the exception raised.
        seconds: how long the call took.
    """

    kind: str
    result: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


class _Worker:
    """A daemon thread that runs ``place`` calls one at a time. A call that overruns its time
    limit leaves its worker stuck; the next call gets a new worker."""

    _current: _Worker | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue]] = (
            queue.SimpleQueue())
        self.thread = threading.Thread(target=self._loop, name="kt-conformance-place",
                                       daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            func, reply = self.jobs.get()
            try:
                reply.put(("result", func()))
            except BaseException as exc:  # reported as the outcome
                reply.put(("error", exc))

    @classmethod
    def run(cls, func: Callable[[], Any], timeout: float) -> tuple[str, Any] | None:
        """``("result", value)`` or ``("error", exc)``; None after ``timeout`` seconds."""
        with cls._lock:
            if cls._current is None:
                cls._current = cls()
            worker = cls._current
        reply: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        worker.jobs.put((func, reply))
        try:
            return reply.get(timeout=timeout)
        except queue.Empty:
            with cls._lock:
                if cls._current is worker:
                    cls._current = None
            return None


def call_place(placer: ReplicaPlacer, case: Case, timeout: float) -> Outcome:
    """Call ``placer.place`` for ``case`` in a helper thread, giving up after ``timeout``
    seconds (the call is then left to finish on its own)."""
    subset = None if case.shape.subset is None else list(case.shape.subset)
    cluster = case.cluster()
    start = time.perf_counter()
    answer = _Worker.run(lambda: placer.place(case.spec, cluster, subset), timeout)
    seconds = time.perf_counter() - start
    if answer is None:
        return Outcome("timeout", seconds=seconds)
    kind, value = answer
    if kind == "error":
        return Outcome("raised", error=value, seconds=seconds)
    return Outcome("deferred" if value is None else "ok", value, seconds=seconds)


class PlacementRun:
    """One placer instance and the outcomes of the cases it was asked, cached per run so each
    rule test checks the same placements without placing them again.

    Args:
        target: the placer under test.
        timeout: the time limit of one ``place`` call, in seconds.
    """

    def __init__(self, target: PlacerTarget, timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        self._placer: ReplicaPlacer | None = None
        self._outcomes: dict[tuple, Outcome] = {}

    @property
    def placer(self) -> ReplicaPlacer:
        """The run's placer, created on first use."""
        if self._placer is None:
            self._placer = self.target.create()
        return self._placer

    def outcome(self, case: Case) -> Outcome:
        """The outcome of ``case``, placing it on first use."""
        if case.key not in self._outcomes:
            self._outcomes[case.key] = call_place(self.placer, case, self.timeout)
        return self._outcomes[case.key]

    def close(self) -> None:
        """Close the placer (errors ignored: the suite is done with it)."""
        if self._placer is not None:
            with contextlib.suppress(Exception):
                self._placer.close()


def describe_outcome(outcome: Outcome) -> str:
    """An outcome in words (for reports)."""
    if outcome.kind == "raised":
        return f"raised {type(outcome.error).__name__}: {outcome.error}"
    if outcome.kind == "timeout":
        return f"did not return within {outcome.seconds:.1f}s"
    if outcome.kind == "deferred":
        return "returned None (deferred to the default placer)"
    return f"returned {len(outcome.result)} replica lists"


@dataclass
class Findings:
    """The violations one test found, by rule, in the order the (smallest first) cases were
    checked, so the first one of each rule is its minimal example.

    Args:
        rules: the rules this test is about; violations of other rules are left to their tests.
    """

    rules: tuple[str, ...]
    checked: int = 0
    by_rule: dict[str, list[tuple[Case | None, Violation, str]]] = field(default_factory=dict)
    failing_cases: dict[str, set] = field(default_factory=dict)

    def add(self, case: Case | None, violations: Iterable[Violation], note: str = "") -> None:
        """Record ``violations`` found in ``case`` (``note``: extra context for the report)."""
        for v in violations:
            if v.rule not in self.rules:
                continue
            self.by_rule.setdefault(v.rule, []).append((case, v, note))
            self.failing_cases.setdefault(v.rule, set()).add(
                case.key if case is not None else id(v))

    def report(self) -> str:
        """The failure report: one section per broken rule with its minimal example."""
        broken = [r for r in self.rules if r in self.by_rule]
        lines = [f"broken rule(s): {', '.join(broken)}"]
        for rule in broken:
            found = self.by_rule[rule]
            case, v, note = found[0]
            n_cases = len(self.failing_cases[rule])
            lines.append("")
            lines.append(f"[{rule}] {RULES.get(rule, '')}")
            lines.append(f"  fails in {n_cases} of {self.checked} checked cases; "
                         "minimal example:")
            if case is not None:
                lines.append("    " + case.describe())
            if note:
                lines.append(f"    {note}")
            if v.partition is not None:
                reps = "?" if v.replicas is None else list(v.replicas)
                lines.append(f"    partition {v.partition}: replicas {reps}: {v.detail}")
            else:
                lines.append(f"    {v.detail}")
        return "\n".join(lines)

    def fail_if_any(self, request: pytest.FixtureRequest) -> None:
        """Fail the test with :meth:`report` when any rule is broken, and record the broken
        rules for the end-of-run summary."""
        broken = [r for r in self.rules if r in self.by_rule]
        if broken:
            request.node.user_properties.append(("kt_failed_rules", ",".join(broken)))
            pytest.fail(self.report(), pytrace=False)


def _area_of(func: Any) -> str:
    return str(getattr(func, "__module__", "")).rsplit(".", 1)[-1].removeprefix("test_")


class PlacerSuiteBase:
    """Base of every test class of the placer suite.

    Class attributes a placer author sets (fsspec style)::

        class TestMyPlacer(PlacerConformance):
            placer = "my-placer"                 # or "my_pkg.placers:MyPlacer"
            placer_config = {"zone.key": "az"}   # optional

    Attributes:
        placer: entry-point name or import path of the placer under test; None: use the
            ``--kt-placer`` option.
        placer_config: configuration for the placer (``--kt-placer-config`` pairs are added on
            top); ``seed`` is added unless given.
        seed: the seed handed to the placer.
        place_timeout: the time limit of one ``place`` call, in seconds.
        include_large: whether the large clusters (64 and 48 brokers) are placed.
        requirements_class: the :class:`Requirements` subclass describing the placer.
    """

    placer: ClassVar[str | None] = None
    placer_config: ClassVar[Mapping[str, str]] = {}
    seed: ClassVar[int] = DEFAULT_SEED
    place_timeout: ClassVar[float] = 30.0
    include_large: ClassVar[bool] = True
    requirements_class: ClassVar[type[Requirements]] = Requirements

    # ---------------------------------------------------------------- fixtures

    @pytest.fixture(scope="class")
    def kt_target(self, request: pytest.FixtureRequest) -> PlacerTarget:
        """The placer under test (class attribute, else ``--kt-placer``)."""
        from kafka_tiers.conformance.pytest_plugin import parse_pairs
        from kafka_tiers.plugins import PLACER_GROUP, resolve_class

        cls = request.cls
        name = getattr(cls, "placer", None) or request.config.getoption("kt_placer", None)
        if not name:
            pytest.skip("no placer under test: give --kt-placer NAME_OR_PATH, or set the "
                        "`placer` attribute of the test class")
        config = {str(k): str(v) for k, v in dict(getattr(cls, "placer_config", {})).items()}
        config.update(parse_pairs(request.config.getoption("kt_placer_config", None) or [],
                                  "--kt-placer-config"))
        config.setdefault("seed", str(getattr(cls, "seed", DEFAULT_SEED)))
        placer_cls, label = resolve_class(PLACER_GROUP, name)
        return PlacerTarget(name, config, placer_cls, label)

    @pytest.fixture(scope="class")
    def kt_requirements(self, request: pytest.FixtureRequest,
                        kt_target: PlacerTarget) -> Requirements:
        """The capabilities of the placer under test."""
        return request.cls.requirements_class(kt_target.placer_cls)

    @pytest.fixture(autouse=True)
    def _kt_gate(self, request: pytest.FixtureRequest, kt_target: PlacerTarget,
                 kt_requirements: Requirements) -> None:
        """Record the test for the summary; skip it when a capability it needs is off."""
        props = request.node.user_properties
        props.append(("kt_suite", "placer"))
        props.append(("kt_area", _area_of(request.function)))
        props.append(("kt_plugin", kt_target.describe()))
        for cap in kt_requirements.all():
            yes = "yes" if cap.declared else "no"
            on = "yes" if cap.enabled else "no"
            kind = "cases" if cap.selects_cases else "tests"
            props.append(("kt_capability", f"{cap.name}|{yes}|{on}|{kind}|{cap.reason}"))
        needs = tuple(getattr(request.function, REQUIRES_ATTRIBUTE, ()))
        props.append(("kt_requires", ",".join(needs)))
        for name in needs:
            cap = kt_requirements.get(name)
            if not cap.enabled:
                pytest.skip(f"needs capability {name}: {cap.reason}")

    @pytest.fixture
    def make_placer(self, kt_target: PlacerTarget) -> Iterator[Callable[[], ReplicaPlacer]]:
        """A factory of fresh configured placers; each is closed after the test."""
        made: list[ReplicaPlacer] = []

        def factory() -> ReplicaPlacer:
            placer = kt_target.create()
            made.append(placer)
            return placer

        yield factory
        for placer in made:
            with contextlib.suppress(Exception):  # closing is best effort here
                placer.close()

    @pytest.fixture
    def placer_obj(self, make_placer: Callable[[], ReplicaPlacer]) -> ReplicaPlacer:
        """One fresh configured placer."""
        return make_placer()

    @pytest.fixture
    def kt_run(self, request: pytest.FixtureRequest, kt_target: PlacerTarget) -> PlacementRun:
        """The run's cached placements for the placer under test (one per pytest run)."""
        store: dict[tuple, PlacementRun] = request.config.stash.setdefault(_RUNS, {})
        key = (kt_target.key, float(request.cls.place_timeout))
        if key not in store:
            store[key] = PlacementRun(kt_target, float(request.cls.place_timeout))
            request.config.add_cleanup(store[key].close)
        return store[key]

    @pytest.fixture
    def kt_shapes(self, request: pytest.FixtureRequest,
                  kt_requirements: Requirements) -> list[Shape]:
        """The shapes the placer under test is placed on, smallest first."""
        return shapes(path_racks=kt_requirements.multi_level.enabled,
                      with_unracked=kt_requirements.places_brokers_without_racks.enabled,
                      large=bool(request.cls.include_large))

    @pytest.fixture
    def kt_cases(self, kt_shapes: list[Shape]) -> list[Case]:
        """Every generated case, smallest first."""
        return cases(kt_shapes)


def placements(run: PlacementRun, case_list: Iterable[Case], *, valid: bool = True
               ) -> Iterator[tuple[Case, list[list[int]]]]:
    """The cases of ``case_list`` whose placement returned a well-formed result (and, with
    ``valid``, one that passes every validity rule), with that result as lists of ints.
    Other cases are left to the tests of their own rules."""
    from kafka_tiers.conformance.placer.rules import check_size, check_validity

    for case in case_list:
        outcome = run.outcome(case)
        if outcome.kind != "ok" or check_size(case.spec, outcome.result):
            continue
        result = [[int(b) for b in reps] for reps in outcome.result]
        if valid and check_validity(case.shape, case.spec, result):
            continue
        yield case, result


_RUNS: pytest.StashKey[dict[tuple, PlacementRun]] = pytest.StashKey()


__all__ = [
    "DEFAULT_SEED",
    "Findings",
    "Outcome",
    "PlacementRun",
    "PlacerSuiteBase",
    "PlacerTarget",
    "call_place",
    "describe_outcome",
    "placements",
    "requires",
]
