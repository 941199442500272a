"""A broker with ``remote.storage.manager.class=s3``: rolled segments are tiered to moto's S3,
old offsets are read back through the plugin (also by a restarted broker), topic deletion
empties the bucket; and a broker whose S3 is down at start starts, serves local produce and
fetch, and tiers once S3 is back."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_tiers.api import RetriableRemoteStorageError, TopicPartition
from kafka_tiers.broker import Broker

pytestmark = pytest.mark.servers


def _value(i: int) -> bytes:
    return (f"value-{i:06d}-".encode() * 16)[:200]


def _broker(tmp_path: Any, rsm_config: dict[str, str]) -> Broker:
    config = {"log.dirs": str(tmp_path / "logs"), "broker.id": "1",
              "remote.log.storage.enable": "true", "remote.storage.manager.class": "s3",
              "remote.log.manager.task.interval.ms": "3600000",
              "remote.log.manager.task.retry.jitter": "0"}
    config.update({f"rsm.config.{k}": v for k, v in rsm_config.items()})
    return Broker(config, background=False).start()


def _tiered_topic(broker: Broker, name: str) -> TopicPartition:
    broker.create_topic(name, 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                  "local.retention.bytes": "0"})
    return TopicPartition(name, 0)


def _produce(broker: Broker, tp: TopicPartition, start: int, count: int) -> None:
    for i in range(start, start + count, 10):
        broker.produce(tp, [(f"k{j}".encode(), _value(j), (), None)
                            for j in range(i, min(i + 10, start + count))])


def _read(broker: Broker, tp: TopicPartition, start: int, end: int
          ) -> dict[int, tuple[bytes | None, str]]:
    """offset -> (value, tier it came from)."""
    out: dict[int, tuple[bytes | None, str]] = {}
    offset = start
    while offset < end:
        result = broker.fetch(tp, offset, 4096)
        records = [r for r in result.records_list() if r.offset < end]
        assert records, f"nothing read at offset {offset}"
        for r in records:
            out[r.offset] = (r.value, result.tier)
        offset = records[-1].offset + 1
    return out


def test_a_broker_tiers_to_s3_and_reads_old_offsets_back(
        s3_server: Any, bucket: str, s3_config: dict[str, str], tmp_path: Any,
        topic: str) -> None:
    rsm_config = {**s3_config, "key.prefix": "cluster-a"}
    broker = _broker(tmp_path, rsm_config)
    try:
        tp = _tiered_topic(broker, topic)
        _produce(broker, tp, 0, 100)
        rolled = broker.log(tp).segment_bases()[:-1]
        assert len(rolled) >= 4
        result = broker.run_tiering()[tp]
        assert result.error is None
        assert [m.start_offset for m in result.copied] == rolled
        assert result.local_deleted == len(rolled)  # local.retention.bytes=0
        got = _read(broker, tp, 0, 100)
        assert {o: v for o, (v, _) in got.items()} == {i: _value(i) for i in range(100)}
        assert got[0][1] == "remote" and got[99][1] == "local"
        keys = [o["Key"] for o in s3_server.client().list_objects_v2(
            Bucket=bucket, Prefix=f"cluster-a/{topic}-0/")["Contents"]]
        assert sum(k.endswith(".manifest") for k in keys) == len(rolled)
    finally:
        broker.shutdown()

    again = _broker(tmp_path, rsm_config)  # the tier describes itself: a restart finds it
    try:
        assert [m.start_offset for m in again.rlm.remote_segments(tp)] == rolled
        assert _read(again, tp, 0, 5)[3] == (_value(3), "remote")
        again.delete_topic(topic)
        left = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=f"cluster-a/{topic}-")
        assert left.get("KeyCount") == 0
    finally:
        again.shutdown()


def test_the_broker_starts_while_s3_is_down_and_tiers_once_it_is_back(
        server_factory: Any, make_config: Any, credentials: dict[str, str], tmp_path: Any,
        topic: str) -> None:
    from tests.servers.moto_s3 import MotoS3Server

    server = server_factory(MotoS3Server)  # a private server: this test stops it
    bucket = server.create_bucket()
    server.stop()
    broker = _broker(tmp_path, make_config(server.url, bucket,
                                           **{"s3.api.call.attempt.timeout": "2000"}))
    try:
        assert broker.started
        tp = _tiered_topic(broker, topic)
        _produce(broker, tp, 0, 40)
        assert _read(broker, tp, 0, 40)[0] == (_value(0), "local")  # local traffic goes on
        result = broker.run_tiering()[tp]
        assert isinstance(result.error, RetriableRemoteStorageError)
        assert not result.copied
        for secret in credentials.values():
            assert secret not in str(result.error)

        server.start()
        # moto keeps everything in memory: the restarted server is empty, so the bucket is
        # created again (a real S3 would still have it)
        server.create_bucket(bucket)
        result = broker.run_tiering()[tp]
        assert result.error is None and result.copied
        got = _read(broker, tp, 0, 40)
        assert got[0] == (_value(0), "remote")
        assert {o: v for o, (v, _) in got.items()} == {i: _value(i) for i in range(40)}
    finally:
        broker.shutdown()
