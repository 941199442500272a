"""Authorization of every Kafka API (part 5 of issue 15): each handler asks the operation
Kafka's ``KafkaApis`` asks, answers a denial with Kafka's error code, and serves the request
when allowed.

The broker's authorizer is a :class:`TableAuthorizer` set on the running server: it allows
exactly the ``(principal, operation, resource type, name)`` rows of its table (or everything
but its ``deny`` rows). On PLAINTEXT the principal is ``User:ANONYMOUS``, which is enough to
reach every denial path with raw requests and real clients. The end-to-end tests at the end
use the built-in ACL authorizer with real ACLs.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from kafka_tiers.api import TopicPartition
from kafka_tiers.api.authorizer import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    Authorizer,
    KafkaPrincipal,
    PatternType,
    RequestIdentity,
    ResourcePattern,
    ResourceType,
)
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.kafka.registry import apis
from kafka_tiers.kafka.security import authorization
from kafka_tiers.kafka.security.api_rules import (
    API_RULES,
    CLUSTER_AUTHORIZATION_FAILED,
    DENIAL_ERROR,
    GROUP_AUTHORIZATION_FAILED,
    HIDDEN,
    SUPPORTED_OPERATIONS,
    TOPIC_AUTHORIZATION_FAILED,
)
from kafka_tiers.kafka.security.authorization import check_by_resource_type
from kafka_tiers.kafka.topic_ids import topic_id
from kafka_tiers.log.records import ProducerRecord, build_batch
from tests.broker.helpers import make_broker, shutdown_brokers  # noqa: F401
from tests.kafka.clients import confluent_consumer_conf, confluent_producer_conf
from tests.kafka.group_requests import RawMember, commit, fetch, find_coordinator, subscription
from tests.kafka.raw_requests import RawConnection, request_class
from tests.kafka.targets import FAST_GROUPS, LISTENER

Op, R = AclOperation, ResourceType
ANON = "User:ANONYMOUS"
TOPIC, OTHER, GROUP = "orders", "secret", "readers"
REPLICA_NOT_AVAILABLE = 9
#: the APIs whose handlers other parts of issue 15 wrote and test (SASL, ACLs, SCRAM)
OTHER_PARTS = frozenset({17, 29, 30, 31, 36, 50, 51})


class TableAuthorizer(Authorizer):
    """Allows the rows of its table, ``(principal, operation, resource type, name)`` (name
    ``*``: any), or with ``everything`` all but the ``deny`` rows; remembers every action
    asked. Its ACLs (for InitProducerId's "WRITE on some topic") are the allowed rows."""

    def __init__(self, *rows: tuple[AclOperation, ResourceType, str],
                 everything: bool = False,
                 deny: Sequence[tuple[AclOperation, ResourceType, str]] = ()) -> None:
        self.rows = {(ANON, *r) for r in rows}
        self.everything = everything
        self.deny = {(ANON, *r) for r in deny}
        self.asked: list[tuple[str, AclOperation, ResourceType, str]] = []
        self._lock = threading.Lock()

    def _allows(self, principal: str, a: Action) -> bool:
        keys = [(principal, a.operation, a.resource_type, n) for n in (a.name, "*")]
        if self.everything:
            return not any(k in self.deny for k in keys)
        return any(k in self.rows for k in keys)

    def authorize(self, identity: RequestIdentity, actions: Sequence[Action]
                  ) -> list[AuthorizationResult]:
        principal = str(identity.principal)
        with self._lock:
            self.asked += [(principal, a.operation, a.resource_type, a.name) for a in actions]
        return [AuthorizationResult.ALLOWED if self._allows(principal, a)
                else AuthorizationResult.DENIED for a in actions]

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        out = [AclBinding(ResourcePattern(rt, name, PatternType.LITERAL),
                          AccessControlEntry(p, "*", op, AclPermissionType.ALLOW))
               for p, op, rt, name in self.rows]
        return [b for b in out if flt.matches(b)]

    def create_acls(self, identity: RequestIdentity, bindings: Sequence[AclBinding]
                    ) -> list[str | None]:
        return ["the test authorizer keeps a fixed table"] * len(bindings)

    def delete_acls(self, identity: RequestIdentity, filters: Sequence[AclBindingFilter]
                    ) -> list[list[AclBinding] | str]:
        return ["the test authorizer keeps a fixed table"] * len(filters)

    def asked_for(self, resource_type: ResourceType, name: str) -> list[AclOperation]:
        with self._lock:
            return [op for _, op, rt, n in self.asked if rt == resource_type and n == name]


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One standalone broker for the module: topics ``orders`` (2 partitions) and ``secret``
    with a few records; every test sets its own authorizer (reset afterwards)."""
    d = tmp_path_factory.mktemp("authz")
    b = Broker({"broker.id": "1", "log.dirs": str(d / "data"), "listeners": LISTENER,
                **FAST_GROUPS}).start()
    try:
        b.create_topic(TOPIC, 2)
        b.create_topic(OTHER, 1)
        for p in (0, 1):
            b.produce(TopicPartition(TOPIC, p), [(b"k", b"v")])
        b.produce(TopicPartition(OTHER, 0), [(b"k", b"s")])
        yield b
    finally:
        b.shutdown()


@pytest.fixture
def authorize(broker: Broker) -> Iterator[Callable[..., TableAuthorizer]]:
    """``authorize(*rows, everything=False, deny=())``: the broker's authorizer from now
    until the end of the test."""
    server = broker.kafka_server
    assert server is not None

    def install(*rows: tuple[AclOperation, ResourceType, str], everything: bool = False,
                deny: Sequence[tuple[AclOperation, ResourceType, str]] = ()
                ) -> TableAuthorizer:
        authz = TableAuthorizer(*rows, everything=everything, deny=deny)
        server.authorizer = authz
        return authz

    yield install
    server.authorizer = None


def call(broker: Broker, key: int, version: int, **fields: Any) -> Any:
    with RawConnection(broker.bootstrap_servers, timeout=15) as conn:
        return conn.call(key, version, **fields)


COVERED: dict[int, list[str]] = {}


def covers(*keys: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Mark a test as checking the denial (and the allowed path) of API ``keys``."""
    def mark(fn: Callable[..., None]) -> Callable[..., None]:
        for k in keys:
            COVERED.setdefault(k, []).append(fn.__name__)
        return fn
    return mark


# ---------------------------------------------------------------------- the rule table
@pytest.mark.parametrize("key", sorted(apis()))
def test_every_served_api_declares_its_authorization(key: int) -> None:
    """A new API cannot forget its check: it must be in api_rules.API_RULES (an empty tuple
    only for the APIs every principal may call), and its rules must name an error Kafka
    answers for their resource type."""
    api = apis()[key]
    assert key in API_RULES, f"{api.name} (key {key}) has no authorization rule in API_RULES"
    for rule in API_RULES[key]:
        assert rule.error in (HIDDEN, DENIAL_ERROR[rule.resource_type],
                              TOPIC_AUTHORIZATION_FAILED), (api.name, rule)
        assert rule.operation in SUPPORTED_OPERATIONS[rule.resource_type] or \
            rule.operation == Op.IDEMPOTENT_WRITE, (api.name, rule)
    if not API_RULES[key]:
        assert api.name in ("ApiVersions", "SaslHandshake", "SaslAuthenticate"), api.name


def test_every_api_with_a_rule_has_a_denial_test_here() -> None:
    ruled = {k for k, rules in API_RULES.items() if rules and k in apis()} - OTHER_PARTS
    assert ruled - set(COVERED) == set(), "add a denial test for these API keys"


def test_the_docs_table_lists_every_rule() -> None:
    """docs/security.md's Authorization table has a row per rule: API, operation, resource,
    error."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    section = text.split("## Authorization", 1)[1].split("\n## ", 1)[0]
    errors = {HIDDEN: "left out", TOPIC_AUTHORIZATION_FAILED: "TOPIC_AUTHORIZATION_FAILED",
              GROUP_AUTHORIZATION_FAILED: "GROUP_AUTHORIZATION_FAILED",
              CLUSTER_AUTHORIZATION_FAILED: "CLUSTER_AUTHORIZATION_FAILED"}
    rows = {tuple(c.strip().strip("`") for c in line.strip("|").split("|")[:4])
            for line in section.splitlines() if line.startswith("| ")}
    for key, rules in API_RULES.items():
        if key not in apis():
            continue
        name = apis()[key].name
        if not rules:
            assert any(r[0] == name and r[1] == "none" for r in rows), name
        for rule in rules:
            row = (name, rule.operation.name, rule.resource_type.name, errors[rule.error])
            assert row in rows, f"docs/security.md: no row {' | '.join(row)}"


# ---------------------------------------------------------------------- produce and fetch
def _produce_fields(version: int, topic: str, partitions: Sequence[int]) -> dict[str, Any]:
    cls = request_class(0, version).TopicProduceData
    batch = build_batch([ProducerRecord(b"x")])
    return {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        cls(name=topic, partition_data=[cls.PartitionProduceData(index=p, records=batch)
                                        for p in partitions])]}


@covers(0)
def test_produce_needs_write_on_the_topic(broker: Broker, authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.TOPIC, TOPIC))
    resp = call(broker, 0, 9, **_produce_fields(9, TOPIC, [0, 1]))
    assert [p.error_code for p in resp.responses[0].partition_responses] == \
        [TOPIC_AUTHORIZATION_FAILED] * 2
    end = broker.log(TopicPartition(TOPIC, 0)).log_end_offset
    authorize((Op.WRITE, R.TOPIC, TOPIC))
    resp = call(broker, 0, 9, **_produce_fields(9, TOPIC, [0]))
    assert resp.responses[0].partition_responses[0].error_code == 0
    assert broker.log(TopicPartition(TOPIC, 0)).log_end_offset == end + 1


def test_confluent_producer_gets_topic_authorization_failed(broker: Broker,
                                                            authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.TOPIC, TOPIC))
    errors: list[Any] = []
    p = Producer(confluent_producer_conf(broker.bootstrap_servers, message_timeout_ms=5000))
    try:
        p.produce(TOPIC, b"denied", partition=0, on_delivery=lambda e, m: errors.append(e))
        p.flush(10)
    finally:
        p.close()
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _fetch(broker: Broker, topics: Sequence[str], version: int = 12, replica_id: int = -1,
           offset: int = 0) -> dict[str, list[Any]]:
    req = request_class(1, version)
    part = req.FetchTopic.FetchPartition
    fields: dict[str, Any] = dict(
        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], rack_id="", replica_id=replica_id,
        topics=[req.FetchTopic(topic=t, topic_id=uuid.uuid4(), partitions=[
            part(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                 last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])
            for t in topics])
    resp = call(broker, 1, version, **fields)
    return {t.topic: list(t.partitions) for t in resp.responses}


@covers(1)
def test_fetch_needs_read_and_a_replica_fetch_cluster_action(broker: Broker,
                                                             authorize: Any) -> None:
    authorize((Op.READ, R.TOPIC, TOPIC))
    got = _fetch(broker, [TOPIC, OTHER])
    assert got[TOPIC][0].error_code == 0 and got[TOPIC][0].records
    assert got[OTHER][0].error_code == TOPIC_AUTHORIZATION_FAILED
    assert not got[OTHER][0].records
    # a replica's fetch: CLUSTER_ACTION first (then refused: kafka-tiers replicates itself)
    got = _fetch(broker, [TOPIC], replica_id=2)
    assert got[TOPIC][0].error_code == TOPIC_AUTHORIZATION_FAILED
    authorize((Op.CLUSTER_ACTION, R.CLUSTER, CLUSTER_NAME))
    assert _fetch(broker, [TOPIC], replica_id=2)[TOPIC][0].error_code == REPLICA_NOT_AVAILABLE


def test_a_fetch_session_checks_its_partitions_on_every_fetch(broker: Broker,
                                                              authorize: Any) -> None:
    """A session opened while READ was allowed serves nothing once it is revoked."""
    authz = authorize((Op.READ, R.TOPIC, TOPIC))
    req = request_class(1, 12)
    part = req.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                                         fetch_offset=0, last_fetched_epoch=-1,
                                         log_start_offset=-1, partition_max_bytes=1 << 20)
    base = dict(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                forgotten_topics_data=[], rack_id="", replica_id=-1)
    with RawConnection(broker.bootstrap_servers) as conn:
        first = conn.call(1, 12, session_id=0, session_epoch=0, topics=[
            req.FetchTopic(topic=TOPIC, topic_id=uuid.uuid4(), partitions=[part])], **base)
        assert first.session_id != 0
        assert first.responses[0].partitions[0].error_code == 0
        authz.rows.clear()
        second = conn.call(1, 12, session_id=first.session_id, session_epoch=1, topics=[],
                           **base)
    assert [p.error_code for t in second.responses for p in t.partitions] == \
        [TOPIC_AUTHORIZATION_FAILED]


def test_the_remote_tier_is_not_read_without_read(tmp_path: Path) -> None:
    """A tiered topic's offsets below the local log come from the remote tier through the
    broker's Fetch: without READ on the topic the remote tier is never asked."""
    b, _store, _ = make_broker(tmp_path, listeners=LISTENER)
    b.create_topic("tiered", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("tiered", 0)
    for _ in range(0, 200, 4):
        b.produce(tp, [(b"k", b"v" * 100)] * 4)
    b.run_tiering()
    assert b.log(tp).local_log_start_offset > 0
    # every remote read of a Kafka Fetch starts on the remote log manager's reader pool
    assert b.rlm is not None
    reads: list[int] = []
    real = b.rlm.submit_read

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(*args, **kwargs)

    b.rlm.submit_read = counted  # type: ignore[method-assign]
    assert b.kafka_server is not None
    b.kafka_server.authorizer = TableAuthorizer((Op.DESCRIBE, R.TOPIC, "tiered"))
    got = _fetch(b, ["tiered"])
    assert got["tiered"][0].error_code == TOPIC_AUTHORIZATION_FAILED
    assert not got["tiered"][0].records and reads == []
    b.kafka_server.authorizer = TableAuthorizer((Op.READ, R.TOPIC, "tiered"))
    got = _fetch(b, ["tiered"])
    assert got["tiered"][0].error_code == 0 and got["tiered"][0].records and reads


@covers(2)
def test_list_offsets_needs_describe(broker: Broker, authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.TOPIC, TOPIC))
    req = request_class(2, 9)
    topics = [req.ListOffsetsTopic(name=t, partitions=[req.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=-1, timestamp=-1, max_num_offsets=1)])
        for t in (TOPIC, OTHER)]
    resp = call(broker, 2, 9, replica_id=-1, isolation_level=0, topics=topics, timeout_ms=1000)
    got = {t.name: t.partitions[0] for t in resp.topics}
    assert got[TOPIC].error_code == 0 and got[TOPIC].offset >= 1
    assert got[OTHER].error_code == TOPIC_AUTHORIZATION_FAILED and got[OTHER].offset == -1


@covers(23)
def test_offset_for_leader_epoch_needs_describe_or_cluster_action(broker: Broker,
                                                                   authorize: Any) -> None:
    req = request_class(23, 4)
    part = req.OffsetForLeaderTopic.OffsetForLeaderPartition

    def ask() -> dict[str, int]:
        resp = call(broker, 23, 4, replica_id=-1, topics=[
            req.OffsetForLeaderTopic(topic=t, partitions=[
                part(partition=0, current_leader_epoch=-1, leader_epoch=0)])
            for t in (TOPIC, OTHER)])
        return {t.topic: t.partitions[0].error_code for t in resp.topics}

    authorize((Op.DESCRIBE, R.TOPIC, TOPIC))
    assert ask() == {TOPIC: 0, OTHER: TOPIC_AUTHORIZATION_FAILED}
    authorize((Op.CLUSTER_ACTION, R.CLUSTER, CLUSTER_NAME))
    assert ask() == {TOPIC: 0, OTHER: 0}


# ---------------------------------------------------------------------- metadata
def _metadata(broker: Broker, topics: Sequence[str] | None, version: int = 12, **kw: Any
              ) -> Any:
    req = request_class(3, version)
    entries = None if topics is None else [req.MetadataRequestTopic(name=t, topic_id=None)
                                           for t in topics]
    fields = {"allow_auto_topic_creation": False,
              "include_topic_authorized_operations": False, **kw}
    if 8 <= version <= 10:
        fields.setdefault("include_cluster_authorized_operations", False)
    return call(broker, 3, version, topics=entries, **fields)


@covers(3)
def test_metadata_hides_topics_the_principal_may_not_describe(broker: Broker,
                                                              authorize: Any,
                                                              caplog: Any) -> None:
    authorize((Op.DESCRIBE, R.TOPIC, TOPIC))
    with caplog.at_level(logging.INFO, logger="kafka_tiers.audit"):
        listed = _metadata(broker, None)
    assert [t.name for t in listed.topics] == [TOPIC] and listed.brokers
    assert not [r for r in caplog.records if r.name == "kafka_tiers.audit"]  # quiet filter
    named = {t.name: t for t in _metadata(broker, [TOPIC, OTHER, "absent"]).topics}
    assert named[TOPIC].error_code == 0 and len(named[TOPIC].partitions) == 2
    # existence is not disclosed: an existing and a missing topic answer alike
    for t in (OTHER, "absent"):
        assert named[t].error_code == TOPIC_AUTHORIZATION_FAILED
        assert named[t].partitions == [] and named[t].topic_id in (None, uuid.UUID(int=0))
    # asked by id: the id is answered, the name is not
    req = request_class(3, 12)
    resp = call(broker, 3, 12, topics=[req.MetadataRequestTopic(
        name=None, topic_id=topic_id(broker, OTHER))], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)
    (t,) = resp.topics
    assert t.error_code == TOPIC_AUTHORIZATION_FAILED and t.name is None
    assert t.topic_id == topic_id(broker, OTHER)


def test_metadata_authorized_operations(broker: Broker, authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.TOPIC, TOPIC), (Op.READ, R.TOPIC, TOPIC),
              (Op.DESCRIBE, R.CLUSTER, CLUSTER_NAME), (Op.CREATE, R.CLUSTER, CLUSTER_NAME))
    resp = _metadata(broker, [TOPIC], version=10, include_topic_authorized_operations=True,
                     include_cluster_authorized_operations=True)
    assert resp.topics[0].authorized_operations == {int(Op.DESCRIBE), int(Op.READ)}
    assert resp.authorized_operations == {int(Op.DESCRIBE), int(Op.CREATE)}
    authorize((Op.DESCRIBE, R.TOPIC, TOPIC), (Op.CREATE, R.CLUSTER, CLUSTER_NAME))
    resp = _metadata(broker, [TOPIC], version=10, include_cluster_authorized_operations=True)
    assert resp.authorized_operations == set()  # no DESCRIBE on the cluster: none


def test_metadata_auto_creation_needs_create(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(**{"auto.create.topics.enable": "true"})
    assert b.kafka_server is not None
    b.kafka_server.authorizer = TableAuthorizer((Op.DESCRIBE, R.TOPIC, "*"),
                                                (Op.CREATE, R.TOPIC, "made"))
    got = {t.name: t.error_code for t in _metadata(
        b, ["made", "refused"], allow_auto_topic_creation=True).topics}
    assert got == {"made": 5, "refused": TOPIC_AUTHORIZATION_FAILED}  # 5: LEADER_NOT_AVAILABLE
    assert "made" in b.topics() and "refused" not in b.topics()
    b.kafka_server.authorizer = TableAuthorizer((Op.DESCRIBE, R.TOPIC, "*"),
                                                (Op.CREATE, R.CLUSTER, CLUSTER_NAME))
    assert _metadata(b, ["refused"], allow_auto_topic_creation=True).topics[0].error_code == 5
    assert "refused" in b.topics()


@covers(60)
def test_describe_cluster_reports_the_authorized_operations(broker: Broker,
                                                            authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.CLUSTER, CLUSTER_NAME), (Op.ALTER, R.CLUSTER, CLUSTER_NAME))
    resp = call(broker, 60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert resp.error_code == 0 and resp.brokers
    assert resp.authorized_operations == {int(Op.DESCRIBE), int(Op.ALTER)}
    authorize()
    resp = call(broker, 60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert resp.error_code == 0 and resp.brokers and resp.authorized_operations == set()


# ---------------------------------------------------------------------- groups
@covers(10)
def test_find_coordinator_needs_describe_on_the_group(broker: Broker, authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.GROUP, GROUP))
    with RawConnection(broker.bootstrap_servers) as conn:
        denied = find_coordinator(conn, "other", version=3)
        assert denied.error_code == GROUP_AUTHORIZATION_FAILED and denied.node_id == -1
        batch = find_coordinator(conn, "other", version=4).coordinators[0]
        assert batch.error_code == GROUP_AUTHORIZATION_FAILED
        deadline = time.monotonic() + 15
        while (ok := find_coordinator(conn, GROUP, version=3)).error_code != 0:
            assert time.monotonic() < deadline, ok
            time.sleep(0.1)
        assert ok.node_id == broker.broker_id


@covers(11, 12, 13, 14)
def test_group_membership_needs_read_on_the_group(broker: Broker, authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.GROUP, "g-denied"))
    m = RawMember(broker.bootstrap_servers, "g-denied")
    try:
        assert m.join_once().error_code == GROUP_AUTHORIZATION_FAILED
        assert m.join_once(version=3).error_code == GROUP_AUTHORIZATION_FAILED
        m.member_id, m.generation = "someone", 1
        assert m.heartbeat() == GROUP_AUTHORIZATION_FAILED
        m.join_response = type("J", (), {"protocol_name": "range"})()
        assert m.sync().error_code == GROUP_AUTHORIZATION_FAILED
        assert m.leave().error_code == GROUP_AUTHORIZATION_FAILED
        assert m.leave(version=2).error_code == GROUP_AUTHORIZATION_FAILED
    finally:
        m.close()
    authz = authorize((Op.READ, R.GROUP, "g-allowed"))
    m = RawMember(broker.bootstrap_servers, "g-allowed", protocols=[("range",
                                                                      subscription(TOPIC))])
    try:
        assert m.join().error_code == 0
        assert m.sync([(m.member_id, b"")]).error_code == 0
        assert m.heartbeat() == 0
        assert m.leave().error_code == 0
    finally:
        m.close()
    assert set(authz.asked_for(R.GROUP, "g-allowed")) == {Op.READ}


@covers(8, 9)
def test_offset_commit_and_fetch(broker: Broker, authorize: Any) -> None:
    offsets = {(TOPIC, 0): 1, (OTHER, 0): 1}
    with RawConnection(broker.bootstrap_servers) as conn:
        authorize((Op.READ, R.TOPIC, TOPIC))  # no READ on the group
        assert set(commit(conn, "g-off", offsets).values()) == {GROUP_AUTHORIZATION_FAILED}
        authorize((Op.READ, R.GROUP, "g-off"), (Op.READ, R.TOPIC, TOPIC))
        assert commit(conn, "g-off", offsets) == {(TOPIC, 0): 0,
                                                  (OTHER, 0): TOPIC_AUTHORIZATION_FAILED}
        # OffsetFetch: DESCRIBE on the group, then on each topic
        authorize((Op.DESCRIBE, R.TOPIC, TOPIC))
        assert fetch(conn, "g-off", {TOPIC: [0]})[0] == GROUP_AUTHORIZATION_FAILED
        assert fetch(conn, "g-off", {TOPIC: [0]}, version=8)[0] == GROUP_AUTHORIZATION_FAILED
        error, parts = fetch(conn, "g-off", {TOPIC: [0]}, version=1)
        assert parts[(TOPIC, 0)][2] == GROUP_AUTHORIZATION_FAILED
        authorize((Op.DESCRIBE, R.GROUP, "g-off"), (Op.DESCRIBE, R.TOPIC, TOPIC))
        error, parts = fetch(conn, "g-off", {TOPIC: [0], OTHER: [0]})
        assert error == 0
        assert parts[(TOPIC, 0)][0] == 1 and parts[(TOPIC, 0)][2] == 0
        assert parts[(OTHER, 0)][0] == -1 and parts[(OTHER, 0)][2] == TOPIC_AUTHORIZATION_FAILED
        # every committed topic: the undescribable ones are left out
        authorize(everything=True)
        assert commit(conn, "g-off", {(OTHER, 0): 1})[(OTHER, 0)] == 0
        authorize((Op.DESCRIBE, R.GROUP, "g-off"), (Op.DESCRIBE, R.TOPIC, TOPIC))
        error, parts = fetch(conn, "g-off", None, version=8)
        assert error == 0 and set(parts) == {(TOPIC, 0)}


@covers(47)
def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(
        broker: Broker, authorize: Any) -> None:
    req = request_class(47, 0)

    def delete() -> Any:
        return call(broker, 47, 0, group_id="g-del", topics=[
            req.OffsetDeleteRequestTopic(name=t, partitions=[
                req.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])
            for t in (TOPIC, OTHER)])

    with RawConnection(broker.bootstrap_servers) as conn:
        authorize(everything=True)
        assert set(commit(conn, "g-del", {(TOPIC, 0): 1, (OTHER, 0): 1}).values()) == {0}
    authorize((Op.READ, R.TOPIC, TOPIC), (Op.READ, R.TOPIC, OTHER))
    resp = delete()
    assert resp.error_code == GROUP_AUTHORIZATION_FAILED and resp.topics == []
    authorize((Op.DELETE, R.GROUP, "g-del"), (Op.READ, R.TOPIC, TOPIC))
    resp = delete()
    got = {t.name: t.partitions[0].error_code for t in resp.topics}
    assert resp.error_code == 0 and got == {TOPIC: 0, OTHER: TOPIC_AUTHORIZATION_FAILED}


@covers(15, 16, 42)
def test_describe_list_and_delete_groups(broker: Broker, authorize: Any) -> None:
    with RawConnection(broker.bootstrap_servers) as conn:
        authorize(everything=True)
        for g in ("g-a", "g-b"):
            assert set(commit(conn, g, {(TOPIC, 0): 1}).values()) == {0}
    authorize((Op.DESCRIBE, R.GROUP, "g-a"))
    resp = call(broker, 15, 5, groups=["g-a", "g-b"], include_authorized_operations=True)
    got = {g.group_id: g for g in resp.groups}
    assert got["g-a"].error_code == 0 and got["g-a"].authorized_operations == {int(Op.DESCRIBE)}
    assert got["g-b"].error_code == GROUP_AUTHORIZATION_FAILED
    listed = {g.group_id for g in call(broker, 16, 4, states_filter=[]).groups}
    assert "g-a" in listed and "g-b" not in listed
    authorize((Op.DESCRIBE, R.CLUSTER, CLUSTER_NAME))
    listed = {g.group_id for g in call(broker, 16, 4, states_filter=[]).groups}
    assert {"g-a", "g-b"} <= listed
    authorize((Op.DELETE, R.GROUP, "g-a"))
    got = {r.group_id: r.error_code for r in call(broker, 42, 2,
                                                  groups_names=["g-a", "g-b"]).results}
    assert got == {"g-a": 0, "g-b": GROUP_AUTHORIZATION_FAILED}


def test_confluent_consumer_without_group_read_cannot_join(broker: Broker,
                                                           authorize: Any) -> None:
    """librdkafka reports GROUP_AUTHORIZATION_FAILED to the application (a fatal error of the
    consumer group) when it may describe the group but not read it."""
    from confluent_kafka import Consumer

    authorize((Op.DESCRIBE, R.TOPIC, TOPIC), (Op.READ, R.TOPIC, TOPIC),
              (Op.DESCRIBE, R.GROUP, "no-read"))
    consumer = Consumer(confluent_consumer_conf(broker.bootstrap_servers, "no-read"))
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                error = msg.error()
            elif msg is not None:
                pytest.fail(f"a record was consumed without READ on the group: {msg.value()!r}")
    finally:
        consumer.close()
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


# ---------------------------------------------------------------------- producer ids
@covers(22)
def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(
        broker: Broker, authorize: Any) -> None:
    fields = dict(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                  producer_epoch=-1)
    authorize((Op.READ, R.TOPIC, TOPIC))
    assert call(broker, 22, 4, **fields).error_code == CLUSTER_AUTHORIZATION_FAILED
    authorize((Op.WRITE, R.TOPIC, "any-topic"))  # WRITE on some topic implies it (KIP-679)
    resp = call(broker, 22, 4, **fields)
    assert resp.error_code == 0 and resp.producer_id >= 0
    authorize((Op.IDEMPOTENT_WRITE, R.CLUSTER, CLUSTER_NAME))
    assert call(broker, 22, 4, **fields).error_code == 0


def test_idempotent_confluent_producer_with_topic_write_only(broker: Broker,
                                                            authorize: Any) -> None:
    authorize((Op.DESCRIBE, R.TOPIC, TOPIC), (Op.WRITE, R.TOPIC, TOPIC))
    errors: list[Any] = []
    p = Producer(confluent_producer_conf(broker.bootstrap_servers, enable_idempotence=True,
                                         message_timeout_ms=8000))
    try:
        p.produce(TOPIC, b"idempotent", partition=1, on_delivery=lambda e, m: errors.append(e))
        p.flush(10)
    finally:
        p.close()
    assert errors == [None]


# ---------------------------------------------------------------------- admin: topics
def _create(broker: Broker, *names: str) -> dict[str, Any]:
    req = request_class(19, 7)
    resp = call(broker, 19, 7, timeout_ms=5000, validate_only=False, topics=[
        req.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[],
                           configs=[]) for n in names])
    return {t.name: t for t in resp.topics}


@covers(19)
def test_create_topics_needs_create_and_describe_configs_for_the_configs(
        broker: Broker, authorize: Any) -> None:
    authorize((Op.CREATE, R.TOPIC, "new-a"), (Op.DESCRIBE_CONFIGS, R.TOPIC, "new-a"))
    got = _create(broker, "new-a", "new-b")
    assert got["new-a"].error_code == 0 and got["new-a"].configs
    assert got["new-b"].error_code == TOPIC_AUTHORIZATION_FAILED
    assert "new-a" in broker.topics() and "new-b" not in broker.topics()
    authorize((Op.CREATE, R.CLUSTER, CLUSTER_NAME))  # every topic, but no configs shown
    got = _create(broker, "new-b")
    assert got["new-b"].error_code == 0 and got["new-b"].num_partitions == 1
    assert got["new-b"].configs is None
    assert got["new-b"].topic_config_error_code == TOPIC_AUTHORIZATION_FAILED


@covers(20)
def test_delete_topics_needs_delete(broker: Broker, authorize: Any) -> None:
    broker.create_topic("doomed", 1)
    tid = topic_id(broker, "doomed")
    req = request_class(20, 6)
    authorize((Op.DESCRIBE, R.TOPIC, "doomed"))
    resp = call(broker, 20, 6, timeout_ms=5000, topics=[
        req.DeleteTopicState(name="doomed", topic_id=None)])
    assert resp.responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
    authorize((Op.DELETE, R.TOPIC, "doomed"))  # by id without DESCRIBE: the name is hidden
    resp = call(broker, 20, 6, timeout_ms=5000, topics=[
        req.DeleteTopicState(name=None, topic_id=tid)])
    (r,) = resp.responses
    assert r.error_code == TOPIC_AUTHORIZATION_FAILED and r.name is None and r.topic_id == tid
    assert "doomed" in broker.topics()
    resp = call(broker, 20, 3, timeout_ms=5000, topic_names=["doomed"])
    assert resp.responses[0].error_code == 0 and "doomed" not in broker.topics()


@covers(37)
def test_create_partitions_needs_alter(broker: Broker, authorize: Any) -> None:
    broker.create_topic("growing", 1)
    req = request_class(37, 3)

    def grow(n: int) -> int:
        resp = call(broker, 37, 3, timeout_ms=5000, validate_only=False, topics=[
            req.CreatePartitionsTopic(name="growing", count=n, assignments=None)])
        return int(resp.results[0].error_code)

    authorize((Op.DESCRIBE, R.TOPIC, "growing"))
    assert grow(2) == TOPIC_AUTHORIZATION_FAILED and broker.topic("growing").partitions == 1
    authorize((Op.ALTER, R.TOPIC, "growing"))
    assert grow(2) == 0 and broker.topic("growing").partitions == 2


@covers(21)
def test_delete_records_needs_delete(broker: Broker, authorize: Any) -> None:
    req = request_class(21, 2)
    t = req.DeleteRecordsTopic

    def delete(topic: str) -> int:
        resp = call(broker, 21, 2, timeout_ms=5000, topics=[t(name=topic, partitions=[
            t.DeleteRecordsPartition(partition_index=0, offset=-1)])])
        return int(resp.topics[0].partitions[0].error_code)

    authorize((Op.DELETE, R.TOPIC, "gone-records"))
    assert delete(OTHER) == TOPIC_AUTHORIZATION_FAILED
    assert broker.log(TopicPartition(OTHER, 0)).log_start_offset == 0
    broker.create_topic("gone-records", 1)
    broker.produce(TopicPartition("gone-records", 0), [(b"k", b"v")])
    assert delete("gone-records") == 0
    assert broker.log(TopicPartition("gone-records", 0)).log_start_offset == 1


# ---------------------------------------------------------------------- admin: configs
@covers(32)
def test_describe_configs_needs_describe_configs(broker: Broker, authorize: Any) -> None:
    req = request_class(32, 4)

    def describe() -> dict[tuple[int, str], int]:
        resp = call(broker, 32, 4, include_synonyms=False, include_documentation=False,
                    resources=[req.DescribeConfigsResource(resource_type=rt, resource_name=n,
                                                           configuration_keys=None)
                               for rt, n in ((2, TOPIC), (2, OTHER), (4, "1"))])
        return {(r.resource_type, r.resource_name): r.error_code for r in resp.results}

    authorize((Op.DESCRIBE_CONFIGS, R.TOPIC, TOPIC))
    assert describe() == {(2, TOPIC): 0, (2, OTHER): TOPIC_AUTHORIZATION_FAILED,
                          (4, "1"): CLUSTER_AUTHORIZATION_FAILED}
    authorize((Op.DESCRIBE_CONFIGS, R.CLUSTER, CLUSTER_NAME))
    assert describe()[4, "1"] == 0


@covers(33, 44)
def test_alter_configs_need_alter_configs(broker: Broker, authorize: Any) -> None:
    alter = request_class(33, 2)
    incremental = request_class(44, 1)

    def both() -> list[dict[tuple[int, str], int]]:
        out = []
        resp = call(broker, 33, 2, validate_only=True, resources=[
            alter.AlterConfigsResource(resource_type=rt, resource_name=n, configs=[])
            for rt, n in ((2, TOPIC), (2, OTHER), (4, "1"))])
        out.append({(r.resource_type, r.resource_name): r.error_code for r in resp.responses})
        resp = call(broker, 44, 1, validate_only=False, resources=[
            incremental.AlterConfigsResource(resource_type=rt, resource_name=n, configs=[
                incremental.AlterConfigsResource.AlterableConfig(
                    name="retention.ms", config_operation=0, value="3600000")]
                if rt == 2 else [])
            for rt, n in ((2, TOPIC), (2, OTHER), (4, "1"))])
        out.append({(r.resource_type, r.resource_name): r.error_code for r in resp.responses})
        return out

    authorize((Op.ALTER_CONFIGS, R.TOPIC, TOPIC))
    for got in both():
        assert got[2, TOPIC] == 0 and got[2, OTHER] == TOPIC_AUTHORIZATION_FAILED
        assert got[4, "1"] == CLUSTER_AUTHORIZATION_FAILED
    assert broker.topic(TOPIC).config.get("retention.ms") == "3600000"
    assert "retention.ms" not in broker.topic(OTHER).config
    authorize((Op.ALTER_CONFIGS, R.CLUSTER, CLUSTER_NAME))
    assert {got[4, "1"] for got in both()} == {44}  # past authorization: POLICY_VIOLATION


# ---------------------------------------------------------------------- admin: cluster
@covers(34, 35)
def test_log_dirs_need_alter_and_describe_on_the_cluster(broker: Broker,
                                                         authorize: Any) -> None:
    dirs = broker.log_manager.log_dirs if broker.log_manager is not None else []
    path = str(dirs[0]) if dirs else "/nowhere"
    req = request_class(34, 2)
    move = dict(dirs=[req.AlterReplicaLogDir(path=path, topics=[
        req.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0, 1])])])
    authorize((Op.DESCRIBE, R.CLUSTER, CLUSTER_NAME))
    resp = call(broker, 34, 2, **move)
    assert [p.error_code for t in resp.results for p in t.partitions] == \
        [CLUSTER_AUTHORIZATION_FAILED] * 2
    described = call(broker, 35, 4, topics=None)
    assert described.error_code == 0 and described.results
    authorize((Op.ALTER, R.CLUSTER, CLUSTER_NAME))
    described = call(broker, 35, 4, topics=None)
    assert described.error_code == CLUSTER_AUTHORIZATION_FAILED and described.results == []
    assert call(broker, 35, 2, topics=None).results == []  # v0-2: no error field, no dirs
    resp = call(broker, 34, 2, **move)
    assert [p.error_code for t in resp.results for p in t.partitions] == [0, 0]


@covers(43)
def test_elect_leaders_needs_alter_on_the_cluster(broker: Broker, authorize: Any) -> None:
    req = request_class(43, 2)
    fields = dict(election_type=0, timeout_ms=5000, topic_partitions=[
        req.TopicPartitions(topic=TOPIC, partitions=[0])])
    authorize((Op.DESCRIBE, R.CLUSTER, CLUSTER_NAME))
    resp = call(broker, 43, 2, **fields)
    assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
    assert [p.error_code for t in resp.replica_election_results
            for p in t.partition_result] == [CLUSTER_AUTHORIZATION_FAILED]
    authorize((Op.ALTER, R.CLUSTER, CLUSTER_NAME))
    resp = call(broker, 43, 2, **fields)
    assert resp.error_code == 0
    assert [p.error_code for t in resp.replica_election_results
            for p in t.partition_result] == [84]  # ELECTION_NOT_NEEDED


@covers(45, 46)
def test_reassignments_need_alter_and_describe_on_the_cluster(broker: Broker,
                                                              authorize: Any) -> None:
    req = request_class(45, 0)
    fields = dict(timeout_ms=5000, topics=[req.ReassignableTopic(name=TOPIC, partitions=[
        req.ReassignableTopic.ReassignablePartition(partition_index=0,
                                                    replicas=[broker.broker_id])])])
    authorize((Op.DESCRIBE, R.CLUSTER, CLUSTER_NAME))
    resp = call(broker, 45, 0, **fields)
    assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
    assert [p.error_code for t in resp.responses for p in t.partitions] == \
        [CLUSTER_AUTHORIZATION_FAILED]
    assert call(broker, 46, 0, timeout_ms=5000, topics=None).error_code == 0
    authorize((Op.ALTER, R.CLUSTER, CLUSTER_NAME))
    resp = call(broker, 45, 0, **fields)
    assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
    assert call(broker, 46, 0, timeout_ms=5000, topics=None).error_code == \
        CLUSTER_AUTHORIZATION_FAILED


def test_a_denial_is_audited_once_per_second(broker: Broker, authorize: Any,
                                             caplog: Any) -> None:
    authorize()
    group = f"audited-{uuid.uuid4()}"
    authorization._audit_limiter.clear()  # per principal and address: earlier tests' denials
    with caplog.at_level(logging.INFO, logger="kafka_tiers.audit"):
        for _ in range(3):
            call(broker, 15, 5, groups=[group], include_authorized_operations=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_tiers.audit"]
    assert len(lines) == 1, lines
    assert "principal=User:ANONYMOUS" in lines[0] and "operation=DESCRIBE" in lines[0]
    assert f"resource=GROUP:{group}" in lines[0] and "client=127.0.0.1" in lines[0]


def test_api_versions_needs_nothing(broker: Broker, authorize: Any) -> None:
    authz = authorize()
    resp = call(broker, 18, 3, client_software_name="t", client_software_version="1")
    assert resp.error_code == 0 and resp.api_keys
    assert authz.asked == []


# ---------------------------------------------------------------------- forwarding
@pytest.mark.slow
def test_a_forwarded_admin_request_is_checked_before_it_is_forwarded(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    """The authorizer sits on the broker the client asked only (the controller has none and
    would allow anything): its denials prove the check happens before forwarding, and the
    entries it allowed are still forwarded and done by the controller."""
    c = make_kafka_cluster(brokers=3)
    c.wait_until(lambda: c.controller_id() is not None, 15, "a controller")
    ctl = c.controller_id()
    assert ctl is not None
    other = next(b for bid, b in c.brokers.items() if bid != ctl)
    assert other.kafka_server is not None
    authz = TableAuthorizer((Op.CREATE, R.TOPIC, "fwd-ok"), (Op.DELETE, R.TOPIC, "fwd-ok"))
    other.kafka_server.authorizer = authz
    req = request_class(19, 7)
    with RawConnection(other.bootstrap_servers) as conn:
        resp = conn.call(19, 7, timeout_ms=10000, validate_only=False, topics=[
            req.CreatableTopic(name=n, num_partitions=1, replication_factor=3, assignments=[],
                               configs=[]) for n in ("fwd-ok", "fwd-denied")])
    got = {t.name: t.error_code for t in resp.topics}
    assert got == {"fwd-ok": 0, "fwd-denied": TOPIC_AUTHORIZATION_FAILED}
    md = c.brokers[ctl].metadata
    assert md is not None
    assert md.topic("fwd-ok") is not None and md.topic("fwd-denied") is None
    with RawConnection(other.bootstrap_servers) as conn:
        resp = conn.call(20, 3, timeout_ms=10000, topic_names=["fwd-ok", "fwd-denied"])
    got = {t.name: t.error_code for t in resp.responses}
    assert got["fwd-denied"] == TOPIC_AUTHORIZATION_FAILED and got["fwd-ok"] == 0
    assert {Op.CREATE, Op.DELETE} <= set(authz.asked_for(R.TOPIC, "fwd-denied"))


# ---------------------------------------------------------------------- real users, real ACLs
PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";')
ADMIN = RequestIdentity(KafkaPrincipal.parse("User:admin"), "127.0.0.1", "SASL_PLAINTEXT",
                        "SASL_PLAINTEXT")


def _acl(principal: str, op: AclOperation, rtype: ResourceType, name: str, *,
         prefixed: bool = False, deny: bool = False) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, PatternType.PREFIXED if prefixed
                                      else PatternType.LITERAL),
                      AccessControlEntry(principal, "*", op, AclPermissionType.DENY if deny
                                         else AclPermissionType.ALLOW))


@pytest.fixture
def acl_broker(make_kafka_broker: Callable[..., Broker]) -> Broker:
    """A broker with one SASL_PLAINTEXT listener (PLAIN users admin, alice, bob), the
    built-in ACL authorizer and User:admin as super user; topics orders, orders-eu, payments,
    one record in orders."""
    b = make_kafka_broker(**{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "authorizer.class.name": "acl", "super.users": "User:admin"})
    for t in ("orders", "orders-eu", "payments"):
        b.create_topic(t, 1)
    b.produce(TopicPartition("orders", 0), [(b"k", b"first")])
    return b


def _grant(b: Broker, *acls: AclBinding) -> None:
    assert b.kafka_server is not None and b.kafka_server.authorizer is not None
    assert b.kafka_server.authorizer.create_acls(ADMIN, acls) == [None] * len(acls)


def _sasl(b: Broker, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw"}


def _kp_admin(b: Broker, user: str) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=b.bootstrap_servers,
                            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username=user, sasl_plain_password=f"{user}-pw",
                            request_timeout_ms=5000)


def test_a_user_sees_only_the_topics_it_may_describe_and_joins_only_its_group(
        acl_broker: Broker) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    _grant(acl_broker, _acl("User:alice", Op.READ, R.TOPIC, "orders"),
           _acl("User:alice", Op.READ, R.GROUP, "orders-readers"),
           _acl("User:alice", Op.DESCRIBE, R.GROUP, "other"))
    topics = AdminClient({**_sasl(acl_broker, "alice"), "socket.timeout.ms": 5000}
                         ).list_topics(timeout=10).topics
    assert set(topics) == {"orders"}  # READ implies DESCRIBE; the others are invisible
    conf = confluent_consumer_conf(acl_broker.bootstrap_servers, "orders-readers",
                                   **{k.replace(".", "_"): v
                                      for k, v in _sasl(acl_broker, "alice").items()})
    consumer = Consumer(conf)
    try:
        consumer.subscribe(["orders"])
        deadline, msg = time.monotonic() + 20, None
        while msg is None and time.monotonic() < deadline:
            got = consumer.poll(0.5)
            if got is not None and got.error() is None:
                msg = got
            elif got is not None:
                pytest.fail(f"consumer error: {got.error()}")
        assert msg is not None and msg.value() == b"first"
    finally:
        consumer.close()
    consumer = Consumer({**conf, "group.id": "other"})
    try:
        consumer.subscribe(["orders"])
        deadline, error = time.monotonic() + 15, None
        while error is None and time.monotonic() < deadline:
            got = consumer.poll(0.5)
            if got is not None and got.error() is not None:
                error = got.error()
            elif got is not None:
                pytest.fail("consumed without READ on the group")
    finally:
        consumer.close()
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_non_super_user_cannot_delete_topics_move_replicas_or_reassign(
        acl_broker: Broker) -> None:
    import kafka.errors as ke
    from kafka.structs import TopicPartition as KTP
    from kafka.structs import TopicPartitionReplica

    _grant(acl_broker, _acl("User:alice", Op.ALL, R.TOPIC, "orders"))
    log_dir = str(acl_broker.log_manager.log_dirs[0]) if acl_broker.log_manager else "/x"
    admin = _kp_admin(acl_broker, "alice")
    try:
        with pytest.raises(ke.ClusterAuthorizationFailedError):
            admin.alter_partition_reassignments({KTP("orders", 0): [1]})
        with pytest.raises(ke.ClusterAuthorizationFailedError):
            admin.list_partition_reassignments()
        try:
            moved = repr(admin.alter_replica_log_dirs(
                {TopicPartitionReplica("orders", 0, acl_broker.broker_id): log_dir}))
        except ke.ClusterAuthorizationFailedError as exc:
            moved = repr(exc)
        assert "ClusterAuthorizationFailed" in moved, moved
        try:
            deleted = repr(admin.delete_topics(["payments"]))
        except ke.TopicAuthorizationFailedError as exc:
            deleted = repr(exc)
        assert "TopicAuthorizationFailed" in deleted, deleted
    finally:
        admin.close()
    assert "payments" in acl_broker.topics()
    admin = _kp_admin(acl_broker, "admin")  # the super user may
    try:
        admin.delete_topics(["payments"])
    finally:
        admin.close()
    assert "payments" not in acl_broker.topics()


def test_a_prefixed_write_acl_admits_an_idempotent_producer_and_a_deny_wins(
        acl_broker: Broker) -> None:
    """InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic: bob's
    prefixed WRITE on ``orders-`` is enough (KIP-679); a prefixed DENY covering it is not."""
    _grant(acl_broker, _acl("User:bob", Op.WRITE, R.TOPIC, "orders-", prefixed=True))
    errors: list[Any] = []
    producer = Producer({**_sasl(acl_broker, "bob"), "enable.idempotence": True,
                         "message.timeout.ms": 8000, "socket.timeout.ms": 5000})
    try:
        producer.produce("orders-eu", b"idempotent", on_delivery=lambda e, m: errors.append(e))
        producer.produce("orders", b"denied", on_delivery=lambda e, m: errors.append(e))
        producer.flush(15)
    finally:
        producer.close()
    assert sorted(str(e and e.name()) for e in errors) == ["None", "TOPIC_AUTHORIZATION_FAILED"]
    server = acl_broker.kafka_server
    assert server is not None
    bob = RequestIdentity(KafkaPrincipal.parse("User:bob"), "127.0.0.1", "SASL_PLAINTEXT",
                          "SASL_PLAINTEXT")
    assert check_by_resource_type(server, bob, Op.WRITE, R.TOPIC)
    _grant(acl_broker, _acl("User:bob", Op.WRITE, R.TOPIC, "orders", prefixed=True, deny=True))
    assert not check_by_resource_type(server, bob, Op.WRITE, R.TOPIC)
    assert check_by_resource_type(server, ADMIN, Op.WRITE, R.TOPIC)  # a super user


def test_authorize_by_resource_type_matches_hosts_as_authorize_does(acl_broker: Broker
                                                                    ) -> None:
    """An ACL's host and the client's address are compared in one spelling, as the
    authorizer's own decisions compare them: an ACL for ``0:0:0:0:0:0:0:1`` covers a client
    at ``::1``, one for ``10.0.0.5`` a dual-stack client at ``::ffff:10.0.0.5``."""
    server = acl_broker.kafka_server
    assert server is not None
    for acl_host, client in (("0:0:0:0:0:0:0:1", "::1"), ("10.0.0.5", "::ffff:10.0.0.5")):
        _grant(acl_broker, AclBinding(
            ResourcePattern(R.TOPIC, f"t-{client}", PatternType.LITERAL),
            AccessControlEntry("User:carol", acl_host, Op.WRITE, AclPermissionType.ALLOW)))
        carol = RequestIdentity(KafkaPrincipal.parse("User:carol"), client, "SASL_PLAINTEXT",
                                "SASL_PLAINTEXT")
        assert check_by_resource_type(server, carol, Op.WRITE, R.TOPIC), (acl_host, client)
        assert server.authorizer is not None
        assert [r.name for r in server.authorizer.authorize(
            carol, [Action(Op.WRITE, R.TOPIC, f"t-{client}")])] == ["ALLOWED"]
