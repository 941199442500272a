"""Asking the broker's authorizer, in one place: every API handler goes through
:meth:`~kafka_tiers.kafka.context.RequestContext.authorize`, which comes here.

Without an authorizer (``authorizer.class.name`` unset) everything is allowed. An
authorizer that raises denies the request (logged once per minute, never with a secret). A
denial whose action asks for it is audited: one INFO line on the logger
``kafka_tiers.audit`` with the principal, the client address, the operation and the
resource, at most one line per second per principal and resource (the rest are counted
into the next line).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from kafka_tiers.api.authorizer import Action, AuthorizationResult, RequestIdentity

log = logging.getLogger(__name__)
audit_log = logging.getLogger("kafka_tiers.audit")

_AUDIT_INTERVAL_S = 1.0
_audit_lock = threading.Lock()
_audit_last: dict[tuple[str, str, str], tuple[float, int]] = {}
_failure_last = [0.0]


def check(server: Any, identity: RequestIdentity, actions: Sequence[Action]) -> list[bool]:
    """One decision per action (see the module docstring)."""
    authorizer = getattr(server, "authorizer", None)
    if authorizer is None:
        return [True] * len(actions)
    try:
        results = authorizer.authorize(identity, actions)
        allowed = [r == AuthorizationResult.ALLOWED for r in results]
        if len(allowed) != len(actions):
            raise ValueError(f"{len(allowed)} results for {len(actions)} actions")
    except Exception as exc:
        now = time.monotonic()
        if now - _failure_last[0] > 60:
            _failure_last[0] = now
            log.error("the authorizer failed (%s); the request is denied",
                      type(exc).__name__)
        allowed = [False] * len(actions)
    for action, ok in zip(actions, allowed, strict=True):
        if not ok and action.log_if_denied:
            _audit(identity, action)
    return allowed


def _audit(identity: RequestIdentity, action: Action) -> None:
    resource = f"{action.resource_type.name}:{action.name}"
    key = (str(identity.principal), resource, action.operation.name)
    now = time.monotonic()
    with _audit_lock:
        last, skipped = _audit_last.get(key, (0.0, 0))
        if now - last < _AUDIT_INTERVAL_S:
            _audit_last[key] = (last, skipped + 1)
            return
        _audit_last[key] = (now, 0)
        if len(_audit_last) > 10_000:  # bounded: forget the oldest half
            for k in sorted(_audit_last, key=lambda k: _audit_last[k][0])[:5_000]:
                del _audit_last[k]
    audit_log.info("denied: principal=%s client=%s listener=%s operation=%s resource=%s%s",
                   identity.principal, identity.client_address, identity.listener,
                   action.operation.name, resource,
                   f" (and {skipped} more denials since the last line)" if skipped else "")


__all__ = ["check"]
