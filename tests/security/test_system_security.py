"""System tests of a secured broker with real clients.

- A cluster of 3 broker processes (``kafka-tiers broker start`` each, on a ZooKeeper chroot)
  whose only Kafka listeners are ``SASL_SSL`` (SCRAM-SHA-512), whose internal transport is
  TLS with the brokers' certificate, mutually authenticated
  (``inter.broker.listener.name=SASL_SSL``), with the ACL authorizer (the brokers'
  certificate principal and ``admin`` in ``super.users``) and a tiered topic on S3 (moto): a
  SCRAM user with Write and Read ACLs produces with confluent-kafka, the leader of a
  partition is killed, a new one is elected, the same user's consumer group reads every
  record, and rolled segments reach S3; a second user without ACLs is refused with
  ``TOPIC_AUTHORIZATION_FAILED``.
- Brute force, functional (the timing goal is ``benchmarks/security.py``'s): 1,000 wrong
  SCRAM attempts from one client process while another, authenticated client keeps producing
  successfully; every attempt is refused and the broker keeps serving new clients.
"""

from __future__ import annotations

import json
import runpy
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.broker.broker import Broker
from tests.kafka.clients import confluent_consumer_conf, confluent_producer_conf
from tests.kafka.fixtures import zookeeper_chroot
from tests.kafka.processes import KafkaBrokerProcess, wait_until
from tests.security.certs import TestCerts
from tests.servers.base import free_port

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "security.py"
MECHANISM = "SCRAM-SHA-512"
BROKER_PRINCIPAL = "User:CN=broker,O=example"
PASSWORDS = {"admin": "admin-secret-31", "alice": "alice-secret-59", "mallory": "mallory-7"}
TOPIC = "orders"
PARTITIONS = 3

pytestmark = pytest.mark.servers


def sasl_ssl(bootstrap: str, ca: Path, user: str, password: str | None = None
             ) -> dict[str, Any]:
    """confluent-kafka's settings for ``user`` on a SASL_SSL listener (Kafka's names)."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM, "sasl.username": user,
            "sasl.password": PASSWORDS[user] if password is None else password,
            "ssl.ca.location": str(ca)}


# ------------------------------------------------------------------ the 3-broker cluster

class SecureBrokerProcess(KafkaBrokerProcess):
    """A broker process whose only Kafka listener is SASL_SSL on a fixed free port."""

    def __init__(self, broker_id: int, workdir: Path, zk_connect: str,
                 extra: dict[str, str]) -> None:
        port = free_port()
        super().__init__(broker_id, workdir, zk_connect,
                         {**extra, "listeners": f"SASL_SSL://127.0.0.1:{port}"})
        self.kafka_port = port
        self.kafka_address = f"127.0.0.1:{port}"


class SecureCluster:
    """Three :class:`SecureBrokerProcess` on one ZooKeeper chroot; Kafka-protocol admin as
    the super user ``admin`` (the internal transport takes only the brokers' certificates)."""

    def __init__(self, workdir: Path, zk_connect: str, extra: dict[str, str],
                 ca: Path) -> None:
        self.zk_connect = zk_connect
        self.ca = ca
        self.brokers = {b: SecureBrokerProcess(b, workdir, zk_connect, extra)
                        for b in (1, 2, 3)}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(p.kafka_address for p in self.brokers.values())

    def config(self, user: str, password: str | None = None) -> dict[str, Any]:
        return sasl_ssl(self.bootstrap_servers, self.ca, user, password)

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({**self.config("admin"), "socket.timeout.ms": 5000})

    def leader(self, topic: str, partition: int) -> int:
        """The leader the cluster reports (-1 while none)."""
        md = self.admin().list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None or partition not in t.partitions:
            return -1
        return int(t.partitions[partition].leader)

    def close(self) -> None:
        for p in self.brokers.values():
            p.kill()

    def logs(self) -> str:
        return "\n".join(f"--- broker {b}\n{p.log_text()[-3000:]}"
                         for b, p in self.brokers.items())


def add_scram_user(props: Path, user: str, password: str) -> None:
    """``kafka-tiers scram add`` on a broker's server.properties (the password from a file)."""
    secret = props.parent / f"{user}.password"
    secret.write_text(password + "\n")
    secret.chmod(0o600)
    proc = subprocess.run([sys.executable, "-m", "kafka_tiers", "scram", "add", "--config",
                           str(props), "--user", user, "--mechanism", MECHANISM,
                           "--password-file", str(secret)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert password not in proc.stdout + proc.stderr


@pytest.fixture
def secure_cluster(zookeeper_server: Any, s3_server: Any, certs: TestCerts, tmp_path: Path
                   ) -> Iterator[tuple[SecureCluster, dict[str, str]]]:
    """The started cluster and its S3 plugin settings (``rsm.config.*``)."""
    chroot = zookeeper_chroot(zookeeper_server, "/kt-secure")
    rsm = {"s3.bucket.name": s3_server.create_bucket(), "s3.endpoint.url": s3_server.url,
           "s3.region": "us-east-1", "s3.path.style.access.enabled": "true",
           "aws.access.key.id": "kt-test", "aws.secret.access.key": "kt-test-secret",
           "s3.retry.max.attempts": "2"}
    extra = {
        "inter.broker.listener.name": "SASL_SSL", "sasl.enabled.mechanisms": MECHANISM,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_cert),
        "authorizer.class.name": "acl", "super.users": f"{BROKER_PRINCIPAL};User:admin",
        "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
        "remote.log.storage.enable": "true", "remote.storage.manager.class": "s3",
        "remote.log.manager.task.interval.ms": "300",
        **{f"rsm.config.{k}": v for k, v in rsm.items()}}
    cluster = SecureCluster(tmp_path / "cluster", zookeeper_server.connection_string + chroot,
                            extra, certs.ca_cert)
    try:
        for user, password in PASSWORDS.items():
            add_scram_user(cluster.brokers[1].config, user, password)
        for p in cluster.brokers.values():
            p.start()
        yield cluster, rsm
    finally:
        cluster.close()


def produce(config: dict[str, Any], start: int, count: int) -> dict[int, list[bytes]]:
    """``count`` records (numbered from ``start``) round-robin over the partitions, acks=all;
    every one acknowledged, or the test fails naming the errors."""
    from confluent_kafka import Producer

    producer = Producer(confluent_producer_conf(config["bootstrap.servers"], **{
        **config, "acks": "all", "message.timeout.ms": 30000,
        "batch.size": 4096}))  # batches well below segment.bytes
    errors: list[str] = []
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(start, start + count):
        value = f"order-{i:05d}-".encode() + b"x" * (200 + i % 50)
        partition = i % PARTITIONS
        sent[partition].append(value)
        producer.produce(TOPIC, value=value, partition=partition,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        producer.poll(0)
    left = producer.flush(60)
    assert left == 0 and not errors, (left, errors[:3])
    return sent


def read_until(consumer: Any, got: dict[int, list[bytes]], total: int,
               cluster: SecureCluster, timeout: float = 90.0, distinct: bool = False) -> None:
    """Poll until ``got`` holds ``total`` records (``distinct``: different records); fails
    with the counts and the logs."""
    deadline = time.monotonic() + timeout

    def count() -> int:
        return sum(len(set(v)) if distinct else len(v) for v in got.values())

    while count() < total:
        assert time.monotonic() < deadline, ({p: len(v) for p, v in got.items()},
                                             cluster.logs())
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got[msg.partition()].append(msg.value())


@pytest.mark.slow
def test_sasl_ssl_cluster_replicates_fails_over_tiers_and_authorizes(
        secure_cluster: tuple[SecureCluster, dict[str, str]]) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    cluster, rsm = secure_cluster
    admin = cluster.admin()
    # the super user creates the tiered topic and gives alice Write+Read on it and its group
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
            "remote.storage.enable": "true", "segment.bytes": "16384",
            "retention.bytes": "-1"})], operation_timeout=30).values():
        f.result(60)
    acls = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice",
                       "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
    acls.append(AclBinding(ResourceType.GROUP, "orders-readers", ResourcePatternType.LITERAL,
                           "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(acls).values():
        f.result(30)
    wait_until(lambda: all(cluster.leader(TOPIC, p) > 0 for p in range(PARTITIONS)), 30,
               "every partition of orders has a leader")

    alice = cluster.config("alice")
    sent = produce(alice, 0, 600)
    # alice's consumer group reads them (its offsets topic is made while 3 brokers run)
    consumer = Consumer(confluent_consumer_conf(cluster.bootstrap_servers, "orders-readers",
                                                **alice))
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.subscribe([TOPIC])
        read_until(consumer, got, 600, cluster)
        # kill the leader of partition 0: another broker leads, alice keeps producing
        old = cluster.leader(TOPIC, 0)
        cluster.brokers[old].kill()
        wait_until(lambda: cluster.leader(TOPIC, 0) not in (-1, old), 60,
                   f"a new leader of {TOPIC}-0 after broker {old} was killed")
        more = produce(alice, 600, 300)
        for p in range(PARTITIONS):
            sent[p] += more[p]
        # the same consumer reads on, from the new leaders (and coordinator)
        read_until(consumer, got, 900, cluster, distinct=True)
    finally:
        consumer.close()
    # every acknowledged record, in order per partition; a record read again after the
    # group's coordinator moved (at least once) is not a loss
    for p in range(PARTITIONS):
        assert list(dict.fromkeys(got[p])) == sent[p], (
            p, len(got[p]), len(sent[p]), sorted(set(sent[p]) - set(got[p]))[:3])

    # rolled segments reach S3, through the live brokers' remote log managers
    from kafka_tiers.api import TopicPartition
    from kafka_tiers.plugins import load_remote_storage

    store = load_remote_storage("s3", rsm)
    try:
        wait_until(lambda: all(store.list_remote_segments(TopicPartition(TOPIC, p))
                               for p in range(PARTITIONS)), 60,
                   "a remote segment of every partition in S3")
    finally:
        store.close()

    # mallory authenticates but has no ACL: her produce is refused, orders is not shown
    mallory = cluster.config("mallory")
    producer = Producer(confluent_producer_conf(cluster.bootstrap_servers, **{
        **mallory, "message.timeout.ms": 10000}))
    errors: list[Any] = []
    producer.produce(TOPIC, value=b"not allowed", partition=0,
                     on_delivery=lambda err, _m: errors.append(err))
    producer.flush(20)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    seen = AdminClient({**mallory, "socket.timeout.ms": 5000}).list_topics(timeout=10).topics
    assert TOPIC not in seen  # no Describe: invisible in her Metadata
    assert TOPIC in cluster.admin().list_topics(timeout=10).topics
    # a wrong password is an authentication failure, and the cluster keeps serving alice
    reported: list[Any] = []
    bad = Producer({**confluent_producer_conf(cluster.bootstrap_servers, **cluster.config(
        "alice", "not-her-password")), "error_cb": reported.append})
    with pytest.raises(KafkaException):
        bad.list_topics(TOPIC, timeout=10)
    bad.poll(0)  # the error callbacks
    assert KafkaError._AUTHENTICATION in {e.code() for e in reported}, reported
    assert produce(alice, 900, 30)


# ------------------------------------------------------------------ brute force (functional)

@pytest.fixture
def scram_broker(make_kafka_broker: Callable[..., Broker], certs: TestCerts) -> Broker:
    """A standalone broker with a PLAINTEXT listener (to add the SCRAM user through
    AlterUserScramCredentials: no authorizer here) and a SASL_SSL SCRAM-SHA-512 listener."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    broker = make_kafka_broker(
        listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        **{"sasl.enabled.mechanisms": MECHANISM, "ssl.keystore.type": "PEM",
           "ssl.keystore.location": str(certs.broker_keystore),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_cert)})
    plain = listener_address(broker, "PLAINTEXT")
    admin = AdminClient({"bootstrap.servers": plain, "socket.timeout.ms": 5000})
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
        PASSWORDS["alice"].encode())
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(20)
    broker.create_topic(TOPIC, 1, {})
    return broker


def listener_address(broker: Broker, name: str) -> str:
    """host:port of the broker's listener ``name`` (as Metadata advertises it)."""
    assert broker.kafka_server is not None
    host, port = broker.kafka_server.advertised()[name]
    return f"{host}:{port}"


@pytest.mark.slow
def test_a_thousand_wrong_scram_attempts_do_not_stop_other_clients(
        scram_broker: Broker, certs: TestCerts) -> None:
    from confluent_kafka import Producer

    sasl = listener_address(scram_broker, "SASL_SSL")
    alice = sasl_ssl(sasl, certs.ca_cert, "alice")
    producer = Producer(confluent_producer_conf(sasl, **{**alice, "acks": 1}))
    acked: list[int] = []
    failed: list[str] = []
    stop = threading.Event()

    def keep_producing() -> None:
        i = 0
        while not stop.is_set():
            producer.produce(TOPIC, value=f"steady-{i}".encode(), partition=0,
                             on_delivery=lambda err, _m: failed.append(str(err)) if err
                             else acked.append(1))
            producer.poll(0.005)
            i += 1
        producer.flush(30)

    producer.list_topics(TOPIC, timeout=10)  # authenticated before the attack
    thread = threading.Thread(target=keep_producing, daemon=True)
    thread.start()
    try:
        before = len(acked)
        attack = subprocess.run([sys.executable, str(BENCH), "--attack-child", json.dumps({
            "bootstrap": sasl, "ca_file": str(certs.ca_cert), "user": "alice",
            "attempts": 1000, "threads": 10})], capture_output=True, text=True, timeout=300,
            cwd=ROOT)
        during = len(acked) - before
    finally:
        stop.set()
        thread.join(60)
    assert attack.returncode == 0, attack.stderr[-2000:]
    outcome = json.loads(attack.stdout.strip().splitlines()[-1])
    assert outcome["attempts"] == 1000
    assert outcome["refused"] == 1000 and outcome["accepted"] == 0, outcome
    # the authenticated producer kept producing through the attack, every record acknowledged
    assert not failed, failed[:3]
    assert during > 0
    # the broker still serves: a new client authenticates and produces
    fresh = Producer(confluent_producer_conf(sasl, **alice))
    errors: list[Any] = []
    fresh.produce(TOPIC, value=b"after the attack", partition=0,
                  on_delivery=lambda err, _m: errors.append(err))
    assert fresh.flush(20) == 0 and errors == [None]
    # the right password through the attack child's own SCRAM exchange is accepted (the
    # refusals above were the wrong passwords', not a broken exchange)
    bench = runpy.run_path(str(BENCH))
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    port = int(sasl.rsplit(":", 1)[1])
    assert bench["wrong_scram_attempt"]("127.0.0.1", port, context, "alice",
                                        PASSWORDS["alice"]) == "accepted"


# ------------------------------------------------------------------ the benchmark runs

@pytest.mark.slow
def test_security_benchmark_quick_run_prints_its_figures() -> None:
    """benchmarks/security.py --quick ends with one JSON line holding every figure beside its
    baseline; the goals are the benchmark's business, not asserted here."""
    proc = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True,
                          text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["benchmark"] == "security" and doc["quick"] is True and doc["goal"]
    assert isinstance(doc["goal_met"], bool) and set(doc["goals"]) == {"brute_force", "tls"}
    assert doc["brute_force_attempts"] == 1000 and doc["brute_force_accepted"] == 0
    assert doc["brute_force_refused"] == 1000
    assert doc["baseline_p99_ms"] > 0 and doc["brute_force_p99_ms"] > 0
    for kind in ("produce", "consume"):
        assert doc[f"tls_{kind}_sasl_ssl_mb_s"] > 0 and doc[f"tls_{kind}_plaintext_mb_s"] > 0
        assert len(doc[f"tls_{kind}_sasl_ssl_runs_mb_s"]) == 3
