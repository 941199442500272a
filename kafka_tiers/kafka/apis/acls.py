"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31), v0-v3 each: the ACLs
of the broker's authorizer (``authorizer.class.name``), as Kafka's ``AclApis``.

- Authorization: CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE
  on the cluster; otherwise ``CLUSTER_AUTHORIZATION_FAILED`` (31) for the request (every
  creation, every filter).
- Without an authorizer all three answer ``SECURITY_DISABLED`` (54), as Kafka does.
- CreateAcls checks each creation as Kafka checks a new ACL
  (:func:`~kafka_tiers.kafka.security.acl_authorizer.binding_problem`: resource type known and
  not ANY, pattern type LITERAL or PREFIXED (v0: LITERAL only), a non-empty name, the
  CLUSTER resource named ``kafka-cluster``, operation and permission neither ANY nor
  UNKNOWN, a principal ``TYPE:NAME``); a refused creation answers ``INVALID_REQUEST`` (42)
  with the reason, the others are stored. A creation the authorizer could not store (its
  store unreachable, the ACL bound reached) answers ``UNKNOWN_SERVER_ERROR`` with its reason.
- DescribeAcls answers the ACLs its filter selects, grouped by resource pattern (one
  resource entry per pattern, its ACLs under it, as Kafka's ``aclsResources``); a filter
  with an UNKNOWN element, or v0 with another pattern type than LITERAL, answers
  ``INVALID_REQUEST``.
- DeleteAcls deletes, per filter, the ACLs it selects and lists them (each ACL under the
  first filter selecting it); a filter with an UNKNOWN element answers ``INVALID_REQUEST``
  for that filter.
- Bounds: more creations or filters than ``max.request.partitions`` in one request answer
  ``INVALID_REQUEST`` for each.

A plugin authorizer's exception answers ``UNKNOWN_SERVER_ERROR`` with its type and message
(never its traceback); the request is still answered. Every ACL created or deleted is one
INFO line on the logger ``kafka_tiers.audit`` (who, from where, the ACL).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, TypeVar

from kafka_tiers.api.authorizer import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafka_tiers.kafka import errors as kerr
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.acl_authorizer import binding_problem
from kafka_tiers.kafka.security.audit import audit_log, shown
from kafka_tiers.placement.limits import check_request_entries

log = logging.getLogger(__name__)

SECURITY_DISABLED = 54
NO_AUTHORIZER = "No Authorizer is configured on the broker"

E = TypeVar("E", bound=IntEnum)
R = TypeVar("R")


class _Invalid(ValueError):
    """A request entry Kafka refuses with INVALID_REQUEST."""


def _enum(cls: type[E], code: int, what: str) -> E:
    try:
        return cls(int(code))
    except ValueError:
        raise _Invalid(f"unknown {what} {code}") from None


def _not_authorized(ctx: RequestContext, operation: AclOperation) -> str | None:
    """The refusal message when the principal may not ``operation`` the cluster."""
    if ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return (f"{ctx.principal} is not authorized to {operation.name} the cluster "
            "(ACL changes need ALTER, listing needs DESCRIBE on the cluster)")


def _binding(creation: Any, version: int) -> AclBinding:
    """A CreateAcls creation as an :class:`AclBinding` (v0: LITERAL).

    Raises:
        _Invalid: an unknown code, or v0 with a pattern type other than LITERAL.
    """
    ptype = (_enum(PatternType, creation.resource_pattern_type, "pattern type")
             if version >= 1 else PatternType.LITERAL)
    binding = AclBinding(
        ResourcePattern(_enum(ResourceType, creation.resource_type, "resource type"),
                        creation.resource_name or "", ptype),
        AccessControlEntry(creation.principal or "", creation.host or "",
                           _enum(AclOperation, creation.operation, "operation"),
                           _enum(AclPermissionType, creation.permission_type,
                                 "permission type")))
    problem = binding_problem(binding)
    if problem is not None:
        raise _Invalid(problem)
    return binding


def _filter(src: Any, version: int) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter as an :class:`AclBindingFilter`.

    Raises:
        _Invalid: an unknown code or an UNKNOWN element (Kafka refuses them in a filter).
    """
    ptype = (_enum(PatternType, src.pattern_type_filter, "pattern type")
             if version >= 1 else PatternType.LITERAL)
    flt = AclBindingFilter(
        resource_type=_enum(ResourceType, src.resource_type_filter, "resource type"),
        name=src.resource_name_filter, pattern_type=ptype,
        principal=src.principal_filter, host=src.host_filter,
        operation=_enum(AclOperation, src.operation, "operation"),
        permission_type=_enum(AclPermissionType, src.permission_type, "permission type"))
    unknown = [n for n, v in (("resource type", flt.resource_type),
                              ("pattern type", flt.pattern_type),
                              ("operation", flt.operation),
                              ("permission type", flt.permission_type)) if v == 0]
    if unknown:
        raise _Invalid(f"the filter's {', '.join(unknown)} is UNKNOWN")
    return flt


def _audit_change(ctx: RequestContext, change: str, b: AclBinding) -> None:
    """One INFO line on ``kafka_tiers.audit`` per ACL created or deleted: who, from where,
    and the ACL (an ACL holds no secret; its names, the client's text, escaped and truncated
    by :func:`~kafka_tiers.kafka.security.audit.shown`). Not rate limited: every change of
    an authorized principal is recorded."""
    p, e = b.pattern, b.entry
    audit_log.info("ACL %s: principal=%s client=%s listener=%s acl=(%s:%s:%s %s %s %s from %s)",
                   change, shown(ctx.principal), ctx.connection.ip, shown(ctx.listener),
                   p.resource_type.name, p.pattern_type.name, shown(p.name),
                   e.permission_type.name, shown(e.principal), e.operation.name, shown(e.host))


def _plugin_failure(what: str, exc: BaseException) -> str:
    log.warning("the authorizer failed to %s: %s", what, type(exc).__name__)
    return f"the authorizer failed to {what}: {type(exc).__name__}: {str(exc)[:300]}"


def _each_or_failure(what: str, unit: str, count: int, call: Callable[[], Sequence[R]]
                     ) -> Sequence[R | str]:
    """The authorizer's ``count`` per-item answers from ``call``; when it raises or answers
    for another number of items (``unit``: what they are), the failure text (logged, the
    exception's type only) for each item instead. Never raises."""
    try:
        answers = call()
        if len(answers) != count:
            raise ValueError(f"{len(answers)} results for {count} {unit}")
    except Exception as exc:
        return [_plugin_failure(what, exc)] * count
    return answers


@handles(30, 0, 3)
def create_acls(ctx: RequestContext, request: Any) -> Any:
    """Store the ACLs of the request's creations (see the module docstring)."""
    result_cls = response_class(30, ctx.version).AclCreationResult
    creations = list(request.creations)
    results: list[tuple[int, str | None]] = [(0, None)] * len(creations)
    refused = _not_authorized(ctx, AclOperation.ALTER)
    authorizer = ctx.server.authorizer
    if refused is not None:
        results = [(kerr.CLUSTER_AUTHORIZATION_FAILED, refused)] * len(creations)
    elif authorizer is None:
        results = [(SECURITY_DISABLED, NO_AUTHORIZER)] * len(creations)
    else:
        try:
            check_request_entries(ctx.config, creations, "ACL creations")
        except Exception as exc:
            creations, results = [], [(kerr.INVALID_REQUEST, str(exc))] * len(creations)
        valid: list[tuple[int, AclBinding]] = []
        for i, creation in enumerate(creations):
            try:
                valid.append((i, _binding(creation, ctx.version)))
            except _Invalid as exc:
                results[i] = (kerr.INVALID_REQUEST, f"Failed to create ACL: {exc}")
        if valid:
            outcome = _each_or_failure(
                "create ACLs", "ACLs", len(valid),
                lambda: authorizer.create_acls(ctx.identity(), [b for _, b in valid]))
            for (i, binding), reason in zip(valid, outcome, strict=True):
                if reason is not None:
                    results[i] = (kerr.UNKNOWN_SERVER_ERROR, str(reason))
                else:
                    _audit_change(ctx, "created", binding)
    return ctx.response(throttle_time_ms=0, results=[
        result_cls(error_code=code, error_message=message) for code, message in results])


@handles(29, 0, 3)
def describe_acls(ctx: RequestContext, request: Any) -> Any:
    """The ACLs the request's filter selects, grouped by resource pattern."""
    cls = response_class(29, ctx.version)
    resource_cls = cls.DescribeAclsResource
    acl_cls = resource_cls.AclDescription
    refused = _not_authorized(ctx, AclOperation.DESCRIBE)
    authorizer = ctx.server.authorizer
    if refused is not None:
        return ctx.response(throttle_time_ms=0, error_code=kerr.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=refused, resources=[])
    if authorizer is None:
        return ctx.response(throttle_time_ms=0, error_code=SECURITY_DISABLED,
                            error_message=NO_AUTHORIZER, resources=[])
    try:
        flt = _filter(request, ctx.version)
    except _Invalid as exc:
        return ctx.response(throttle_time_ms=0, error_code=kerr.INVALID_REQUEST,
                            error_message=f"DescribeAcls: {exc}", resources=[])
    try:
        bindings = list(authorizer.acls(flt))
    except Exception as exc:
        return ctx.response(throttle_time_ms=0, error_code=kerr.UNKNOWN_SERVER_ERROR,
                            error_message=_plugin_failure("list ACLs", exc), resources=[])
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        entries = grouped.setdefault(b.pattern, [])
        if b.entry not in entries:
            entries.append(b.entry)
    resources = []
    for pattern, entries in grouped.items():
        if ctx.version < 1 and pattern.pattern_type != PatternType.LITERAL:
            continue  # v0 cannot say a pattern is prefixed (its filter selects LITERAL)
        resources.append(resource_cls(
            resource_type=int(pattern.resource_type), resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=[acl_cls(principal=e.principal, host=e.host, operation=int(e.operation),
                          permission_type=int(e.permission_type)) for e in entries]))
    return ctx.response(throttle_time_ms=0, error_code=0, error_message=None,
                        resources=resources)


@handles(31, 0, 3)
def delete_acls(ctx: RequestContext, request: Any) -> Any:
    """Delete the ACLs each filter selects and list them per filter."""
    result_cls = response_class(31, ctx.version).DeleteAclsFilterResult
    matching_cls = result_cls.DeleteAclsMatchingAcl
    filters = list(request.filters)
    outcome: list[tuple[int, str | None, list[AclBinding]]] = [(0, None, [])] * len(filters)
    refused = _not_authorized(ctx, AclOperation.ALTER)
    authorizer = ctx.server.authorizer
    if refused is not None:
        outcome = [(kerr.CLUSTER_AUTHORIZATION_FAILED, refused, [])] * len(filters)
    elif authorizer is None:
        outcome = [(SECURITY_DISABLED, NO_AUTHORIZER, [])] * len(filters)
    else:
        try:
            check_request_entries(ctx.config, filters, "ACL filters")
        except Exception as exc:
            filters, outcome = [], [(kerr.INVALID_REQUEST, str(exc), [])] * len(filters)
        valid: list[tuple[int, AclBindingFilter]] = []
        for i, src in enumerate(filters):
            try:
                valid.append((i, _filter(src, ctx.version)))
            except _Invalid as exc:
                outcome[i] = (kerr.INVALID_REQUEST, f"DeleteAcls: {exc}", [])
        if valid:
            deleted = _each_or_failure(
                "delete ACLs", "filters", len(valid),
                lambda: authorizer.delete_acls(ctx.identity(), [f for _, f in valid]))
            for (i, _), got in zip(valid, deleted, strict=True):
                outcome[i] = ((kerr.UNKNOWN_SERVER_ERROR, got, []) if isinstance(got, str)
                              else (0, None, list(got)))
                for binding in () if isinstance(got, str) else got:
                    _audit_change(ctx, "deleted", binding)
    return ctx.response(throttle_time_ms=0, filter_results=[
        result_cls(error_code=code, error_message=message, matching_acls=[
            matching_cls(error_code=0, error_message=None,
                         resource_type=int(b.pattern.resource_type),
                         resource_name=b.pattern.name,
                         pattern_type=int(b.pattern.pattern_type),
                         principal=b.entry.principal, host=b.entry.host,
                         operation=int(b.entry.operation),
                         permission_type=int(b.entry.permission_type))
            for b in acls])
        for code, message, acls in outcome])


__all__ = ["create_acls", "delete_acls", "describe_acls"]
