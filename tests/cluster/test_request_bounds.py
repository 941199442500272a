"""Every count a request carries has a configured bound, checked before anything is
allocated, and a refusal answers with the matching Kafka error code (never UNKNOWN):
partitions per request and per topic, replication factor, partitions per broker, topics and
partitions listed, record batch and request frame sizes, ``place --partitions``."""

from __future__ import annotations

import resource
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_tiers.api.cluster import BrokerInfo, ClusterView
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.transport import (
    ApiKey,
    ErrorCode,
    HandlerTable,
    Response,
    TcpClient,
    TcpServer,
    TransportError,
    decode_response,
    encode_request,
)
from kafka_tiers.config import BrokerConfig
from kafka_tiers.placement.limits import LimitExceededError
from kafka_tiers.placement.service import PlacementService
from tests.broker.helpers import make_broker

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "kafka_tiers" / "samples" / "multi-level-cluster.json"
HUGE = 1099511627776
Make = Callable[..., LocalCluster]


def _code(fn: Callable[[], object]) -> ErrorCode:
    with pytest.raises(TransportError) as err:
        fn()
    return err.value.code


# ---------------------------------------------------------------------- CreateTopics

def test_create_topics_counts_are_bounded_with_kafka_error_codes(make_cluster: Make) -> None:
    c = make_cluster(overrides={"max.topic.partitions": "8", "max.request.partitions": "6",
                                "max.replication.factor": "2"})
    cl = c.client()
    t0 = time.monotonic()
    assert _code(lambda: cl.create_topic("huge", HUGE, 1, wait=False)) == \
        ErrorCode.INVALID_PARTITIONS
    assert time.monotonic() - t0 < 5
    # per request
    assert _code(lambda: cl.create_topic("t", 7, 1, wait=False)) == ErrorCode.INVALID_PARTITIONS
    assert sorted(cl.create_topic("t", 6, 1)) == list(range(6))
    # per topic: 6 + 2 fits, 6 + 3 does not (CreatePartitions)
    with pytest.raises(TransportError) as err:
        cl.add_partitions("t", 9, wait=False)
    assert err.value.code == ErrorCode.INVALID_PARTITIONS
    assert "max.topic.partitions 8" in str(err.value)
    assert sorted(cl.add_partitions("t", 8)) == [6, 7]
    assert _code(lambda: cl.add_partitions("t", HUGE, wait=False)) == \
        ErrorCode.INVALID_PARTITIONS
    # replication factor: the cap, then the live brokers
    assert _code(lambda: cl.create_topic("r", 1, 3, wait=False)) == \
        ErrorCode.INVALID_REPLICATION_FACTOR
    assert cl.describe_topic("t")  # the controller still answers


def test_replication_factor_above_live_brokers_and_bad_types(make_cluster: Make) -> None:
    c = make_cluster()
    cl = c.client()
    assert _code(lambda: cl.create_topic("r", 1, 4, wait=False)) == \
        ErrorCode.INVALID_REPLICATION_FACTOR
    assert _code(lambda: cl.create_topic("r", 1, 40, wait=False)) == \
        ErrorCode.INVALID_REPLICATION_FACTOR
    controller = cl.metadata()["controller"]
    address = cl.broker_address(controller)

    def raw(body: dict) -> ErrorCode:
        return cl.transport.send_raw(address, ApiKey.CREATE_TOPICS, body).error

    assert raw({"topic": "x", "partitions": "many", "replication_factor": 1}) == \
        ErrorCode.INVALID_PARTITIONS
    assert raw({"topic": "x", "partitions": 1.5, "replication_factor": 1}) == \
        ErrorCode.INVALID_PARTITIONS
    assert raw({"topic": "x", "partitions": 1, "replication_factor": "x"}) == \
        ErrorCode.INVALID_REPLICATION_FACTOR
    assert raw({"partitions": 1}) == ErrorCode.INVALID_REQUEST  # no topic
    assert raw({"topic": "../x", "partitions": 1}) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert raw({"topic": "x" * 300, "partitions": 1}) == ErrorCode.INVALID_TOPIC_EXCEPTION
    # 0 is not "the default" (absent or Kafka's -1 is)
    assert raw({"topic": "x", "partitions": 0, "replication_factor": 1}) == \
        ErrorCode.INVALID_PARTITIONS
    assert raw({"topic": "x", "partitions": 1, "replication_factor": 0}) == \
        ErrorCode.INVALID_REPLICATION_FACTOR
    assert raw({"topic": "d", "partitions": -1, "replication_factor": -1}) == ErrorCode.NONE
    assert raw({"topic": "x", "partitions": 1, "replication_factor": 1,
                "assignment": {str(HUGE): [1]}}) == ErrorCode.INVALID_PARTITIONS
    assert raw({"topic": "x", "assignment": {}}) == ErrorCode.INVALID_PARTITIONS
    assert raw({"topic": "x", "assignment": {"5": [1]}}) == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT  # partitions start at 0, one after another
    assert raw({"topic": "x", "assignment": {"0": [1], "2": [2]}}) == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert raw({"topic": "x", "assignment": {"0": [1, 2], "1": [2, 3]}}) == ErrorCode.NONE
    assert raw({"topic": "x", "assignment": {"0": [3]}}) == \
        ErrorCode.TOPIC_ALREADY_EXISTS  # creating never grows a topic
    grown = cl.transport.send_raw(address, ApiKey.CREATE_PARTITIONS,
                                  {"topic": "x", "total": 3, "assignment": [[3, 1]]})
    assert (grown.error, grown.body.get("assignment")) == (ErrorCode.NONE, {"2": [3, 1]})
    for body in ({"topic": "x", "total": "many"}, {"topic": "x", "total": HUGE},
                 {"topic": "x", "total": 5, "assignment": [[1]] * 200_000}):
        bad = cl.transport.send_raw(address, ApiKey.CREATE_PARTITIONS, body)
        assert bad.error in (ErrorCode.INVALID_PARTITIONS, ErrorCode.INVALID_REQUEST), bad
    assert raw({"topic": "x", "partitions": 1, "replication_factor": 1,
                "broker_ids": list(range(200_000))}) == ErrorCode.INVALID_REQUEST
    placement = cl.transport.send_raw(address, ApiKey.CREATE_REPLICA_PLACEMENT,
                                      {"num_partitions": HUGE, "replication_factor": 1})
    assert placement.error == ErrorCode.INVALID_PARTITIONS


def test_max_broker_partitions_is_a_policy_violation(make_cluster: Make) -> None:
    c = make_cluster(overrides={"max.broker.partitions": "4"})
    cl = c.client()
    cl.create_topic("a", 4, 3)  # 4 replicas on every broker
    with pytest.raises(TransportError) as err:
        cl.create_topic("b", 1, 1, wait=False)
    assert err.value.code == ErrorCode.POLICY_VIOLATION
    assert "max.broker.partitions 4" in str(err.value)
    assert "b" not in [t["topic"] for t in cl.metadata()["topics"]]


def test_listed_topics_and_partitions_are_bounded(make_cluster: Make) -> None:
    c = make_cluster(overrides={"max.request.topics": "3", "max.request.partitions": "3"})
    cl = c.client()
    address = cl.broker_address(cl.metadata()["controller"])
    md = cl.transport.send_raw(address, ApiKey.METADATA, {"topics": ["a", "b", "c", "d"]})
    assert md.error == ErrorCode.INVALID_REQUEST and "max.request.topics 3" in \
        md.body["message"]
    dirs = cl.transport.send_raw(address, ApiKey.DESCRIBE_LOG_DIRS,
                                 {"topics": ["a", "b", "c", "d"]})
    assert dirs.error == ErrorCode.INVALID_REQUEST
    elect = cl.transport.send_raw(address, ApiKey.ELECT_LEADERS, {"partitions": [
        {"topic": "a", "partition": p} for p in range(4)]})
    assert elect.error == ErrorCode.INVALID_REQUEST
    reassign = cl.transport.send_raw(address, ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
        "partitions": [{"topic": "a", "partition": p, "replicas": [1]} for p in range(4)]})
    assert reassign.error == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(("entry", "code"), [
    ({"topic": "a", "partition": 0}, ErrorCode.INVALID_REQUEST),
    ({"partition": 0, "replicas": [1]}, ErrorCode.INVALID_REQUEST),
    ({"topic": "a", "partition": HUGE, "replicas": [1]}, ErrorCode.INVALID_PARTITIONS),
    ({"topic": "a", "partition": 0, "replicas": list(range(100))},
     ErrorCode.INVALID_REPLICATION_FACTOR),
    ({"topic": "a", "partition": 0, "replicas": [1, 1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ({"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]},
     ErrorCode.INVALID_REQUEST),
])
def test_reassignment_entries_are_checked_before_they_are_stored(
        make_cluster: Make, entry: dict, code: ErrorCode) -> None:
    c = make_cluster()
    cl = c.client()
    address = cl.broker_address(cl.metadata()["controller"])
    resp = cl.transport.send_raw(address, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                                 {"partitions": [entry]})
    assert resp.error == code
    assert cl.transport.send(address, ApiKey.LIST_PARTITION_REASSIGNMENTS, {}).body == \
        {"partitions": []}


def test_a_batch_above_message_max_bytes_is_message_too_large(make_cluster: Make) -> None:
    c = make_cluster(overrides={"message.max.bytes": "1024"})
    cl = c.client()
    cl.create_topic("m", 1, 3)
    with pytest.raises(TransportError) as err:
        cl.produce("m", 0, [b"x" * 4096], timeout=5)
    assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert cl.produce("m", 0, [b"small"], timeout=5) == 0


# ---------------------------------------------------------------------- frames

def _echo() -> HandlerTable:
    t = HandlerTable()
    t.register(ApiKey.METADATA, lambda r: Response({"n": len(r.payload)}))
    return t


def test_a_frame_above_socket_request_max_bytes_is_refused_without_reading_it() -> None:
    server = TcpServer(_echo(), max_request_bytes=4096).start()
    client = TcpClient()
    try:
        with pytest.raises(TransportError) as err:
            client.send(server.address, ApiKey.METADATA, {}, payload=b"x" * 1_000_000)
        assert err.value.code == ErrorCode.INVALID_REQUEST
        assert "socket.request.max.bytes 4096" in str(err.value)
        # the connection stays in step: the next request is answered
        assert client.send(server.address, ApiKey.METADATA, {}, payload=b"y" * 100).body == \
            {"n": 100}
    finally:
        client.close()
        server.close()


def test_the_length_prefix_is_checked_before_the_body_arrives() -> None:
    """A prefix announcing 2 GiB is answered from the header alone once the sender stops:
    the server never waits to hold the body."""
    server = TcpServer(_echo(), max_request_bytes=4096).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            header = encode_request(ApiKey.METADATA, 0, 99, {})[4:]
            sock.sendall(struct.pack(">i", 5000) + header + b"z" * (5000 - len(header)))
            size = struct.unpack(">i", sock.recv(4))[0]
            data = b""
            while len(data) < size:
                data += sock.recv(size - len(data))
            corr, resp = decode_response(data)
            assert corr == 99 and resp.error == ErrorCode.INVALID_REQUEST
    finally:
        server.close()


def test_the_broker_listener_takes_socket_request_max_bytes(make_cluster: Make) -> None:
    c = make_cluster(transport="tcp", overrides={"socket.request.max.bytes": "2048"})
    cl = c.client()
    address = cl.broker_address(cl.metadata()["controller"])
    resp = cl.transport.send_raw(address, ApiKey.METADATA, {"topics": ["x" * 4000]})
    assert resp.error == ErrorCode.INVALID_REQUEST
    assert "socket.request.max.bytes 2048" in resp.body["message"]


# ---------------------------------------------------------------------- placement

def _cluster(n: int = 3) -> ClusterView:
    return ClusterView([BrokerInfo(b, None, False) for b in range(1, n + 1)], {})


def test_placement_service_checks_counts_before_the_placer_runs() -> None:
    cfg = BrokerConfig({"max.topic.partitions": "10", "max.replication.factor": "2"})
    with PlacementService(cfg) as core:
        assert len(core.create_replica_placement(_cluster(), 10, 2)) == 10
        for n, rf, start, code in ((11, 1, 0, "INVALID_PARTITIONS"),
                                   (6, 1, 5, "INVALID_PARTITIONS"),
                                   (HUGE, 1, 0, "INVALID_PARTITIONS"),
                                   (0, 1, 0, "INVALID_PARTITIONS"),
                                   (1, 3, 0, "INVALID_REPLICATION_FACTOR")):
            with pytest.raises(LimitExceededError) as err:
                core.create_replica_placement(_cluster(), n, rf, start_partition=start)
            assert err.value.error_code == code


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_place_with_a_huge_partition_count_is_one_error_line() -> None:
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            [sys.executable, "-m", "kafka_tiers", "place", "--cluster", str(SAMPLE),
             "--partitions", str(HUGE), "--replication-factor", "3"],
            capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail("place --partitions 2**40 did not finish in 60 s")
    assert time.monotonic() - t0 < 30
    assert res.returncode != 0
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert "max.request.partitions" in lines[0] and str(HUGE) in lines[0]


# ---------------------------------------------------------------------- standalone

def test_standalone_broker_bounds_topic_creation(tmp_path: Path) -> None:
    broker, _, _ = make_broker(tmp_path, max_topic_partitions="4",
                               max_broker_partitions="6")
    try:
        with pytest.raises(LimitExceededError) as err:
            broker.create_topic("big", HUGE)
        assert err.value.error_code == "INVALID_PARTITIONS"
        with pytest.raises(LimitExceededError):
            broker.create_topic("five", 5)
        broker.create_topic("four", 4)
        with pytest.raises(LimitExceededError) as err:
            broker.create_topic("three", 3)
        assert err.value.error_code == "POLICY_VIOLATION"
        broker.create_topic("two", 2)
        assert sorted(broker.topics()) == ["four", "two"]
    finally:
        broker.shutdown()


def test_a_fetch_response_is_bounded_by_fetch_max_bytes(make_cluster: Make) -> None:
    c = make_cluster(overrides={"fetch.max.bytes": "4096"})
    cl = c.client()
    cl.create_topic("f", 3, 1)
    for p in range(3):
        for _ in range(4):
            cl.produce("f", p, [b"v" * 1500], timeout=5)
    md = cl.metadata(["f"])["topics"][0]["partitions"]
    leader = {p["partition"]: p["leader"] for p in md}
    assert len(set(leader.values())) >= 1
    b = leader[0]
    parts = [{"topic": "f", "partition": p, "offset": 0} for p in range(3) if leader[p] == b]
    parts = parts * 20  # the same partitions again and again: still one bounded response
    resp = cl.transport.send_raw(cl.broker_address(b), ApiKey.FETCH, {
        "replica_id": -1, "max_bytes": 1 << 40, "max_wait_ms": 0, "partitions": parts})
    assert resp.error == ErrorCode.NONE
    one_batch = resp.body["partitions"][0]["size"]
    assert 0 < one_batch <= 4096
    assert len(resp.payload) <= 4096 + 1600  # the budget, passed by at most one batch
    assert sum(e["size"] for e in resp.body["partitions"]) == len(resp.payload)


# ---------------------------------------------------------------------- admin channel

def test_admin_channel_requests_are_bounded(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import json as _json

    from kafka_tiers.broker import admin_channel as ac

    too_many = {"version": 1, "partitions": [
        {"topic": "t", "partition": p, "log_dir": "any"}
        for p in range(ac.MAX_REQUEST_MOVES + 1)]}
    with pytest.raises(ac.ReassignmentError, match=r"max\.request\.partitions"):
        ac.request_moves(too_many)

    class Manager:  # what poll() needs of a log manager
        log_dirs = [tmp_path]
        offline_dirs: dict[str, str] = {}

        def alter_replica_log_dirs(self, moves: object) -> dict:
            raise AssertionError("an oversized request must not be applied")

    monkeypatch.setattr(ac, "MAX_REQUEST_BYTES", 64)
    admin = ac.admin_dir(tmp_path)
    admin.mkdir()
    (admin / "reassign-1-a.json").write_text(_json.dumps(
        {"version": 1, "partitions": [{"topic": "t", "partition": 0, "log_dir": "any"}] * 3}))
    assert ac.AdminChannel(Manager()).poll() == 1  # type: ignore[arg-type]
    status = _json.loads((admin / "status-1-a.json").read_text())
    assert status["complete"] and "exceeds 64" in status["error"]
    assert not (admin / "reassign-1-a.json").exists()
