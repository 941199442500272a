"""Failover to serving (issue 13): a broker taking over many partitions in one LeaderAndIsr
request changes their roles in one pass. Becoming leader writes no file and starts no thread;
the fetcher table is updated once per batch, not once per partition; the new epoch's
leader-epoch entry is durable before the first append in it; the new leader answers fetches
at once."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.replica_manager import ReplicaManager, _Fetcher
from kafka_tiers.cluster.transport import ErrorCode, TransportError
from kafka_tiers.log.checkpoints import LeaderEpochCheckpointFile
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.records import ProducerRecord, build_batch

N = 40  # partitions per request: above the old thread-pool threshold (32)
CONFIG = {"replica.lag.time.max.ms": "30000", "replica.fetch.wait.max.ms": "50",
          "replica.fetch.max.bytes": "1048576", "min.insync.replicas": "1",
          "request.timeout.ms": "2000"}


class _NoNetwork:
    """The fetchers' client: every leader is unreachable (only the tables are checked)."""

    def send(self, *args: Any, **kwargs: Any) -> Any:
        raise TransportError("no network in this test")


class _Metadata:
    """The store's side the replica manager reads here: the controller epoch its requests
    are checked against (the requests below come from controller epoch 1)."""

    def controller_epoch(self) -> int:
        return 1


def _request(leader: int, epoch: int, n: int = N) -> dict[str, Any]:
    return {"controller_epoch": 1, "partitions": [
        {"topic": "t", "partition": i, "leader": leader, "leader_epoch": epoch,
         "isr": [1, 2, 3], "replicas": [1, 2, 3], "version": epoch} for i in range(n)]}


@pytest.fixture
def rm(tmp_path: Path) -> Iterator[ReplicaManager]:
    lm = LogManager([tmp_path / "data"])
    manager = ReplicaManager(1, lm, _Metadata(), _NoNetwork(),  # type: ignore[arg-type]
                             CONFIG)
    manager.brokers = {1: "inproc:1", 2: "inproc:2", 3: "inproc:3"}
    try:
        out = manager.leader_and_isr(_request(2, 0))  # every replica exists, following 2
        assert all(e["error"] == 0 for e in out["partitions"])
        yield manager
    finally:
        manager.shutdown()
        lm.shutdown()


def _fetched_by(rm: ReplicaManager) -> dict[int, dict[TopicPartition, int]]:
    return {leader: {tp: st.leader_epoch for tp, st in f.parts.items()}
            for leader, f in rm._fetchers.items()}


def test_becoming_leader_of_many_is_one_pass(rm: ReplicaManager,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fsyncs: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    threads: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        threads.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    fetcher_calls: list[str] = []
    for name in ("add", "remove", "update"):  # whichever a version of the code has
        real = getattr(_Fetcher, name, None)
        if real is None:
            continue

        def counted(self: _Fetcher, *args: Any, _name: str = name, _real: Any = real) -> Any:
            fetcher_calls.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(_Fetcher, name, counted)

    out = rm.leader_and_isr(_request(1, 1))

    assert all(e["error"] == 0 for e in out["partitions"])
    assert fsyncs == []  # nothing durable is written to serve: no checkpoint, no fsync
    assert threads == []  # no thread pool for role changes that are memory only
    # the fetcher table: one update per fetcher for the whole batch, not one per partition
    assert len(fetcher_calls) <= len(rm._fetchers) == 1, fetcher_calls
    assert _fetched_by(rm) == {2: {}}
    assert all(p.is_leader and p.leader_epoch == 1 for p in rm.partitions.values())


def test_new_leader_answers_fetches_at_once(rm: ReplicaManager) -> None:
    rm.leader_and_isr(_request(1, 1))
    body, _ = rm.fetch({"replica_id": -1, "max_wait_ms": 0, "partitions": [
        {"topic": "t", "partition": i, "offset": 0, "current_leader_epoch": 1}
        for i in range(N)]})
    assert [e["error"] for e in body["partitions"]] == [ErrorCode.NONE] * N


def test_epoch_entry_is_durable_before_the_first_append_in_it(rm: ReplicaManager) -> None:
    rm.leader_and_isr(_request(1, 1))
    tp = TopicPartition("t", 7)
    p = rm.partitions[tp]
    path = p.log.leader_epoch_cache.path
    assert path is not None
    on_disk: list[list[tuple[int, int]]] = []
    real_append = p.log.append

    def append(*args: Any, **kwargs: Any) -> Any:
        on_disk.append([(e, o) for e, o in LeaderEpochCheckpointFile(path).read()])
        return real_append(*args, **kwargs)

    p.log.append = append  # type: ignore[method-assign]
    rm.produce(tp, build_batch([ProducerRecord(b"v")]), acks=1)
    assert on_disk == [[(1, 0)]]


def test_batched_followers_fetch_from_their_new_leader_only(rm: ReplicaManager) -> None:
    assert _fetched_by(rm) == {2: {TopicPartition("t", i): 0 for i in range(N)}}
    rm.leader_and_isr(_request(3, 1))
    assert _fetched_by(rm) == {2: {}, 3: {TopicPartition("t", i): 1 for i in range(N)}}
    # a partition led here by a later request is not fetched by an older one's finish
    rm.leader_and_isr(_request(1, 2, n=1))
    table = _fetched_by(rm)
    assert TopicPartition("t", 0) not in table[3] and len(table[3]) == N - 1
