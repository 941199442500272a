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
    """Write one JSON document to stdout.

    Raises:
        OutputWriteError: the write failed (a full disk); a broken pipe stays a
            ``BrokenPipeError`` (the reader went away: a quiet exit at the boundary).
    """
    from kafka_tiers.cli.boundary import OutputWriteError

    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputWriteError(exc.errno, "cannot write the output to stdout: "
                                          f"{exc.strerror or exc}") from None


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


#: The shortest interval or timeout a CLI option takes, in seconds: a shorter one (0, 1e-300)
#: would make a polling loop spin a core.
MIN_SECONDS = 0.1


class Seconds(click.ParamType):
    """A click type for an interval or a timeout: a finite number of seconds from ``minimum``
    (:data:`MIN_SECONDS`, 0.1 s) to ``maximum`` (a smaller one would make a loop spin, a
    negative or NaN one never wait)."""

    name = "seconds"

    def __init__(self, maximum: float = 7 * 86400.0, minimum: float = MIN_SECONDS) -> None:
        self.maximum = maximum
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"expected a number of seconds, got {value!r}", param, ctx)
        check_seconds(seconds, self.maximum, param, ctx, minimum=self.minimum)
        return seconds


def check_seconds(seconds: float, maximum: float, param: click.Parameter | None = None,
                  ctx: click.Context | None = None, *, minimum: float = MIN_SECONDS) -> None:
    """Refuse an interval or timeout that is not finite, below ``minimum`` (default
    :data:`MIN_SECONDS`, 0.1 s) or above ``maximum``.

    Raises:
        click.BadParameter: naming the value and the allowed range.
    """
    if not (math.isfinite(seconds) and minimum <= seconds <= maximum):
        raise click.BadParameter(f"expected seconds from {minimum:g} to {maximum:g}, got "
                                 f"{seconds:g}", ctx=ctx, param=param)


def broker_ids_callback(_ctx: click.Context | None, _param: click.Parameter | None,
                        value: str | None) -> list[int] | None:
    """A click callback for ``--broker-ids 1,2,3``: the ids, or None when not given.

    Raises:
        click.BadParameter: an empty list, an entry that is not a broker id (an integer
            from 0 to 2147483647), or a broker id given twice.
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
    ids = [int(p) for p in parts]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise click.BadParameter(f"broker {twice[0]} is given more than once in {value!r}; "
                                 "give each broker id once")
    return ids


def read_json(path: str) -> Any:
    """The JSON document in the file at ``path``, read by
    :func:`kafka_tiers.log.input_file.read_input_file`: a regular file of at most
    :data:`~kafka_tiers.log.input_file.MAX_JSON_FILE_BYTES` (16 MiB).

    Raises:
        KafkaTiersError: one line naming the file: it cannot be read, is not a regular file,
            is larger than the limit, is not UTF-8 JSON, or is nested too deeply for the
            parser (a hostile document).
    """
    from kafka_tiers.api.errors import KafkaTiersError
    from kafka_tiers.log.input_file import MAX_JSON_FILE_BYTES, read_input_file

    raw = read_input_file(path, MAX_JSON_FILE_BYTES)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise KafkaTiersError(f"{path} is not usable JSON: nested too deeply") from None
    except ValueError as exc:
        raise KafkaTiersError(f"{path} is not JSON: {exc}") from None


def check_output_file(path: str, option: str = "--output") -> None:
    """Refuse an output path that exists and is not a regular file (``/dev/full``,
    ``/dev/null``, a fifo): output files are replaced atomically (a temp file renamed over
    the path), which would replace the device node itself with a file.

    Raises:
        KafkaTiersError: one line naming the option, the path and the fix.
    """
    import os
    import stat

    from kafka_tiers.api.errors import KafkaTiersError

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise KafkaTiersError(f"cannot write {option} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise KafkaTiersError(f"cannot write {option} {path}: it is not a regular file (a "
                              "device, fifo or directory) and would be replaced by one; give "
                              "the path of a file, or leave the option out to print to stdout")


def parse_kv(pairs: tuple[str, ...], what: str = "--config") -> dict[str, str]:
    """``("a=1", "b=2")`` -> ``{"a": "1", "b": "2"}``; a pair without ``=`` is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"{what} takes key=value, got {pair!r}")
        out[key.strip()] = value
    return out


__all__ = ["FORMAT_OPTION", "MIN_SECONDS", "Seconds", "broker_ids_callback",
           "check_output_file", "check_seconds", "console", "emit_json", "parse_kv",
           "read_json"]
