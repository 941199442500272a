"""``kafka-tiers acls add|list|remove``: a cluster's ACLs through its Kafka listeners
(CreateAcls, DescribeAcls, DeleteAcls), with ``kafka-acls.sh``'s flag names, so the same
commands work against an Apache Kafka cluster.

Two ways to reach the ACLs (as ``kafka-tiers scram``):

- ``--bootstrap-server HOST:PORT`` (or ``$KAFKA_TIERS_BOOTSTRAP``, else 127.0.0.1:9092): the
  Kafka protocol. The broker answers only when it has an authorizer
  (``authorizer.class.name``, e.g. ``acl``) and the caller may manage ACLs (ALTER on the
  cluster to add or remove, DESCRIBE to list: a super user, or an ACL granting it).
- ``--dir DIR``, ``--config server.properties`` or ``--zookeeper-connect``: the security
  state written directly (:func:`~kafka_tiers.kafka.security.state_store.
  open_offline_store`), for the first ACLs before anyone can log in, only by the user owning
  the broker's files (Kafka's ``kafka-acls --authorizer-properties``). Running brokers see
  the change through their watch.

``--command-config FILE`` gives the client's security settings in Kafka's client property
names, so an admin reaches a SASL_SSL listener (:mod:`kafka_tiers.cli.command_config`).

Errors are one line (exit status 2): the broker's error name per refused entry
(``SECURITY_DISABLED``: the broker has no authorizer; ``CLUSTER_AUTHORIZATION_FAILED``: the
caller may not manage ACLs).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import click

from kafka_tiers.cli.output import FORMAT_OPTION, Seconds
from kafka_tiers.cli.security_store_options import SecurityTarget, security_store_options

#: the seconds a command waits for the cluster by default
DEFAULT_TIMEOUT = 15.0

_RESOURCES = ("topic", "group", "cluster", "transactional_id")

@contextlib.contextmanager
def _admin(at: SecurityTarget) -> Iterator[Any]:
    """kafka-python's admin client on ``at``'s listeners with its ``--command-config``
    settings (the CLI's :class:`~kafka_tiers.cli.kafka_admin.KafkaAdmin`); its errors as
    one-line :class:`~kafka_tiers.cli.kafka_admin.KafkaAdminError`."""
    from kafka_tiers.cli.kafka_admin import KafkaAdmin

    with KafkaAdmin(at.bootstrap_servers(), timeout=at.timeout,
                    settings={"client_id": "kafka-tiers-acls", **at.client_settings()}) as ka:
        yield ka.admin


def _operation(name: str) -> Any:
    from kafka_tiers.api.authorizer import AclOperation

    key = re.sub(r"[_\-\s]", "", name).lower()
    for op in AclOperation:
        if op.name.replace("_", "").lower() == key and op not in (AclOperation.UNKNOWN,
                                                                   AclOperation.ANY):
            return op
    choices = "Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, " \
        "AlterConfigs, IdempotentWrite, All"
    raise click.BadParameter(f"unknown operation {name!r}; one of {choices}",
                             param_hint="--operation")


def _resources(topic: Sequence[str], group: Sequence[str], cluster: bool,
               transactional_id: Sequence[str]) -> list[tuple[Any, str]]:
    from kafka_tiers.api.authorizer import CLUSTER_NAME, ResourceType

    found = [(ResourceType.TOPIC, t) for t in topic]
    found += [(ResourceType.GROUP, g) for g in group]
    found += [(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else []
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_id]
    return found


def _entries(allow_principal: Sequence[str], deny_principal: Sequence[str],
             allow_host: Sequence[str], deny_host: Sequence[str]) -> list[tuple[str, str, Any]]:
    """(principal, host, permission) of the principal and host flags (a principal without
    hosts: every host, ``*``)."""
    from kafka_tiers.api.authorizer import AclPermissionType, KafkaPrincipal

    out = []
    for principals, hosts, perm in ((allow_principal, allow_host, AclPermissionType.ALLOW),
                                    (deny_principal, deny_host, AclPermissionType.DENY)):
        for p in principals:
            try:
                KafkaPrincipal.parse(p)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--allow-principal/"
                                         "--deny-principal") from None
            for h in hosts or ("*",):
                out.append((p, h, perm))
    return out


def _pattern_type(text: str) -> Any:
    from kafka_tiers.api.authorizer import PatternType

    return PatternType[text.upper()]


class _Kafka:
    """ACLs through the Kafka protocol (CreateAcls, DescribeAcls, DeleteAcls) with
    kafka-python's admin client."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin

    def create(self, bindings: Sequence[Any]) -> None:
        import kafka.admin as kp

        from kafka_tiers.cli.kafka_admin import KafkaAdminError, _errors

        wanted = [kp.ACL(b.entry.principal, b.entry.host,
                         kp.ACLOperation(int(b.entry.operation)),
                         kp.ACLPermissionType(int(b.entry.permission_type)),
                         kp.ResourcePattern(kp.ResourceType(int(b.pattern.resource_type)),
                                            b.pattern.name, kp.ACLResourcePatternType(
                                                int(b.pattern.pattern_type))))
                  for b in bindings]
        with _errors("CreateAcls"):
            result = self.admin.create_acls(wanted)
        if result["failed"]:
            names = sorted({str(getattr(e, "message", None) or getattr(e, "__name__", e))
                            for e in result["failed"]})
            raise KafkaAdminError(f"CreateAcls: {len(result['failed'])} of {len(wanted)} ACLs "
                                  f"refused: {', '.join(names)}", names[0])

    def describe(self, filters: Sequence[Any]) -> list[Any]:
        from kafka_tiers.cli.kafka_admin import _errors

        found: list[Any] = []
        with _errors("DescribeAcls"):
            for flt in filters:
                listed, _ = self.admin.describe_acls(_to_kp_filter(flt))
                found.extend(_from_kp(a) for a in listed)
        return found

    def delete(self, filters: Sequence[Any]) -> list[Any]:
        from kafka_tiers.cli.kafka_admin import KafkaAdminError, _errors

        with _errors("DeleteAcls"):
            results = self.admin.delete_acls([_to_kp_filter(f) for f in filters])
        removed: list[Any] = []
        for _flt, matched, error in results:
            if getattr(error, "errno", 0):
                name = getattr(error, "message", None) or error.__name__
                raise KafkaAdminError(f"DeleteAcls: {name}", name)
            removed.extend(_from_kp(a) for a in matched)
        return removed


class _Direct:
    """ACLs written directly to the security state (no broker asked): for the first ACLs
    before anyone can log in, by the user owning the broker's files."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    def create(self, bindings: Sequence[Any]) -> None:
        self.storage.update(add=bindings)

    def describe(self, filters: Sequence[Any]) -> list[Any]:
        return [b for b in self.storage.load() if any(f.matches(b) for f in filters)]

    def delete(self, filters: Sequence[Any]) -> list[Any]:
        chosen = self.describe(filters)
        if chosen:
            self.storage.update(remove=chosen)
        return chosen


@contextlib.contextmanager
def _target(bootstrap: str | None, command_config: str | None, directory: str | None,
            config_path: str | None, zookeeper_connect: str | None, timeout: float
            ) -> Iterator[_Kafka | _Direct]:
    """Where the ACLs are: a cluster's Kafka listeners, or its security state directly
    (:class:`~kafka_tiers.cli.security_store_options.SecurityTarget`)."""
    at = SecurityTarget(bootstrap, command_config, directory, config_path, zookeeper_connect,
                        timeout)
    if at.direct:
        from kafka_tiers.kafka.security.acl_storage import StateStoreAclStorage

        with at.open_store() as store:
            yield _Direct(StateStoreAclStorage(store))
        return
    with _admin(at) as admin:
        yield _Kafka(admin)


def _plan(topic: Sequence[str], group: Sequence[str], cluster: bool,
          transactional_id: Sequence[str], operation: Sequence[str], producer: bool,
          consumer: bool, idempotent: bool, default: Any) -> list[tuple[Any, str, list[Any]]]:
    """(resource type, name, operations) of the resource and operation flags: the
    ``--operation`` values (``default`` when none) on every resource, or the operations of
    ``--producer`` / ``--consumer`` as kafka-acls.sh grants them.

    Raises:
        click.UsageError: flags kafka-acls.sh refuses together, or no resource.
    """
    from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType

    op = AclOperation
    if not (producer or consumer):
        if idempotent:
            raise click.UsageError("--idempotent goes with --producer")
        resources = _resources(topic, group, cluster, transactional_id)
        if not resources:
            raise click.UsageError("name a resource: --topic, --group, --cluster or "
                                   "--transactional-id")
        ops = [_operation(o) for o in operation] or [default]
        return [(rtype, name, ops) for rtype, name in resources]
    if operation or cluster:
        raise click.UsageError("--producer and --consumer name the operations and resources "
                               "themselves: drop --operation and --cluster")
    if not topic:
        raise click.UsageError("--producer and --consumer need --topic")
    if consumer and not group:
        raise click.UsageError("--consumer needs --group")
    if group and not consumer:
        raise click.UsageError("--group goes with --consumer (a producer has no group)")
    plan: dict[tuple[Any, str], list[Any]] = {}

    def grant(rtype: Any, names: Sequence[str], *ops: Any) -> None:
        for name in names:
            wanted = plan.setdefault((rtype, name), [])
            wanted.extend(o for o in ops if o not in wanted)

    if producer:
        grant(ResourceType.TOPIC, topic, op.WRITE, op.DESCRIBE, op.CREATE)
        grant(ResourceType.TRANSACTIONAL_ID, transactional_id, op.WRITE, op.DESCRIBE)
        if idempotent:
            grant(ResourceType.CLUSTER, [CLUSTER_NAME], op.IDEMPOTENT_WRITE)
    if consumer:
        grant(ResourceType.TOPIC, topic, op.READ, op.DESCRIBE)
        grant(ResourceType.GROUP, group, op.READ)
    return [(rtype, name, ops) for (rtype, name), ops in plan.items()]


def _resource_options(fn: Any) -> Any:
    options = [
        click.option("--topic", multiple=True, help="A topic (repeatable; '*': every topic)."),
        click.option("--group", multiple=True, help="A consumer group (repeatable)."),
        click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster)."),
        click.option("--transactional-id", "transactional_id", multiple=True,
                     help="A transactional id (repeatable)."),
        click.option("--timeout", type=Seconds(maximum=3600.0), default=DEFAULT_TIMEOUT,
                     show_default=True, help="Seconds to wait for the cluster."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return security_store_options(fn)


def _entry_options(fn: Any) -> Any:
    options = [
        click.option("--allow-principal", multiple=True, metavar="TYPE:NAME",
                     help="Principal allowed (User:alice; User:* for everyone; repeatable)."),
        click.option("--deny-principal", multiple=True, metavar="TYPE:NAME",
                     help="Principal denied (repeatable)."),
        click.option("--allow-host", multiple=True,
                     help="Host (IP) the allowed principals may connect from (default *)."),
        click.option("--deny-host", multiple=True,
                     help="Host (IP) the denied principals are denied from (default *)."),
        click.option("--operation", multiple=True,
                     help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                     "DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable)."),
        click.option("--producer", is_flag=True,
                     help="A producer's operations: Write, Describe, Create on the topics, "
                     "Write, Describe on the transactional ids (kafka-acls.sh's shortcut)."),
        click.option("--consumer", is_flag=True,
                     help="A consumer's operations: Read, Describe on the topics, Read on the "
                     "groups (needs --group)."),
        click.option("--idempotent", is_flag=True,
                     help="With --producer: IdempotentWrite on the cluster too."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


def _row(b: Any) -> dict[str, str]:
    p, e = b.pattern, b.entry
    return {"resource_type": p.resource_type.name, "pattern_type": p.pattern_type.name,
            "name": p.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permission_type": e.permission_type.name}


def _from_kp(a: Any) -> Any:
    """A kafka-python ACL as our AclBinding."""
    from kafka_tiers.api.authorizer import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    rp = a.resource_pattern
    return AclBinding(ResourcePattern(ResourceType(int(rp.resource_type)), rp.resource_name,
                                      PatternType(int(rp.pattern_type))),
                      AccessControlEntry(a.principal, a.host, AclOperation(int(a.operation)),
                                         AclPermissionType(int(a.permission_type))))


def _to_kp_filter(f: Any) -> Any:
    """Our AclBindingFilter as kafka-python's ACLFilter."""
    import kafka.admin as kp

    return kp.ACLFilter(f.principal, f.host, kp.ACLOperation(int(f.operation)),
                        kp.ACLPermissionType(int(f.permission_type)),
                        kp.ResourcePatternFilter(kp.ResourceType(int(f.resource_type)), f.name,
                                                 kp.ACLResourcePatternType(
                                                     int(f.pattern_type))))


_COLUMNS = ("resource_type", "pattern_type", "name", "principal", "host", "operation",
            "permission_type")


def _show(rows: list[dict[str, str]], fmt: str, key: str, empty: str) -> None:
    from kafka_tiers.cli.output import console, emit_json

    if fmt == "json":
        emit_json({key: rows})
        return
    if not rows:
        if empty:
            click.echo(empty)
        return
    from rich.table import Table

    table = Table(box=None)
    for col in _COLUMNS:
        table.add_column(col.upper().replace("_TYPE", ""))
    for r in rows:
        table.add_row(*(r[c] for c in _COLUMNS))
    console().print(table)


def _sorted_rows(bindings: Iterable[Any]) -> list[dict[str, str]]:
    rows = {tuple(_row(b).values()): _row(b) for b in bindings}
    return [rows[k] for k in sorted(rows)]


@click.group()
def acls() -> None:
    """Add, list and remove a cluster's ACLs (Kafka's kafka-acls.sh), through its Kafka
    listeners (--bootstrap-server, --command-config), or directly in its security state
    (--dir, --config, --zookeeper-connect: the first ACLs, by the owner of the files).

    \b
    Examples:
      kafka-tiers acls add --bootstrap-server 127.0.0.1:9092 \\
          --allow-principal User:alice --operation Read --topic orders
      kafka-tiers acls add --bootstrap-server 127.0.0.1:9092 --allow-principal User:bob \\
          --operation Write --topic orders- --resource-pattern-type prefixed
      kafka-tiers acls list --bootstrap-server 127.0.0.1:9092 --topic orders --format json
      kafka-tiers acls remove --bootstrap-server 127.0.0.1:9092 --topic orders \\
          --allow-principal User:alice --command-config admin.properties
      kafka-tiers acls add --config server.properties --allow-principal User:admin --cluster
    """


@acls.command("add")
@_resource_options
@_entry_options
@click.option("--resource-pattern-type", type=click.Choice(["literal", "prefixed"],
              case_sensitive=False), default="literal", show_default=True,
              help="literal: the names exactly ('*': all); prefixed: names starting so.")
@FORMAT_OPTION
def add(bootstrap: str | None, command_config: str | None, directory: str | None,
        config_path: str | None, zookeeper_connect: str | None, topic: tuple[str, ...],
        group: tuple[str, ...], cluster: bool, transactional_id: tuple[str, ...],
        timeout: float, allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
        allow_host: tuple[str, ...], deny_host: tuple[str, ...], operation: tuple[str, ...],
        producer: bool, consumer: bool, idempotent: bool, resource_pattern_type: str,
        fmt: str) -> None:
    """Add ACLs: each principal x host x operation on each resource given (adding one that
    exists changes nothing).

    Operations default to All. The operations a resource type takes are Kafka's (a group:
    Read, Describe, Delete; the cluster: Create, ClusterAction, DescribeConfigs,
    AlterConfigs, IdempotentWrite, Alter, Describe; a transactional id: Describe, Write).
    The cluster's ACLs are always literal.
    """
    from kafka_tiers.api.authorizer import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        PatternType,
        ResourcePattern,
        ResourceType,
    )
    from kafka_tiers.kafka.security.acl_authorizer import SUPPORTED_OPERATIONS, binding_problem

    plan = _plan(topic, group, cluster, transactional_id, operation, producer, consumer,
                 idempotent, AclOperation.ALL)
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    if not entries:
        raise click.UsageError("name a principal: --allow-principal or --deny-principal")
    ptype = _pattern_type(resource_pattern_type)
    bindings = []
    for rtype, name, ops in plan:
        pattern = ResourcePattern(rtype, name, PatternType.LITERAL
                                  if rtype == ResourceType.CLUSTER else ptype)
        for op in ops:
            if op != AclOperation.ALL and op not in SUPPORTED_OPERATIONS[rtype]:
                supported = ", ".join(sorted(o.name for o in SUPPORTED_OPERATIONS[rtype]))
                raise click.UsageError(f"{rtype.name} does not take operation {op.name} "
                                       f"(it takes {supported}, ALL)")
            for principal, host, perm in entries:
                b = AclBinding(pattern, AccessControlEntry(principal, host, op, perm))
                problem = binding_problem(b)
                if problem is not None:
                    raise click.UsageError(problem)
                bindings.append(b)
    with _target(bootstrap, command_config, directory, config_path, zookeeper_connect,
                 timeout) as where:
        where.create(bindings)
    rows = [_row(b) for b in bindings]
    if fmt != "json":
        click.echo(f"created {len(rows)} ACL(s)")
    _show(rows, fmt, "created", "")


def _filters(plan: Sequence[tuple[Any, str | None, Sequence[Any]]], ptype_text: str | None,
             entries: Sequence[tuple[str | None, str | None, Any]]) -> list[Any]:
    """Filters for each planned resource and operation (a resource of ``None`` name: every
    resource), and each (principal, host, permission) entry."""
    from kafka_tiers.api.authorizer import AclBindingFilter, PatternType, ResourceType

    out = []
    for rtype, name, ops in plan:
        if ptype_text is not None:
            ptype = _pattern_type(ptype_text)
        elif name is None:
            ptype = PatternType.ANY
        else:
            ptype = PatternType.LITERAL
        if rtype == ResourceType.CLUSTER and ptype == PatternType.PREFIXED:
            ptype = PatternType.LITERAL  # the cluster's ACLs are literal
        out += [AclBindingFilter(rtype, name, ptype, principal, host, op, perm)
                for principal, host, perm in entries for op in ops]
    return out


_PATTERN_FILTER = click.option(
    "--resource-pattern-type", type=click.Choice(["literal", "prefixed", "any", "match"],
                                                  case_sensitive=False),
    help="literal (the default with a resource), prefixed, any (the default without one), "
    "or match (every ACL that applies to the named resource).")


@acls.command("list")
@_resource_options
@_PATTERN_FILTER
@click.option("--principal", help="Only the ACLs of this principal (TYPE:NAME).")
@FORMAT_OPTION
def list_(bootstrap: str | None, command_config: str | None, directory: str | None,
          config_path: str | None, zookeeper_connect: str | None, topic: tuple[str, ...],
          group: tuple[str, ...], cluster: bool, transactional_id: tuple[str, ...],
          timeout: float, resource_pattern_type: str | None, principal: str | None,
          fmt: str) -> None:
    """List ACLs: all, or those of the resources (and principal) given."""
    from kafka_tiers.api.authorizer import AclOperation, AclPermissionType, ResourceType

    resources: list[tuple[Any, str | None]] = list(
        _resources(topic, group, cluster, transactional_id)) or [(ResourceType.ANY, None)]
    filters = _filters([(rtype, name, [AclOperation.ANY]) for rtype, name in resources],
                       resource_pattern_type, [(principal, None, AclPermissionType.ANY)])
    with _target(bootstrap, command_config, directory, config_path, zookeeper_connect,
                 timeout) as where:
        found = where.describe(filters)
    _show(_sorted_rows(found), fmt, "acls", "no ACLs")


@acls.command("remove")
@_resource_options
@_entry_options
@_PATTERN_FILTER
@FORMAT_OPTION
def remove(bootstrap: str | None, command_config: str | None, directory: str | None,
           config_path: str | None, zookeeper_connect: str | None, topic: tuple[str, ...],
           group: tuple[str, ...], cluster: bool, transactional_id: tuple[str, ...],
           timeout: float, allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
           allow_host: tuple[str, ...], deny_host: tuple[str, ...],
           operation: tuple[str, ...], producer: bool, consumer: bool, idempotent: bool,
           resource_pattern_type: str | None, fmt: str) -> None:
    """Remove the ACLs of the resources given: all of them, or only those of the principals,
    hosts and operations given (removing none is not an error)."""
    from kafka_tiers.api.authorizer import AclOperation, AclPermissionType

    plan = _plan(topic, group, cluster, transactional_id, operation, producer, consumer,
                 idempotent, AclOperation.ANY)
    entries: list[tuple[str | None, str | None, Any]] = list(
        _entries(allow_principal, deny_principal, allow_host, deny_host))
    if not entries:
        entries = [(None, None, AclPermissionType.ANY)]
    elif not (allow_host or deny_host):
        entries = [(p, None, perm) for p, _h, perm in entries]  # any host
    filters = _filters(plan, resource_pattern_type, entries)
    with _target(bootstrap, command_config, directory, config_path, zookeeper_connect,
                 timeout) as where:
        removed = where.delete(filters)
    rows = _sorted_rows(removed)
    if fmt != "json":
        click.echo(f"removed {len(rows)} ACL(s)")
    _show(rows, fmt, "removed", "")


__all__ = ["acls"]
