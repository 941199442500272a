"""The idempotent producer over the Kafka protocol: InitProducerId (ids unique in the cluster,
never reused after a restart), the refusal of transactions, duplicates detected on a new
leader, and real clients (confluent-kafka with enable.idempotence, kafka-python's default)
producing to a standalone broker and a 3-broker cluster with acks=all."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.kafka.apis.transactions import TRANSACTION_API_KEYS
from kafka_tiers.kafka.producer_ids import (
    BLOCK_FILE,
    BLOCK_NODE,
    BLOCK_SIZE,
    FileProducerIdManager,
    ProducerIdsExhaustedError,
    StoreProducerIdManager,
)
from kafka_tiers.log.errors import DuplicateSequenceError, OutOfOrderSequenceError
from kafka_tiers.log.log import Log
from kafka_tiers.log.producer_state import AppendOrigin
from kafka_tiers.log.records import ProducerRecord, build_batch
from tests.kafka.clients import (
    aiokafka_common,
    confluent_producer,
    confluent_producer_conf,
    kafka_python_producer_conf,
)
from tests.kafka.raw_requests import RawConnection
from tests.kafka.targets import LISTENER, KafkaTarget

INIT_PRODUCER_ID = 22
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def init_producer_id(bootstrap: str, version: int, transactional_id: str | None = None,
                     **fields: Any) -> Any:
    with RawConnection(bootstrap) as conn:
        if version >= 3:
            fields.setdefault("producer_id", -1)
            fields.setdefault("producer_epoch", -1)
        return conn.call(INIT_PRODUCER_ID, version, transactional_id=transactional_id,
                         transaction_timeout_ms=60000, **fields)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------- InitProducerId
def test_init_producer_id_gives_new_ids_at_epoch_zero_every_version(kafka_broker: Broker
                                                                     ) -> None:
    ids = []
    for version in range(6):
        resp = init_producer_id(kafka_broker.bootstrap_servers, version)
        assert (resp.error_code, resp.producer_epoch) == (0, 0), version
        ids.append(resp.producer_id)
    # KIP-360 for a producer without transactional id: a new id, as Kafka answers it
    resp = init_producer_id(kafka_broker.bootstrap_servers, 4, producer_id=ids[-1],
                            producer_epoch=0)
    assert resp.error_code == 0 and resp.producer_epoch == 0
    ids.append(resp.producer_id)
    assert len(set(ids)) == len(ids) and min(ids) >= 0


def test_transactional_ids_are_refused_and_transaction_apis_not_advertised(
        kafka_broker: Broker) -> None:
    for version in (0, 3, 5):
        resp = init_producer_id(kafka_broker.bootstrap_servers, version, "my-txn")
        assert resp.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert resp.producer_id == -1
    assert init_producer_id(kafka_broker.bootstrap_servers, 4, "").error_code == 42
    with RawConnection(kafka_broker.bootstrap_servers) as conn:
        versions = conn.call(18, 3, client_software_name="kt", client_software_version="1")
    served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert served[INIT_PRODUCER_ID] == (0, 5)
    assert not TRANSACTION_API_KEYS & set(served)


def test_standalone_ids_are_never_reused_after_a_restart(tmp_path: Path) -> None:
    cfg = {"broker.id": "1", "log.dirs": str(tmp_path / "data"), "listeners": LISTENER}
    before = []
    with Broker(cfg).start() as broker:
        for _ in range(3):
            before.append(init_producer_id(broker.bootstrap_servers, 4).producer_id)
    assert (tmp_path / "data" / BLOCK_FILE).exists()
    with Broker(cfg).start() as broker:
        after = init_producer_id(broker.bootstrap_servers, 4).producer_id
    assert after > max(before) and after >= BLOCK_SIZE


def test_the_block_file_is_claimed_before_use_and_checked(tmp_path: Path) -> None:
    first = FileProducerIdManager(tmp_path, 1)
    ids = [first.generate() for _ in range(BLOCK_SIZE + 1)]
    assert ids == list(range(BLOCK_SIZE + 1))
    # a crash now: the file already names the second block, a new manager starts after it
    assert FileProducerIdManager(tmp_path, 1).generate() == 2 * BLOCK_SIZE
    (tmp_path / BLOCK_FILE).write_text("{not json")
    with pytest.raises(ProducerIdsExhaustedError, match="holds no producer id block"):
        FileProducerIdManager(tmp_path, 1).generate()
    (tmp_path / BLOCK_FILE).write_text(
        json.dumps({"version": 1, "broker": 1, "block_start": "0",
                    "block_end": str((1 << 63) - 2)}))
    with pytest.raises(ProducerIdsExhaustedError, match="exhausted"):
        FileProducerIdManager(tmp_path, 1).generate()


def test_cluster_ids_are_unique_even_when_brokers_race(kafka_cluster: LocalCluster) -> None:
    # through the Kafka listener of every broker
    ids = [init_producer_id(addr, 4).producer_id
           for addr in kafka_cluster.bootstrap_servers.split(",") for _ in range(2)]
    assert len(set(ids)) == len(ids)
    # block claims racing in the metadata store: one version-checked write wins each block
    managers = [StoreProducerIdManager(kafka_cluster.broker(b).member.store, b)
                for b in kafka_cluster.live]
    got: list[list[int]] = [[] for _ in managers]

    def run(i: int) -> None:
        for _ in range(3 * BLOCK_SIZE // 2):
            got[i].append(managers[i].generate())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(managers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    everything = [pid for g in got for pid in g] + ids
    assert len(everything) == len(set(everything)) == len(ids) + 3 * (3 * BLOCK_SIZE // 2)
    data, _ = kafka_cluster.broker(kafka_cluster.live[0]).member.store.get(BLOCK_NODE)
    assert set(data) == {"version", "broker", "block_start", "block_end"}
    assert int(data["block_end"]) >= max(everything)
    assert (int(data["block_end"]) + 1) % BLOCK_SIZE == 0


@pytest.mark.parametrize("kind", ["embedded", pytest.param("zookeeper",
                                                            marks=pytest.mark.servers)])
def test_block_claims_race_on_every_store(kind: str, tmp_path: Path,
                                          request: pytest.FixtureRequest) -> None:
    """Three sessions (three brokers) claim blocks at once: every id is handed out once."""
    sessions: list[Any] = []
    server: Any = None
    if kind == "embedded":
        from kafka_tiers.cluster.embedded_store import EmbeddedMetadataServer, EmbeddedStore

        server = EmbeddedMetadataServer(tmp_path / "meta")
        sessions = [EmbeddedStore(server) for _ in range(3)]
    else:
        from kafka_tiers.cluster.zookeeper_store import ZooKeeperStore

        zk = request.getfixturevalue("zookeeper_server")
        chroot = f"/pid{time.monotonic_ns()}"
        admin = zk.client()
        admin.ensure_path(chroot)
        admin.stop()
        admin.close()
        sessions = [ZooKeeperStore(zk.connection_string + chroot) for _ in range(3)]
    try:
        for st in sessions:
            st.start()
        managers = [StoreProducerIdManager(st, i) for i, st in enumerate(sessions)]
        got: list[list[int]] = [[] for _ in managers]
        barrier = threading.Barrier(len(managers))

        def run(i: int) -> None:
            barrier.wait()
            got[i] += [managers[i].generate() for _ in range(5 * BLOCK_SIZE // 2)]

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(managers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        ids = [pid for g in got for pid in g]
        assert len(ids) == len(set(ids)) == 3 * (5 * BLOCK_SIZE // 2)
        data, version = sessions[0].get(BLOCK_NODE)
        assert version == int(data["block_end"]) // BLOCK_SIZE  # one write per block
    finally:
        for st in sessions:
            st.close()
        if server is not None:
            server.close()


# ---------------------------------------------------------------------------- leader change
def _batch(pid: int, seq: int, n: int = 3) -> bytes:
    return build_batch([ProducerRecord(b"r%d" % (seq + i)) for i in range(n)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq)


def test_a_new_leader_detects_the_old_leaders_duplicates(kafka_cluster: LocalCluster) -> None:
    topic = unique("idem")
    tp = TopicPartition(topic, 0)
    with kafka_cluster.client() as cl:
        cl.create_topic(topic, 1, 3)
        cl.wait_for_leaders(topic)
        old = cl.leader(topic, 0, refresh=True)
    rm = kafka_cluster.broker(old).replicas
    firsts = [rm.produce(tp, _batch(77, 3 * i), -1, origin=AppendOrigin.CLIENT)[0]
              for i in range(4)]
    assert firsts == [0, 3, 6, 9]
    kafka_cluster.stop_broker(old)  # controlled: leadership moves to an in-sync follower
    with kafka_cluster.client() as cl:
        deadline = time.monotonic() + 20
        while (new := cl.leader(topic, 0, refresh=True)) in (old, -1):
            assert time.monotonic() < deadline, "no new leader"
            time.sleep(0.05)
    lead = kafka_cluster.broker(new)
    nrm = lead.replicas
    log: Log = lead.log_manager.get_log(tp)
    deadline = time.monotonic() + 10
    while not nrm._partition(tp).is_leader:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    end = log.log_end_offset
    assert end == 12
    # the old leader's batches, retried against the new leader: their offsets, nothing written
    for i in range(4):
        assert nrm.produce(tp, _batch(77, 3 * i), 1, origin=AppendOrigin.CLIENT)[0] == firsts[i]
    assert log.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceError):
        nrm.produce(tp, _batch(77, 13), 1, origin=AppendOrigin.CLIENT)
    assert nrm.produce(tp, _batch(77, 12), 1, origin=AppendOrigin.CLIENT)[0] == 12


# ---------------------------------------------------------------------------- over the wire
PRODUCE = 0


def _produce_raw(conn: RawConnection, topic: str, records: bytes, version: int = 9) -> Any:
    resp = conn.call(PRODUCE, version, transactional_id=None, acks=-1, timeout_ms=5000,
                     topic_data=[(topic, [(0, records)])])
    part = resp.responses[0].partition_responses[0]
    return part


def test_produce_answers_duplicates_and_sequence_errors(kafka_target: KafkaTarget) -> None:
    topic = unique("seq")
    kafka_target.create_topic(topic)
    pid = init_producer_id(kafka_target.bootstrap_servers, 4).producer_id
    leader = _leader_address(kafka_target, topic)
    with RawConnection(leader) as conn:
        first = _produce_raw(conn, topic, _batch(pid, 0))
        assert (first.error_code, first.base_offset) == (0, 0)
        assert _produce_raw(conn, topic, _batch(pid, 3)).base_offset == 3
        again = _produce_raw(conn, topic, _batch(pid, 0))  # a retry: the original offset
        assert (again.error_code, again.base_offset) == (0, 0)
        gap = _produce_raw(conn, topic, _batch(pid, 9))
        assert gap.error_code == OutOfOrderSequenceError.kafka_error_code
        assert _produce_raw(conn, topic, _batch(pid, 6)).base_offset == 6
        for seq in (9, 12, 15, 18):
            _produce_raw(conn, topic, _batch(pid, seq))
        old = _produce_raw(conn, topic, _batch(pid, 0))
        assert old.error_code == DuplicateSequenceError.kafka_error_code
        bumped = build_batch([ProducerRecord(b"e1")], producer_id=pid, producer_epoch=1,
                             base_sequence=0)
        assert _produce_raw(conn, topic, bumped).base_offset == 21
        fenced = _produce_raw(conn, topic, _batch(pid, 21))  # epoch 0, older than 1
        assert fenced.error_code == 47


@pytest.mark.parametrize("stop", ["shutdown", "kill"])
def test_a_retry_after_a_broker_restart_gets_its_original_offsets(tmp_path: Path,
                                                                   stop: str) -> None:
    cfg = {"broker.id": "1", "log.dirs": str(tmp_path / "data"), "listeners": LISTENER}
    broker = Broker(cfg).start()
    try:
        broker.create_topic("restart", 1)
        pid = init_producer_id(broker.bootstrap_servers, 4).producer_id
        with RawConnection(broker.bootstrap_servers) as conn:
            bases = [_produce_raw(conn, "restart", _batch(pid, 3 * i)).base_offset
                     for i in range(6)]
    finally:
        getattr(broker, stop)()
    assert bases == [0, 3, 6, 9, 12, 15]
    with Broker(cfg).start() as broker, RawConnection(broker.bootstrap_servers) as conn:
        for i in range(1, 6):  # the last five batches are remembered
            again = _produce_raw(conn, "restart", _batch(pid, 3 * i))
            assert (again.error_code, again.base_offset) == (0, bases[i])
        old = _produce_raw(conn, "restart", _batch(pid, 0))
        assert old.error_code == DuplicateSequenceError.kafka_error_code
        assert _produce_raw(conn, "restart", _batch(pid, 18)).base_offset == 18
        assert broker.log(TopicPartition("restart", 0)).log_end_offset == 21


def _leader_address(target: KafkaTarget, topic: str) -> str:
    if target.kind == "standalone":
        return target.bootstrap_servers
    cluster: LocalCluster = target.server
    with cluster.client() as cl:
        leader = cl.leader(topic, 0, refresh=True)
    broker = cluster.broker(leader)
    return str(broker.bootstrap_servers)


# ---------------------------------------------------------------------------- real clients
COUNT = 300


def _leader_log(target: KafkaTarget, topic: str) -> Log:
    tp = TopicPartition(topic, 0)
    if target.kind == "standalone":
        return target.server.log(tp)
    cluster: LocalCluster = target.server
    with cluster.client() as cl:
        return cluster.broker(cl.leader(topic, 0, refresh=True)).log_manager.get_log(tp)


def _check_idempotent_log(log: Log, count: int, *, one_producer: bool = True) -> None:
    """Every record once, in order, in idempotent batches whose sequences run from 0 without
    a gap for each producer id and epoch (``one_producer``: a single id and epoch)."""
    seen: list[bytes | None] = []
    next_seq: dict[tuple[int, int], int] = {}
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for b in data.batches():
            key = (b.producer_id, b.producer_epoch)
            assert b.producer_id >= 0 and b.base_sequence == next_seq.get(key, 0)
            next_seq[key] = b.last_sequence + 1
            seen += [r.value for r in b.records()]
            offset = b.next_offset
    assert seen == [b"m%d" % i for i in range(count)]
    assert len(next_seq) == 1 or not one_producer


def test_confluent_kafka_idempotent_producer(kafka_target: KafkaTarget) -> None:
    topic = unique("cidem")
    kafka_target.create_topic(topic)
    errors: list[Any] = []
    offsets: list[int] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    with confluent_producer(kafka_target.bootstrap_servers, enable_idempotence=True,
                            acks="all", linger_ms=5, batch_num_messages=37) as producer:
        for i in range(COUNT):
            producer.produce(topic, b"m%d" % i, partition=0, on_delivery=on_delivery)
            if i % 50 == 0:
                producer.poll(0)
        assert producer.flush(15) == 0
    assert not errors
    assert sorted(offsets) == list(range(COUNT))
    _check_idempotent_log(_leader_log(kafka_target, topic), COUNT)


def _kafka_python_conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    conf = kafka_python_producer_conf(bootstrap, **extra)
    conf.pop("api_version_auto_timeout_ms", None)  # not a KafkaProducer setting in 3.x
    return conf


def test_kafka_python_default_producer_is_idempotent(kafka_target: KafkaTarget) -> None:
    from kafka import KafkaProducer

    topic = unique("pidem")
    kafka_target.create_topic(topic)
    producer = KafkaProducer(**_kafka_python_conf(kafka_target.bootstrap_servers,
                                                  linger_ms=5, batch_size=2048))
    try:
        futures = [producer.send(topic, b"m%d" % i, partition=0) for i in range(COUNT)]
        producer.flush(15)
        offsets = [f.get(timeout=10).offset for f in futures]
    finally:
        producer.close(5)
    assert offsets == list(range(COUNT))
    _check_idempotent_log(_leader_log(kafka_target, topic), COUNT)


def test_aiokafka_idempotent_producer(kafka_target: KafkaTarget) -> None:
    from aiokafka import AIOKafkaProducer

    topic = unique("aidem")
    kafka_target.create_topic(topic)

    async def run() -> list[int]:
        producer = AIOKafkaProducer(**aiokafka_common(kafka_target.bootstrap_servers),
                                    acks="all", enable_idempotence=True, linger_ms=5,
                                    max_batch_size=2048)
        await asyncio.wait_for(producer.start(), 15)
        try:
            futures = [await producer.send(topic, b"m%d" % i, partition=0)
                       for i in range(COUNT)]
            await asyncio.wait_for(producer.flush(), 20)
            return [(await asyncio.wait_for(f, 10)).offset for f in futures]
        finally:
            await producer.stop()

    assert asyncio.run(run()) == list(range(COUNT))
    _check_idempotent_log(_leader_log(kafka_target, topic), COUNT)


def test_confluent_kafka_transactional_producer_is_refused_clearly(kafka_broker: Broker
                                                                   ) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer

    producer = Producer(confluent_producer_conf(kafka_broker.bootstrap_servers,
                                                transactional_id="txn-1"))
    try:
        started = time.monotonic()
        with pytest.raises(KafkaException) as err:
            producer.init_transactions(10)
        error = err.value.args[0]
        assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
        assert error.fatal() and "does not support transactions" in error.str()
        assert time.monotonic() - started < 8  # fatal at once, not a timeout
    finally:
        producer.purge()


def test_kafka_python_transactional_producer_is_refused_clearly(kafka_broker: Broker) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError

    producer = KafkaProducer(**_kafka_python_conf(kafka_broker.bootstrap_servers,
                                                  transactional_id="txn-2"))
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
    finally:
        producer.close(1)


def test_confluent_kafka_idempotent_producer_across_a_leader_change(
        kafka_cluster: LocalCluster) -> None:
    topic = unique("move")
    with kafka_cluster.client() as cl:
        cl.create_topic(topic, 1, 3)
        cl.wait_for_leaders(topic)
        old = cl.leader(topic, 0, refresh=True)
    count, delivered, errors = 3000, [0], []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[0] += 1

    with confluent_producer(kafka_cluster.bootstrap_servers, enable_idempotence=True,
                            acks="all", linger_ms=2, batch_num_messages=20,
                            message_timeout_ms=20000) as producer:
        for i in range(count):
            producer.produce(topic, b"m%d" % i, partition=0, on_delivery=on_delivery)
            producer.poll(0)
            if i == count // 3:
                producer.flush(10)
            if i == count // 2:  # batches in flight while leadership moves
                kafka_cluster.stop_broker(old)
        assert producer.flush(30) == 0
    assert not errors and delivered[0] == count
    # librdkafka may take a new producer id after the move: still once each, in order
    _check_idempotent_log(_leader_log(KafkaTarget("cluster", kafka_cluster), topic), count,
                          one_producer=False)
