"""Shared output helpers for CLI commands: JSON for tools, rich tables for people."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

FORMAT_OPTION = click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
    help="table for people, json (a stable schema) for tools.")


def emit_json(data: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def console(stderr: bool = False) -> Any:
    """A rich console (imported lazily, so ``--help`` stays instant)."""
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False, soft_wrap=False)
    out.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]  # rich exits 1 there
    return out


def _broken_pipe() -> None:
    """The reader of our output went away (``kafka-tiers ... | head``): what rich does (stdout
    to /dev/null), but as a ``StdoutClosedError`` for the error boundary (exit 0), where
    rich would exit 1, which means "no" here."""
    import os

    from kafka_tiers.cli.boundary import StdoutClosedError

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise StdoutClosedError("stdout closed by its reader")


class Seconds(click.ParamType):
    """A click type for an interval or a timeout: a finite number of seconds above 0 and at
    most ``maximum`` (0 would make a loop spin, a negative or NaN one never wait)."""

    name = "seconds"

    def __init__(self, maximum: float = 7 * 86400.0) -> None:
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"expected a number of seconds, got {value!r}", param, ctx)
        check_seconds(seconds, self.maximum, param, ctx)
        return seconds


def check_seconds(seconds: float, maximum: float, param: click.Parameter | None = None,
                  ctx: click.Context | None = None) -> None:
    """Refuse an interval or timeout that is not finite, not above 0 or above ``maximum``.

    Raises:
        click.BadParameter: naming the value and the allowed range.
    """
    if not (math.isfinite(seconds) and 0 < seconds <= maximum):
        raise click.BadParameter(f"expected seconds above 0 and at most {maximum:g}, got "
                                 f"{seconds:g}", ctx=ctx, param=param)


def broker_ids_callback(_ctx: click.Context | None, _param: click.Parameter | None,
                        value: str | None) -> list[int] | None:
    """A click callback for ``--broker-ids 1,2,3``: the ids, or None when not given.

    Raises:
        click.BadParameter: an empty list or an entry that is not a broker id (an integer
            from 0 to 2147483647).
    """
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()]
    bad = [p for p in parts if not (p.isascii() and p.isdigit() and int(p) <= 2**31 - 1)]
    if bad:
        raise click.BadParameter(f"expected comma-separated broker ids (integers from 0 to "
                                 f"2147483647), got {bad[0]!r}")
    if not parts:
        raise click.BadParameter("expected at least one broker id")
    return [int(p) for p in parts]


def read_json(path: str) -> Any:
    """The JSON document in the file at ``path``, read by
    :func:`kafka_tiers.input_file.read_input_file`: a regular file of at most
    :data:`~kafka_tiers.input_file.MAX_JSON_FILE_BYTES` (16 MiB).

    Raises:
        KafkaTiersError: one line naming the file: it cannot be read, is not a regular file,
            is larger than the limit, is not UTF-8 JSON, or is nested too deeply for the
            parser (a hostile document).
    """
    from kafka_tiers.api.errors import KafkaTiersError
    from kafka_tiers.input_file import MAX_JSON_FILE_BYTES, read_input_file

    raw = read_input_file(path, MAX_JSON_FILE_BYTES)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise KafkaTiersError(f"{path} is not usable JSON: nested too deeply") from None
    except ValueError as exc:
        raise KafkaTiersError(f"{path} is not JSON: {exc}") from None


def parse_kv(pairs: tuple[str, ...], what: str = "--config") -> dict[str, str]:
    """``("a=1", "b=2")`` -> ``{"a": "1", "b": "2"}``; a pair without ``=`` is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"{what} takes key=value, got {pair!r}")
        out[key.strip()] = value
    return out


__all__ = ["FORMAT_OPTION", "Seconds", "broker_ids_callback", "check_seconds", "console",
           "emit_json", "parse_kv", "read_json"]
