"""The replica manager's part of issue 13's lock audit: a consumer fetch below the local log
reads the remote tier (waiting up to remote.fetch.max.wait.ms for the reader pool) without
holding the partition's lock, which produce, the ISR checker and the replica manager's shutdown
take."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kafka_tiers.api import TopicPartition
from kafka_tiers.cluster.local_cluster import LocalCluster


def test_a_remote_read_does_not_hold_the_partitions_lock(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(1, overrides={"log.segment.bytes": "1024"})
    with c.client() as client:
        client.create_topic("t", 1, 1)
        for i in range(20):
            client.produce("t", 0, [(None, b"x" * 200 + str(i).encode())])
    rm = c.broker(1).replicas
    tp = TopicPartition("t", 0)
    p = rm.partitions[tp]
    assert p.log.advance_local_log_start_offset(p.log.high_watermark) > 0  # as after a copy
    reading, release = threading.Event(), threading.Event()

    def slow_remote(tp_: TopicPartition, offset: int, max_bytes: int) -> bytes | None:
        reading.set()
        release.wait(10)
        return None

    rm.remote_reader = slow_remote
    result: list[Any] = []
    fetcher = threading.Thread(target=lambda: result.append(rm.fetch(
        {"replica_id": -1, "partitions": [{"topic": "t", "partition": 0, "offset": 0}]})),
        daemon=True)
    fetcher.start()
    assert reading.wait(10)
    free = p.lock.acquire(timeout=2)
    if free:
        p.lock.release()
    release.set()
    fetcher.join(10)
    assert free, "the partition's lock was held during the remote read"
    body, _ = result[0]
    assert body["partitions"][0]["error"] == 1  # OFFSET_OUT_OF_RANGE: nothing remote either
