"""The contrib storage example is a working third-party distribution: installed, it is found by
its entry-point name ``example-sqlite`` and its own test module passes the whole storage suite.

Installed as the placer template is, by ``tests/contrib_install.py``: nothing is installed into
the running environment.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.contrib_install import NO_EXTRA_PLUGINS, env_with, install_copy

EXAMPLE = Path(__file__).resolve().parents[2] / "contrib" / "kafka-tiers-storage-example"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(copy of the example, directory it is installed into)."""
    return install_copy(EXAMPLE, tmp_path_factory.mktemp("storage-example"))


def test_found_by_entry_point_name(example: tuple[Path, Path], tmp_path: Path) -> None:
    _, target = example
    code = ("from kafka_tiers.plugins import installed_names, load_remote_storage\n"
            f"p = load_remote_storage('example-sqlite', {{'path': {str(tmp_path / 't.db')!r}}})\n"
            "print(type(p).__module__, type(p).store_class.__name__)\n"
            "print('example-sqlite' in installed_names('kafka_tiers.object_store'))\n"
            "p.close()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=env_with(target), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    # the object store is registered; the core built the storage manager around it
    assert proc.stdout.split() == ["kt_example_sqlite.store", "SqliteObjectStore", "True"]


def test_its_tests_run_the_whole_storage_suite_and_pass(example: tuple[Path, Path]) -> None:
    copy, target = example
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *NO_EXTRA_PLUGINS],
                          capture_output=True, text=True, cwd=copy, env=env_with(target),
                          timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "kafka-tiers storage conformance" in out
    # it declares every capability: nothing of the suite is skipped (60 tests with the
    # data-path areas; the suite only grows)
    summary = re.search(r"result: PASS \((\d+) of (\d+) tests passed or skipped\)", out)
    assert summary and summary[1] == summary[2] and int(summary[1]) >= 60, out
    assert re.search(r"^\d+ passed in ", out, re.M), out  # no skip, no failure
