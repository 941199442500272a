"""Asking the broker's authorizer, in one place: every API handler goes through
:meth:`~kafka_tiers.kafka.context.RequestContext.authorize`, which comes here.

Without an authorizer (``authorizer.class.name`` unset) everything is allowed. An
authorizer that raises denies the request (logged once per minute, never with a secret). A
denial whose action asks for it is audited: one INFO line on the logger
``kafka_tiers.audit`` per request at most (:func:`audit_denials`, called by the server once
the handler returned), with the principal, the client address, the listener and the denied
operations and resources (names escaped and truncated by
:func:`~kafka_tiers.kafka.security.audit.shown`, the list bounded), at most one line per
second per principal and client address (the rest are counted into the next line; the
limiter's table is bounded, see :mod:`kafka_tiers.kafka.security.audit`).
"""

from __future__ import annotations

import logging
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
from kafka_tiers.kafka.security.acl_authorizer import canonical_host
from kafka_tiers.kafka.security.audit import AuditLimiter, audit_log, shown, shown_list

log = logging.getLogger(__name__)

#: denials audited: at most one line a second per (principal, client address)
_audit_limiter = AuditLimiter(per_second=1)
#: the characters of a denial line's list of denied resources
_AUDIT_LIST_CHARS = 1000
_failure_last = [0.0]


def check(server: Any, identity: RequestIdentity, actions: Sequence[Action],
          denials: list[Action] | None = None) -> list[bool]:
    """One decision per action (see the module docstring). The denied actions that ask to
    be audited are appended to ``denials`` (the request's, audited once by
    :func:`audit_denials`); without it they are audited at once, in one line."""
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
    denied = [a for a, ok in zip(actions, allowed, strict=True) if not ok and a.log_if_denied]
    if denials is not None:
        denials.extend(denied)
    elif denied:
        audit_denials(identity, denied)
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
    client = canonical_host(identity.client_address)  # hosts compared as authorize() does
    for b in bindings:
        e, p = b.entry, b.pattern
        if canonical_host(e.host) not in (client, WILDCARD_HOST):
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


def audit_denials(identity: RequestIdentity, denied: Sequence[Action]) -> None:
    """One audit line for a request's denied actions (nothing when there are none): the
    principal, the client address, the listener and the denied ``OPERATION RESOURCE:name``
    (distinct, in order, the list bounded and every name escaped), rate limited per
    principal and client address (see the module docstring)."""
    if not denied:
        return
    admitted = _audit_limiter.admit((shown(identity.principal), identity.client_address))
    if admitted is None:
        return
    (principal, client), skipped = admitted
    seen = dict.fromkeys((a.operation.name, a.resource_type.name, a.name) for a in denied)
    more = f" (and {skipped} more denied requests since the last line)" if skipped else ""
    if client == identity.client_address:
        listed = shown_list([f"operation={op} resource={rt}:{name}" for op, rt, name in seen],
                            limit=_AUDIT_LIST_CHARS)
        audit_log.info("denied: principal=%s client=%s listener=%s %s%s%s", principal, client,
                       shown(identity.listener), listed,
                       f" ({len(seen)} denials)" if len(seen) > 1 else "", more)
    else:  # the limiter's table is full: the aggregate line of all other clients
        audit_log.info("denied: requests of clients beyond the audit table (%d keys), the "
                       "last: principal=%s client=%s%s", _audit_limiter.max_keys,
                       shown(identity.principal), identity.client_address, more)


__all__ = ["audit_denials", "check", "check_by_resource_type"]
