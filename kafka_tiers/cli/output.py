"""Shared output helpers for CLI commands: JSON for tools, rich tables for people."""

from __future__ import annotations

import json
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

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def parse_kv(pairs: tuple[str, ...], what: str = "--config") -> dict[str, str]:
    """``("a=1", "b=2")`` -> ``{"a": "1", "b": "2"}``; a pair without ``=`` is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"{what} takes key=value, got {pair!r}")
        out[key.strip()] = value
    return out


__all__ = ["FORMAT_OPTION", "console", "emit_json", "parse_kv"]
