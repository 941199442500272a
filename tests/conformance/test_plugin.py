"""The ``kafka_tiers`` pytest plugin: inert without its options, path selection, clear errors,
and the fsspec-style use of the suite from a placer author's own test module."""

from __future__ import annotations

import pytest

from kafka_tiers.conformance import SUITES, Suite, SuiteNotInstalledError, suite_path

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")


def test_changes_nothing_without_its_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=1)
    assert "conformance" not in result.stdout.str()


def test_options_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help", *QUIET)
    out = result.stdout.str()
    for option in ("--kt-placer", "--kt-placer-config", "--kt-storage", "--kt-storage-config",
                   "--kt-storage-set"):
        assert option in out


def test_explicit_paths_are_kept(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    result = pytester.runpytest("--kt-placer", "simple", "test_mine.py", *QUIET)
    result.assert_outcomes(passed=1)
    assert "placer conformance" not in result.stdout.str()


def test_missing_suite_package_is_a_clear_usage_error(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SUITES, "storage",
                        Suite("storage", "--kt-storage", "kafka_tiers.conformance.no_such"))
    result = pytester.runpytest("--kt-storage", "local", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kt-storage: the storage conformance suite "
                                 "(kafka_tiers.conformance.no_such) is not installed*"])


def test_suite_path_lookup() -> None:
    assert (suite_path("placer") / "test_validity.py").is_file()
    with pytest.raises(SuiteNotInstalledError, match="no_such"):
        Suite("x", "--kt-x", "kafka_tiers.conformance.no_such").path()


def test_malformed_config_pair_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--kt-placer", "simple", "--kt-placer-config", "novalue",
                                *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kt-placer-config expects KEY=VALUE, got 'novalue'*"])


def test_unknown_placer_names_installed_ones(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--kt-placer", "no-such-placer", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kt-placer: unknown replica placer 'no-such-placer'; "
                                 "installed: *rack-aware*"])


def test_unimportable_placer_path_errors_every_test_with_the_reason(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--kt-placer", "no_such_mod:P", "-k", "test_distinct", *QUIET)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "replica placer 'no_such_mod:P' cannot be imported" in result.stdout.str()


def test_suite_from_a_placer_authors_module(pytester: pytest.Pytester) -> None:
    """fsspec style: subclass PlacerConformance, name the placer; no option needed."""
    pytester.makepyfile(test_conf="""
        from kafka_tiers.conformance.placer import PlacerConformance

        class TestRackAware(PlacerConformance):
            placer = "rack-aware"
            placer_config = {"seed": "3"}
            include_large = False
    """)
    result = pytester.runpytest("-rs", *QUIET)
    outcomes = result.parseoutcomes()
    assert result.ret == 0, result.stdout.str()
    assert outcomes["passed"] >= 20
    assert outcomes["skipped"] == 4  # the multi-level tests
    out = result.stdout.str()
    assert "kafka-tiers placer conformance" in out
    assert "config: seed=3" in out
    assert "needs capability multi_level: placer does not declare MULTI_LEVEL" in out


def test_requirements_override_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_conf="""
        from kafka_tiers.conformance.placer import Capability, PlacerConformance, Requirements

        class NoRacks(Requirements):
            @property
            def rack_aware(self):
                return Capability("rack_aware", False, "rack checks switched off by the author")

        class TestIt(PlacerConformance):
            placer = "rack-aware"
            requirements_class = NoRacks
            include_large = False
    """)
    result = pytester.runpytest("-rs", "-k", "rack or balance", *QUIET)
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "needs capability rack_aware: rack checks switched off by the author" in out
    line = next(x for x in out.splitlines() if x.startswith("rack_aware "))
    assert "rack checks switched off by the author" in line


def test_without_a_placer_everything_is_skipped(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_conf="""
        from kafka_tiers.conformance.placer import PlacerConformance

        class TestNothing(PlacerConformance):
            pass
    """)
    result = pytester.runpytest("-rs", *QUIET)
    assert result.ret == 0
    assert result.parseoutcomes().get("passed", 0) == 0
    assert "no placer under test" in result.stdout.str()


def test_any_suite_joins_the_summary_through_user_properties(pytester: pytest.Pytester) -> None:
    """The summary is generic: a test that sets the documented user_properties (old 4-field
    capability form included) gets a section for its suite."""
    pytester.makepyfile(test_other="""
        import pytest

        @pytest.fixture(autouse=True)
        def protocol(request):
            props = request.node.user_properties
            props += [("kt_suite", "storage"), ("kt_area", "ranges"),
                      ("kt_plugin", "remote storage plugin 'x'"),
                      ("kt_capability", "fault_injection|no|no|not an object store"),
                      ("kt_requires", "fault_injection" if "faults" in request.node.name else "")]
            if "faults" in request.node.name:
                pytest.skip("needs fault_injection: not an object store")

        def test_reads(request):
            pass

        def test_faults():
            pass

        def test_broken(request):
            request.node.user_properties.append(("kt_failed_rules", "inclusive-end"))
            assert False
    """)
    result = pytester.runpytest(*QUIET)
    out = result.stdout.str()
    assert result.ret == 1
    assert "kafka-tiers storage conformance" in out
    assert "storage under test: remote storage plugin 'x'" in out
    cap = next(x for x in out.splitlines() if x.startswith("fault_injection "))
    assert cap.split()[:3] == ["fault_injection", "no", "-"]
    assert "1 tests (needs fault_injection: not an object store)" in cap
    area = next(x for x in out.splitlines() if x.startswith("ranges "))
    assert area.split() == ["ranges", "1", "1", "1", "inclusive-end"]
    assert "result: FAIL (2 of 3 tests passed or skipped)" in out
