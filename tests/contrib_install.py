"""Installing a contrib distribution as a third party would, without touching the running
environment: a copy goes into a temporary directory with ``pip install --no-deps --target DIR``
(without build isolation first, using this environment's setuptools; with pip's isolated build
if that cannot build), and checks run in fresh interpreters whose ``PYTHONPATH`` puts ``DIR``
first, so ``importlib.metadata`` (and stevedore) see the distribution's entry points there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: pytest plugins the contrib test runs leave out (they are not the distribution's own).
NO_EXTRA_PLUGINS = ["-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:cacheprovider"]


def env_with(target: Path) -> dict[str, str]:
    """The environment of a fresh interpreter that sees ``target`` first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), *(p for p in sys.path if p)])
    return env


def install_copy(source: Path, work: Path) -> tuple[Path, Path]:
    """Copy the distribution at ``source`` into ``work`` and install it into ``work/site``;
    returns (the copy, the install directory)."""
    copy = work / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns(
        "*.egg-info", "__pycache__", "build", "dist", ".pytest_cache"))
    target = work / "site"
    base = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--target", str(target)]
    proc = subprocess.run([*base, "--no-build-isolation", str(copy)], capture_output=True,
                          text=True, timeout=300, check=False)
    if proc.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        proc = subprocess.run([*base, str(copy)], capture_output=True, text=True, timeout=600,
                              check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return copy, target


__all__ = ["NO_EXTRA_PLUGINS", "env_with", "install_copy"]
