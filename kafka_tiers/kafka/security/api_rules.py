"""What each Kafka API asks the authorizer, as Kafka's ``KafkaApis`` does, and the helpers the
handlers ask it with.

:data:`API_RULES` declares, for every API key the broker serves (and the security APIs of
this issue), the checks its handler makes: operation, resource type, the error code a denial
answers, and where the check applies. The handlers make the checks (each through
:meth:`~kafka_tiers.kafka.context.RequestContext.authorize`); the table is their written
contract, shown in ``docs/security.md`` and checked by the tests: a served API missing from
it fails the test suite, so a new API cannot forget its check. An API with no rule
(``()``: ApiVersions, SaslHandshake, SaslAuthenticate) is served to every principal.

Without an authorizer (``authorizer.class.name`` unset) every check allows, and the
authorized-operations fields report every operation of the resource (Kafka's answer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_tiers.api.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    Action,
    ResourceType,
)
from kafka_tiers.kafka.errors import (  # Kafka's authorization error codes
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)

#: the operations an authorized-operations field reports per resource type (Kafka's
#: ``AclEntry.supportedOperations``), the built-in authorizer's table
from kafka_tiers.kafka.security.acl_authorizer import SUPPORTED_OPERATIONS

_O, _R = AclOperation, ResourceType

if TYPE_CHECKING:
    from kafka_tiers.kafka.context import RequestContext

#: a denial that is not an error: the resource is left out of the answer
HIDDEN = 0

#: the error a denial on each resource type answers (Kafka's ``configsAuthorizationApiError``)
DENIAL_ERROR: Mapping[ResourceType, int] = {
    ResourceType.TOPIC: TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}



@dataclass(frozen=True)
class Rule:
    """One check an API's handler makes.

    Attributes:
        operation: the operation asked.
        resource_type: on which resource type (the cluster's one name is ``kafka-cluster``).
        error: the code a denial answers (:data:`HIDDEN`: the resource is left out).
        applies: where it applies, in a few words (for the docs).
    """

    operation: AclOperation
    resource_type: ResourceType
    error: int
    applies: str


def _rule(op: AclOperation, rtype: ResourceType, applies: str, error: int | None = None
          ) -> Rule:
    return Rule(op, rtype, DENIAL_ERROR[rtype] if error is None else error, applies)


_T, _G, _C = _R.TOPIC, _R.GROUP, _R.CLUSTER

#: API key -> the checks its handler makes (see the module docstring)
API_RULES: Mapping[int, tuple[Rule, ...]] = {
    0: (_rule(_O.WRITE, _T, "each topic (per partition)"),),  # Produce
    1: (_rule(_O.READ, _T, "each topic (per partition), local and remote tier"),  # Fetch
        _rule(_O.CLUSTER_ACTION, _C, "a replica's fetch (replica id >= 0); each partition",
              TOPIC_AUTHORIZATION_FAILED)),
    2: (_rule(_O.DESCRIBE, _T, "each topic (per partition)"),),  # ListOffsets
    3: (_rule(_O.DESCRIBE, _T, "each topic named; listing all topics hides the others",  # Metadata
              TOPIC_AUTHORIZATION_FAILED),
        _rule(_O.CREATE, _C, "auto-creating any topic (else CREATE on the topic)",
              TOPIC_AUTHORIZATION_FAILED),
        _rule(_O.CREATE, _T, "auto-creating the topic, without CREATE on the cluster")),
    8: (_rule(_O.READ, _G, "the group (whole request)"),  # OffsetCommit
        _rule(_O.READ, _T, "each topic (per partition)")),
    9: (_rule(_O.DESCRIBE, _G, "each group"),  # OffsetFetch
        _rule(_O.DESCRIBE, _T, "each topic asked (per partition); all topics: others "
              "left out")),
    10: (_rule(_O.DESCRIBE, _G, "each group key"),),  # FindCoordinator
    11: (_rule(_O.READ, _G, "the group"),),  # JoinGroup
    12: (_rule(_O.READ, _G, "the group"),),  # Heartbeat
    13: (_rule(_O.READ, _G, "the group"),),  # LeaveGroup
    14: (_rule(_O.READ, _G, "the group"),),  # SyncGroup
    15: (_rule(_O.DESCRIBE, _G, "each group"),),  # DescribeGroups
    16: (_rule(_O.DESCRIBE, _C, "lists every group", HIDDEN),  # ListGroups
         _rule(_O.DESCRIBE, _G, "without DESCRIBE on the cluster: only these groups",
               HIDDEN)),
    17: (),  # SaslHandshake
    18: (),  # ApiVersions
    19: (_rule(_O.CREATE, _C, "every topic; else CREATE on each topic",  # CreateTopics
               TOPIC_AUTHORIZATION_FAILED),
         _rule(_O.CREATE, _T, "each topic, without CREATE on the cluster"),
         _rule(_O.DESCRIBE_CONFIGS, _T, "the configs in the answer (topic_config_error_code)")),
    20: (_rule(_O.DELETE, _T, "each topic"),  # DeleteTopics
         _rule(_O.DESCRIBE, _T, "each topic named by id (the name is not returned)")),
    21: (_rule(_O.DELETE, _T, "each topic (per partition)"),),  # DeleteRecords
    22: (_rule(_O.IDEMPOTENT_WRITE, _C, "or WRITE on some topic (any ACL allowing it)"),),
    23: (_rule(_O.CLUSTER_ACTION, _C, "every topic (a follower)", HIDDEN),  # OffsetForLeaderEpoch
         _rule(_O.DESCRIBE, _T, "each topic, without CLUSTER_ACTION (per partition)")),
    29: (_rule(_O.DESCRIBE, _C, "the request"),),  # DescribeAcls
    30: (_rule(_O.ALTER, _C, "the request"),),  # CreateAcls
    31: (_rule(_O.ALTER, _C, "the request"),),  # DeleteAcls
    32: (_rule(_O.DESCRIBE_CONFIGS, _T, "each topic resource"),  # DescribeConfigs
         _rule(_O.DESCRIBE_CONFIGS, _C, "each broker resource")),
    33: (_rule(_O.ALTER_CONFIGS, _T, "each topic resource"),  # AlterConfigs
         _rule(_O.ALTER_CONFIGS, _C, "each broker resource")),
    34: (_rule(_O.ALTER, _C, "the request (every partition)"),),  # AlterReplicaLogDirs
    35: (_rule(_O.DESCRIBE, _C, "the request"),),  # DescribeLogDirs
    36: (),  # SaslAuthenticate
    37: (_rule(_O.ALTER, _T, "each topic"),),  # CreatePartitions
    42: (_rule(_O.DELETE, _G, "each group"),),  # DeleteGroups
    43: (_rule(_O.ALTER, _C, "the request (every partition)"),),  # ElectLeaders
    44: (_rule(_O.ALTER_CONFIGS, _T, "each topic resource"),  # IncrementalAlterConfigs
         _rule(_O.ALTER_CONFIGS, _C, "each broker resource")),
    45: (_rule(_O.ALTER, _C, "the request (every partition)"),),  # AlterPartitionReassignments
    46: (_rule(_O.DESCRIBE, _C, "the request"),),  # ListPartitionReassignments
    47: (_rule(_O.DELETE, _G, "the group (whole request)"),  # OffsetDelete
         _rule(_O.READ, _T, "each topic (per partition)")),
    50: (_rule(_O.DESCRIBE, _C, "the request"),),  # DescribeUserScramCredentials
    51: (_rule(_O.ALTER, _C, "the request"),),  # AlterUserScramCredentials
    60: (_rule(_O.DESCRIBE, _C,  # DescribeCluster
               "the cluster's authorized operations only (0 when denied)", HIDDEN),),
}


def allowed_names(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                  names: Iterable[str], *, log_if_denied: bool = True) -> set[str]:
    """The distinct ``names`` the request's principal may perform ``operation`` on (one
    call to the authorizer for all of them; Kafka's ``filterByAuthorized``)."""
    distinct = list(dict.fromkeys(names))
    if not distinct or ctx.server.authorizer is None:  # no authorizer: every name
        return set(distinct)
    results = ctx.authorize_all([Action(operation, resource_type, n, log_if_denied=log_if_denied)
                                 for n in distinct])
    return {n for n, ok in zip(distinct, results, strict=True) if ok}


def allowed_by_cluster_or_names(ctx: RequestContext, cluster_operation: AclOperation,
                                operation: AclOperation, resource_type: ResourceType,
                                names: Iterable[str]) -> set[str]:
    """Every one of ``names`` when the principal may perform ``cluster_operation`` on the
    cluster (that check is not audited when denied: the names may still be allowed), else
    the :func:`allowed_names` for ``operation`` (denials audited). Kafka's rule for CREATE
    (CreateTopics, Metadata's auto-creation) and CLUSTER_ACTION (OffsetForLeaderEpoch)."""
    if ctx.authorize(cluster_operation, ResourceType.CLUSTER, CLUSTER_NAME,
                     log_if_denied=False):
        return set(names)
    return allowed_names(ctx, operation, resource_type, names)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType,
                          name: str = CLUSTER_NAME) -> set[int]:
    """The operation codes of :data:`SUPPORTED_OPERATIONS` the principal may perform on the
    resource (an authorized-operations field; Kafka's ``authorizedOperations``). Denials are
    not audited: nothing was refused."""
    ops = SUPPORTED_OPERATIONS[resource_type]
    results = ctx.authorize_all([Action(op, resource_type, name, log_if_denied=False)
                                 for op in ops])
    return {int(op) for op, ok in zip(ops, results, strict=True) if ok}


def cluster_operations(ctx: RequestContext) -> set[int]:
    """The cluster's authorized operations as Kafka reports them (Metadata v8-10,
    DescribeCluster): none without DESCRIBE on the cluster (audited as a denial), else each
    cluster operation the principal may perform."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return set()
    return authorized_operations(ctx, ResourceType.CLUSTER)


def may_on_some(ctx: RequestContext, operation: AclOperation,
                resource_type: ResourceType) -> bool:
    """Whether some ACL lets the principal perform ``operation`` on some resource of
    ``resource_type`` (Kafka's ``authorizeByResourceType``: InitProducerId's WRITE on any
    topic)."""
    from kafka_tiers.kafka.security import authorization
    return authorization.check_by_resource_type(ctx.server, ctx.identity(), operation,
                                                resource_type)


__all__ = [
    "API_RULES",
    "CLUSTER_AUTHORIZATION_FAILED",
    "DENIAL_ERROR",
    "GROUP_AUTHORIZATION_FAILED",
    "HIDDEN",
    "SUPPORTED_OPERATIONS",
    "TOPIC_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "Rule",
    "allowed_names",
    "authorized_operations",
    "cluster_operations",
    "may_on_some",
]
