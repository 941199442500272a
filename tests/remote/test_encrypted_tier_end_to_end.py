"""A broker with a Kafka listener tiers a topic to S3 (moto) with chunking, zstd compression,
encryption at rest and a disk chunk cache; its background remote log manager copies the
segments and deletes them locally; a real client (confluent-kafka) then reads every record from
offset 0, most of them from the remote tier. The raw S3 objects hold no plaintext record and
every manifest says how its segment is stored (format 3, several chunks, zstd, key pair id).
``kafka-tiers remote verify|describe|cat`` read the same tier with the key files, and say which
key pair is missing without them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.cli import cli
from kafka_tiers.conformance.storage import write_key_pair
from tests.cli_run import kt
from tests.kafka.clients import confluent_consumer, confluent_producer
from tests.kafka.fixtures import broker_factory, no_aws_environment  # noqa: F401 (by name)

pytestmark = [pytest.mark.servers, pytest.mark.slow,
              pytest.mark.usefixtures("no_aws_environment")]

TOPIC = "secret-orders"
COUNT = 600
MARKER = b"PLAINTEXT-MARKER"
CHUNK_SIZE = 1024
TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "8192",
                "local.retention.bytes": "0"}


def value(i: int) -> bytes:
    """A record value that compresses well and carries the marker."""
    return MARKER + f"-{i:06d}-".encode() + b"order line, quantity 1, price 9.99; " * 3


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    with broker_factory(tmp_path) as make:
        yield make


def s3_keys(server: object, bucket: str) -> dict[str, str]:
    return {"s3.bucket.name": bucket, "s3.endpoint.url": server.url,  # type: ignore[attr-defined]
            "s3.region": "us-east-1", "s3.path.style.access.enabled": "true",
            "aws.access.key.id": "kt-test", "aws.secret.access.key": "kt-test-secret",
            "s3.retry.max.attempts": "2"}


def wait_until_tiered(broker: Broker, tp: TopicPartition, timeout: float = 20.0) -> int:
    """Waits until the remote tier holds the partition from offset 0 and the local log starts
    right after it (the copied segments deleted locally); returns the local log start."""
    deadline = time.monotonic() + timeout
    while True:
        remote = broker.rlm.remote_segments(tp)
        start = broker.log(tp).local_log_start_offset
        if (len(remote) >= 3 and remote[0].start_offset == 0 and start > COUNT // 2
                and start == remote[-1].end_offset + 1):
            return start
        assert time.monotonic() < deadline, \
            f"not tiered: {len(remote)} remote segments, local log start {start}"
        time.sleep(0.1)


def read_from_zero(bootstrap: str) -> list[tuple[int, bytes]]:
    from confluent_kafka import TopicPartition as CkTopicPartition

    got: list[tuple[int, bytes]] = []
    with confluent_consumer(bootstrap) as consumer:
        consumer.assign([CkTopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 20
        while len(got) < COUNT and time.monotonic() < deadline:
            for msg in consumer.consume(200, 0.2):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
    return got


def test_encrypted_compressed_chunked_tier_through_the_kafka_protocol(
        request: pytest.FixtureRequest, make_broker: Callable[..., Broker],
        tmp_path: Path) -> None:
    server = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    keys = tmp_path / "keys"
    keys.mkdir()
    plugin = {**s3_keys(server, bucket), "chunk.size": str(CHUNK_SIZE),
              "compression.enabled": "true", "encryption.enabled": "true",
              "encryption.key.pair.id": "k1", "encryption.key.pairs": "k1",
              **write_key_pair(keys, "k1"),
              "fetch.chunk.cache.class": "disk",
              "fetch.chunk.cache.path": str(tmp_path / "chunk-cache"),
              "fetch.chunk.cache.size": str(4 << 20)}
    broker = make_broker(**{"remote.log.storage.enable": "true",
                            "remote.storage.manager.class": "s3",
                            "remote.log.manager.task.interval.ms": "200",
                            "remote.log.manager.task.retry.jitter": "0",
                            **{f"rsm.config.{k}": v for k, v in plugin.items()}})
    broker.create_topic(TOPIC, 1, TOPIC_CONFIG)
    tp = TopicPartition(TOPIC, 0)
    errors: list[str] = []
    with confluent_producer(broker.bootstrap_servers, acks="all", linger_ms=2,
                            batch_size=2048, compression_type="none") as producer:
        for i in range(COUNT):
            producer.produce(TOPIC, value=value(i), partition=0,
                             on_delivery=lambda err, _m: err and errors.append(str(err)))
            producer.poll(0)
        assert producer.flush(20) == 0
    assert not errors, errors[:3]
    local_start = wait_until_tiered(broker, tp)

    got = read_from_zero(broker.bootstrap_servers)
    assert [o for o, _ in got] == list(range(COUNT)), \
        f"read {len(got)} of {COUNT}, first offsets {[o for o, _ in got[:5]]}"
    assert [v for _, v in got] == [value(i) for i in range(COUNT)]
    assert local_start > 0  # offsets below it came from the remote tier
    assert any((tmp_path / "chunk-cache").rglob("*")), "the disk chunk cache holds nothing"

    # what S3 holds: no plaintext, format 3 manifests with several chunks, zstd and k1
    s3 = server.client()
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    manifests = 0
    for obj in listed:
        raw = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        assert MARKER not in raw, f"{obj['Key']} holds plaintext"
        if obj["Key"].endswith(".manifest"):
            doc = json.loads(raw)
            assert doc["format_version"] == 3 and doc["compression"] == "zstd"
            assert doc["encryption"]["key_id"] == "k1"
            log_entry = next(o for o in doc["objects"] if o["kind"] == "log")
            assert log_entry["stored_size"] < log_entry["size"]  # compressed
            assert -(-log_entry["size"] // CHUNK_SIZE) >= 2  # several chunks
            manifests += 1
    assert manifests >= 3

    # the CLI reads the same tier with the key files (a reader: no key pair id needed)
    config = tmp_path / "reader.properties"
    reader = {k: v for k, v in plugin.items() if k != "encryption.key.pair.id"}
    config.write_text("".join(f"{k}={v}\n" for k, v in reader.items()))
    base = ["--storage", "s3", "--config", str(config), "--topic", TOPIC]
    runner = CliRunner()
    verified = runner.invoke(cli, ["remote", "verify", *base, "--format", "json"])
    assert verified.exit_code == 0, verified.output
    doc = json.loads(verified.output)
    # (the background tasks may have copied more since: every segment from 0 is checked)
    assert doc["ok"] and doc["segments"][0]["start_offset"] == 0
    assert sum(s["records"] for s in doc["segments"]) == doc["segments"][-1]["end_offset"] + 1
    assert doc["segments"][-1]["end_offset"] + 1 >= local_start
    first = doc["segments"][0]["segment_id"]
    described = runner.invoke(cli, ["remote", "describe", *base, "--segment", first,
                                    "--format", "json"])
    assert described.exit_code == 0, described.output
    data = json.loads(described.output)["segment"]["data"]
    assert data["format_version"] == 3 and data["chunks"] >= 2
    assert data["chunk_size"] == CHUNK_SIZE and data["compression"] == "zstd"
    assert data["key_id"] == "k1" and data["stored_size"] < data["original_size"]
    printed = runner.invoke(cli, ["remote", "cat", *base, "--segment", first,
                                  "--max-records", "2", "--format", "json"])
    assert printed.exit_code == 0, printed.output
    assert [r["value"]["text"] for r in json.loads(printed.output)["records"]] == \
        [value(0).decode(), value(1).decode()]
    # without the private key: one line naming the key pair
    config.write_text("".join(f"{k}={v}\n" for k, v in s3_keys(server, bucket).items()))
    missing = kt("remote", "cat", *base, "--segment", first)
    assert missing.code == 2 and missing.out == ""
    (line,) = missing.err_lines
    assert line.startswith("error: ") and "key pair 'k1'" in line, line
    assert "BEGIN" not in missing.err
