"""The ``kafka_tiers`` pytest plugin (entry point ``pytest11``): options and summary of the
conformance suites.

Every pytest run in an environment where kafka-tiers is installed loads this module, so it imports
only the standard library and :mod:`kafka_tiers.conformance` at import time, and it changes nothing
unless one of its options is given or a conformance test actually runs.

Options:
    ``--kt-placer NAME_OR_PATH``: the replica placer under test (entry-point name in group
    ``kafka_tiers.replica_placer`` or ``pkg.module:Class``). ``--kt-placer-config k=v``
    (repeatable) is handed to its ``configure`` (the suite adds ``seed`` unless given).

    ``--kt-storage NAME_OR_PATH``, ``--kt-storage-config FILE``, ``--kt-storage-set k=v``
    (repeatable): the same for the remote storage suite in ``kafka_tiers.conformance.storage``,
    which owns their meaning.

Path selection: when a suite option (``--kt-placer``, ``--kt-storage``) is given and pytest got no
test paths on its command line, the suite's package directory replaces the default paths
(``testpaths`` or the current directory), and conftest discovery stops at
``kafka_tiers/conformance`` (``--confcutdir``). Explicit paths are kept as given. A suite option
whose package is not installed is a usage error.

Secrets: every test report passes through
:func:`kafka_tiers.conformance.report_secrets.hide_secrets_in_report` (nothing happens while no
:class:`kafka_tiers.api.Secret` exists in the process).

Summary: a test of a suite takes part in the end-of-run summary by putting these pairs in its
``user_properties`` (the placer suite's base class does this for every test):

* ``("kt_suite", kind)`` and ``("kt_area", area)``: which suite and behaviour area it belongs to;
* ``("kt_plugin", label)``: the plugin under test, in words;
* ``("kt_capability", "name|declared|enabled|reason")``: one per capability of the plugin
  (``declared`` and ``enabled`` are ``yes``/``no``); the form
  ``"name|declared|enabled|kind|reason"`` adds ``kind``: ``tests`` (the default) when the
  capability gates tests, ``cases`` when it selects which generated cases run;
* ``("kt_requires", "cap1,cap2")``: the capabilities the test needs (skipped when one is off);
* ``("kt_failed_rules", "rule-a,rule-b")``: the rules a failing test found broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pluggy import HookimplMarker

from kafka_tiers.conformance import SUITES, SuiteNotInstalledError

#: pytest's hook marker (pluggy's, so that this module need not import pytest).
_hookimpl = HookimplMarker("pytest")


def pytest_addoption(parser: Any) -> None:
    """Register the ``--kt-*`` options (pytest hook)."""
    group = parser.getgroup("kafka-tiers", "kafka-tiers conformance suites")
    group.addoption("--kt-placer", action="store", default=None, metavar="NAME_OR_PATH",
                    help="run the replica placer conformance suite against this placer "
                         "(entry-point name or pkg.module:Class)")
    group.addoption("--kt-placer-config", action="append", default=[], metavar="K=V",
                    help="a configuration key for the placer under test (repeatable)")
    group.addoption("--kt-storage", action="store", default=None, metavar="NAME_OR_PATH",
                    help="run the remote storage conformance suite against this plugin")
    group.addoption("--kt-storage-config", action="store", default=None, metavar="FILE",
                    help="configuration file for the remote storage plugin under test")
    group.addoption("--kt-storage-set", action="append", default=[], metavar="K=V",
                    help="a configuration key overriding the storage config file (repeatable)")


def parse_pairs(pairs: list[str], option: str) -> dict[str, str]:
    """Turn ``["k=v", ...]`` into a dict; later keys win.

    Raises:
        ValueError: an item has no ``=`` or an empty key (the message names ``option``).
    """
    out: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def _suite_selected_implicitly(namespace: Any) -> bool:
    given = any(getattr(namespace, suite.dest, None) for suite in SUITES.values())
    return given and not getattr(namespace, "file_or_dir", None)


@_hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: list[str]) -> None:
    """When a suite is selected implicitly (its option, no test paths), stop conftest discovery
    at ``kafka_tiers/conformance`` (pytest hook, run first): the suites need no conftest of the
    directories above them, and those (for example a checkout's own root ``conftest.py``)
    cannot be loaded from a run rooted elsewhere."""
    namespace = early_config.known_args_namespace
    if _suite_selected_implicitly(namespace):
        from pathlib import Path

        namespace.confcutdir = str(Path(__file__).resolve().parent)


_STATE_KEY: Any = None


def _state_key() -> Any:
    global _STATE_KEY
    if _STATE_KEY is None:
        import pytest

        _STATE_KEY = pytest.StashKey[_RunState]()
    return _STATE_KEY


def pytest_configure(config: Any) -> None:
    """Select the suite paths when a suite option is given without test paths (pytest hook)."""
    import pytest

    config.stash[_state_key()] = _RunState()
    for option in ("kt_placer_config", "kt_storage_set"):
        try:
            parse_pairs(config.getoption(option) or [], "--" + option.replace("_", "-"))
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    chosen: list[str] = []
    for suite in SUITES.values():
        if not config.getoption(suite.dest, None):
            continue
        try:
            chosen.append(str(suite.path()))
        except SuiteNotInstalledError as exc:
            raise pytest.UsageError(f"{suite.option}: {exc}") from None
    placer = config.getoption("kt_placer", None)
    if placer and ":" not in placer:
        # An entry-point name can be checked now: a wrong one is one clear line, not an
        # error per test. (Import paths may need the test directories on sys.path first.)
        from kafka_tiers.api.errors import PluginError
        from kafka_tiers.plugins import PLACER_GROUP, resolve_class

        try:
            resolve_class(PLACER_GROUP, placer)
        except PluginError as exc:
            raise pytest.UsageError(f"--kt-placer: {exc}") from None
    if chosen and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = chosen
        config.args_source = pytest.Config.ArgsSource.ARGS


@dataclass
class _Item:
    suite: str
    area: str
    plugin: str = ""
    outcome: str = "passed"
    requires: tuple[str, ...] = ()
    skip_reason: str = ""
    failed_rules: tuple[str, ...] = ()


@dataclass
class _RunState:
    items: dict[str, _Item] = field(default_factory=dict)
    #: capabilities per (suite, plugin under test): one run may certify several plugins
    capabilities: dict[tuple[str, str], dict[str, tuple[str, str, str, str]]] = field(
        default_factory=dict)


@_hookimpl(wrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """Hide every live secret (:class:`kafka_tiers.api.Secret`) in the report before anything
    prints it, ``-l`` locals of a client library's frames included (pytest hook; see
    :mod:`kafka_tiers.conformance.report_secrets`)."""
    report = yield
    from kafka_tiers.conformance.report_secrets import hide_secrets_in_report

    hide_secrets_in_report(report)
    return report


def pytest_runtest_logreport(report: Any) -> None:
    """Record the outcome of conformance tests for the summary (pytest hook)."""
    props = dict((k, v) for k, v in report.user_properties if isinstance(k, str))
    suite = props.get("kt_suite")
    if not suite:
        return
    if not _CURRENT:
        return
    state = _CURRENT[-1]
    item = state.items.setdefault(report.nodeid, _Item(suite, props.get("kt_area", "?")))
    if "kt_plugin" in props:
        item.plugin = str(props["kt_plugin"])
    for key, value in report.user_properties:
        if key == "kt_capability":
            state.capabilities.setdefault((suite, item.plugin), {}).update(
                [_capability(str(value))])
    if props.get("kt_requires"):
        item.requires = tuple(x for x in props["kt_requires"].split(",") if x)
    if report.skipped and report.when in ("setup", "call"):
        item.outcome = "skipped"
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            item.skip_reason = str(longrepr[2]).removeprefix("Skipped: ")
    elif report.failed:
        item.outcome = "failed" if report.when == "call" else "error"
        if props.get("kt_failed_rules"):
            item.failed_rules = tuple(props["kt_failed_rules"].split(","))


def _capability(value: str) -> tuple[str, tuple[str, str, str, str]]:
    """Parse ``name|declared|enabled|reason`` or ``name|declared|enabled|kind|reason``."""
    parts = [*value.split("|"), "", "", ""]
    name, declared, enabled = parts[:3]
    if len(value.split("|")) >= 5 and parts[3] in ("tests", "cases"):
        return name, (declared, enabled, parts[3], "|".join(value.split("|")[4:]))
    return name, (declared, enabled, "tests", "|".join(value.split("|")[3:]))


#: the states of the runs in progress, innermost last (pytester nests runs in one process).
_CURRENT: list[_RunState] = []


def pytest_sessionstart(session: Any) -> None:
    """Make this run's state current (pytest hook)."""
    _CURRENT.append(session.config.stash[_state_key()])


def pytest_sessionfinish(session: Any) -> None:
    """Restore the enclosing run's state (pytest hook)."""
    state = session.config.stash.get(_state_key(), None)
    if _CURRENT and _CURRENT[-1] is state:
        _CURRENT.pop()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Print, per suite that ran, the capability table and pass/fail per area (pytest hook)."""
    state = config.stash.get(_state_key(), None)
    if state is None or not state.items:
        return
    for lines in summary_lines(state):
        terminalreporter.write_sep("=", lines[0])
        for line in lines[1:]:
            terminalreporter.write_line(line)


def summary_lines(state: _RunState) -> list[list[str]]:
    """The summary as one list of lines per suite and plugin under test (first line: the
    section title)."""
    out: list[list[str]] = []
    runs = sorted({(i.suite, i.plugin) for i in state.items.values()})
    for suite, plugin in runs:
        items = [i for i in state.items.values() if (i.suite, i.plugin) == (suite, plugin)]
        lines = [f"kafka-tiers {suite} conformance"]
        if plugin:
            lines.append(f"{suite} under test: {plugin}")
        caps = state.capabilities.get((suite, plugin), {})
        if caps:
            rows: list[tuple[str, ...]] = [
                ("capability", "declared", "checked", "skipped (reason)")]
            for name, (declared, enabled, kind, reason) in sorted(caps.items()):
                needing = [i for i in items if name in i.requires]
                ran = [i for i in needing if i.outcome != "skipped"]
                skipped = [i for i in needing if i.outcome == "skipped"]
                checked = f"{len(ran)} tests" if ran else "-"
                if kind == "cases":
                    checked, skip_text = (("cases included", "-") if enabled == "yes" else
                                          ("-", f"cases left out ({reason})"))
                elif skipped:
                    why = skipped[0].skip_reason or reason
                    skip_text = f"{len(skipped)} tests ({why})"
                else:
                    skip_text = "-" if enabled == "yes" else f"- ({reason})"
                rows.append((name, declared, checked, skip_text))
            lines += _table(rows)
            lines.append("")
        rows = [("area", "passed", "failed", "skipped", "failing rules")]
        for area in sorted({i.area for i in items}):
            in_area = [i for i in items if i.area == area]
            count = {o: sum(1 for i in in_area if i.outcome == o)
                     for o in ("passed", "failed", "error", "skipped")}
            rules = sorted({r for i in in_area for r in i.failed_rules})
            failed = count["failed"] + count["error"]
            rows.append((area, str(count["passed"]), str(failed), str(count["skipped"]),
                         ", ".join(rules) or ("-" if not failed else "(see errors)")))
        lines += _table(rows)
        bad = sum(1 for i in items if i.outcome in ("failed", "error"))
        lines.append("")
        lines.append(f"result: {'FAIL' if bad else 'PASS'} "
                     f"({len(items) - bad} of {len(items)} tests passed or skipped)")
        out.append(lines)
    return out


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*rows[0]).rstrip(), "  ".join("-" * w for w in widths)]
    lines += [fmt.format(*r).rstrip() for r in rows[1:]]
    return lines


__all__ = [
    "parse_pairs",
    "pytest_addoption",
    "pytest_configure",
    "pytest_load_initial_conftests",
    "pytest_runtest_logreport",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_terminal_summary",
    "summary_lines",
]
