"""The whole remote log manager path on top of the backend: produce, roll, copy, local
retention, read old offsets back through the remote tier, restart, remote retention.

Each test runs an in-process :class:`~kafka_tiers.broker.Broker` (log dirs in a temporary
directory, no background threads) whose remote tier is the plugin under test over the test's
fresh root, and drives the remote log manager's tasks synchronously.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api import RemoteStorageManager, TopicPartition
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.harness import (
    SegmentBuilder,
    StorageTarget,
    check,
    storage_test,
)

#: records per test partition, and bytes per value: about ten 4 KiB segments.
RECORDS = 120
VALUE_BYTES = 300
SEGMENT_BYTES = 4096


def _value(i: int) -> bytes:
    return (f"record-{i:06d}-".encode() * (VALUE_BYTES // 14 + 1))[:VALUE_BYTES]


class _BrokerFactory:
    """Starts brokers over one log dir whose remote tier is the plugin under test."""

    def __init__(self, target: StorageTarget, log_dir: Path) -> None:
        self.target = target
        self.log_dir = log_dir
        self.running: list[Any] = []

    def start(self, **extra: str) -> Any:
        from kafka_tiers.broker import Broker
        from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager

        config = {"log.dirs": str(self.log_dir), "broker.id": "1",
                  "remote.log.storage.enable": "true",
                  "remote.log.manager.task.interval.ms": "3600000", **extra}
        broker = Broker(config, hooks=Hooks(make_plugin_manager(load_entrypoints=False)),
                        remote_storage=self.target.guarded(), background=False)
        broker.start()
        self.running.append(broker)
        return broker

    def stop(self, broker: Any) -> None:
        broker.shutdown()
        self.running.remove(broker)


def _produce(broker: Any, tp: TopicPartition, start: int, count: int) -> None:
    for i in range(start, start + count, 10):
        broker.produce(tp, [(f"k{j}".encode(), _value(j)) for j in range(i, min(i + 10,
                                                                                 start + count))])


def _read_all(broker: Any, tp: TopicPartition, start: int, end: int,
              rule: str) -> list[tuple[int, str]]:
    """Fetch offsets ``start..end-1``; returns (offset, tier) per record, checking values."""
    seen: list[tuple[int, str]] = []
    offset = start
    while offset < end:
        result = broker.fetch(tp, offset, 2048)
        records = result.records_list()
        check(rule, records, f"a fetch at offset {offset} ({result.tier}) returned nothing")
        for rec in records:
            if rec.offset >= end:
                break
            check(rule, rec.offset == offset, f"expected offset {offset}, read {rec.offset} "
                  f"from the {result.tier} tier")
            check(rule, rec.value == _value(offset),
                  f"offset {offset} read back from the {result.tier} tier differs from what "
                  "was produced")
            seen.append((offset, result.tier))
            offset += 1
    return seen


class RemoteLogManagerTests(StorageSuiteBase):
    """The remote log manager over the backend."""

    @pytest.fixture
    def brokers(self, fresh_target: StorageTarget, make_rsm: Callable[[], RemoteStorageManager],
                tmp_path: Path) -> Iterator[_BrokerFactory]:
        """Starts brokers over the test's fresh root; all are shut down at the end."""
        factory = _BrokerFactory(fresh_target, tmp_path / "broker-logs")
        yield factory
        for broker in list(factory.running):
            with contextlib.suppress(Exception):
                broker.shutdown()

    def _topic(self, broker: Any, segments: SegmentBuilder, **config: str) -> TopicPartition:
        tp = segments.tp(0)
        broker.create_topic(tp.topic, 1, {"remote.storage.enable": "true",
                                          "segment.bytes": str(SEGMENT_BYTES), **config})
        return tp

    @storage_test("rlm-copy-and-read-back")
    def test_produce_roll_copy_local_retention_and_remote_read(
            self, brokers: _BrokerFactory, segments: SegmentBuilder) -> None:
        rule = "rlm-copy-and-read-back"
        broker = brokers.start()
        tp = self._topic(broker, segments, **{"local.retention.bytes": "0"})
        _produce(broker, tp, 0, RECORDS)
        lg = broker.log(tp)
        rolled = lg.segment_bases()[:-1]
        check(rule, len(rolled) >= 3, f"only {len(rolled)} segments rolled; the test needs 3")
        result = broker.run_tiering()[tp]
        check(rule, result.error is None, f"the remote log manager task failed: {result.error}")
        remote = broker.rlm.remote_segments(tp)
        check(rule, [m.start_offset for m in remote] == rolled,
              f"remote segments start at {[m.start_offset for m in remote]}, expected every "
              f"rolled segment {rolled}")
        for a, b in itertools.pairwise(remote):
            check(rule, b.start_offset == a.end_offset + 1,
                  f"gap or overlap between remote segments {a.end_offset} and {b.start_offset}")
        check(rule, lg.local_log_start_offset == lg.segment_bases()[0] > 0,
              f"local retention kept local segments from {lg.local_log_start_offset}")
        check(rule, lg.num_segments == 1, f"{lg.num_segments} local segments remain; only the "
              "active one should after local.retention.bytes=0")
        seen = _read_all(broker, tp, 0, RECORDS, rule)
        tiers = {o: t for o, t in seen}
        check(rule, tiers[0] == "remote" and tiers[RECORDS - 1] == "local",
              "old offsets must come from the remote tier and new ones from the local log")
        brokers.stop(broker)
        again = brokers.start()
        check(rule, [m.segment_id for m in again.rlm.remote_segments(tp)]
              == [m.segment_id for m in remote],
              "a restarted broker does not list the same remote segments")
        _read_all(again, tp, 0, 5, rule)

    @storage_test("rlm-remote-retention")
    def test_remote_retention_deletes_oldest_remote_segments(
            self, brokers: _BrokerFactory, segments: SegmentBuilder,
            make_rsm: Callable[[], RemoteStorageManager]) -> None:
        rule = "rlm-remote-retention"
        broker = brokers.start()
        tp = self._topic(broker, segments, **{"local.retention.bytes": "0",
                                              "remote.retention.bytes": str(4 * SEGMENT_BYTES)})
        _produce(broker, tp, 0, RECORDS)
        result = broker.run_tiering()[tp]
        check(rule, result.error is None, f"the remote log manager task failed: {result.error}")
        check(rule, result.remote_deleted, "remote.retention.bytes deleted no remote segment")
        remote = make_rsm().list_remote_segments(tp)
        deleted = {m.segment_id for m in result.remote_deleted}
        check(rule, not deleted & {m.segment_id for m in remote},
              "a segment deleted by remote retention is still listed")
        total = sum(m.segment_size_in_bytes for m in remote) + broker.log(tp).size
        check(rule, total <= 4 * SEGMENT_BYTES + SEGMENT_BYTES,
              f"{total} bytes kept, above remote.retention.bytes")
        first = remote[0].start_offset
        check(rule, broker.log(tp).log_start_offset == first,
              f"the log start offset is {broker.log(tp).log_start_offset}, not the first "
              f"remaining remote offset {first}")
        from kafka_tiers.log.errors import OffsetOutOfRangeError

        with pytest.raises(OffsetOutOfRangeError):
            broker.fetch(tp, 0, 1024)
        _read_all(broker, tp, first, RECORDS, rule)


__all__ = ["RemoteLogManagerTests"]
