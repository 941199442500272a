"""The classic group membership APIs, answered by the group coordinator
(:mod:`kafka_tiers.kafka.groups.coordinator`):

- JoinGroup (11) v0-v9: parked until the join phase completes; v4+ (KIP-394): a new dynamic
  member first gets MEMBER_ID_REQUIRED with its member id; v5+ static membership
  (``group_instance_id``, KIP-345).
- SyncGroup (14) v0-v5: parked until the leader's assignment is stored.
- Heartbeat (12) v0-v4; LeaveGroup (13) v0-v5 (v3+: a batch of members).
- ListGroups (16) v0-v5 (v4+ ``states_filter``; v5+ ``types_filter``: only "classic"
  groups exist here), DescribeGroups (15) v0-v6, DeleteGroups (42) v0-v2.

Authorization (Kafka's ``KafkaApis``): JoinGroup, SyncGroup, Heartbeat and LeaveGroup need READ
on the group (else ``GROUP_AUTHORIZATION_FAILED``, nothing reaches the coordinator);
DescribeGroups DESCRIBE and DeleteGroups DELETE on each group (that group
``GROUP_AUTHORIZATION_FAILED``); ListGroups lists every group with DESCRIBE on the cluster,
else only the groups the principal may DESCRIBE (the others are left out, quietly).
"""

from __future__ import annotations

from typing import Any

from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.groups.coordinator import coordinator_of
from kafka_tiers.kafka.groups.errors import GROUP_ID_NOT_FOUND, NONE, GroupError
from kafka_tiers.kafka.groups.group import JoinResult, SyncResult, protocols_of
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.api_rules import (
    GROUP_AUTHORIZATION_FAILED,
    allowed_names,
    authorized_operations,
)

JOIN_GROUP_KEY = 11
HEARTBEAT_KEY = 12
LEAVE_GROUP_KEY = 13
SYNC_GROUP_KEY = 14
DESCRIBE_GROUPS_KEY = 15
LIST_GROUPS_KEY = 16
DELETE_GROUPS_KEY = 42
#: DescribeGroups v3+ authorized_operations when not asked for (the library encodes None as
#: Kafka's INT32_MIN)
OPS_NOT_REQUESTED = None


def text(value: str | None) -> str:
    """A string field as sent ("" for a null where the schema allows none: a malformed
    request is then answered like an empty id, never with a dropped connection)."""
    return value if value is not None else ""


def may_read_group(ctx: RequestContext, group_id: str) -> bool:
    """Whether the principal may READ ``group_id`` (join, sync, heartbeat, leave, commit)."""
    return ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id)


def _client_host(ctx: RequestContext) -> str:
    host = ctx.peer.rpartition(":")[0]
    return f"/{host}"


@handles(JOIN_GROUP_KEY, 0, 9)
def join_group(ctx: RequestContext, request: Any) -> Any:
    """JoinGroup (see the module docstring)."""
    v = ctx.version
    session = int(request.session_timeout_ms)
    if not may_read_group(ctx, text(request.group_id)):
        result = JoinResult(GROUP_AUTHORIZATION_FAILED, "")
    else:
        result = coordinator_of(ctx).join(
            group_id=text(request.group_id), member_id=text(request.member_id),
            group_instance_id=request.group_instance_id if v >= 5 else None,
            session_timeout_ms=session,
            rebalance_timeout_ms=int(request.rebalance_timeout_ms) if v >= 1 else session,
            protocol_type=text(request.protocol_type),
            protocols=protocols_of(request.protocols),
            client_id=ctx.header.client_id or "", client_host=_client_host(ctx),
            require_known_member_id=v >= 4)
    cls = response_class(JOIN_GROUP_KEY, v)
    members = [cls.JoinGroupResponseMember(member_id=mid, group_instance_id=iid,
                                           metadata=meta)
               for mid, iid, meta in result.members]
    protocol_name = result.protocol_name
    if v < 7 and protocol_name is None:
        protocol_name = ""
    fields: dict[str, Any] = dict(
        error_code=result.error, generation_id=result.generation,
        protocol_type=result.protocol_type, protocol_name=protocol_name,
        leader=result.leader, member_id=result.member_id, members=members,
        skip_assignment=False)
    if v >= 2:
        fields["throttle_time_ms"] = 0
    return cls(**fields)


@handles(SYNC_GROUP_KEY, 0, 5)
def sync_group(ctx: RequestContext, request: Any) -> Any:
    """SyncGroup (see the module docstring)."""
    v = ctx.version
    if not may_read_group(ctx, text(request.group_id)):
        result = SyncResult(GROUP_AUTHORIZATION_FAILED)
    else:
        result = coordinator_of(ctx).sync(
            group_id=text(request.group_id), generation=int(request.generation_id),
            member_id=text(request.member_id),
            group_instance_id=request.group_instance_id if v >= 3 else None,
            protocol_type=request.protocol_type if v >= 5 else None,
            protocol_name=request.protocol_name if v >= 5 else None,
            assignments=[(text(a.member_id), bytes(a.assignment or b""))
                         for a in request.assignments or []])
    fields: dict[str, Any] = dict(error_code=result.error, assignment=result.assignment,
                                  protocol_type=result.protocol_type,
                                  protocol_name=result.protocol_name)
    if v >= 1:
        fields["throttle_time_ms"] = 0
    return ctx.response(**fields)


@handles(HEARTBEAT_KEY, 0, 4)
def heartbeat(ctx: RequestContext, request: Any) -> Any:
    """Heartbeat (see the module docstring)."""
    v = ctx.version
    if not may_read_group(ctx, text(request.group_id)):
        error = GROUP_AUTHORIZATION_FAILED
    else:
        error = coordinator_of(ctx).heartbeat(
            group_id=text(request.group_id), generation=int(request.generation_id),
            member_id=text(request.member_id),
            group_instance_id=request.group_instance_id if v >= 3 else None)
    fields: dict[str, Any] = {"error_code": error}
    if v >= 1:
        fields["throttle_time_ms"] = 0
    return ctx.response(**fields)


@handles(LEAVE_GROUP_KEY, 0, 5)
def leave_group(ctx: RequestContext, request: Any) -> Any:
    """LeaveGroup (see the module docstring)."""
    v = ctx.version
    if v < 3:
        members = [(text(request.member_id), None)]
    else:
        members = [(text(m.member_id), m.group_instance_id) for m in request.members or []]
    results: list[tuple[str, str | None, int]] = []
    if not may_read_group(ctx, text(request.group_id)):
        error = GROUP_AUTHORIZATION_FAILED
    else:
        error, results = coordinator_of(ctx).leave(group_id=text(request.group_id),
                                                   members=members)
    fields: dict[str, Any] = {}
    if v < 3:
        fields["error_code"] = error or (results[0][2] if results else NONE)
    else:
        cls = response_class(LEAVE_GROUP_KEY, v)
        fields["error_code"] = error
        fields["members"] = [cls.MemberResponse(member_id=mid, group_instance_id=iid,
                                                error_code=code)
                             for mid, iid, code in results]
    if v >= 1:
        fields["throttle_time_ms"] = 0
    return ctx.response(**fields)


@handles(LIST_GROUPS_KEY, 0, 5)
def list_groups(ctx: RequestContext, request: Any) -> Any:
    """ListGroups: the groups this broker coordinates (AdminClient asks every broker)."""
    v = ctx.version
    states = [text(x) for x in request.states_filter or []] if v >= 4 else []
    types = {text(t).lower() for t in (request.types_filter or [])} if v >= 5 else set()
    error = NONE
    try:
        groups = [] if types and "classic" not in types else \
            coordinator_of(ctx).list_groups(states)
    except GroupError as exc:  # COORDINATOR_LOAD_IN_PROGRESS: no list until it is loaded
        error, groups = exc.kafka_error_code, []
    if groups and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME,
                                    log_if_denied=False):
        visible = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                (g for g, _, _ in groups), log_if_denied=False)
        groups = [g for g in groups if g[0] in visible]
    cls = response_class(LIST_GROUPS_KEY, v)
    listed = [cls.ListedGroup(group_id=g, protocol_type=pt, group_state=st,
                              group_type="classic")
              for g, pt, st in groups]
    fields: dict[str, Any] = {"error_code": error, "groups": listed}
    if v >= 1:
        fields["throttle_time_ms"] = 0
    return cls(**fields)


@handles(DESCRIBE_GROUPS_KEY, 0, 6)
def describe_groups(ctx: RequestContext, request: Any) -> Any:
    """DescribeGroups: each group's state, protocol and members (metadata and assignment
    only while Stable, as Kafka); an unknown group is Dead (v6: GROUP_ID_NOT_FOUND)."""
    v = ctx.version
    coordinator = coordinator_of(ctx)
    cls = response_class(DESCRIBE_GROUPS_KEY, v)
    gcls = cls.DescribedGroup
    mcls = gcls.DescribedGroupMember
    ops_wanted = v >= 3 and bool(request.include_authorized_operations)
    asked = [text(g) for g in request.groups or []]
    describable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, asked)
    out = []
    for group_id in asked:
        if group_id not in describable:
            out.append(gcls(error_code=GROUP_AUTHORIZATION_FAILED, error_message=None,
                            group_id=group_id, group_state="", protocol_type="",
                            protocol_data="", members=[],
                            authorized_operations=OPS_NOT_REQUESTED))
            continue
        d = coordinator.describe(group_id)
        error, message = d.error, d.message
        if v >= 6 and not error and d.state == "Dead":
            error, message = GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist"
        members = [mcls(member_id=m.member_id, group_instance_id=m.group_instance_id,
                        client_id=m.client_id, client_host=m.client_host,
                        member_metadata=m.metadata, member_assignment=m.assignment)
                   for m in d.members]
        ops = (authorized_operations(ctx, ResourceType.GROUP, group_id) if ops_wanted
               else OPS_NOT_REQUESTED)
        out.append(gcls(error_code=error, error_message=message, group_id=group_id,
                        group_state=d.state, protocol_type=d.protocol_type,
                        protocol_data=d.protocol, members=members,
                        authorized_operations=ops if not error else OPS_NOT_REQUESTED))
    fields: dict[str, Any] = {"groups": out}
    if v >= 1:
        fields["throttle_time_ms"] = 0
    return cls(**fields)


@handles(DELETE_GROUPS_KEY, 0, 2)
def delete_groups(ctx: RequestContext, request: Any) -> Any:
    """DeleteGroups: an Empty group's offsets and metadata are deleted (NON_EMPTY_GROUP while
    it has members, GROUP_ID_NOT_FOUND when unknown)."""
    coordinator = coordinator_of(ctx)
    cls = response_class(DELETE_GROUPS_KEY, ctx.version)
    asked = [text(g) for g in request.groups_names or []]
    deletable = allowed_names(ctx, AclOperation.DELETE, ResourceType.GROUP, asked)
    results = [cls.DeletableGroupResult(
        group_id=g, error_code=coordinator.delete_group(g) if g in deletable
        else GROUP_AUTHORIZATION_FAILED) for g in asked]
    return cls(throttle_time_ms=0, results=results)
