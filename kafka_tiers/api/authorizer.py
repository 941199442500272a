"""The authorizer interface (Kafka's ``org.apache.kafka.server.authorizer.Authorizer``) and
its value types: principals, resource patterns, access control entries and bindings.

A broker with ``authorizer.class.name`` set asks its authorizer, for every request, whether
the request's principal may perform each operation on each resource the request names. The
name is an entry point of the group :data:`AUTHORIZER_GROUP` (the built-in ACL authorizer is
``acl``) or a ``module:Class`` path. Without it every request is allowed (Kafka's default).

The numeric values of the enums are Kafka's wire codes (CreateAcls, DescribeAcls, DeleteAcls),
so a plugin never translates them.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the entry-point group authorizers are discovered in
AUTHORIZER_GROUP = "kafka_tiers.authorizer"
#: the host of an ACL that matches every client address
WILDCARD_HOST = "*"
#: the resource name of a literal pattern that matches every resource of its type
WILDCARD_RESOURCE = "*"
#: the principal of an ACL that matches every principal
WILDCARD_PRINCIPAL = "User:*"
#: the one resource name of the cluster resource
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    """Kafka's resource types (wire codes)."""

    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """How a resource pattern's name matches (wire codes)."""

    UNKNOWN = 0
    ANY = 1  # filters only: literal or prefixed, the name compared exactly
    MATCH = 2  # filters only: every pattern that matches the filter's name
    LITERAL = 3  # the name exactly, or every resource when the name is "*"
    PREFIXED = 4  # every resource whose name starts with the name


class AclOperation(enum.IntEnum):
    """Kafka's operations (wire codes)."""

    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    """Allow or deny (wire codes); a matching deny always wins."""

    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


class AuthorizationResult(enum.Enum):
    """The answer for one action."""

    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


@dataclass(frozen=True)
class KafkaPrincipal:
    """Who sent a request: ``User:alice``, ``User:CN=client,O=example`` or
    ``User:ANONYMOUS`` (no authentication on the listener)."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``"User:alice"`` as a principal.

        Raises:
            ValueError: no ``TYPE:`` prefix, or an empty type or name.
        """
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"a principal is TYPE:NAME (e.g. User:alice), got {text!r}")
        return cls(kind, name)


#: the principal of a connection that did not authenticate
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(frozen=True)
class ResourcePattern:
    """A resource, or a pattern of resources (in an ACL)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern (LITERAL or PREFIXED) covers the resource ``name``."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name in (name, WILDCARD_RESOURCE)
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return False


@dataclass(frozen=True)
class AccessControlEntry:
    """Who (``principal``, as ``TYPE:NAME``; ``User:*`` for everyone) from where (``host``;
    ``*`` for anywhere) may or may not (``permission_type``) do what (``operation``)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select. ``None`` fields match anything; the enums'
    ``ANY`` too; ``pattern_type=MATCH`` selects every pattern that covers ``name``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        """Whether ``binding`` is selected by this filter."""
        p, e = binding.pattern, binding.entry
        if self.resource_type not in (ResourceType.ANY, p.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not (
                    p.name == self.name
                    or (p.pattern_type == PatternType.LITERAL and p.name == WILDCARD_RESOURCE)
                    or (p.pattern_type == PatternType.PREFIXED
                        and self.name.startswith(p.name))):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, p.pattern_type):
                return False
            if self.name is not None and self.name != p.name:
                return False
        if self.principal is not None and self.principal != e.principal:
            return False
        if self.host is not None and self.host != e.host:
            return False
        if self.operation not in (AclOperation.ANY, e.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, e.permission_type)


@dataclass(frozen=True)
class Action:
    """One thing a request wants to do: ``operation`` on the resource ``resource_type`` /
    ``name``. ``log_if_denied``: the broker audits a denial (False where Kafka filters
    quietly, e.g. Metadata hiding the topics a principal may not describe)."""

    operation: AclOperation
    resource_type: ResourceType
    name: str
    log_if_allowed: bool = False
    log_if_denied: bool = True


@dataclass(frozen=True)
class RequestIdentity:
    """Who asks and from where, as an authorizer sees a request."""

    principal: KafkaPrincipal
    client_address: str  # the peer's IP address
    listener: str
    security_protocol: str
    client_id: str = ""
    api_key: int = -1


class Authorizer(abc.ABC):
    """Decides whether a principal may perform operations on resources, and keeps the ACLs
    it decides by.

    Lifecycle: the broker makes one instance per broker, calls :meth:`configure` with the
    broker's configuration (every key, Kafka's names), then :meth:`start` once before the
    first request, and :meth:`close` when it stops. :meth:`authorize` is called from many
    handler threads at once and must be thread-safe and fast (no I/O per call).

    Errors: :meth:`create_acls` and :meth:`delete_acls` report a refusal per entry (an
    exception string in the result) rather than raising; any exception raised by
    :meth:`authorize` denies the request (the broker logs it once).
    """

    def configure(self, config: Mapping[str, Any]) -> None:  # noqa: B027 - optional
        """The broker's configuration (``super.users``, ``allow.everyone.if.no.acl.found``
        and any key of the plugin's own). Raises ``ConfigError`` on a bad value."""

    def start(self, storage: AclStorage) -> None:  # noqa: B027 - optional
        """Start serving; ``storage`` keeps ACLs where the broker keeps its metadata (the
        cluster's metadata store, or the standalone broker's directory). An authorizer that
        keeps its ACLs elsewhere may ignore it."""

    @abc.abstractmethod
    def authorize(self, identity: RequestIdentity, actions: Sequence[Action]
                  ) -> list[AuthorizationResult]:
        """One result per action, in order."""

    @abc.abstractmethod
    def create_acls(self, identity: RequestIdentity, bindings: Sequence[AclBinding]
                    ) -> list[str | None]:
        """Add ``bindings`` (adding one that exists is not an error: idempotent); per
        binding ``None`` or the reason it was refused."""

    @abc.abstractmethod
    def delete_acls(self, identity: RequestIdentity, filters: Sequence[AclBindingFilter]
                    ) -> list[list[AclBinding] | str]:
        """Delete every ACL each filter selects; per filter the bindings deleted (none is
        not an error: idempotent) or the reason it was refused."""

    @abc.abstractmethod
    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``flt`` selects."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release what :meth:`start` took. Idempotent."""


class AclStorage(abc.ABC):
    """Where the broker keeps ACLs for an authorizer (see :meth:`Authorizer.start`): the
    whole set, versioned, shared by every broker of a cluster."""

    @abc.abstractmethod
    def load(self) -> list[AclBinding]:
        """Every stored ACL."""

    @abc.abstractmethod
    def update(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()
               ) -> list[AclBinding]:
        """Add and remove ACLs atomically (a concurrent update is retried, never lost);
        returns the stored set after the change. Raises ``OSError`` or the store's error
        when it cannot be written (nothing changed then)."""

    @abc.abstractmethod
    def watch(self, callback: Any) -> None:
        """Call ``callback(acls)`` with the whole stored set whenever any broker changed it
        (and once now)."""


__all__ = [
    "ANONYMOUS",
    "AUTHORIZER_GROUP",
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclStorage",
    "Action",
    "AuthorizationResult",
    "Authorizer",
    "KafkaPrincipal",
    "PatternType",
    "RequestIdentity",
    "ResourcePattern",
    "ResourceType",
]
