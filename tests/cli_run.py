"""Run ``kafka-tiers`` in this process through its real entry point
(:func:`kafka_tiers.cli.main`, error boundary included), with captured stdout and stderr."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from click.testing import CliRunner

from kafka_tiers.cli import main


@dataclass(frozen=True)
class Ran:
    """What one run printed and its exit status."""

    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        """stderr's non-blank lines."""
        return [line for line in self.err.splitlines() if line.strip()]


def kt(*args: str, env: Mapping[str, str | None] | None = None,
       input: str | None = None) -> Ran:
    """``kafka-tiers ARGS`` as the console script runs it; ``env`` overrides variables,
    ``input`` is what stdin holds (empty by default)."""
    code: object = None
    with CliRunner().isolation(input=input, env=env) as (out, err, _):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    assert isinstance(code, int), f"main() must exit with an int status, got {code!r}"
    return Ran(code, out.getvalue().decode("utf-8", "replace"),
               err.getvalue().decode("utf-8", "replace"))


__all__ = ["Ran", "kt"]
