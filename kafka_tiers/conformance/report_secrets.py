"""Secrets out of pytest's reports: the ``kafka_tiers`` pytest plugin passes every test report
through :func:`hide_secrets_in_report`.

A :class:`~kafka_tiers.api.Secret` shows itself as ``<hidden>``, but once a plugin has revealed
it to its client library, the library's own frames hold it in plain ``str`` and ``bytes``
(botocore's signed request headers, a SAS in a request URL), and ``pytest -l`` prints the locals
of every frame of a failure, pretty-printed (so a long value is split over several lines). So
every live secret is hidden from a report before anything prints it:

- each string of the failure (source and ``E`` lines, crash message, function arguments,
  captured output) has the values replaced by ``<hidden>`` (:meth:`kafka_tiers.api.Secret.hide`);
- a part that still holds a secret split over several lines (one local variable's value, or
  a traceback entry's lines) is replaced as a whole by :data:`HIDDEN_PART`
  (:func:`kafka_tiers.plugins.secrets.holds_secret`).

Only the secrets alive when the report is made are known (the conformance suite keeps the
plugin's configuration, with its secrets, for the whole run). Nothing is done, and nothing is
imported, while no :class:`~kafka_tiers.api.Secret` was ever made in the process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

#: What replaces a part of a report that held a secret split over lines.
HIDDEN_PART = "<hidden: this part of the report held a secret>"


def hide_secrets_in_report(report: Any) -> None:
    """Hide every live secret in a pytest report (a ``TestReport``), in place."""
    if "kafka_tiers.api.secret" not in sys.modules:  # no Secret was ever made in this process
        return
    from kafka_tiers.api import Secret
    from kafka_tiers.plugins.secrets import holds_secret

    _Hider(Secret.hide, holds_secret).report(report)


class _Hider:
    def __init__(self, hide: Callable[[str], str], holds: Callable[[str], bool]) -> None:
        self.hide = hide
        self.holds = holds

    def text(self, value: str) -> str:
        hidden = self.hide(value)
        return HIDDEN_PART if self.holds(hidden) else hidden

    def lines(self, lines: list[str]) -> list[str]:
        hidden = [self.hide(line) for line in lines]
        return [HIDDEN_PART] if self.holds("\n".join(hidden)) else hidden

    def local_lines(self, lines: list[str]) -> list[str]:
        """``name = value`` lines of ``-l``: a value's continuation lines are indented."""
        out: list[str] = []
        block: list[str] = []

        def flush() -> None:
            if not block:
                return
            hidden = [self.hide(line) for line in block]
            if self.holds("\n".join(hidden)):
                name = block[0].split("=", 1)[0].rstrip()
                hidden = [f"{name:<10} = {HIDDEN_PART}"]
            out.extend(hidden)
            block.clear()

        for line in lines:
            if line[:1].isspace() and block:
                block.append(line)
            else:
                flush()
                block.append(line)
        flush()
        return out

    def report(self, report: Any) -> None:
        longrepr = report.longrepr
        if isinstance(longrepr, str):
            report.longrepr = self.text(longrepr)
        elif isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, why)
            report.longrepr = (longrepr[0], longrepr[1], self.text(str(longrepr[2])))
        elif longrepr is not None:
            self.exception(longrepr)
        sections = getattr(report, "sections", None)
        if sections:
            report.sections = [(title, self.text(content)) for title, content in sections]

    def exception(self, longrepr: Any) -> None:
        chain = getattr(longrepr, "chain", None)
        if chain is not None:
            hidden = []
            for traceback, crash, description in chain:
                self.traceback(traceback)
                self.location(crash)
                hidden.append((traceback, crash,
                               self.text(description) if description else description))
            longrepr.chain = hidden
        else:
            self.traceback(getattr(longrepr, "reprtraceback", None))
        self.location(getattr(longrepr, "reprcrash", None))
        sections = getattr(longrepr, "sections", None)
        if sections:
            longrepr.sections = [(name, self.text(content), sep)
                                 for name, content, sep in sections]

    def traceback(self, traceback: Any) -> None:
        if traceback is None:
            return
        if getattr(traceback, "extraline", None):
            traceback.extraline = self.text(traceback.extraline)
        for entry in getattr(traceback, "reprentries", None) or []:
            if getattr(entry, "lines", None):
                entry.lines = self.lines(list(entry.lines))
            args = getattr(entry, "reprfuncargs", None)
            if args is not None and getattr(args, "args", None):
                args.args = [(name, self.text(str(value))) for name, value in args.args]
            local = getattr(entry, "reprlocals", None)
            if local is not None and getattr(local, "lines", None):
                local.lines = self.local_lines(list(local.lines))
            self.location(getattr(entry, "reprfileloc", None))

    def location(self, location: Any) -> None:
        if location is not None and getattr(location, "message", None):
            location.message = self.text(location.message)


__all__ = ["HIDDEN_PART", "hide_secrets_in_report"]
