"""``kafka-tiers conformance placer|storage``: exit status is pytest's, output names the rules,
a plugin that does not load is one ``error:`` line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_tiers.cli import main
from kafka_tiers.conformance import SUITES, Suite

RUN_CLI = "import sys; from kafka_tiers.cli import main; sys.exit(main(sys.argv[1:]))"
NO_EXTRA_PLUGINS = ["-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:cacheprovider"]


def run_main(argv: list[str]) -> int:
    """The CLI in-process, as the console script runs it: ``sys.exit(main(argv))``."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return int(code or 0)


def kafka_tiers(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter (pytest runs inside it), from ``cwd``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-c", RUN_CLI, *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300, check=False)


def test_placer_passes_with_exit_0(tmp_path: Path) -> None:
    proc = kafka_tiers("conformance", "placer", "simple", "--config", "seed=5", "--",
                       *NO_EXTRA_PLUGINS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kafka-tiers placer conformance" in proc.stdout
    assert "config: seed=5" in proc.stdout
    assert "result: PASS" in proc.stdout


def test_broken_placer_fails_with_exit_1_naming_the_rule(tmp_path: Path) -> None:
    proc = kafka_tiers("conformance", "placer", "tests.conformance.broken_placers:Duplicates",
                       "--", "-k", "validity", *NO_EXTRA_PLUGINS, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "broken rule(s): distinct-replicas" in proc.stdout
    assert "[distinct-replicas] no broker appears twice in one partition" in proc.stdout
    assert "result: FAIL" in proc.stdout


def test_unknown_placer_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["conformance", "placer", "no-such-placer"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: unknown replica placer 'no-such-placer'; installed:")
    assert "rack-aware" in err[0]


def test_unimportable_placer_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["conformance", "placer", "no_such_module.sub:Placer"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: replica placer 'no_such_module.sub:Placer' cannot be imported: "
                   "No module named 'no_such_module'"]


def test_bad_config_pair_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["conformance", "placer", "simple", "--config", "novalue"]) == 2
    assert "--config expects KEY=VALUE, got 'novalue'" in capsys.readouterr().err


def test_storage_without_its_suite_is_one_error_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(SUITES, "storage",
                        Suite("storage", "--kt-storage", "kafka_tiers.conformance.no_such"))
    config = tmp_path / "s.properties"
    config.write_text("root=/tmp\n")
    assert run_main(["conformance", "storage", "local", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: the storage conformance suite (kafka_tiers.conformance.no_such) is "
                   "not installed in this kafka-tiers"]


def test_storage_requires_a_config_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["conformance", "storage", "local"]) == 2
    assert "--config" in capsys.readouterr().err


def test_help_lists_both_suites(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["conformance", "--help"]) == 0
    out = capsys.readouterr().out
    assert "placer" in out and "storage" in out
