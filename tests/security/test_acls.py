"""The ACL authorizer (part 4 of issue 15): Kafka's decision rules, loading by
``authorizer.class.name``, the ACL storage in the security state store, CreateAcls /
DescribeAcls / DeleteAcls with kafka-python's and confluent-kafka's admin clients on a
standalone broker and a 3-broker cluster, and ``kafka-tiers acls``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api.authorizer import (
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
    ResourcePattern,
    ResourceType,
)
from kafka_tiers.api.errors import ConfigError, PluginError
from kafka_tiers.kafka.security.acl_authorizer import (
    AclAuthorizer,
    AclIndex,
    binding_problem,
    parse_super_users,
)
from kafka_tiers.kafka.security.acl_storage import StateStoreAclStorage
from kafka_tiers.kafka.security.authorizer_loader import load_authorizer
from kafka_tiers.kafka.security.state_store import FileStateStore, SecurityStateError
from tests.kafka.admin_helpers import roundtrip, wait_for

OP, PERM, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOW, DENY = PERM.ALLOW, PERM.DENY
SUPER = {"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}
"""A broker whose PLAINTEXT clients (principal User:ANONYMOUS) may manage ACLs."""


# ---------------------------------------------------------------------- helpers


class MemoryAclStorage(AclStorage):
    """ACLs in a set; watchers called synchronously (as the state store's on this broker)."""

    def __init__(self, acls: Iterable[AclBinding] = ()) -> None:
        self.acls = set(acls)
        self.callbacks: list[Callable[[list[AclBinding]], None]] = []

    def load(self) -> list[AclBinding]:
        return list(self.acls)

    def update(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()
               ) -> list[AclBinding]:
        self.acls = (self.acls - set(remove)) | set(add)
        for cb in self.callbacks:
            cb(list(self.acls))
        return list(self.acls)

    def watch(self, callback: Any) -> None:
        self.callbacks.append(callback)
        callback(list(self.acls))


def acl(principal: str, op: AclOperation, name: str, perm: AclPermissionType = ALLOW, *,
        rtype: ResourceType = RT.TOPIC, ptype: PatternType = PT.LITERAL,
        host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, ptype),
                      AccessControlEntry(principal, host, op, perm))


def authorizer(*acls: AclBinding, **config: str) -> AclAuthorizer:
    a = AclAuthorizer()
    a.configure({"super.users": "", "allow.everyone.if.no.acl.found": "false", **config})
    a.start(MemoryAclStorage(acls))
    return a


def identity(principal: str = "User:alice", host: str = "10.0.0.1") -> RequestIdentity:
    return RequestIdentity(KafkaPrincipal.parse(principal), host, "PLAINTEXT", "PLAINTEXT")


def allowed(a: Authorizer, op: AclOperation, name: str, principal: str = "User:alice", *,
            rtype: ResourceType = RT.TOPIC, host: str = "10.0.0.1") -> bool:
    [result] = a.authorize(identity(principal, host), [Action(op, rtype, name)])
    return result == AuthorizationResult.ALLOWED


# ---------------------------------------------------------------------- decisions


def test_a_super_user_is_allowed_everything_even_against_a_deny() -> None:
    a = authorizer(acl("User:admin", OP.ALL, "orders", DENY),
                   **{"super.users": "User:admin; User:CN=broker,O=example"})
    assert allowed(a, OP.WRITE, "orders", "User:admin")
    assert allowed(a, OP.ALTER, "kafka-cluster", "User:CN=broker,O=example",
                   rtype=RT.CLUSTER)
    assert not allowed(a, OP.WRITE, "orders", "User:alice")


def test_without_any_acl_on_the_resource_allow_everyone_decides() -> None:
    closed = authorizer()
    assert not allowed(closed, OP.READ, "orders")
    opened = authorizer(**{"allow.everyone.if.no.acl.found": "true"})
    assert allowed(opened, OP.READ, "orders")
    assert allowed(opened, OP.CREATE, "kafka-cluster", rtype=RT.CLUSTER)
    # any ACL on the resource, whoever it names, takes the decision away from the flag
    guarded = authorizer(acl("User:bob", OP.READ, "orders"),
                         **{"allow.everyone.if.no.acl.found": "true"})
    assert not allowed(guarded, OP.READ, "orders", "User:alice")
    assert allowed(guarded, OP.READ, "payments", "User:alice")  # no ACL there


def test_read_but_not_write_and_deny_wins_over_allow() -> None:
    a = authorizer(acl("User:alice", OP.READ, "orders"))
    assert allowed(a, OP.READ, "orders")
    assert not allowed(a, OP.WRITE, "orders")
    assert not allowed(a, OP.READ, "orders", "User:bob")
    both = authorizer(acl("User:alice", OP.READ, "orders"),
                      acl("User:alice", OP.READ, "orders", DENY))
    assert not allowed(both, OP.READ, "orders")
    everyone_denied = authorizer(acl("User:alice", OP.ALL, "orders"),
                                 acl("User:*", OP.READ, "orders", DENY))
    assert not allowed(everyone_denied, OP.READ, "orders")
    assert allowed(everyone_denied, OP.WRITE, "orders")
    prefixed_deny = authorizer(acl("User:alice", OP.WRITE, "orders-eu"),
                               acl("User:alice", OP.WRITE, "orders-", DENY, ptype=PT.PREFIXED))
    assert not allowed(prefixed_deny, OP.WRITE, "orders-eu")


def test_a_prefixed_acl_covers_every_name_starting_with_it() -> None:
    a = authorizer(acl("User:alice", OP.WRITE, "orders-", ptype=PT.PREFIXED),
                   acl("User:alice", OP.READ, "o", ptype=PT.PREFIXED))
    for name in ("orders-", "orders-eu", "orders-us-2"):
        assert allowed(a, OP.WRITE, name)
    assert not allowed(a, OP.WRITE, "orders")
    assert not allowed(a, OP.WRITE, "ordersx")
    assert not allowed(a, OP.WRITE, "xorders-eu")
    assert allowed(a, OP.READ, "orders-eu")  # the shorter prefix too
    assert not allowed(a, OP.READ, "payments")


def test_wildcards_principal_host_and_resource() -> None:
    a = authorizer(acl("User:*", OP.READ, "public"),
                   acl("User:alice", OP.WRITE, "public", host="10.0.0.1"),
                   acl("User:carol", OP.READ, "*"))
    assert allowed(a, OP.READ, "public", "User:anyone")
    assert allowed(a, OP.WRITE, "public", host="10.0.0.1")
    assert not allowed(a, OP.WRITE, "public", host="10.0.0.2")
    assert allowed(a, OP.READ, "whatever", "User:carol")
    assert allowed(a, OP.READ, "public", "User:carol")
    assert not allowed(a, OP.READ, "whatever", "User:alice")
    # a literal "*" is every topic, not every resource type
    assert not allowed(a, OP.READ, "whatever", "User:carol", rtype=RT.GROUP)


def test_hosts_match_however_the_address_is_written() -> None:
    a = authorizer(acl("User:alice", OP.READ, "t", host="0:0:0:0:0:0:0:1"),
                   acl("User:alice", OP.WRITE, "t", host="10.0.0.7"))
    assert allowed(a, OP.READ, "t", host="::1")
    assert allowed(a, OP.WRITE, "t", host="::ffff:10.0.0.7")  # a dual-stack listener's peer
    assert not allowed(a, OP.WRITE, "t", host="10.0.0.8")
    # the ACL is listed as it was given
    assert a.acls(AclBindingFilter(operation=OP.READ))[0].entry.host == "0:0:0:0:0:0:0:1"


def test_implied_operations_are_allow_only_as_kafka() -> None:
    for op in (OP.READ, OP.WRITE, OP.DELETE, OP.ALTER):
        assert allowed(authorizer(acl("User:alice", op, "t")), OP.DESCRIBE, "t"), op
    for op in (OP.CREATE, OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS):
        assert not allowed(authorizer(acl("User:alice", op, "t")), OP.DESCRIBE, "t"), op
    assert not allowed(authorizer(acl("User:alice", OP.DESCRIBE, "t")), OP.READ, "t")
    assert allowed(authorizer(acl("User:alice", OP.ALTER_CONFIGS, "t")),
                   OP.DESCRIBE_CONFIGS, "t")
    assert not allowed(authorizer(acl("User:alice", OP.DESCRIBE_CONFIGS, "t")),
                       OP.ALTER_CONFIGS, "t")
    # a DENY implies nothing: DENY DESCRIBE leaves READ, DENY READ leaves DESCRIBE
    a = authorizer(acl("User:alice", OP.READ, "t"), acl("User:alice", OP.DESCRIBE, "t", DENY))
    assert allowed(a, OP.READ, "t")
    assert not allowed(a, OP.DESCRIBE, "t")
    b = authorizer(acl("User:alice", OP.READ, "t"), acl("User:alice", OP.WRITE, "t"),
                   acl("User:alice", OP.READ, "t", DENY))
    assert not allowed(b, OP.READ, "t")
    assert allowed(b, OP.DESCRIBE, "t")
    # ALL covers every operation, allow or deny
    c = authorizer(acl("User:alice", OP.ALL, "t"))
    assert all(allowed(c, op, "t") for op in (OP.READ, OP.WRITE, OP.DESCRIBE, OP.ALTER_CONFIGS))
    d = authorizer(acl("User:alice", OP.READ, "t"), acl("User:alice", OP.ALL, "t", DENY))
    assert not allowed(d, OP.READ, "t")


def test_resource_types_are_separate_and_results_are_per_action() -> None:
    a = authorizer(acl("User:alice", OP.READ, "billing", rtype=RT.GROUP))
    assert allowed(a, OP.READ, "billing", rtype=RT.GROUP)
    assert not allowed(a, OP.READ, "billing", rtype=RT.TOPIC)
    results = a.authorize(identity(), [Action(OP.READ, RT.GROUP, "billing"),
                                       Action(OP.READ, RT.TOPIC, "billing"),
                                       Action(OP.DESCRIBE, RT.GROUP, "billing")])
    assert results == [AuthorizationResult.ALLOWED, AuthorizationResult.DENIED,
                       AuthorizationResult.ALLOWED]


def test_the_index_follows_the_storage_watch() -> None:
    storage = MemoryAclStorage()
    a = AclAuthorizer()
    a.configure({})
    a.start(storage)
    assert not allowed(a, OP.READ, "orders")
    storage.update(add=[acl("User:alice", OP.READ, "orders")])  # another broker's change
    assert allowed(a, OP.READ, "orders")
    storage.update(remove=[acl("User:alice", OP.READ, "orders")])
    assert not allowed(a, OP.READ, "orders")


def test_the_index_finds_prefixes_of_several_lengths() -> None:
    index = AclIndex([acl("User:a", OP.READ, p, ptype=PT.PREFIXED)
                      for p in ("a", "ab", "abc", "b", "abcdefgh")] +
                     [acl("User:a", OP.READ, "abc"), acl("User:a", OP.READ, "*")])
    assert len(index.matching(RT.TOPIC, "abcd")) == 3 + 1  # a, ab, abc and *
    assert len(index.matching(RT.TOPIC, "abc")) == 3 + 2  # a, ab, abc, literal abc, *
    assert len(index.matching(RT.TOPIC, "zz")) == 1  # *
    assert index.matching(RT.GROUP, "abc") == []


def test_create_delete_and_list_through_the_authorizer() -> None:
    a = authorizer()
    good = acl("User:alice", OP.READ, "orders")
    prefixed = acl("User:bob", OP.WRITE, "orders-", ptype=PT.PREFIXED)
    bad = acl("alice", OP.READ, "orders")
    assert a.create_acls(identity(), [good, bad, prefixed]) == [
        None, binding_problem(bad), None]
    assert a.create_acls(identity(), [good]) == [None]  # idempotent
    assert set(a.acls(AclBindingFilter())) == {good, prefixed}
    match = AclBindingFilter(resource_type=RT.TOPIC, name="orders-eu",
                             pattern_type=PT.MATCH)
    assert a.acls(match) == [prefixed]
    result = a.delete_acls(identity(), [AclBindingFilter(principal="User:bob"),
                                        AclBindingFilter(), AclBindingFilter(name="none")])
    assert result == [[prefixed], [good], []]  # each ACL under the first filter selecting it
    assert a.acls(AclBindingFilter()) == []


@pytest.mark.parametrize("binding, problem", [
    (acl("User:a", OP.READ, ""), "empty"),
    (acl("User:a", OP.ALTER, "my-cluster", rtype=RT.CLUSTER), "kafka-cluster"),
    (acl("User:a", OP.READ, "t", ptype=PT.MATCH), "pattern type MATCH"),
    (acl("User:a", OP.READ, "t", ptype=PT.ANY), "pattern type ANY"),
    (acl("User:a", OP.ANY, "t"), "operation ANY"),
    (acl("User:a", OP.UNKNOWN, "t"), "operation UNKNOWN"),
    (acl("User:a", OP.READ, "t", PERM.ANY), "permission type ANY"),
    (acl("alice", OP.READ, "t"), "principal"),
    (acl("User:a", OP.READ, "t", rtype=RT.ANY), "resource type ANY"),
    (acl("User:a", OP.READ, "t", host=""), "host"),
])
def test_a_new_acl_is_checked_as_kafka_checks_it(binding: AclBinding, problem: str) -> None:
    found = binding_problem(binding)
    assert found is not None and problem in found
    assert binding_problem(acl("User:a", OP.ALTER, "kafka-cluster", rtype=RT.CLUSTER)) is None


def test_super_users_parse_and_refuse_items_without_a_type() -> None:
    assert parse_super_users(" User:a ;User:CN=b,O=c;; ") == {"User:a", "User:CN=b,O=c"}
    with pytest.raises(ConfigError, match=r"super\.users"):
        parse_super_users("User:a;admin")
    with pytest.raises(ConfigError, match=r"allow\.everyone"):
        AclAuthorizer().configure({"allow.everyone.if.no.acl.found": "maybe"})


def test_the_broker_config_refuses_a_bad_super_user() -> None:
    from kafka_tiers.config import BrokerConfig

    with pytest.raises(ConfigError, match=r"super\.users"):
        BrokerConfig({"super.users": "admin"})
    assert BrokerConfig({})["allow.everyone.if.no.acl.found"] is False
    assert BrokerConfig({})["authorizer.class.name"] == ""


# ---------------------------------------------------------------------- loading


class RecordingAuthorizer(Authorizer):
    """A plugin authorizer (loaded by import path): allows READ only; records its life."""

    instances: list[RecordingAuthorizer] = []

    def __init__(self) -> None:
        self.events: list[str] = []
        RecordingAuthorizer.instances.append(self)

    def configure(self, config: Mapping[str, Any]) -> None:
        self.events.append(f"configure broker.id={config['broker.id']}")

    def start(self, storage: AclStorage) -> None:
        self.events.append(f"start {type(storage).__name__}")

    def authorize(self, identity: RequestIdentity, actions: Sequence[Action]
                  ) -> list[AuthorizationResult]:
        return [AuthorizationResult.ALLOWED if a.operation == OP.READ
                else AuthorizationResult.DENIED for a in actions]

    def create_acls(self, identity: RequestIdentity, bindings: Sequence[AclBinding]
                    ) -> list[str | None]:
        raise RuntimeError("read-only authorizer")

    def delete_acls(self, identity: RequestIdentity, filters: Sequence[AclBindingFilter]
                    ) -> list[list[AclBinding] | str]:
        return ["read-only authorizer"] * len(filters)

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [acl("User:x", OP.READ, "fixed")]

    def close(self) -> None:
        self.events.append("close")


class NotAnAuthorizer:
    pass


@pytest.mark.parametrize("name", ["acl", "kafka.security.authorizer.AclAuthorizer",
                                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer"])
def test_the_built_in_authorizer_loads_by_name_and_by_kafkas_class_names(name: str) -> None:
    a = load_authorizer({"authorizer.class.name": name, "super.users": "User:admin",
                         "allow.everyone.if.no.acl.found": True})
    assert isinstance(a, AclAuthorizer)
    assert a.super_users == {"User:admin"} and a.allow_everyone_if_no_acl_found


def test_no_authorizer_unless_named_and_an_import_path_loads() -> None:
    assert load_authorizer({"authorizer.class.name": ""}) is None
    assert load_authorizer({}) is None
    a = load_authorizer({"authorizer.class.name": f"{__name__}:RecordingAuthorizer",
                         "broker.id": 7})
    assert isinstance(a, RecordingAuthorizer) and a.events == ["configure broker.id=7"]


def test_an_unknown_authorizer_is_one_config_error_naming_the_installed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        load_authorizer({"authorizer.class.name": "ranger"})
    assert "unknown authorizer 'ranger'" in str(err.value)
    assert "installed: acl" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(PluginError, match=r"not a subclass of kafka_tiers\.api\.Authorizer"):
        load_authorizer({"authorizer.class.name": f"{__name__}:NotAnAuthorizer"})
    with pytest.raises(PluginError, match="cannot be imported"):
        load_authorizer({"authorizer.class.name": "no_such_module_x:Authorizer"})


def test_config_check_names_an_unknown_authorizer_but_takes_kafkas_class_names() -> None:
    from kafka_tiers.config import BrokerConfig

    for name in ("acl", "kafka.security.authorizer.AclAuthorizer",
                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "pkg.mod:Cls", ""):
        BrokerConfig({"authorizer.class.name": name}).check_plugins()
    with pytest.raises(ConfigError, match="did you mean acl"):
        BrokerConfig({"authorizer.class.name": "acll"}).check_plugins()


def test_a_broker_with_an_unknown_authorizer_does_not_start(tmp_path: Path) -> None:
    from kafka_tiers.broker.broker import Broker

    broker = Broker({"broker.id": "1", "log.dirs": str(tmp_path / "d"),
                     "listeners": "PLAINTEXT://127.0.0.1:0", "authorizer.class.name": "nope"})
    with pytest.raises(ConfigError, match="unknown authorizer 'nope'"):
        broker.start()
    assert not broker.started


def test_a_plugin_authorizer_is_configured_started_used_and_closed(
        make_kafka_broker: Callable[..., Any]) -> None:
    RecordingAuthorizer.instances.clear()
    broker = make_kafka_broker(**{"authorizer.class.name": f"{__name__}:RecordingAuthorizer"})
    [a] = RecordingAuthorizer.instances
    assert broker.kafka_server.authorizer is a
    assert a.events == ["configure broker.id=1", "start StateStoreAclStorage"]
    bs = broker.bootstrap_servers
    # DescribeAcls needs DESCRIBE on the cluster: this plugin allows READ only
    denied = roundtrip(bs, 29, 1, resource_type_filter=1, resource_name_filter=None,
                       pattern_type_filter=1, principal_filter=None, host_filter=None,
                       operation=1, permission_type=1)
    assert denied.error_code == 31
    broker.shutdown()
    assert a.events[-1] == "close"


# ---------------------------------------------------------------------- storage


def test_the_acl_storage_keeps_acls_in_the_state_store(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path, poll_s=0)
    storage = StateStoreAclStorage(store)
    seen: list[set[AclBinding]] = []
    storage.watch(lambda acls: seen.append(set(acls)))
    assert seen == [set()]
    a1, a2 = acl("User:a", OP.READ, "t"), acl("User:b", OP.WRITE, "p-", DENY, ptype=PT.PREFIXED)
    assert set(storage.update(add=[a1, a2])) == {a1, a2}
    assert seen[-1] == {a1, a2}  # delivered before update returned
    assert set(storage.update(remove=[a1])) == {a2}
    assert seen[-1] == {a2}
    doc = json.loads((tmp_path / "kafka-tiers-security-acls.json").read_text())["data"]
    assert doc["acls"] == {"TOPIC": {"PREFIXED": {"p-": [["User:b", "*", "WRITE", "DENY"]]}}}
    assert doc["serial"] == 1  # 0 for the first write, then one more per change
    # another storage on the same directory (a restart) reads the same set
    assert StateStoreAclStorage(FileStateStore(tmp_path, poll_s=0)).load() == [a2]
    store.close()


def test_the_acl_storage_is_bounded_and_refuses_unreadable_documents(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path, poll_s=0)
    storage = StateStoreAclStorage(store, max_acls=2)
    storage.update(add=[acl("User:a", OP.READ, "t1"), acl("User:a", OP.READ, "t2")])
    with pytest.raises(SecurityStateError, match="above the limit of 2; delete at least 1"):
        storage.update(add=[acl("User:a", OP.READ, "t3")])
    assert len(storage.load()) == 2  # nothing changed
    storage.update(add=[acl("User:a", OP.READ, "t3")], remove=[acl("User:a", OP.READ, "t1")])
    assert len(storage.load()) == 2
    store.update("acls", lambda doc: {"serial": 9, "acls": {"TOPIC": {"LITERAL": {
        "t": [["User:a", "*", "NO_SUCH_OP", "ALLOW"]]}}}})
    with pytest.raises(SecurityStateError, match="unreadable entry"):
        storage.load()
    store.close()


def test_a_watcher_never_gets_an_older_set_than_it_had(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path, poll_s=0)
    storage = StateStoreAclStorage(store)
    seen: list[int] = []
    storage.watch(lambda acls: seen.append(len(acls)))
    storage.update(add=[acl("User:a", OP.READ, "t1")])  # serial 0
    storage.update(add=[acl("User:a", OP.READ, "t2")])  # serial 1
    from kafka_tiers.kafka.security.acl_storage import encode

    # the store's watch delivering serial 0 late (it read before the second write landed)
    storage._deliver(encode([acl("User:a", OP.READ, "t1")], 0))
    assert seen == [0, 1, 2]  # each set once, the late older one not at all
    store.close()


# ---------------------------------------------------------------------- the APIs

ANY_FILTER = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                  principal_filter=None, host_filter=None, operation=1, permission_type=1)


def creation(version: int, rtype: int = 2, name: str = "orders", ptype: int = 3,
             principal: str = "User:alice", host: str = "*", op: int = 3,
             perm: int = 3) -> Any:
    from kafka_tiers.kafka.codec import REQUESTS

    return REQUESTS[30][version].AclCreation(
        resource_type=rtype, resource_name=name, resource_pattern_type=ptype,
        principal=principal, host=host, operation=op, permission_type=perm)


def delete_filter(version: int, **fields: Any) -> Any:
    from kafka_tiers.kafka.codec import REQUESTS

    return REQUESTS[31][version].DeleteAclsFilter(**{**ANY_FILTER, **fields})


def kp_admin(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)


def kp_acl_types() -> Any:
    """kafka-python's ACL types (ACL, ACLFilter, ResourcePattern, ...): its admin package."""
    import kafka.admin
    return kafka.admin


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(
        make_kafka_broker: Callable[..., Any]) -> None:
    import kafka.errors

    bs = make_kafka_broker().bootstrap_servers
    created = roundtrip(bs, 30, 1, creations=[creation(1)])
    assert [r.error_code for r in created.results] == [54]
    assert roundtrip(bs, 29, 1, **ANY_FILTER).error_code == 54
    deleted = roundtrip(bs, 31, 1, filters=[delete_filter(1)])
    assert [r.error_code for r in deleted.filter_results] == [54]
    t = kp_acl_types()
    admin = kp_admin(bs)
    try:
        with pytest.raises(kafka.errors.SecurityDisabledError):
            admin.describe_acls(t.ACLFilter(None, None, t.ACLOperation.ANY,
                                            t.ACLPermissionType.ANY, t.ResourcePatternFilter(
                                                t.ResourceType.ANY, None,
                                                t.ACLResourcePatternType.ANY)))
    finally:
        admin.close()


def test_kafka_python_admin_creates_describes_and_deletes_acls(
        make_kafka_broker: Callable[..., Any]) -> None:
    broker = make_kafka_broker(**SUPER)
    t = kp_acl_types()
    admin = kp_admin(broker.bootstrap_servers)
    try:
        read = t.ACL("User:alice", "*", t.ACLOperation.READ, t.ACLPermissionType.ALLOW,
                     t.ResourcePattern(t.ResourceType.TOPIC, "orders"))
        deny = t.ACL("User:bob", "10.1.2.3", t.ACLOperation.WRITE, t.ACLPermissionType.DENY,
                     t.ResourcePattern(t.ResourceType.TOPIC, "orders-",
                                       t.ACLResourcePatternType.PREFIXED))
        group = t.ACL("User:alice", "*", t.ACLOperation.READ, t.ACLPermissionType.ALLOW,
                      t.ResourcePattern(t.ResourceType.GROUP, "billing"))
        result = admin.create_acls([read, deny, group])
        assert result["failed"] == [] and len(result["succeeded"]) == 3
        everything = t.ACLFilter(None, None, t.ACLOperation.ANY, t.ACLPermissionType.ANY,
                                 t.ResourcePatternFilter(t.ResourceType.ANY, None,
                                                         t.ACLResourcePatternType.ANY))
        listed, error = admin.describe_acls(everything)
        assert error is kafka_errors().NoError and set(listed) == {read, deny, group}
        topics = t.ACLFilter(None, None, t.ACLOperation.ANY, t.ACLPermissionType.ANY,
                             t.ResourcePatternFilter(t.ResourceType.TOPIC, "orders-eu",
                                                     t.ACLResourcePatternType.MATCH))
        assert admin.describe_acls(topics)[0] == [deny]
        # the authorizer decides by them at once
        a = broker.kafka_server.authorizer
        assert allowed(a, OP.READ, "orders") and not allowed(a, OP.WRITE, "orders")
        [(_, gone, err)] = admin.delete_acls([t.ACLFilter(
            "User:bob", None, t.ACLOperation.ANY, t.ACLPermissionType.ANY,
            t.ResourcePatternFilter(t.ResourceType.ANY, None, t.ACLResourcePatternType.ANY))])
        assert gone == [deny] and err is kafka_errors().NoError
        assert set(admin.describe_acls(everything)[0]) == {read, group}
    finally:
        admin.close()


def kafka_errors() -> Any:
    import kafka.errors
    return kafka.errors


def ck_binding(rtype: str, name: str, principal: str, op: str, perm: str = "ALLOW",
               ptype: str = "LITERAL") -> Any:
    """A confluent-kafka AclBinding by enum names (its CLUSTER is ``BROKER``)."""
    import confluent_kafka.admin as ck

    return ck.AclBinding(ck.ResourceType[rtype], name, ck.ResourcePatternType[ptype],
                         principal, "*", ck.AclOperation[op], ck.AclPermissionType[perm])


def ck_filter(principal: str | None = None) -> Any:
    """A confluent-kafka filter selecting every ACL (of ``principal``)."""
    import confluent_kafka.admin as ck

    return ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY,
                               principal, None, ck.AclOperation.ANY, ck.AclPermissionType.ANY)


def ck_admin(bootstrap: str) -> Any:
    """A confluent-kafka admin client (keep a reference while its futures run)."""
    import confluent_kafka.admin as ck

    return ck.AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def test_confluent_kafka_admin_creates_describes_and_deletes_acls(
        make_kafka_broker: Callable[..., Any]) -> None:
    broker = make_kafka_broker(**SUPER)
    admin = ck_admin(broker.bootstrap_servers)
    write = ck_binding("TOPIC", "orders-", "User:alice", "WRITE", ptype="PREFIXED")
    describe = ck_binding("BROKER", "kafka-cluster", "User:ops", "DESCRIBE")
    for fut in admin.create_acls([write, describe], request_timeout=5).values():
        assert fut.result(10) is None
    assert set(admin.describe_acls(ck_filter(), request_timeout=5).result(10)) == {
        write, describe}
    assert allowed(broker.kafka_server.authorizer, OP.WRITE, "orders-eu")
    bad = ck_binding("BROKER", "my-cluster", "User:ops", "ALTER")
    [fut] = admin.create_acls([bad], request_timeout=5).values()
    with pytest.raises(Exception, match="kafka-cluster"):
        fut.result(10)
    [fut] = admin.delete_acls([ck_filter("User:alice")], request_timeout=5).values()
    assert fut.result(10) == [write]
    assert admin.describe_acls(ck_filter(), request_timeout=5).result(10) == [describe]
    assert not allowed(broker.kafka_server.authorizer, OP.WRITE, "orders-eu")


def test_each_creation_is_checked_and_describe_groups_by_pattern(
        make_kafka_broker: Callable[..., Any]) -> None:
    bs = make_kafka_broker(**SUPER).bootstrap_servers
    created = roundtrip(bs, 30, 2, creations=[
        creation(2), creation(2, op=4),
        creation(2, rtype=4, name="my-cluster", op=7),  # CLUSTER named otherwise
        creation(2, name=""),                           # empty name
        creation(2, principal="alice"),                 # no TYPE:
        creation(2, ptype=2),                           # MATCH is a filter's
        creation(2, op=1),                              # ANY
        creation(2, perm=0),                            # UNKNOWN
        creation(2, rtype=99),                          # no such resource type
    ])
    codes = [r.error_code for r in created.results]
    assert codes == [0, 0, 42, 42, 42, 42, 42, 42, 42]
    assert "kafka-cluster" in created.results[2].error_message
    described = roundtrip(bs, 29, 2, **ANY_FILTER)
    assert described.error_code == 0
    [resource] = described.resources  # two ACLs of one pattern: one resource
    assert (resource.resource_type, resource.resource_name, resource.pattern_type) == (
        2, "orders", 3)
    assert sorted(a.operation for a in resource.acls) == [3, 4]
    bad_filter = roundtrip(bs, 29, 2, **{**ANY_FILTER, "operation": 0})
    assert bad_filter.error_code == 42


def test_version_0_is_literal_only(make_kafka_broker: Callable[..., Any]) -> None:
    broker = make_kafka_broker(**SUPER)
    bs = broker.bootstrap_servers
    assert [r.error_code for r in roundtrip(bs, 30, 0, creations=[creation(0)]).results] == [0]
    broker.kafka_server.authorizer.create_acls(identity(), [
        acl("User:bob", OP.READ, "orders-", ptype=PT.PREFIXED)])
    v0 = roundtrip(bs, 29, 0, **{k: v for k, v in ANY_FILTER.items()
                                 if k != "pattern_type_filter"})
    assert [(r.resource_name, [a.principal for a in r.acls]) for r in v0.resources] == [
        ("orders", ["User:alice"])]
    v3 = roundtrip(bs, 29, 3, **ANY_FILTER)
    assert sorted(r.resource_name for r in v3.resources) == ["orders", "orders-"]
    deleted = roundtrip(bs, 31, 0, filters=[delete_filter(0)])
    [result] = deleted.filter_results
    assert [(m.resource_name, m.principal) for m in result.matching_acls] == [
        ("orders", "User:alice")]
    assert broker.kafka_server.authorizer.acls(AclBindingFilter()) == [
        acl("User:bob", OP.READ, "orders-", ptype=PT.PREFIXED)]


def test_acl_changes_need_alter_and_listing_describe_on_the_cluster(
        make_kafka_broker: Callable[..., Any]) -> None:
    broker = make_kafka_broker(**{"authorizer.class.name": "acl"})  # no super user
    bs = broker.bootstrap_servers
    created = roundtrip(bs, 30, 1, creations=[creation(1)])
    assert [r.error_code for r in created.results] == [31]
    assert roundtrip(bs, 29, 1, **ANY_FILTER).error_code == 31
    assert [r.error_code for r in roundtrip(bs, 31, 1, filters=[delete_filter(1)])
            .filter_results] == [31]
    a = broker.kafka_server.authorizer
    a.create_acls(identity(), [acl("User:ANONYMOUS", OP.DESCRIBE, "kafka-cluster",
                                   rtype=RT.CLUSTER)])
    assert roundtrip(bs, 29, 1, **ANY_FILTER).error_code == 0
    assert [r.error_code for r in roundtrip(bs, 30, 1, creations=[creation(1)]).results] == [31]
    a.create_acls(identity(), [acl("User:ANONYMOUS", OP.ALTER, "kafka-cluster",
                                   rtype=RT.CLUSTER)])
    assert [r.error_code for r in roundtrip(bs, 30, 1, creations=[creation(1)]).results] == [0]


def test_entries_per_request_are_bounded(make_kafka_broker: Callable[..., Any]) -> None:
    broker = make_kafka_broker(**SUPER, **{"max.request.partitions": "2"})
    bs = broker.bootstrap_servers
    created = roundtrip(bs, 30, 1, creations=[creation(1, name=f"t{i}") for i in range(3)])
    assert [r.error_code for r in created.results] == [42, 42, 42]
    assert "max.request.partitions" in created.results[0].error_message
    assert broker.kafka_server.authorizer.acls(AclBindingFilter()) == []
    deleted = roundtrip(bs, 31, 1, filters=[delete_filter(1)] * 3)
    assert [r.error_code for r in deleted.filter_results] == [42, 42, 42]


def test_acls_outlive_a_restart(tmp_path: Path) -> None:
    from kafka_tiers.broker.broker import Broker

    cfg = {"broker.id": "1", "log.dirs": str(tmp_path / "d"),
           "listeners": "PLAINTEXT://127.0.0.1:0", **SUPER}
    with Broker(cfg) as broker:
        created = roundtrip(broker.bootstrap_servers, 30, 1, creations=[creation(1)])
        assert created.results[0].error_code == 0
    with Broker(cfg) as broker:
        assert allowed(broker.kafka_server.authorizer, OP.READ, "orders")
        assert not allowed(broker.kafka_server.authorizer, OP.WRITE, "orders")


def test_an_acl_created_through_broker_1_takes_effect_on_broker_3(
        make_kafka_cluster: Callable[..., Any]) -> None:
    # PLAINTEXT between brokers explicitly (refused by default beside an authorizer)
    cluster = make_kafka_cluster(3, overrides={**SUPER, "security.inter.broker.protocol":
                                               "PLAINTEXT"})
    first, third = cluster.brokers[1], cluster.brokers[3]
    binding = ck_binding("TOPIC", "orders", "User:alice", "READ")
    admin1, admin3 = ck_admin(first.bootstrap_servers), ck_admin(third.bootstrap_servers)
    [fut] = admin1.create_acls([binding], request_timeout=5).values()
    assert fut.result(10) is None
    wait_for(lambda: allowed(third.kafka_server.authorizer, OP.READ, "orders"), 10,
             "broker 3 to allow alice's READ")
    assert not allowed(third.kafka_server.authorizer, OP.WRITE, "orders")
    # kafka-python's admin asking broker 3 alone sees it too
    t = kp_acl_types()
    kp = kp_admin(third.bootstrap_servers)
    try:
        listed, _ = kp.describe_acls(t.ACLFilter(
            None, None, t.ACLOperation.ANY, t.ACLPermissionType.ANY,
            t.ResourcePatternFilter(t.ResourceType.TOPIC, "orders",
                                    t.ACLResourcePatternType.LITERAL)))
        assert [(a.principal, a.operation) for a in listed] == [
            ("User:alice", t.ACLOperation.READ)]
    finally:
        kp.close()
    # deleted through broker 3: gone on broker 1
    [fut] = admin3.delete_acls([ck_filter()], request_timeout=5).values()
    assert fut.result(10) == [binding]
    wait_for(lambda: not allowed(first.kafka_server.authorizer, OP.READ, "orders"), 10,
             "broker 1 to forget the ACL")


# ---------------------------------------------------------------------- kafka-tiers acls


def test_the_cli_adds_lists_and_removes_acls(make_kafka_broker: Callable[..., Any]) -> None:
    from tests.cli_run import kt

    broker = make_kafka_broker(**SUPER)
    bs = ["--bootstrap-server", broker.bootstrap_servers, "--timeout", "5"]
    added = kt("acls", "add", *bs, "--allow-principal", "User:alice", "--operation", "Read",
               "--operation", "Describe", "--topic", "orders")
    assert added.code == 0, added.err
    assert "created 2 ACL(s)" in added.out
    prefixed = kt("acls", "add", *bs, "--deny-principal", "User:bob", "--deny-host",
                  "10.0.0.9", "--operation", "write", "--topic", "orders-",
                  "--resource-pattern-type", "prefixed", "--format", "json")
    assert prefixed.code == 0, prefixed.err
    assert json.loads(prefixed.out)["created"] == [{
        "resource_type": "TOPIC", "pattern_type": "PREFIXED", "name": "orders-",
        "principal": "User:bob", "host": "10.0.0.9", "operation": "WRITE",
        "permission_type": "DENY"}]
    assert kt("acls", "add", *bs, "--allow-principal", "User:ops", "--cluster",
              "--operation", "Alter").code == 0
    a = broker.kafka_server.authorizer
    assert allowed(a, OP.READ, "orders") and not allowed(a, OP.WRITE, "orders")
    assert not allowed(a, OP.WRITE, "orders-eu", "User:bob", host="10.0.0.9")
    assert allowed(a, OP.ALTER, "kafka-cluster", "User:ops", rtype=RT.CLUSTER)

    listed = kt("acls", "list", *bs, "--format", "json")
    assert listed.code == 0, listed.err
    assert len(json.loads(listed.out)["acls"]) == 4
    orders = json.loads(kt("acls", "list", *bs, "--topic", "orders", "--format", "json").out)
    assert sorted(r["operation"] for r in orders["acls"]) == ["DESCRIBE", "READ"]
    applying = json.loads(kt("acls", "list", *bs, "--topic", "orders-eu",
                             "--resource-pattern-type", "match", "--format", "json").out)
    assert [r["name"] for r in applying["acls"]] == ["orders-"]
    table = kt("acls", "list", *bs, "--principal", "User:ops")
    assert table.code == 0 and "User:ops" in table.out and "User:alice" not in table.out

    removed = kt("acls", "remove", *bs, "--topic", "orders", "--allow-principal", "User:alice",
                 "--operation", "Describe", "--format", "json")
    assert removed.code == 0, removed.err
    assert [r["operation"] for r in json.loads(removed.out)["removed"]] == ["DESCRIBE"]
    assert allowed(a, OP.READ, "orders")
    every = kt("acls", "remove", *bs, "--topic", "orders")
    assert every.code == 0 and "removed 1 ACL(s)" in every.out
    assert not allowed(a, OP.READ, "orders")


def test_the_cli_errors_are_one_line(make_kafka_broker: Callable[..., Any],
                                     tmp_path: Path) -> None:
    from tests.cli_run import kt

    plain = make_kafka_broker()  # no authorizer
    bs = ["--bootstrap-server", plain.bootstrap_servers, "--timeout", "5"]
    disabled = kt("acls", "list", *bs)
    assert disabled.code == 2 and len(disabled.err_lines) == 1
    assert "SECURITY_DISABLED" in disabled.err
    refused = kt("acls", "add", *bs, "--allow-principal", "User:a", "--operation", "Write",
                 "--group", "g")
    assert refused.code == 2 and "GROUP does not take operation WRITE" in refused.err
    no_type = kt("acls", "add", *bs, "--allow-principal", "alice", "--topic", "t")
    assert no_type.code == 2 and "TYPE:NAME" in no_type.err
    closed = make_kafka_broker(**{"authorizer.class.name": "acl"})  # no super user
    denied = kt("acls", "add", "--bootstrap-server", closed.bootstrap_servers, "--timeout", "5",
                "--allow-principal", "User:a", "--topic", "t")
    assert denied.code == 2 and len(denied.err_lines) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in denied.err
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule"
                      " required username=\"admin\" password=\"s3cret-pw\";\n"
                      "fetch.max.bytes=1\n")
    unknown = kt("acls", "list", *bs, "--command-config", str(config))
    assert unknown.code == 2 and "unknown client property 'fetch.max.bytes'" in unknown.err
    assert "s3cret-pw" not in unknown.err


def test_command_config_maps_kafka_client_properties(tmp_path: Path) -> None:
    from kafka_tiers.cli.command_config import client_settings

    config = tmp_path / "client.properties"
    config.write_text("security.protocol=sasl_ssl\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule"
                      " required username=\"admin\" password=\"p\\\\\"w\";\n"
                      "ssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n"
                      "ssl.keystore.location=/client-keystore.pem\n"
                      "ssl.endpoint.identification.algorithm=\n")
    assert client_settings(str(config)) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "admin", "sasl_plain_password": 'p"w',
        "ssl_cafile": "/ca.pem", "ssl_certfile": "/client-keystore.pem",
        "ssl_keyfile": "/client-keystore.pem", "ssl_check_hostname": False}
    config.write_text("ssl.truststore.type=JKS\n")
    with pytest.raises(Exception, match="must be PEM"):
        client_settings(str(config))
    assert client_settings(None) == {}


def test_tls_principals_are_decided_by_acls_and_the_cli_reaches_an_ssl_listener(
        make_kafka_broker: Callable[..., Any], certs: Any, tmp_path: Path) -> None:
    """The client certificate's subject is the principal (part 1's TLS): not a super user,
    it may not manage ACLs until an ACL grants it ALTER (and so DESCRIBE) on the cluster."""
    from tests.cli_run import kt

    broker = make_kafka_broker(**{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.location": str(certs.ca_cert), "ssl.client.auth": "required",
        "authorizer.class.name": "acl", "super.users": "User:CN=admin"})
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.location={certs.ca_cert}\n"
                      f"ssl.certificate.location={certs.client_cert}\n"
                      f"ssl.key.location={certs.client_key}\n")
    cmd = ["--bootstrap-server", broker.bootstrap_servers, "--command-config", str(config),
           "--timeout", "5"]
    denied = kt("acls", "list", *cmd)
    assert denied.code == 2 and "CLUSTER_AUTHORIZATION_FAILED" in denied.err, denied.err
    principal = "User:CN=client,OU=eng,O=example"
    broker.kafka_server.authorizer.create_acls(identity(), [
        acl(principal, OP.ALTER, "kafka-cluster", rtype=RT.CLUSTER)])
    added = kt("acls", "add", *cmd, "--allow-principal", "User:alice", "--topic", "orders",
               "--operation", "Read")
    assert added.code == 0, added.err
    listed = json.loads(kt("acls", "list", *cmd, "--topic", "orders", "--format", "json").out)
    assert [(r["principal"], r["operation"]) for r in listed["acls"]] == [
        ("User:alice", "READ")]


def test_the_cli_writes_the_first_acls_directly_to_a_brokers_files(
        make_kafka_broker: Callable[..., Any], tmp_path: Path) -> None:
    """--dir (a standalone broker's first log dir): no client, no authorization; the running
    broker's authorizer picks the change up through its watch."""
    from tests.cli_run import kt

    broker = make_kafka_broker(**{"authorizer.class.name": "acl"})
    log_dir = broker.config["log.dirs"][0]
    added = kt("acls", "add", "--dir", log_dir, "--allow-principal", "User:admin",
               "--cluster", "--operation", "Alter")
    assert added.code == 0, added.err
    wait_for(lambda: allowed(broker.kafka_server.authorizer, OP.ALTER, "kafka-cluster",
                             "User:admin", rtype=RT.CLUSTER), 10, "the broker to see the ACL")
    listed = json.loads(kt("acls", "list", "--dir", log_dir, "--format", "json").out)
    assert [(r["principal"], r["resource_type"]) for r in listed["acls"]] == [
        ("User:admin", "CLUSTER")]
    both = kt("acls", "list", "--dir", log_dir, "--bootstrap-server", "127.0.0.1:1")
    assert both.code == 2 and "give one of" in both.err
    config = tmp_path / "c.properties"
    config.write_text("security.protocol=SSL\n")
    mixed = kt("acls", "list", "--dir", log_dir, "--command-config", str(config))
    assert mixed.code == 2 and "--command-config is for --bootstrap-server" in mixed.err
    removed = kt("acls", "remove", "--dir", log_dir, "--cluster")
    assert removed.code == 0 and "removed 1 ACL(s)" in removed.out
    wait_for(lambda: not allowed(broker.kafka_server.authorizer, OP.ALTER, "kafka-cluster",
                                 "User:admin", rtype=RT.CLUSTER), 10, "the ACL to go")


def test_a_creation_beyond_the_stored_bound_is_refused_and_changes_nothing(
        make_kafka_broker: Callable[..., Any]) -> None:
    """The ACL document's size bound (the metadata store's node limit) through CreateAcls:
    every ACL of the request refused with the reason, none stored."""
    broker = make_kafka_broker(**SUPER)
    bs = broker.bootstrap_servers
    assert roundtrip(bs, 30, 1, creations=[creation(1)]).results[0].error_code == 0
    big = [creation(1, name=f"{i}-" + "x" * 30_000) for i in range(40)]  # 1.2 MB
    refused = roundtrip(bs, 30, 1, creations=big)
    assert {r.error_code for r in refused.results} == {-1}
    assert "above the limit" in refused.results[0].error_message
    assert broker.kafka_server.authorizer.acls(AclBindingFilter()) == [
        acl("User:alice", OP.READ, "orders")]


# ---------------------------------------------------------------------- real SASL users

PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";')


@pytest.fixture
def sasl_acl_broker(make_kafka_broker: Callable[..., Any]) -> Any:
    """A broker with one SASL_PLAINTEXT listener (PLAIN: admin, alice, bob), the ACL
    authorizer and User:admin as its super user; topics orders, orders-eu, payments."""
    broker = make_kafka_broker(**{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS, **SUPER,
        "super.users": "User:admin"})
    for topic in ("orders", "orders-eu", "payments"):
        broker.create_topic(topic, 1)
    return broker


def ck_conf(broker: Any, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw",
            "socket.timeout.ms": 5000}


def ck_produce(broker: Any, user: str, topic: str) -> str | None:
    """Produce one record as ``user`` with librdkafka; None, or the error's name."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({**ck_conf(broker, user), "message.timeout.ms": 8000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    assert len(errors) == 1, "no delivery report within 15 s"
    return None if errors[0] is None else errors[0].name()


def grant(user: str, *ops: str, **cli: str) -> list[str]:
    """``kafka-tiers acls add`` arguments (``cli`` as --flag value pairs)."""
    args = ["--allow-principal", f"User:{user}"]
    for op in ops:
        args += ["--operation", op]
    for flag, value in cli.items():
        args += [f"--{flag.replace('_', '-')}", value]
    return args


def test_sasl_users_are_decided_by_acls_managed_by_the_super_user(
        sasl_acl_broker: Any, tmp_path: Path) -> None:
    """Read but not Write cannot produce; a prefixed ACL covers orders-*; deny wins over
    allow; the ACLs are added with kafka-tiers acls as admin over SASL."""
    from tests.cli_run import kt

    admin_config = tmp_path / "admin.properties"
    admin_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        "username=\"admin\" password=\"admin-pw\";\n")
    cmd = ["--bootstrap-server", sasl_acl_broker.bootstrap_servers, "--command-config",
           str(admin_config), "--timeout", "5"]
    for args in (grant("alice", "Read", topic="orders"),
                 grant("bob", "Write", topic="orders-", resource_pattern_type="prefixed"),
                 grant("alice", "Write", topic="payments"),
                 ["--deny-principal", "User:alice", "--operation", "Write", "--topic",
                  "payments"]):
        ran = kt("acls", "add", *cmd, *args)
        assert ran.code == 0, ran.err
    assert ck_produce(sasl_acl_broker, "alice", "orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert ck_produce(sasl_acl_broker, "bob", "orders-eu") is None  # prefixed covers it
    assert ck_produce(sasl_acl_broker, "bob", "orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert ck_produce(sasl_acl_broker, "alice", "payments") == "TOPIC_AUTHORIZATION_FAILED"
    assert ck_produce(sasl_acl_broker, "admin", "orders") is None  # super user
    # a non-super user may not manage ACLs
    alice_config = tmp_path / "alice.properties"
    alice_config.write_text(admin_config.read_text().replace("admin", "alice"))
    refused = kt("acls", "add", "--bootstrap-server", sasl_acl_broker.bootstrap_servers,
                 "--command-config", str(alice_config), "--timeout", "5",
                 *grant("alice", "Write", topic="orders"))
    assert refused.code == 2 and "CLUSTER_AUTHORIZATION_FAILED" in refused.err


def test_kafka_python_producer_is_refused_write_it_was_not_granted(
        sasl_acl_broker: Any) -> None:
    import kafka.errors
    from kafka import KafkaProducer

    sasl_acl_broker.kafka_server.authorizer.create_acls(identity(), [
        acl("User:alice", OP.READ, "orders"), acl("User:alice", OP.WRITE, "orders-",
                                                  ptype=PT.PREFIXED)])
    producer = KafkaProducer(bootstrap_servers=sasl_acl_broker.bootstrap_servers,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="alice", sasl_plain_password="alice-pw",
                             request_timeout_ms=5000, max_block_ms=8000, retries=0)
    try:
        producer.send("orders-eu", b"ok").get(timeout=10)
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send("orders", b"no").get(timeout=10)
    finally:
        producer.close(timeout=5)


@pytest.mark.servers
def test_acls_in_zookeeper_reach_another_brokers_authorizer(
        zookeeper_state_stores: list[Any]) -> None:
    """Two brokers' authorizers over one ZooKeeper (two sessions): an ACL created through
    one decides on the other, through the store's watch."""
    authorizers = []
    for store in zookeeper_state_stores:
        a = AclAuthorizer()
        a.configure({})
        a.start(StateStoreAclStorage(store))
        authorizers.append(a)
    assert authorizers[0].create_acls(identity(), [
        acl("User:alice", OP.WRITE, "orders-", ptype=PT.PREFIXED)]) == [None]
    assert allowed(authorizers[0], OP.WRITE, "orders-eu")  # at once where created
    wait_for(lambda: allowed(authorizers[1], OP.WRITE, "orders-eu"), 10,
             "the other session's watch")
    assert authorizers[1].delete_acls(identity(), [AclBindingFilter()]) == [[
        acl("User:alice", OP.WRITE, "orders-", ptype=PT.PREFIXED)]]
    wait_for(lambda: not allowed(authorizers[0], OP.WRITE, "orders-eu"), 10,
             "the deletion to reach the first session")


def test_every_acl_change_is_audited(make_kafka_broker: Callable[..., Any],
                                     caplog: pytest.LogCaptureFixture) -> None:
    bs = make_kafka_broker(**SUPER).bootstrap_servers
    with caplog.at_level("INFO", logger="kafka_tiers.audit"):
        roundtrip(bs, 30, 1, creations=[creation(1), creation(1, name="")])
        roundtrip(bs, 31, 1, filters=[delete_filter(1)])
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_tiers.audit"]
    assert len(lines) == 2, lines  # the refused creation is not a change
    assert lines[0].startswith("ACL created: principal=User:ANONYMOUS client=127.0.0.1 ")
    assert "acl=(TOPIC:LITERAL:orders ALLOW User:alice READ from *)" in lines[0]
    assert lines[1].startswith("ACL deleted: principal=User:ANONYMOUS")


def test_the_cli_producer_and_consumer_shortcuts_grant_what_kafka_acls_grants(
        make_kafka_broker: Callable[..., Any]) -> None:
    from tests.cli_run import kt

    broker = make_kafka_broker(**SUPER)
    log_dir = broker.config["log.dirs"][0]
    producer = kt("acls", "add", "--dir", log_dir, "--allow-principal", "User:p", "--producer",
                  "--idempotent", "--topic", "orders-", "--resource-pattern-type", "prefixed",
                  "--transactional-id", "tx", "--format", "json")
    assert producer.code == 0, producer.err
    got = {(r["resource_type"], r["pattern_type"], r["name"], r["operation"])
           for r in json.loads(producer.out)["created"]}
    assert got == {("TOPIC", "PREFIXED", "orders-", op) for op in ("WRITE", "DESCRIBE",
                                                                   "CREATE")} | {
        ("TRANSACTIONAL_ID", "PREFIXED", "tx", "WRITE"),
        ("TRANSACTIONAL_ID", "PREFIXED", "tx", "DESCRIBE"),
        ("CLUSTER", "LITERAL", "kafka-cluster", "IDEMPOTENT_WRITE")}
    consumer = kt("acls", "add", "--dir", log_dir, "--allow-principal", "User:c", "--consumer",
                  "--topic", "orders", "--group", "billing", "--format", "json")
    assert consumer.code == 0, consumer.err
    assert {(r["resource_type"], r["name"], r["operation"])
            for r in json.loads(consumer.out)["created"]} == {
        ("TOPIC", "orders", "READ"), ("TOPIC", "orders", "DESCRIBE"),
        ("GROUP", "billing", "READ")}
    for bad, why in ((["--consumer", "--topic", "t"], "--consumer needs --group"),
                     (["--producer", "--operation", "Read", "--topic", "t"], "drop --operation"),
                     (["--idempotent", "--topic", "t"], "--idempotent goes with --producer")):
        ran = kt("acls", "add", "--dir", log_dir, "--allow-principal", "User:x", *bad)
        assert ran.code == 2 and why in ran.err, ran.err
    removed = kt("acls", "remove", "--dir", log_dir, "--consumer", "--topic", "orders",
                 "--group", "billing")
    assert removed.code == 0 and "removed 3 ACL(s)" in removed.out, removed.out


def test_a_sasl_users_grant_through_broker_1_lets_it_produce_through_broker_3(
        make_kafka_cluster: Callable[..., Any]) -> None:
    """A 3-broker cluster with SASL_PLAINTEXT listeners: the super user creates the topic and
    grants alice Write through broker 1; alice, bootstrapped on broker 3 alone, produces to
    whichever broker leads, and is refused on the topic she was not granted."""
    import confluent_kafka.admin as ck

    cluster = make_kafka_cluster(3, overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "authorizer.class.name": "acl", "super.users": "User:admin",
        "security.inter.broker.protocol": "PLAINTEXT"})  # explicit: refused by default here
    first, third = cluster.brokers[1], cluster.brokers[3]
    admin = ck.AdminClient(ck_conf(first, "admin"))
    for fut in admin.create_topics([ck.NewTopic("orders", 3, 3), ck.NewTopic("payments", 1, 3)],
                                   request_timeout=10).values():
        fut.result(15)
    [fut] = admin.create_acls([ck_binding("TOPIC", "orders", "User:alice", "WRITE")],
                              request_timeout=5).values()
    assert fut.result(10) is None
    wait_for(lambda: all(allowed(b.kafka_server.authorizer, OP.WRITE, "orders")
                         for b in cluster.brokers.values()), 10, "every broker's authorizer")
    assert ck_produce(third, "alice", "orders") is None
    assert ck_produce(third, "alice", "payments") == "TOPIC_AUTHORIZATION_FAILED"


class FailingAclAuthorizer(RecordingAuthorizer):
    """A plugin that allows everything but fails at changing ACLs: create_acls raises,
    delete_acls answers for one filter too many."""

    def authorize(self, identity: RequestIdentity, actions: Sequence[Action]
                  ) -> list[AuthorizationResult]:
        return [AuthorizationResult.ALLOWED] * len(actions)

    def delete_acls(self, identity: RequestIdentity, filters: Sequence[AclBindingFilter]
                    ) -> list[list[AclBinding] | str]:
        return [[] for _ in range(len(filters) + 1)]


def test_a_plugin_that_fails_to_change_acls_answers_unknown_server_error_per_entry(
        make_kafka_broker: Callable[..., Any]) -> None:
    broker = make_kafka_broker(**{"authorizer.class.name": f"{__name__}:FailingAclAuthorizer"})
    bs = broker.bootstrap_servers
    created = roundtrip(bs, 30, 1, creations=[creation(1), creation(1, op=4)])
    assert [r.error_code for r in created.results] == [-1, -1]
    assert all("failed to create ACLs: RuntimeError" in r.error_message
               for r in created.results)
    deleted = roundtrip(bs, 31, 1, filters=[delete_filter(1)])
    assert [r.error_code for r in deleted.filter_results] == [-1]
    assert "2 results for 1 filters" in deleted.filter_results[0].error_message
