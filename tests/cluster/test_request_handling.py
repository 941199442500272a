"""Request handling as a hostile peer tries it: forged controller requests, malformed fields
sent to every api, reassignments to brokers that do not exist, unbounded lists and
timeouts, and the default bounds that keep one request within the request timeout."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.request_schemas import (
    REQUEST_SCHEMAS,
    AnyValue,
    ConfigValue,
    ListOf,
    MapOf,
    Nullable,
    Obj,
    Scalar,
    Spec,
    request_validator,
)
from kafka_tiers.cluster.transport import (
    ApiKey,
    ErrorCode,
    HandlerTable,
    Request,
    Response,
    TcpClient,
    TcpServer,
)
from kafka_tiers.placement.limits import MAX_REQUEST_PARTITIONS

Make = Callable[..., LocalCluster]


def _controller_address(c: LocalCluster) -> tuple[Any, str]:
    cl = c.client()
    return cl, cl.broker_address(cl.metadata()["controller"])


def _other_broker(c: LocalCluster, cl: Any) -> int:
    ctl = cl.metadata()["controller"]
    return next(b for b in c.live if b != ctl)


# ---------------------------------------------------------------------- 1. controller epoch

def test_a_controller_epoch_above_the_stores_is_refused_and_never_remembered(
        make_cluster: Make, caplog: pytest.LogCaptureFixture) -> None:
    c = make_cluster(brokers=2)
    cl = c.client()
    store_epoch = cl.metadata()["controller_epoch"]
    victim = _other_broker(c, cl)
    address = cl.broker_address(victim)
    with caplog.at_level(logging.WARNING):
        resp = cl.transport.send_raw(address, ApiKey.LEADER_AND_ISR,
                                     {"controller_epoch": store_epoch + 1000, "partitions": []})
    assert resp.error == ErrorCode.STALE_CONTROLLER_EPOCH
    warned = [r for r in caplog.records if "LeaderAndIsr" in r.getMessage()
              and str(store_epoch + 1000) in r.getMessage()]
    assert len(warned) == 1 and "loopback" in warned[0].getMessage()
    # not remembered: the real controller's requests to that broker still work
    cl.create_topic("after", 2, 2)
    member = c.broker(victim).member
    assert member is not None and member.replicas is not None
    assert member.replicas.controller_epoch == store_epoch
    assert {tp.partition for tp in member.replicas.partitions if tp.topic == "after"} == {0, 1}
    # and the epoch 2**40 of the review: refused (not an int32 epoch), nothing done
    resp = cl.transport.send_raw(address, ApiKey.LEADER_AND_ISR,
                                 {"controller_epoch": 2 ** 40, "partitions": []})
    assert resp.error == ErrorCode.INVALID_REQUEST
    cl.create_topic("later", 1, 2)


def test_a_forged_stop_replica_deletes_nothing_and_a_real_delete_is_logged(
        make_cluster: Make, caplog: pytest.LogCaptureFixture) -> None:
    c = make_cluster(brokers=2)
    cl = c.client()
    cl.create_topic("t", 1, 2)
    victim = _other_broker(c, cl)
    member = c.broker(victim).member
    assert member is not None and member.replicas is not None
    tp = TopicPartition("t", 0)
    assert tp in member.replicas.partitions
    store_epoch = cl.metadata()["controller_epoch"]
    forged = {"controller_epoch": store_epoch + 1, "delete": True,
              "partitions": [{"topic": "t", "partition": 0, "delete": True}]}
    with caplog.at_level(logging.WARNING):
        resp = cl.transport.send_raw(cl.broker_address(victim), ApiKey.STOP_REPLICA, forged)
    assert resp.error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert tp in member.replicas.partitions and tp in member.log_manager.logs
    assert any("StopReplica" in r.getMessage() and "loopback" in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        cl.delete_topic("t")
    deletes = [r.getMessage() for r in caplog.records
               if "StopReplica with delete" in r.getMessage()]
    assert len(deletes) == 2  # one per replica, naming the partition and the epoch
    assert all("t-0" in m and f"controller epoch {store_epoch}" in m for m in deletes)


# ---------------------------------------------------------------------- 3. shapes

def _valid(spec: Spec) -> Any:
    """A value of the shape ``spec`` accepts."""
    if isinstance(spec, Nullable):
        return _valid(spec.inner)
    if isinstance(spec, Scalar):
        return {int: max(spec.lo, 0), str: "t", bool: False}[spec.type]
    if isinstance(spec, ListOf):
        return [_valid(spec.item)]
    if isinstance(spec, MapOf):
        return {"0": _valid(spec.value)}
    if isinstance(spec, Obj):
        return {k: _valid(v) for k, v in spec.required.items()}
    return 1  # ANY, a config value


def _wrong(spec: Spec) -> list[Any]:
    """Values of the wrong JSON type for ``spec`` (none for ANY)."""
    if isinstance(spec, Nullable):
        return _wrong(spec.inner)
    if isinstance(spec, Scalar):
        if spec.type is int:
            return ["1", 1.5, True, [1], {"a": 1}]
        if spec.type is str:
            return [1, ["t"], {"t": 1}]
        return ["yes", 1]
    if isinstance(spec, ListOf | MapOf | Obj):
        return ["x", 1] + ([[1]] if not isinstance(spec, ListOf) else [{"a": 1}])
    if isinstance(spec, ConfigValue):
        return [[1], {"a": 1}]
    assert isinstance(spec, AnyValue)
    return []


def _mutations(spec: Obj) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every body that is valid but for one field (at any depth) of a wrong type."""
    base = _valid(spec)

    def walk(s: Spec, value: Any, path: str, put: Callable[[Any], Any]
             ) -> Iterator[tuple[str, Any]]:
        if isinstance(s, Nullable):
            s = s.inner
        for bad in _wrong(s):
            yield path, put(bad)
        if isinstance(s, Obj):
            for name, sub in {**s.required, **s.optional}.items():
                cur = value.get(name, _valid(sub))
                yield from walk(sub, cur, f"{path}.{name}",
                                lambda v, name=name: put({**value, name: v}))
        elif isinstance(s, ListOf):
            yield from walk(s.item, value[0], f"{path}[0]", lambda v: put([v]))
        elif isinstance(s, MapOf):
            yield from walk(s.value, value["0"], f"{path}['0']", lambda v: put({"0": v}))

    for name, sub in {**spec.required, **spec.optional}.items():
        cur = base.get(name, _valid(sub))
        yield from walk(sub, cur, name, lambda v, name=name: {**base, name: v})


def test_every_served_api_checks_the_shape_of_its_body(make_cluster: Make) -> None:
    c = make_cluster(brokers=2)
    member = c.broker(c.live[0]).member
    assert member is not None
    served = set(member.handlers.versions())
    assert served == set(member.handlers.validated()) == set(REQUEST_SCHEMAS)


def test_wrong_typed_fields_of_every_api_are_invalid_request_with_one_warn_line(
        make_cluster: Make, caplog: pytest.LogCaptureFixture) -> None:
    c = make_cluster(brokers=2)
    cl, address = _controller_address(c)
    cl.create_topic("t", 1, 2)
    sent = 0
    for api, spec in REQUEST_SCHEMAS.items():
        for path, body in _mutations(spec):
            caplog.clear()
            with caplog.at_level(logging.DEBUG):
                resp = cl.transport.send_raw(address, api, body, timeout=10)
            assert resp.error == ErrorCode.INVALID_REQUEST, (ApiKey(api).name, path, body,
                                                               resp.error, resp.body)
            assert path.split("[")[0].split(".")[0] in resp.body["message"]
            warns = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warns) == 1 and warns[0].levelno == logging.WARNING, \
                (ApiKey(api).name, path, [r.getMessage() for r in warns])
            sent += 1
    assert sent > 100
    # nothing was acted on: the topic is as it was, no reassignment, no other topic
    assert [t["topic"] for t in cl.metadata()["topics"]] == ["t"]


def test_the_reviewers_malformed_create_topics_is_invalid_request(
        make_cluster: Make, caplog: pytest.LogCaptureFixture) -> None:
    c = make_cluster(brokers=2)
    cl, address = _controller_address(c)
    with caplog.at_level(logging.DEBUG):
        resp = cl.transport.send_raw(address, ApiKey.CREATE_TOPICS, {
            "topic": "zz7", "partitions": 1, "replication_factor": 1, "config": [1]})
    assert resp.error == ErrorCode.INVALID_REQUEST
    assert "body.config must be an object, got a list" in resp.body["message"]
    assert not any(r.exc_info for r in caplog.records)
    assert "zz7" not in [t["topic"] for t in cl.metadata()["topics"]]


def test_a_handler_bug_is_unknown_with_one_error_line_and_the_traceback_at_debug(
        caplog: pytest.LogCaptureFixture) -> None:
    table = HandlerTable()

    def buggy(req: Request) -> Response:
        return req.body["config"].items()  # type: ignore[no-any-return]

    table.register(ApiKey.METADATA, buggy)
    with caplog.at_level(logging.INFO):
        resp = table.handle(Request(ApiKey.METADATA, 0, {"config": [1]}, peer="10.0.0.1:5"))
    assert resp.error == ErrorCode.UNKNOWN
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and errors[0].levelno == logging.ERROR
    assert "AttributeError" in errors[0].getMessage() and "10.0.0.1:5" in errors[0].getMessage()
    assert errors[0].exc_info is None
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        table.handle(Request(ApiKey.METADATA, 0, {"config": [1]}))
    assert any(r.levelno == logging.DEBUG and r.exc_info for r in caplog.records)


def test_a_malformed_request_over_tcp_is_one_warn_line_naming_the_peer(
        caplog: pytest.LogCaptureFixture) -> None:
    table = HandlerTable()
    table.register(ApiKey.METADATA, lambda r: Response({"ok": True}),
                   validate=request_validator(ApiKey.METADATA, {"max.request.topics": "2"}))
    server = TcpServer(table).start()
    client = TcpClient()
    try:
        with caplog.at_level(logging.INFO):
            bad = client.send_raw(server.address, ApiKey.METADATA, {"topics": "t"})
            long = client.send_raw(server.address, ApiKey.METADATA, {"topics": ["a"] * 3})
            good = client.send_raw(server.address, ApiKey.METADATA, {"topics": ["a"]})
        assert bad.error == long.error == ErrorCode.INVALID_REQUEST
        assert "max.request.topics 2" in long.body["message"]
        assert good.error == ErrorCode.NONE and good.body == {"ok": True}
        warns = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warns) == 2
        assert all("METADATA" in w and "from 127.0.0.1:" in w for w in warns)
        assert "body.topics must be a list, got a string" in warns[0]
    finally:
        client.close()
        server.close()


# ---------------------------------------------------------------------- 4. reassignment

@pytest.mark.parametrize("replicas", [[99], [1, 99], [2, 2]])
def test_a_reassignment_to_an_unknown_or_repeated_broker_is_refused(
        make_cluster: Make, replicas: list[int]) -> None:
    c = make_cluster(brokers=2)
    cl, address = _controller_address(c)
    cl.create_topic("t", 1, 1)
    resp = cl.transport.send_raw(address, ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
        "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                       {"topic": "t", "partition": 0, "replicas": replicas}]})
    assert resp.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT, resp.body
    assert cl.transport.send(address, ApiKey.LIST_PARTITION_REASSIGNMENTS, {}).body == \
        {"partitions": []}


# ---------------------------------------------------------------------- 5. counts, timeouts

def test_offset_for_leader_epoch_lists_are_bounded(make_cluster: Make) -> None:
    c = make_cluster(brokers=2, overrides={"max.request.partitions": "3"})
    cl, address = _controller_address(c)
    entry = {"topic": "t", "partition": 0, "leader_epoch": 0}
    resp = cl.transport.send_raw(address, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                                 {"partitions": [entry] * 4})
    assert resp.error == ErrorCode.INVALID_REQUEST
    assert "max.request.partitions 3" in resp.body["message"]
    ok = cl.transport.send_raw(address, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                               {"partitions": [entry] * 3})
    assert ok.error == ErrorCode.NONE and len(ok.body["partitions"]) == 3


@pytest.mark.parametrize(("api", "body"), [
    (ApiKey.CREATE_TOPICS, {"topic": "neg", "partitions": 1, "replication_factor": 1,
                            "timeout_ms": -1}),
    (ApiKey.CREATE_TOPICS, {"topic": "neg", "partitions": 1, "replication_factor": 1,
                            "timeout_ms": 10 ** 15}),
    (ApiKey.PRODUCE, {"topic": "neg", "partition": 0, "acks": -1, "timeout_ms": 10 ** 15}),
    (ApiKey.FETCH, {"max_wait_ms": -1, "partitions": []}),
])
def test_timeouts_out_of_range_are_refused_before_anything_is_done(
        make_cluster: Make, api: ApiKey, body: dict) -> None:
    c = make_cluster(brokers=2)
    cl, address = _controller_address(c)
    resp = cl.transport.send_raw(address, api, body)
    assert resp.error == ErrorCode.INVALID_REQUEST, resp.body
    assert "neg" not in [t["topic"] for t in cl.metadata()["topics"]]


# ---------------------------------------------------------------------- 2. time per request

def test_the_reviewers_99999_partitions_are_refused_by_the_default_bound(
        make_cluster: Make) -> None:
    c = make_cluster(brokers=2)
    cl, address = _controller_address(c)
    t0 = time.monotonic()
    resp = cl.transport.send_raw(address, ApiKey.CREATE_TOPICS, {
        "topic": "big", "partitions": 99999, "replication_factor": 1})
    assert resp.error == ErrorCode.INVALID_PARTITIONS
    assert f"max.request.partitions {MAX_REQUEST_PARTITIONS}" in resp.body["message"]
    assert time.monotonic() - t0 < 5
    assert cl.metadata()["topics"] == []


@pytest.mark.slow
def test_a_request_at_the_default_bound_answers_within_the_request_timeout(
        make_cluster: Make) -> None:
    """The largest creation the defaults admit (RF 1, two brokers in this one process, so
    twice the work of one broker process) answers in time, and the controller serves the
    next request at once."""
    c = make_cluster(brokers=2)
    cl, address = _controller_address(c)
    timeout_s = 30.0  # request.timeout.ms's default
    t0 = time.monotonic()
    resp = cl.transport.send_raw(address, ApiKey.CREATE_TOPICS, {
        "topic": "big", "partitions": MAX_REQUEST_PARTITIONS, "replication_factor": 1,
        "timeout_ms": int(timeout_s * 1000)}, timeout=timeout_s + 5)
    took = time.monotonic() - t0
    assert resp.error == ErrorCode.NONE, resp.body
    assert took < timeout_s, took
    t1 = time.monotonic()
    cl.create_topic("next", 1, 1)
    assert time.monotonic() - t1 < 5


def test_counts_given_as_digit_strings_are_the_checked_counts(make_cluster: Make) -> None:
    """as_count accepts ``"3"``; the placer gets the checked int, never the string (it
    answered INVALID_REQUEST with a ValueError from the placer)."""
    c = make_cluster(brokers=2)
    cl, address = _controller_address(c)
    resp = cl.transport.send_raw(address, ApiKey.CREATE_TOPICS, {
        "topic": "s", "partitions": "3", "replication_factor": "2"})
    assert resp.error == ErrorCode.NONE, resp.body
    assert sorted(resp.body["assignment"]) == ["0", "1", "2"]
    assert all(len(r) == 2 for r in resp.body["assignment"].values())


def test_the_controller_sends_a_brokers_share_in_bounded_requests(
        make_cluster: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    """LeaderAndIsr carries at most CONTROLLER_REQUEST_MAX_PARTITIONS entries (the bound
    brokers hold it to): a larger share goes in several requests, all applied."""
    from kafka_tiers.cluster import controller as controller_module
    from kafka_tiers.cluster.replica_manager import ReplicaManager

    monkeypatch.setattr(controller_module, "CONTROLLER_REQUEST_MAX_PARTITIONS", 2)
    sizes: list[int] = []
    real = ReplicaManager.leader_and_isr

    def recording(self: ReplicaManager, body: dict, peer: str = "loopback") -> dict:
        sizes.append(len(body.get("partitions", [])))
        return real(self, body, peer)

    monkeypatch.setattr(ReplicaManager, "leader_and_isr", recording)
    c = make_cluster(brokers=2)
    cl = c.client()
    sizes.clear()
    assert sorted(cl.create_topic("t", 7, 2)) == list(range(7))
    assert sizes and max(sizes) <= 2 and sum(sizes) == 14
    for b in c.live:
        member = c.broker(b).member
        assert member is not None and member.replicas is not None
        assert len([tp for tp in member.replicas.partitions if tp.topic == "t"]) == 7


def test_a_controller_request_above_its_bound_is_refused(make_cluster: Make) -> None:
    from kafka_tiers.cluster.request_schemas import CONTROLLER_REQUEST_MAX_PARTITIONS

    c = make_cluster(brokers=2)
    cl = c.client()
    epoch = cl.metadata()["controller_epoch"]
    entry = {"topic": "t", "partition": 0}
    resp = cl.transport.send_raw(cl.broker_address(c.live[0]), ApiKey.STOP_REPLICA, {
        "controller_epoch": epoch, "partitions": [entry] * (CONTROLLER_REQUEST_MAX_PARTITIONS
                                                            + 1)})
    assert resp.error == ErrorCode.INVALID_REQUEST
    assert str(CONTROLLER_REQUEST_MAX_PARTITIONS) in resp.body["message"]
