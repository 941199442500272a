"""The security audit log (logger ``kafka_tiers.audit``): how a line shows a client's text,
and how many lines a client may cause.

Two rules hold for every line the security code logs:

- **Client-chosen text is escaped and truncated** by :func:`shown` (topic, group and user
  names, client ids, mechanisms, principals): a backslash and every non-printable character
  are written as ``\\\\``, ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN`` (so a name never starts a
  new line or forges one), and at most :data:`MAX_SHOWN` characters of it are shown, then
  ``…(N more)``.
- **Lines are rate limited per client, not per name**: :class:`AuditLimiter` admits at most
  ``per_second`` lines a second per key (the principal and the client address, never a name
  the client chose), counts the others into the key's next line, and holds at most
  ``max_keys`` keys: past that, the lines of new keys share one aggregate key
  (:data:`OVERFLOW`), itself limited the same way. Its memory is bounded whatever the
  clients send.
"""

from __future__ import annotations

import logging
import threading
import time

audit_log = logging.getLogger("kafka_tiers.audit")

#: the characters of a client's text a log line shows (then "…(N more)")
MAX_SHOWN = 200
#: the key of the aggregate line of the clients beyond an :class:`AuditLimiter`'s table
OVERFLOW = ("(other clients)", "*")


def shown(text: object, limit: int = MAX_SHOWN) -> str:
    """``text`` (``str()`` of it; bytes are decoded as UTF-8 with replacement) as a log line
    may show it: one line of printable characters, a backslash and each non-printable
    character escaped (``\\\\``, ``\\xNN``, ``\\uNNNN``, ``\\UNNNNNNNN``), at most ``limit``
    characters of the original followed by ``…(N more)`` when it is longer. Pure; never
    raises."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "replace")
    s = str(text)
    head = s[:limit]
    out = []
    for c in head:
        if c == "\\":
            out.append("\\\\")
        elif c.isprintable():
            out.append(c)
        else:
            n = ord(c)
            out.append(f"\\x{n:02x}" if n < 0x100 else
                       f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    if len(s) > limit:
        out.append(f"…({len(s) - limit} more)")
    return "".join(out)


def shown_list(items: list[str], limit: int = MAX_SHOWN) -> str:
    """Several client-chosen texts as one bounded field: ``a, b, c``, each escaped and
    truncated as :func:`shown` does, at most about ``limit`` characters in all (the first
    item always, then ``…(N more)`` naming how many items were left out)."""
    parts: list[str] = []
    used = 0
    for i, item in enumerate(items):
        part = shown(item)
        if parts and used + 2 + len(part) > limit:
            parts.append(f"…({len(items) - i} more)")
            break
        parts.append(part)
        used += len(part) + 2
    return ", ".join(parts)


class AuditLimiter:
    """At most ``per_second`` lines a second per key, in a table of at most ``max_keys``
    keys (see the module docstring). Thread-safe."""

    def __init__(self, per_second: int = 1, max_keys: int = 4096) -> None:
        self.per_second = per_second
        self.max_keys = max_keys
        self._lock = threading.Lock()
        # key -> [start of the current one-second window, lines in it, suppressed since]
        self._table: dict[tuple[str, str], list[float]] = {}
        self._purged = 0.0

    def __len__(self) -> int:
        return len(self._table)

    def clear(self) -> None:
        """Forget every key (the next line of each is admitted)."""
        with self._lock:
            self._table.clear()

    def admit(self, key: tuple[str, str]) -> tuple[tuple[str, str], int] | None:
        """Whether a line for ``key`` may be logged now: None (suppressed, counted), or the
        key to name in the line (``key``, or :data:`OVERFLOW` when the table is full) and
        how many lines of it were suppressed since its last line (to be said in this
        one)."""
        now = time.monotonic()
        with self._lock:
            entry = self._table.get(key)
            if entry is None:
                if len(self._table) >= self.max_keys:
                    self._purge(now)
                if len(self._table) >= self.max_keys:
                    key = OVERFLOW
                    entry = self._table.get(key)
                if entry is None:
                    entry = self._table[key] = [now, 0, 0]
            if now - entry[0] >= 1.0:
                entry[0], entry[1] = now, 0
            if entry[1] >= self.per_second:
                entry[2] += 1
                return None
            entry[1] += 1
            skipped = int(entry[2])
            entry[2] = 0
            return key, skipped

    def _purge(self, now: float) -> None:
        """Forget the keys idle for a second or more (at most once a second); the lines
        they suppressed are counted into the aggregate key's next line."""
        if now - self._purged < 1.0:
            return
        self._purged = now
        lost = 0
        for k in [k for k, e in self._table.items() if now - e[0] >= 1.0 and k != OVERFLOW]:
            lost += int(self._table.pop(k)[2])
        if lost:
            entry = self._table.setdefault(OVERFLOW, [now, 0, 0])
            entry[2] += lost


__all__ = ["MAX_SHOWN", "OVERFLOW", "AuditLimiter", "audit_log", "shown", "shown_list"]
