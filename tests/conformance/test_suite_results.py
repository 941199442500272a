"""The placer suite passes for kafka-tiers' own placers and fails, naming the rule, for
deliberately broken ones (so it can fail)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

BROKEN = "tests.conformance.broken_placers"


@pytest.mark.parametrize(("placer", "ran_capabilities"), [
    ("simple", set()),
    ("rack-aware", {"rack_aware"}),
    ("multi-level-rack", {"rack_aware", "multi_level"}),
])
def test_our_placers_pass(run_suite, placer: str, ran_capabilities: set[str]) -> None:
    run = run_suite(placer)
    assert run.ret == 0, run.output
    assert run.broken == set()
    assert "result: PASS" in run.output
    assert run.outcomes.get("passed", 0) >= 17
    # the capability table says which capability-gated tests ran and which were skipped
    for cap in ("rack_aware", "multi_level"):
        line = next(x for x in run.output.splitlines() if x.startswith(cap + " "))
        if cap in ran_capabilities:
            assert line.split()[1:4] == ["yes", line.split()[2], "tests"], line
            assert int(line.split()[2]) >= 4, line
        else:
            assert "placer does not declare" in line, line


@pytest.mark.parametrize(("placer", "areas", "expected"), [
    ("Duplicates", "validity", {"distinct-replicas"}),
    ("WrongReplicationFactor", "shape", {"replication-factor"}),
    ("FencedLeader", "validity", {"unfenced-leader"}),
    ("IgnoresSubset", "validity", {"allowed-brokers"}),
    ("NonDeterministic", "determinism", {"deterministic-seed"}),
    ("HiddenState", "determinism", {"no-hidden-state"}),
    ("WrongError", "errors", {"refuses-non-positive-rf", "refuses-rf-above-allowed",
                              "refuses-without-unfenced"}),
    ("RackUnawareClaimsRackAware", "rack_spread", {"rack-span", "rack-even"}),
    ("LeaderSkew", "balance", {"leader-balance"}),
    ("FlatClaimsMultiLevel", "multi_level", {"level-span", "level-even"}),
])
def test_broken_placers_fail_naming_the_rule(run_suite, placer: str, areas: str,
                                             expected: set[str]) -> None:
    run = run_suite(f"{BROKEN}:{placer}", "-k", areas)
    assert run.ret == 1, run.output
    assert expected <= run.broken, (run.broken, run.output)
    for rule in expected:
        assert f"[{rule}] " in run.output  # the rule's section with its statement
    assert "minimal example:" in run.output
    assert "result: FAIL" in run.output


def test_report_shows_a_minimal_example(run_suite) -> None:
    """The duplicate is only in the last partition; the smallest failing case is the smallest
    shape with RF >= 2 and one partition, and the report shows its offending replicas."""
    run = run_suite(f"{BROKEN}:Duplicates", "-k", "test_distinct_replicas")
    assert run.ret == 1
    section = run.output.split("[distinct-replicas]", 1)[1]
    assert "shape one-rack-4: 4 brokers" in section
    assert "num_partitions=1, replication_factor=2" in section
    assert "partition 0: replicas [" in section
    assert "appear more than once" in section


def test_fenced_leader_report_names_the_fenced_broker(run_suite) -> None:
    run = run_suite(f"{BROKEN}:FencedLeader", "-k", "test_unfenced_leader")
    assert run.ret == 1
    section = run.output.split("[unfenced-leader]", 1)[1]
    assert "is fenced" in section
    assert "fenced (*):" in section


def test_summary_lists_failing_rules_per_area(run_suite) -> None:
    run = run_suite(f"{BROKEN}:LeaderSkew", "-k", "balance or errors")
    balance = next(x for x in run.output.splitlines() if x.startswith("balance "))
    errors = next(x for x in run.output.splitlines() if x.startswith("errors "))
    assert "leader-balance" in balance
    assert errors.split()[2] == "0"  # no failure in the errors area
