"""Brokers as separate processes on loopback with a real ZooKeeper: SIGKILLed leaders under
acks=all, a SIGSTOPped zombie leader, a killed controller, reassignment under load."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafka_tiers.cluster.client import ClusterClient, encode_records
from kafka_tiers.cluster.transport import ApiKey, ErrorCode, TransportError
from tests.cluster.helpers import AckedProducer, assert_exactly_once
from tests.cluster.processes import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.servers]


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s: {what}")
        time.sleep(0.05)


@pytest.fixture
def brokers(zookeeper_server, tmp_path: Path) -> Iterator[Callable[..., dict]]:
    made: list[BrokerProcess] = []
    clients: list[ClusterClient] = []

    def make(n: int = 3, extra: dict[str, str] | None = None) -> dict:
        chroot = f"/kt{time.monotonic_ns()}"
        admin = zookeeper_server.client()
        admin.ensure_path(chroot)
        admin.stop()
        admin.close()
        connect = zookeeper_server.connection_string + chroot
        procs = {b: BrokerProcess(b, tmp_path, connect, extra) for b in range(1, n + 1)}
        made.extend(procs.values())
        for p in procs.values():
            p.start()
        return procs

    def client(procs: dict) -> ClusterClient:
        c = ClusterClient([p.address for p in procs.values()], timeout=20)
        clients.append(c)
        return c

    make.client = client  # type: ignore[attr-defined]
    yield make
    for c in clients:
        c.close()
    for p in made:
        p.kill()


def test_sigkill_leader_repeatedly_under_acks_all(brokers) -> None:
    procs = brokers(3, {"min.insync.replicas": "2"})
    cl = brokers.client(procs)
    cl.create_topic("t", 1, 3)
    prod = AckedProducer(brokers.client(procs), "t", timeout=6).start()
    try:
        for _ in range(3):
            prod.wait_acked(15, 30)
            leader = cl.leader("t", 0, refresh=True)
            procs[leader].kill()  # SIGKILL
            wait_until(lambda old=leader: cl.leader("t", 0, refresh=True) not in (-1, old),
                       30, "a new leader")
            prod.wait_acked(15, 30)
            procs[leader].start()
            wait_until(lambda b=leader: b in cl.describe_topic("t")[0]["isr"], 30,
                       "the restarted broker back in the ISR")
    finally:
        prod.stop()
    assert len(prod.acked) >= 90
    assert_exactly_once(committed(cl, "t", prod.acked), prod.acked)
    # the followers hold the same: kill the leader once more and read from its successor
    leader = cl.leader("t", 0, refresh=True)
    procs[leader].kill()
    wait_until(lambda: cl.leader("t", 0, refresh=True) not in (-1, leader), 30, "successor")
    assert_exactly_once(committed(cl, "t", prod.acked), prod.acked)


def committed(cl: ClusterClient, topic: str, acked: list[str]) -> list[bytes | None]:
    """The committed records, once the (new) leader's high watermark covers the last
    acknowledged one: a new leader's high watermark moves up as its followers fetch."""
    last = acked[-1].encode()
    values: list[bytes | None] = []

    def covered() -> bool:
        nonlocal values
        values = [r.value for r in cl.read_all(topic, 0)]
        return last in values

    with contextlib.suppress(TimeoutError):  # assert_exactly_once names what is missing
        wait_until(covered, 20, "the high watermark covers the last acknowledged record")
    return values


def test_sigstopped_leader_commits_nothing_after_waking(brokers) -> None:
    procs = brokers(3)
    cl = brokers.client(procs)
    cl.create_topic("z", 1, 3)
    cl.produce("z", 0, ["before"])
    old = cl.leader("z", 0, refresh=True)
    procs[old].signal(signal.SIGSTOP)
    wait_until(lambda: cl.leader("z", 0, refresh=True) not in (-1, old), 30, "new leader")
    new = cl.leader("z", 0)
    cl.produce("z", 0, ["under-new-leader"])
    procs[old].signal(signal.SIGCONT)
    with pytest.raises(TransportError) as err:
        cl.transport.send(procs[old].address, ApiKey.PRODUCE,
                          {"topic": "z", "partition": 0, "acks": -1, "timeout_ms": 6000},
                          payload=encode_records(["zombie"]), timeout=15)
    assert err.value.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT)
    wait_until(lambda: old in cl.describe_topic("z")[0]["isr"], 30, "old leader re-joins")
    values = [r.value for r in cl.read_all("z", 0)]
    assert values == [b"before", b"under-new-leader"]
    # the woken broker truncated the record it never committed: make it lead and read
    for b in procs:
        if b not in (old,):
            procs[b].kill()
    wait_until(lambda: cl.leader("z", 0, refresh=True) == old, 40, "old broker leads")
    assert new != old
    assert [r.value for r in cl.read_all("z", 0)] == values


def test_killed_controller_process_is_replaced(brokers) -> None:
    procs = brokers(3)
    cl = brokers.client(procs)
    cl.create_topic("a", 2, 3)
    md = cl.metadata()
    first, epoch = md["controller"], md["controller_epoch"]
    procs[first].kill()
    wait_until(lambda: cl.metadata()["controller"] not in (-1, first), 30, "new controller")
    assert cl.metadata()["controller_epoch"] > epoch
    cl.create_topic("b", 2, 2)
    for p in range(2):
        cl.produce("a", p, ["x"])
        cl.produce("b", p, ["y"])
        assert [r.value for r in cl.read_all("a", p)] == [b"x"]


def test_reassignment_under_load_loses_nothing(brokers) -> None:
    procs = brokers(3)
    cl = brokers.client(procs)
    cl.create_topic("r", 1, 2, assignment={0: [1, 2]})
    prod = AckedProducer(brokers.client(procs), "r", timeout=6).start()
    try:
        prod.wait_acked(30, 30)
        cl.reassign([{"topic": "r", "partition": 0, "replicas": [3, 2]}])
        wait_until(lambda: cl.describe_topic("r")[0]["replicas"] == [3, 2]
                   and not cl.reassignments(), 60, "reassignment done")
        prod.wait_acked(30, 30)
    finally:
        prod.stop()
    d = cl.describe_topic("r")[0]
    assert sorted(d["isr"]) == [2, 3] and d["leader"] in (2, 3)
    assert_exactly_once([r.value for r in cl.read_all("r", 0)], prod.acked)
    assert not (procs[1].dir / "data" / "r-0").exists()
