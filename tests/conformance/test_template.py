"""The contrib placer template is a working third-party distribution: installed, it is found by
its entry-point name ``example-spread`` and passes the whole placer suite.

How it is installed: the template is copied to a temporary directory and installed with
``pip install --no-deps --target DIR`` (first without build isolation, using the setuptools of
the current environment; if that cannot build, with pip's normal isolated build). Nothing is
installed into the running environment: the checks run in fresh interpreters whose
``PYTHONPATH`` puts ``DIR`` first, so ``importlib.metadata`` (and stevedore) see the template's
entry point there. This works the same in a fresh tox venv.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.contrib_install import NO_EXTRA_PLUGINS, env_with, install_copy

TEMPLATE = Path(__file__).resolve().parents[2] / "contrib" / "kafka-tiers-placer-template"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(copy of the template, directory it is installed into)."""
    return install_copy(TEMPLATE, tmp_path_factory.mktemp("placer-template"))


def test_selected_by_entry_point_name(template: tuple[Path, Path], tmp_path: Path) -> None:
    _, target = template
    code = ("from kafka_tiers.plugins import load_placer, installed_names\n"
            "p = load_placer('example-spread', {'seed': '1'})\n"
            "print(type(p).__module__, type(p).__name__, p.RACK_AWARE, p.MULTI_LEVEL)\n"
            "print('example-spread' in installed_names('kafka_tiers.replica_placer'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=env_with(target), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["kt_example_spread.placer", "ExampleSpreadPlacer", "True",
                                   "False", "True"]
    assert str(target) in subprocess.run(
        [sys.executable, "-c", "import kt_example_spread; print(kt_example_spread.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, env=env_with(target), check=True).stdout


def test_template_tests_run_the_whole_suite_and_pass(template: tuple[Path, Path]) -> None:
    copy, target = template
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *NO_EXTRA_PLUGINS],
                          capture_output=True, text=True, cwd=copy, env=env_with(target),
                          timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "23 passed, 4 skipped" in out  # everything but the multi-level tests
    assert "replica placer 'example-spread' from kafka-tiers-example-spread 0.1.0" in out
    assert "result: PASS" in out


def test_cli_runs_the_suite_on_the_template(template: tuple[Path, Path], tmp_path: Path
                                            ) -> None:
    _, target = template
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; from kafka_tiers.cli import main; sys.exit(main())",
                           "conformance", "placer", "example-spread", "--", *NO_EXTRA_PLUGINS],
                          capture_output=True, text=True, cwd=tmp_path, env=env_with(target),
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "result: PASS" in proc.stdout
