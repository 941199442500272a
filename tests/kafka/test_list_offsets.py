"""ListOffsets through the Kafka listener: latest, earliest (remote tier included), max
timestamp, KIP-1005's earliest-local and latest-tiered, by timestamp in the local log and in
the remote tier, leader epochs and their checks; version by version on a raw socket and with
real clients (kafka-python's end/beginning offsets and offsets_for_times, confluent-kafka's
AdminClient.list_offsets and aiokafka)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiokafka
import kafka
import pytest
from confluent_kafka import TopicPartition as ConfluentTP
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from tests.broker.helpers import make_broker, shutdown_brokers, thread_baseline  # noqa: F401
from tests.kafka.clients import aiokafka_common
from tests.kafka.raw_requests import RawConnection, request_class
from tests.kafka.targets import LISTENER, KafkaTarget

LIST_OFFSETS = 2
NONE, NOT_LEADER, TIMED_OUT, INVALID_REQUEST = 0, 6, 7, 42
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC = 74, 75, 3
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
#: an hour ago: recent enough for retention.ms (7 days) to keep every record
T0 = int(time.time() * 1000) - 3_600_000


def ts(i: int) -> int:
    """The timestamp of record ``i``: 10 ms apart."""
    return T0 + 10 * i


def produce_timed(broker: Broker, tp: TopicPartition, start: int, count: int,
                  per_call: int = 4) -> None:
    """Records ``start..start+count-1`` with timestamps :func:`ts`."""
    for i in range(start, start + count, per_call):
        broker.produce(tp, [(b"k", b"v%05d" % j + b"." * 150, (), ts(j))
                            for j in range(i, min(i + per_call, start + count))])


def ask(bootstrap: str, version: int, topic: str, entries: list[tuple[int, int, int]], *,
        replica_id: int = -1, isolation: int = 0, timeout_ms: int = 5000
        ) -> dict[int, tuple[int, int, int, int]]:
    """``{partition: (error, timestamp, offset, leader epoch)}`` for ``(partition, timestamp,
    current leader epoch)`` entries (a partition may be listed twice)."""
    cls = request_class(LIST_OFFSETS, version).ListOffsetsTopic
    parts = []
    for p, stamp, epoch in entries:
        fields: dict[str, Any] = {"partition_index": p, "timestamp": stamp}
        if version >= 4:
            fields["current_leader_epoch"] = epoch
        parts.append(cls.ListOffsetsPartition(**fields))
    req: dict[str, Any] = {"replica_id": replica_id,
                           "topics": [cls(name=topic, partitions=parts)]}
    if version >= 2:
        req["isolation_level"] = isolation
    if version >= 10:
        req["timeout_ms"] = timeout_ms
    with RawConnection(bootstrap) as conn:
        resp = conn.call(LIST_OFFSETS, version, **req)
    (t,) = resp.topics
    assert t.name == topic
    out = {}
    for p in t.partitions:
        out[p.partition_index] = (p.error_code, p.timestamp, p.offset,
                                  p.leader_epoch if version >= 4 else -1)
    return out


def one(bootstrap: str, version: int, topic: str, stamp: int, epoch: int = -1,
        **kw: Any) -> tuple[int, int, int, int]:
    return ask(bootstrap, version, topic, [(0, stamp, epoch)], **kw)[0]


# ---------------------------------------------------------------------------- local log

@pytest.mark.parametrize("version", range(1, 11))
def test_every_version_lists_latest_earliest_and_by_timestamp(
        make_kafka_broker: Callable[..., Broker], version: int) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 1)
    tp = TopicPartition("t", 0)
    b.become_leader(tp, 3)
    produce_timed(b, tp, 0, 20)
    boot = b.bootstrap_servers
    epoch = 3 if version >= 4 else -1
    assert one(boot, version, "t", LATEST) == (NONE, -1, 20, epoch)
    assert one(boot, version, "t", EARLIEST) == (NONE, -1, 0, epoch)
    assert one(boot, version, "t", ts(7) - 3) == (NONE, ts(7), 7, epoch)
    assert one(boot, version, "t", ts(7)) == (NONE, ts(7), 7, epoch)
    assert one(boot, version, "t", ts(25)) == (NONE, -1, -1, -1)  # none that late
    if version >= 7:
        assert one(boot, version, "t", MAX_TIMESTAMP)[:3] == (NONE, ts(19), 19)
    if version >= 8:  # not tiered: the local log is the whole log
        assert one(boot, version, "t", EARLIEST_LOCAL) == (NONE, -1, 0, epoch)
    if version >= 9:
        assert one(boot, version, "t", LATEST_TIERED) == (NONE, -1, -1, -1)


def test_consumers_see_up_to_the_high_watermark(
        make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 1)
    tp = TopicPartition("t", 0)
    b.produce(tp, [(None, b"a", (), ts(0))])
    lg = b.log(tp)
    lg.append(_batch_at(ts(1)), leader_epoch=0)  # appended, not committed
    assert (lg.high_watermark, lg.log_end_offset) == (1, 2)
    boot = b.bootstrap_servers
    for isolation in (0, 1):  # read_committed: the last stable offset, the same here
        assert one(boot, 7, "t", LATEST, isolation=isolation)[2] == 1
    assert one(boot, 7, "t", ts(1)) == (NONE, -1, -1, -1)  # past the high watermark
    assert one(boot, 7, "t", MAX_TIMESTAMP) == (NONE, -1, -1, -1)
    assert one(boot, 7, "t", LATEST, replica_id=2)[2] == 2  # a replica's: the log end
    assert one(boot, 7, "t", ts(1), replica_id=2)[:3] == (NONE, ts(1), 1)


def test_a_follower_answers_not_leader_but_a_debugging_request(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster(overrides={"auto.leader.rebalance.enable": "false"})
    c.client().create_topic("t", 1, 2, assignment={0: [1, 2]})
    leader = c.client().leader("t", 0, refresh=True)
    follower = 3 - leader
    tp = TopicPartition("t", 0)
    c.broker(leader).produce(tp, [(None, b"a", (), ts(0))])
    c.wait_until(lambda: c.broker(follower).log_manager.get_log(tp) is not None, 10,
                 "the follower's replica")
    assert one(c.broker(leader).bootstrap_servers, 7, "t", LATEST)[:3] == (NONE, -1, 1)
    assert one(c.broker(follower).bootstrap_servers, 7, "t", LATEST)[0] == NOT_LEADER
    assert one(c.broker(follower).bootstrap_servers, 7, "t", EARLIEST,
               replica_id=-2)[:3] == (NONE, -1, 0)


def _batch_at(stamp: int) -> bytes:
    from kafka_tiers.log.records import ProducerRecord, build_batch
    return build_batch([ProducerRecord(b"b", timestamp=stamp)])


def test_leader_epoch_checks_and_errors(make_kafka_broker: Callable[..., Broker]) -> None:
    b = make_kafka_broker(background=False)
    b.create_topic("t", 1)
    tp = TopicPartition("t", 0)
    b.become_leader(tp, 2)
    produce_timed(b, tp, 0, 4)
    boot = b.bootstrap_servers
    assert one(boot, 6, "t", LATEST, epoch=2) == (NONE, -1, 4, 2)
    assert one(boot, 6, "t", LATEST, epoch=1)[0] == FENCED_LEADER_EPOCH
    assert one(boot, 6, "t", LATEST, epoch=3)[0] == UNKNOWN_LEADER_EPOCH
    assert one(boot, 6, "nope", LATEST)[0] == UNKNOWN_TOPIC
    assert ask(boot, 6, "t", [(0, LATEST, -1), (0, EARLIEST, -1)])[0][0] == INVALID_REQUEST
    b.become_follower(tp)
    assert one(boot, 6, "t", LATEST)[0] == NOT_LEADER


def test_a_broker_without_a_replica_answers_not_leader(
        make_kafka_cluster: Callable[..., LocalCluster]) -> None:
    c = make_kafka_cluster()
    c.client().create_topic("t", 1, 1, assignment={0: [1]})
    assert one(c.broker(1).bootstrap_servers, 7, "t", LATEST)[:3] == (NONE, -1, 0)
    assert one(c.broker(2).bootstrap_servers, 7, "t", LATEST)[0] == NOT_LEADER


# ---------------------------------------------------------------------------- remote tier

def _tiered(tmp_path: Path) -> tuple[Broker, Any, TopicPartition]:
    b, store, _ = make_broker(tmp_path, listeners=LISTENER)
    b.create_topic("tiered", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                 "local.retention.bytes": "0"})
    tp = TopicPartition("tiered", 0)
    produce_timed(b, tp, 0, 200)
    b.run_tiering()
    assert b.log(tp).local_log_start_offset > 100 and b.log_start_offset(tp) == 0
    return b, store, tp


@pytest.mark.parametrize("version", [1, 4, 7, 9, 10])
def test_tiered_partitions_list_remote_offsets(tmp_path: Path, version: int) -> None:
    b, _store, tp = _tiered(tmp_path)
    boot = b.bootstrap_servers
    lg = b.log(tp)
    local_start = lg.local_log_start_offset
    assert b.rlm is not None
    highest = b.rlm.highest_remote_offset(tp)
    assert local_start - 1 <= highest < 200
    epoch = 0 if version >= 4 else -1
    assert one(boot, version, "tiered", EARLIEST) == (NONE, -1, 0, epoch)
    assert one(boot, version, "tiered", LATEST) == (NONE, -1, 200, epoch)
    if version >= 8:
        assert one(boot, version, "tiered", EARLIEST_LOCAL) == (NONE, -1, local_start, epoch)
    if version >= 9:
        assert one(boot, version, "tiered", LATEST_TIERED) == (NONE, -1, highest, epoch)
    # by timestamp: offsets only the remote tier holds, one at the boundary, local ones
    for i in (0, 1, 37, 100, local_start - 1, local_start, 150, 199):
        assert one(boot, version, "tiered", ts(i) - 5) == (NONE, ts(i), i, epoch), i
    assert one(boot, version, "tiered", ts(200)) == (NONE, -1, -1, -1)


def test_remote_timestamp_lookup_without_a_time_index(tmp_path: Path) -> None:
    b, _store, _tp = _tiered(tmp_path)
    b.shutdown()
    # a remote tier that lost its time indexes (format 3 keeps small indexes inline in the
    # manifest: drop them there), read by a restarted broker: the segments are scanned
    removed = 0
    for path in (tmp_path / "remote").rglob("*.manifest"):
        doc = json.loads(path.read_bytes())
        kept = [o for o in doc["objects"] if o["kind"] != "timeindex"]
        removed += len(doc["objects"]) - len(kept)
        doc["objects"] = kept
        path.write_text(json.dumps(doc))
    assert removed > 10
    b, _store, _ = make_broker(tmp_path, listeners=LISTENER)
    assert one(b.bootstrap_servers, 7, "tiered", ts(42) - 1) == (NONE, ts(42), 42, 0)
    assert one(b.bootstrap_servers, 7, "tiered", ts(150) - 1) == (NONE, ts(150), 150, 0)


def test_a_hanging_remote_tier_times_out_the_lookup(tmp_path: Path) -> None:
    b, store, _tp = _tiered(tmp_path)
    assert store is not None
    boot = b.bootstrap_servers
    store.mode = "hang"
    try:
        started = time.monotonic()
        got = one(boot, 10, "tiered", ts(10), timeout_ms=300)
        took = time.monotonic() - started
        assert got[0] == TIMED_OUT and took < 5
        # what the remote tier is not needed for still answers
        assert one(boot, 10, "tiered", ts(197))[:3] == (NONE, ts(197), 197)
    finally:
        store.release.set()
        store.mode = "ok"


# ---------------------------------------------------------------------------- real clients

def test_real_clients_list_offsets(kafka_target: KafkaTarget) -> None:
    kafka_target.create_topic("lo", 1)
    server = kafka_target.server
    tp = TopicPartition("lo", 0)
    if isinstance(server, Broker):
        produce_timed(server, tp, 0, 30)
    else:
        leader = server.client().leader("lo", 0, refresh=True)
        produce_timed(server.broker(leader), tp, 0, 30)
    boot = kafka_target.bootstrap_servers
    consumer = kafka.KafkaConsumer(bootstrap_servers=boot.split(","), request_timeout_ms=5000)
    try:
        ktp = kafka.TopicPartition("lo", 0)
        assert consumer.end_offsets([ktp]) == {ktp: 30}
        assert consumer.beginning_offsets([ktp]) == {ktp: 0}
        found = consumer.offsets_for_times({ktp: ts(12) - 1})[ktp]
        assert (found.offset, found.timestamp) == (12, ts(12))
        assert consumer.offsets_for_times({ktp: ts(99)})[ktp] is None
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": boot, "socket.timeout.ms": 5000})
    specs = {"latest": (OffsetSpec.latest(), 30), "earliest": (OffsetSpec.earliest(), 0),
             "max": (OffsetSpec.max_timestamp(), 29), "at": (OffsetSpec.for_timestamp(ts(5)), 5)}
    for what, (spec, want) in specs.items():
        futures = admin.list_offsets({ConfluentTP("lo", 0): spec}, request_timeout=10)
        (fut,) = futures.values()
        assert fut.result().offset == want, what

    async def aio() -> tuple[dict[Any, int], dict[Any, Any]]:
        cons = aiokafka.AIOKafkaConsumer(**aiokafka_common(boot))
        await cons.start()
        try:
            atp = aiokafka.TopicPartition("lo", 0)
            return (await cons.end_offsets([atp]),
                    await cons.offsets_for_times({atp: ts(20)}))
        finally:
            await cons.stop()

    ends, times = asyncio.run(aio())
    assert list(ends.values()) == [30]
    (at,) = times.values()
    assert (at.offset, at.timestamp) == (20, ts(20))


def test_kafka_python_reads_remote_offsets_by_time(tmp_path: Path) -> None:
    b, _store, _tp = _tiered(tmp_path)
    consumer = kafka.KafkaConsumer(bootstrap_servers=b.bootstrap_servers,
                                   request_timeout_ms=5000)
    try:
        ktp = kafka.TopicPartition("tiered", 0)
        assert consumer.beginning_offsets([ktp]) == {ktp: 0}
        found = consumer.offsets_for_times({ktp: ts(3) - 2})[ktp]
        assert (found.offset, found.timestamp) == (3, ts(3))
    finally:
        consumer.close()


def test_earliest_and_latest_tiered_wait_for_a_hanging_listing_at_most_the_timeout(
        tmp_path: Path) -> None:
    b, store, tp = _tiered(tmp_path)
    assert store is not None and b.rlm is not None
    b.rlm.become_follower(tp)  # the remote listing is no longer known: it is read again
    b.rlm.become_leader(tp, 0)
    store.mode = "hang"
    try:
        for stamp in (EARLIEST, LATEST_TIERED):
            started = time.monotonic()
            assert one(b.bootstrap_servers, 10, "tiered", stamp, timeout_ms=300)[0] == \
                TIMED_OUT
            assert time.monotonic() - started < 5
        assert one(b.bootstrap_servers, 10, "tiered", LATEST)[:3] == (NONE, -1, 200)
    finally:
        store.release.set()
        store.mode = "ok"
