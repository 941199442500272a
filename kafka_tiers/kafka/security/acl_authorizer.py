"""The built-in ACL authorizer (entry point ``acl`` of group ``kafka_tiers.authorizer``):
Kafka's ``AclAuthorizer`` / ``StandardAuthorizer`` rules over ACLs kept in the broker's
security state (:mod:`kafka_tiers.kafka.security.acl_storage`).

Decisions, as Kafka's (``AclAuthorizer.authorizeAction``):

- a principal of ``super.users`` is allowed everything;
- the ACLs that apply to a resource are the LITERAL ones naming it exactly, the LITERAL ones
  named ``*`` (every resource of the type) and the PREFIXED ones whose name starts the
  resource's name;
- when no ACL applies to the resource at all (whoever it names), ``allow.everyone.if.no.acl.
  found`` decides (false by default: denied);
- an ACL matches the request when its principal is the request's or ``User:*``, its host the
  client's IP address (compared in one spelling, :func:`canonical_host`) or ``*``, and its
  operation the one asked or ``ALL``;
- a matching DENY denies, whatever allows;
- else a matching ALLOW allows. An ALLOW of READ, WRITE, DELETE or ALTER also allows
  DESCRIBE, and an ALLOW of ALTER_CONFIGS allows DESCRIBE_CONFIGS; a DENY implies nothing (a
  DENY of DESCRIBE does not deny READ, a DENY of READ does not deny DESCRIBE);
- else denied.

Decisions read an immutable :class:`AclIndex` (no I/O, no lock per call), replaced whenever
the storage's watch delivers the stored set (on any broker's change). Creating and deleting
go through the storage, which delivers the new set to this broker's watch before it returns
(read-your-writes on the broker that changed them).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka_tiers.api.authorizer import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclStorage,
    Action,
    AuthorizationResult,
    Authorizer,
    KafkaPrincipal,
    PatternType,
    RequestIdentity,
    ResourceType,
)
from kafka_tiers.api.errors import ConfigError

log = logging.getLogger(__name__)

#: an ALLOW of one of these operations also allows the key (Kafka's implied operations)
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}

#: the operations each resource type supports (Kafka's ``AclEntry.supportedOperations``;
#: ``kafka-tiers acls`` refuses others, as kafka-acls.sh does)
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                   AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE,
                                   AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                                     AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS,
                                     AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

#: Kafka's broker-side class names, accepted for ``authorizer.class.name`` as ``acl``
KAFKA_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                     "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                     "kafka.security.auth.SimpleAclAuthorizer")

_Entries = tuple[AccessControlEntry, ...]
#: the operations an ALLOW must name for each operation asked (itself, or what implies it)
_ALLOWED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    op: IMPLIED_BY.get(op, frozenset({op})) for op in AclOperation}


@functools.lru_cache(maxsize=4096)
def canonical_host(host: str) -> str:
    """An IP address in one spelling (``::1`` for ``0:0:0:0:0:0:0:1``; an IPv4-mapped IPv6
    address as its IPv4 address, as Java reports a dual-stack client), so an ACL's host
    matches the client's however either is written; anything else as it is (``*``)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def binding_problem(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be stored (Kafka's checks of a new ACL), or None.

    Refused: a resource type UNKNOWN or ANY; a pattern type other than LITERAL or PREFIXED;
    an empty resource name; a CLUSTER resource not named ``kafka-cluster``; an operation
    UNKNOWN or ANY; a permission other than ALLOW or DENY; a principal not ``TYPE:NAME``;
    an empty host.
    """
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"invalid resource type {p.resource_type.name}"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"invalid pattern type {p.pattern_type.name} (LITERAL or PREFIXED)"
    if not p.name:
        return "the resource name must not be empty"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"invalid operation {e.operation.name}"
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"invalid permission type {e.permission_type.name} (ALLOW or DENY)"
    try:
        KafkaPrincipal.parse(e.principal)
    except ValueError:
        return (f"could not parse principal {e.principal!r} (no colon separating the "
                "principal type from its name, e.g. User:alice)")
    if not e.host:
        return "the host must not be empty (an IP address, or * for any)"
    return None


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users`` (``User:admin;User:CN=broker,O=example``) as principal strings.

    Raises:
        ConfigError: an item that is not ``TYPE:NAME``.
    """
    found = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        try:
            found.add(str(KafkaPrincipal.parse(item)))
        except ValueError as exc:
            raise ConfigError(f"super.users: {exc}", key="super.users", value=item,
                              expected="TYPE:NAME items separated by ';'") from None
    return frozenset(found)


class AclIndex:
    """An immutable index of a set of ACLs for decisions: LITERAL entries by (type, name),
    PREFIXED entries by type and prefix, with the prefix lengths present so a lookup
    probes one dictionary key per distinct length (not every stored prefix)."""

    __slots__ = ("_literal", "_prefix_lengths", "_prefixed", "bindings")

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        literal: dict[tuple[ResourceType, str], list[AccessControlEntry]] = {}
        prefixed: dict[ResourceType, dict[str, list[AccessControlEntry]]] = {}
        unique = dict.fromkeys(bindings)
        for b in unique:
            p, e = b.pattern, b.entry
            host = canonical_host(e.host)
            if host != e.host:  # decisions compare canonical addresses
                e = AccessControlEntry(e.principal, host, e.operation, e.permission_type)
            if p.pattern_type == PatternType.LITERAL:
                literal.setdefault((p.resource_type, p.name), []).append(e)
            elif p.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(p.resource_type, {}).setdefault(p.name, []).append(e)
        #: every ACL of the index, each once
        self.bindings: tuple[AclBinding, ...] = tuple(unique)
        self._literal: dict[tuple[ResourceType, str], _Entries] = {
            k: tuple(v) for k, v in literal.items()}
        self._prefixed: dict[ResourceType, dict[str, _Entries]] = {
            t: {n: tuple(v) for n, v in by.items()} for t, by in prefixed.items()}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {
            t: tuple(sorted({len(n) for n in by})) for t, by in prefixed.items()}

    def __len__(self) -> int:
        return len(self.bindings)

    def matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of every ACL that applies to the resource (see the module
        docstring)."""
        found: list[AccessControlEntry] = []
        exact = self._literal.get((resource_type, name))
        if exact:
            found.extend(exact)
        if name != WILDCARD_RESOURCE:
            wildcard = self._literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard:
                found.extend(wildcard)
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            for length in self._prefix_lengths[resource_type]:
                if length > len(name):
                    break
                entries = by_prefix.get(name[:length])
                if entries:
                    found.extend(entries)
        return found


def decide(entries: Sequence[AccessControlEntry], principal: str, host: str,
           operation: AclOperation) -> bool:
    """Whether ``entries`` (those applying to one resource, at least one) allow
    ``principal`` from ``host`` to perform ``operation``: no matching DENY and a matching
    ALLOW (the module docstring's rules)."""
    allowed_by = _ALLOWED_BY[operation]
    allow = False
    for e in entries:
        if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
            continue
        if e.host != host and e.host != WILDCARD_HOST:
            continue
        if e.permission_type == AclPermissionType.DENY:
            if e.operation == operation or e.operation == AclOperation.ALL:
                return False
        elif e.permission_type == AclPermissionType.ALLOW and not allow:
            allow = e.operation == AclOperation.ALL or e.operation in allowed_by
    return allow


class AclAuthorizer(Authorizer):
    """Kafka's ACL authorizer (see the module docstring).

    Keys (``configure``): ``super.users``, ``allow.everyone.if.no.acl.found``.
    ``start(storage)`` loads the stored ACLs and watches them; before ``start`` every
    request of a non-super user is decided on no ACLs. Thread-safe: decisions read the
    current index without a lock; changes are serialised.
    """

    def __init__(self) -> None:
        self.super_users: frozenset[str] = frozenset()
        self.allow_everyone_if_no_acl_found = False
        self._index = AclIndex()
        self._storage: AclStorage | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def configure(self, config: Mapping[str, Any]) -> None:
        """Read ``super.users`` and ``allow.everyone.if.no.acl.found``.

        Raises:
            ConfigError: a super user that is not ``TYPE:NAME``, or a non-boolean flag.
        """
        self.super_users = parse_super_users(str(_get(config, "super.users") or ""))
        flag = _get(config, "allow.everyone.if.no.acl.found")
        if isinstance(flag, str):
            if flag.strip().lower() not in ("true", "false"):
                raise ConfigError("allow.everyone.if.no.acl.found must be true or false",
                                  key="allow.everyone.if.no.acl.found", value=flag,
                                  expected="true or false")
            flag = flag.strip().lower() == "true"
        self.allow_everyone_if_no_acl_found = bool(flag)

    def start(self, storage: AclStorage) -> None:
        """Watch ``storage``: its set now, and every change by any broker.

        Raises:
            the storage's error when it cannot be read (the broker does not start).
        """
        self._storage = storage
        storage.watch(self._replace)

    def close(self) -> None:
        """Forget the storage (its watch ends with the storage's store). Idempotent."""
        self._storage = None

    def _replace(self, acls: Iterable[AclBinding]) -> None:
        index = AclIndex(acls)
        self._index = index  # one reference swap: readers see the old or the new index
        log.debug("ACL authorizer: %d ACLs", len(index))

    # ------------------------------------------------------------------ decisions
    def authorize(self, identity: RequestIdentity, actions: Sequence[Action]
                  ) -> list[AuthorizationResult]:
        """One result per action (see the module docstring); no I/O."""
        principal = str(identity.principal)
        if principal in self.super_users:
            return [AuthorizationResult.ALLOWED] * len(actions)
        index = self._index
        host = canonical_host(identity.client_address)
        results = []
        for action in actions:
            entries = index.matching(action.resource_type, action.name)
            if not entries:
                ok = self.allow_everyone_if_no_acl_found
            else:
                ok = decide(entries, principal, host, action.operation)
            results.append(AuthorizationResult.ALLOWED if ok else AuthorizationResult.DENIED)
        return results

    # ------------------------------------------------------------------ ACL changes
    def create_acls(self, identity: RequestIdentity, bindings: Sequence[AclBinding]
                    ) -> list[str | None]:
        """Store the valid ``bindings`` in one update (existing ones are kept as they are);
        per binding None or why it was refused (invalid, or the store failed)."""
        results: list[str | None] = [binding_problem(b) for b in bindings]
        valid = [b for b, problem in zip(bindings, results, strict=True) if problem is None]
        if valid:
            try:
                self._require_storage().update(add=valid)
            except Exception as exc:
                failure = _failure(exc)
                results = [failure if r is None else r for r in results]
        return results

    def delete_acls(self, identity: RequestIdentity, filters: Sequence[AclBindingFilter]
                    ) -> list[list[AclBinding] | str]:
        """Delete what each filter selects, in one update; per filter the ACLs it deleted
        (an ACL selected by several filters is reported under the first) or why nothing
        was deleted."""
        storage = self._require_storage()
        chosen: dict[AclBinding, int] = {}
        try:
            with self._lock:  # the set read here is the set the update removes from
                for binding in storage.load():
                    for i, flt in enumerate(filters):
                        if flt.matches(binding):
                            chosen.setdefault(binding, i)
                            break
                if chosen:
                    storage.update(remove=list(chosen))
        except Exception as exc:
            return [_failure(exc)] * len(filters)
        per_filter: list[list[AclBinding] | str] = [[] for _ in filters]
        for binding, i in chosen.items():
            got = per_filter[i]
            assert isinstance(got, list)
            got.append(binding)
        return per_filter

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """The ACLs of the current index ``flt`` selects."""
        return [b for b in self._index.bindings if flt.matches(b)]

    def _require_storage(self) -> AclStorage:
        storage = self._storage
        if storage is None:
            raise RuntimeError("the ACL authorizer is not started (no storage)")
        return storage


def _get(config: Mapping[str, Any], key: str) -> Any:
    try:
        return config[key]
    except KeyError:
        return None


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


__all__ = [
    "IMPLIED_BY",
    "KAFKA_CLASS_NAMES",
    "SUPPORTED_OPERATIONS",
    "AclAuthorizer",
    "AclIndex",
    "binding_problem",
    "canonical_host",
    "decide",
    "parse_super_users",
]
