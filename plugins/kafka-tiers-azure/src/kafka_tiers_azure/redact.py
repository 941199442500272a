"""Keeping Azure credentials out of messages and log records.

Account keys never travel over the wire (requests carry an HMAC signature instead), but a SAS
token is part of every request URL, and URLs reach text in two places this plugin does not
write itself:

- exception messages of the SDK and its HTTP stack (a refused connection reads
  ``Max retries exceeded with url: /acct/container/blob?...&sig=...``);
- DEBUG records of ``urllib3.connectionpool``, which logs every request line with its query.

So the plugin (a) never copies an SDK exception's text into its own errors without passing it
through :func:`redact`, and raises its errors ``from None`` so that no SDK exception rides along
as ``__cause__``; and (b) installs :data:`LOG_FILTER` on the loggers in :data:`FILTERED_LOGGERS`
while a store is open: it rewrites records (message, arguments and traceback text) with every
registered secret and every ``sig=`` value replaced by ``<hidden>``. The Azure SDK's own HTTP
logging policies already redact ``sig`` and the ``Authorization`` header; the filter is on them
too, as a second line.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Iterable

#: What replaces a secret.
HIDDEN = "<hidden>"

#: Loggers whose records may contain request URLs or headers (the filter is attached to each;
#: a filter on a parent logger does not see its children's records).
FILTERED_LOGGERS: tuple[str, ...] = (
    "urllib3.connectionpool",
    "azure.core.pipeline.policies.http_logging_policy",
    "azure.core.pipeline.policies._universal",
    "azure.core.pipeline.policies._retry",
    "azure.storage.blob._shared.policies",
    "azure.storage.blob._shared.authentication",
    "azure.storage.blob._shared.response_handlers",
    "azure.identity",
)

# a SAS signature, or any query parameter that carries one, in a URL or header dump
_SIG = re.compile(r"(?i)(\bsig(?:nature)?=)[^&\s'\"<>;,)]+")
# AccountKey=... / SharedAccessSignature=... inside a connection string
_CONN = re.compile(r"(?i)\b(AccountKey|SharedAccessSignature)=[^;\s'\"]+")


class _Secrets:
    """The secret strings of every open store (a multiset: stores may share a secret)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._sorted: tuple[str, ...] = ()

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            self._counts.update(v for v in values if v)
            self._resort()

    def remove(self, values: Iterable[str]) -> None:
        with self._lock:
            self._counts.subtract(v for v in values if v)
            self._counts = +self._counts  # drop zero counts
            self._resort()

    def _resort(self) -> None:
        self._sorted = tuple(sorted(self._counts, key=len, reverse=True))

    def values(self) -> tuple[str, ...]:
        return self._sorted


_SECRETS = _Secrets()


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every registered secret, every string of ``extra``, every ``sig=`` value
    and every ``AccountKey=`` / ``SharedAccessSignature=`` value replaced by ``<hidden>``."""
    for secret in sorted({*extra, *_SECRETS.values()}, key=len, reverse=True):
        if secret and len(secret) >= 3:
            text = text.replace(secret, HIDDEN)
    text = _CONN.sub(lambda m: f"{m.group(1)}={HIDDEN}", text)
    return _SIG.sub(lambda m: f"{m.group(1)}{HIDDEN}", text)


class RedactingFilter(logging.Filter):
    """A logging filter that rewrites a record so no secret reaches any handler.

    It never drops a record: the message is formatted with its arguments and redacted, and an
    attached traceback is formatted and redacted into ``exc_text`` (which formatters print in
    place of formatting ``exc_info`` again).
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep the raw parts, redacted
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


#: The one filter instance, attached to :data:`FILTERED_LOGGERS` while a store is open.
LOG_FILTER = RedactingFilter("kafka_tiers_azure")

_attach_lock = threading.Lock()
_attached = 0


def register(secrets: Iterable[str]) -> None:
    """Start hiding ``secrets`` (an opened store calls this); attaches :data:`LOG_FILTER`."""
    global _attached
    _SECRETS.add(secrets)
    with _attach_lock:
        if _attached == 0:
            for name in FILTERED_LOGGERS:
                logging.getLogger(name).addFilter(LOG_FILTER)
        _attached += 1


def unregister(secrets: Iterable[str]) -> None:
    """Undo one :func:`register` (a closed store calls this); the filter is detached when no
    store is open."""
    global _attached
    _SECRETS.remove(secrets)
    with _attach_lock:
        _attached = max(0, _attached - 1)
        if _attached == 0:
            for name in FILTERED_LOGGERS:
                logging.getLogger(name).removeFilter(LOG_FILTER)


__all__ = [
    "FILTERED_LOGGERS",
    "HIDDEN",
    "LOG_FILTER",
    "RedactingFilter",
    "redact",
    "register",
    "unregister",
]
