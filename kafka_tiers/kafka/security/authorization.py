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

from kafka_tiers.api.authorizer import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestIdentity,
    ResourceType,
)

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


def check_by_resource_type(server: Any, identity: RequestIdentity, operation: AclOperation,
                           resource_type: ResourceType) -> bool:
    """Whether the principal may perform ``operation`` on at least one resource of
    ``resource_type`` (Kafka's default ``Authorizer.authorizeByResourceType``): allowed when
    :func:`check` allows a made-up resource name (a super user, or no ACL and
    ``allow.everyone.if.no.acl.found``), else when an ALLOW ACL of the principal (or
    ``User:*``) from this host for the operation (or ALL) names a literal or prefixed pattern
    that no DENY ACL covers (a literal ``*`` deny denies all). Without an authorizer: True.
    An authorizer that fails denies (logged as in :func:`check`)."""
    authorizer = getattr(server, "authorizer", None)
    if authorizer is None:
        return True
    probe = Action(operation, resource_type, "hardcode", log_if_denied=False)
    if check(server, identity, [probe])[0]:
        return True
    try:
        bindings = authorizer.acls(AclBindingFilter(resource_type=resource_type))
    except Exception as exc:
        log.error("the authorizer failed listing ACLs (%s); the request is denied",
                  type(exc).__name__)
        return False
    deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(),
                                          PatternType.PREFIXED: set()}
    principal = str(identity.principal)
    for b in bindings:
        e, p = b.entry, b.pattern
        if e.host not in (identity.client_address, WILDCARD_HOST):
            continue
        if e.principal not in (principal, WILDCARD_PRINCIPAL):
            continue
        if e.operation not in (operation, AclOperation.ALL):
            continue
        if p.pattern_type not in deny:
            continue
        if e.permission_type == AclPermissionType.DENY:
            if p.pattern_type == PatternType.LITERAL and p.name == WILDCARD_RESOURCE:
                return False
            deny[p.pattern_type].add(p.name)
        elif e.permission_type == AclPermissionType.ALLOW:
            allow[p.pattern_type].add(p.name)
    if WILDCARD_RESOURCE in allow[PatternType.LITERAL]:
        return True
    for kind, names in allow.items():
        for name in names:
            if kind == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                continue
            if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                return True
    return False


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


__all__ = ["check", "check_by_resource_type"]
