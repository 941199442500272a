"""DescribeLogDirs and AlterReplicaLogDirs (KIP-113) through the Kafka protocol: every
registered version on the wire, kafka-python's KafkaAdminClient (``describe_log_dirs``,
``alter_replica_log_dirs``) moving replicas between the disks of a standalone broker and of
the brokers of an in-process 3-broker cluster, and the errors Kafka names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import KafkaStorageError, LogDirNotFoundError, NoError, ReplicaNotAvailableError

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.kafka.admin_helpers import roundtrip, wait_for
from tests.kafka.clients import kafka_python_common

LOG_DIR_NOT_FOUND = 57
KAFKA_STORAGE_ERROR = 56
REPLICA_NOT_AVAILABLE = 9


def _kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(**kafka_python_common(bootstrap))


def _two_dirs(make: Callable[..., Broker], tmp_path: Path, **extra: str) -> Broker:
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    return make(**{"log.dirs": ",".join(str(d) for d in dirs)}, **extra)


def _where(results: list[Any]) -> dict[tuple[str, int, bool], str]:
    """``(topic, partition, is_future) -> dir`` of a decoded DescribeLogDirs answer."""
    return {(t.name, p.partition_index, p.is_future_key): r.log_dir for r in results
            for t in r.topics for p in t.partitions}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_describe_log_dirs_every_version(make_kafka_broker: Callable[..., Broker],
                                         tmp_path: Path, version: int) -> None:
    b = _two_dirs(make_kafka_broker, tmp_path)
    b.create_topic("d", 4)
    b.produce(TopicPartition("d", 0), [b"v%d" % i for i in range(50)])
    r = roundtrip(b.bootstrap_servers, 35, version, topics=None)
    if version >= 3:
        assert r.error_code == 0
    assert sorted(x.log_dir for x in r.results) == sorted(str(d) for d in
                                                          b.log_manager.log_dirs)
    assert all(x.error_code == 0 for x in r.results)
    where = _where(r.results)
    assert sorted(where) == [("d", p, False) for p in range(4)]
    for p in range(4):  # each replica in the dir the log manager put it
        assert where[("d", p, False)] == str(b.log_manager.log_dir_of(TopicPartition("d", p)))
    sizes = {(t.name, p.partition_index): (p.partition_size, p.offset_lag)
             for x in r.results for t in x.topics for p in t.partitions}
    assert sizes[("d", 0)] == (b.log(TopicPartition("d", 0)).size, 0)
    assert sizes[("d", 0)][0] > 0 and sizes[("d", 1)][0] == 0
    if version >= 4:
        assert all(x.total_bytes > 0 and 0 <= x.usable_bytes <= x.total_bytes
                   for x in r.results)
    # a topics filter keeps only the partitions named
    r = roundtrip(b.bootstrap_servers, 35, version, topics=[("d", [1, 3]), ("nope", [0])])
    assert sorted(_where(r.results)) == [("d", 1, False), ("d", 3, False)]
    assert len(r.results) == 2  # every dir is still listed


def test_move_a_replica_between_disks_with_kafka_python(
        make_kafka_broker: Callable[..., Broker], tmp_path: Path) -> None:
    b = _two_dirs(make_kafka_broker, tmp_path)
    b.create_topic("m", 1)
    tp = TopicPartition("m", 0)
    b.produce(tp, [b"r%d" % i for i in range(300)])
    source = b.log_manager.log_dir_of(tp)
    dest = next(d for d in b.log_manager.log_dirs if d != source)
    kp = _kp_admin(b.bootstrap_servers)
    try:
        before = kp.describe_log_dirs()
        assert [e["broker"] for e in before] == [b.broker_id]
        dirs = {d["log_dir"]: d for d in before[0]["log_dirs"]}
        assert [t["name"] for t in dirs[str(source)]["topics"]] == ["m"]
        got = kp.alter_replica_log_dirs({
            TopicPartitionReplica("m", 0, b.broker_id): str(dest),
            TopicPartitionReplica("m", 5, b.broker_id): str(dest),
            TopicPartitionReplica("other", 0, b.broker_id): str(tmp_path / "no-such-disk")})
        assert got[TopicPartitionReplica("m", 0, b.broker_id)] is NoError
        assert got[TopicPartitionReplica("m", 5, b.broker_id)] is ReplicaNotAvailableError
        assert got[TopicPartitionReplica("other", 0, b.broker_id)] is LogDirNotFoundError
        wait_for(lambda: b.log_manager.log_dir_of(tp) == dest, what="the move done")
        after = kp.describe_log_dirs(topic_partitions={"m": [0]})
    finally:
        kp.close()
    dirs = {d["log_dir"]: d for d in after[0]["log_dirs"]}
    assert dirs[str(source)]["topics"] == []
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in dirs[str(dest)]["topics"]] == [("m", [0])]
    assert [r.value for r in b.fetch(tp, 0, 1 << 20).records_list()][:3] == \
        [b"r0", b"r1", b"r2"]
    b.produce(tp, [b"after"])  # the moved replica serves
    assert b.log(tp).log_end_offset == 301


def test_a_future_replica_is_described_while_it_moves(
        make_kafka_broker: Callable[..., Broker], tmp_path: Path) -> None:
    # 64 KiB/s: the copy of about 200 KiB lasts a few seconds
    b = _two_dirs(make_kafka_broker, tmp_path, **{"intra.broker.throttled.rate": "65536"})
    b.create_topic("f", 1)
    tp = TopicPartition("f", 0)
    b.produce(tp, [b"x" * 1000 for _ in range(200)])
    dest = next(d for d in b.log_manager.log_dirs if d != b.log_manager.log_dir_of(tp))
    r = roundtrip(b.bootstrap_servers, 34, 2, dirs=[(str(dest), [("f", [0])])])
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in r.results] == [("f", [(0, 0)])]

    def future() -> Any:
        got = roundtrip(b.bootstrap_servers, 35, 4, topics=[("f", [0])])
        return next((p for x in got.results if x.log_dir == str(dest) for t in x.topics
                     for p in t.partitions if p.is_future_key), None)

    part = wait_for(future, 10, "the future replica in the destination dir")
    assert part.offset_lag > 0  # behind the replica it copies
    # asking again for the same dir is no error (the move goes on)
    r = roundtrip(b.bootstrap_servers, 34, 1, dirs=[(str(dest), [("f", [0])])])
    assert r.results[0].partitions[0].error_code == 0
    wait_for(lambda: b.log_manager.log_dir_of(tp) == dest, 30, "the move done")


def test_log_dir_errors(make_kafka_broker: Callable[..., Broker], tmp_path: Path) -> None:
    b = _two_dirs(make_kafka_broker, tmp_path)
    b.create_topic("e", 2)
    lm = b.log_manager
    r = roundtrip(b.bootstrap_servers, 34, 0, dirs=[
        ("relative/dir", [("e", [0])]), (str(lm.log_dirs[0]) + "/../disk-b", [("e", [1])]),
        ("any", [("e", [1])])])
    codes = {(t.topic_name, p.partition_index): p.error_code for t in r.results
             for p in t.partitions}
    assert codes == {("e", 0): LOG_DIR_NOT_FOUND, ("e", 1): LOG_DIR_NOT_FOUND}
    # an offline dir: described with KAFKA_STORAGE_ERROR and no partitions; no move into it
    offline = lm.log_dirs[1]
    lm.mark_log_dir_offline(offline, OSError(5, "test: disk failed"))
    r = roundtrip(b.bootstrap_servers, 35, 4, topics=None)
    row = next(x for x in r.results if x.log_dir == str(offline))
    assert (row.error_code, row.topics, row.total_bytes, row.usable_bytes) == \
        (KAFKA_STORAGE_ERROR, [], -1, -1)
    online = next(x for x in r.results if x.log_dir != str(offline))
    assert online.error_code == 0
    kp = _kp_admin(b.bootstrap_servers)
    try:
        moved = [tp for tp in (TopicPartition("e", 0), TopicPartition("e", 1))
                 if lm.get_log(tp) is not None]
        got = kp.alter_replica_log_dirs({
            TopicPartitionReplica(tp.topic, tp.partition, b.broker_id): str(offline)
            for tp in moved})
    finally:
        kp.close()
    assert moved and set(got.values()) == {KafkaStorageError}


def test_move_replicas_between_disks_in_a_cluster(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(3, log_dirs_per_broker=2)
    cl = c.client()
    cl.create_topic("j", 1, 3, assignment={0: [1, 2, 3]})
    tp = TopicPartition("j", 0)
    cl.produce("j", 0, [b"a%d" % i for i in range(100)])
    moves = {}
    for bid in (1, 2):  # the leader's replica and a follower's
        lm = c.brokers[bid].log_manager
        moves[bid] = next(d for d in lm.log_dirs if d != lm.log_dir_of(tp))
    kp = _kp_admin(c.bootstrap_servers)
    try:
        got = kp.alter_replica_log_dirs({TopicPartitionReplica("j", 0, bid): str(d)
                                         for bid, d in moves.items()})
        assert set(got.values()) == {NoError}
        for bid, d in moves.items():
            wait_for(lambda b=bid, d=d: c.brokers[b].log_manager.log_dir_of(tp) == d,
                     what=f"broker {bid}'s move")
        described = {e["broker"]: e["log_dirs"] for e in kp.describe_log_dirs(
            topic_partitions={"j": [0]}, brokers=[1, 2, 3])}
    finally:
        kp.close()
    for bid, d in moves.items():
        rows = {x["log_dir"]: [t["name"] for t in x["topics"]] for x in described[bid]}
        assert rows[str(d)] == ["j"]
    # replication goes on through the moved replicas
    cl.produce("j", 0, [b"b%d" % i for i in range(100)])
    wait_for(lambda: all(c.brokers[b].log_manager.get_log(tp).log_end_offset == 200
                         for b in (1, 2, 3)), what="every replica at 200")
    assert [r.value for r in cl.read_all("j", 0)] == \
        [b"a%d" % i for i in range(100)] + [b"b%d" % i for i in range(100)]


def test_requests_over_the_bounds_are_refused(make_kafka_broker: Callable[..., Broker],
                                              tmp_path: Path) -> None:
    b = _two_dirs(make_kafka_broker, tmp_path, **{"max.request.topics": "2",
                                                  "max.request.partitions": "2"})
    b.create_topic("e", 2)
    r = roundtrip(b.bootstrap_servers, 35, 4, topics=[("a", [0]), ("b", [0]), ("c", [0])])
    assert (r.error_code, r.results) == (42, [])  # INVALID_REQUEST, nothing described
    dest = str(b.log_manager.log_dirs[0])
    r = roundtrip(b.bootstrap_servers, 34, 2, dirs=[(dest, [("e", [0, 1]), ("x", [0])])])
    assert [p.error_code for t in r.results for p in t.partitions] == [42, 42, 42]
