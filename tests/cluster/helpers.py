"""Helpers of the cluster tests: a hook recorder, a producer that remembers what was
acknowledged, and checks over every replica."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from kafka_tiers.cluster.client import ClusterClient
from kafka_tiers.cluster.transport import TransportError
from kafka_tiers.plugins.hookspecs import hookimpl


class HookRecorder:
    """Records the cluster hooks."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.lock = threading.Lock()

    def _add(self, *item: Any) -> None:
        with self.lock:
            self.calls.append(item)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        with self.lock:
            return [c for c in self.calls if c[0] == kind]

    @hookimpl
    def kafka_tiers_topic_created(self, topic, assignment):
        self._add("topic", topic, dict(assignment))

    @hookimpl
    def kafka_tiers_leader_elected(self, topic_partition, leader, leader_epoch):
        self._add("leader", topic_partition, leader, leader_epoch)

    @hookimpl
    def kafka_tiers_isr_changed(self, topic_partition, isr, leader_epoch):
        self._add("isr", topic_partition, tuple(isr), leader_epoch)

    @hookimpl
    def kafka_tiers_broker_up(self, broker_id, rack):
        self._add("up", broker_id, rack)

    @hookimpl
    def kafka_tiers_broker_down(self, broker_id):
        self._add("down", broker_id)


class AckedProducer:
    """Produces unique values with acks=all in a thread, one record per request, never
    retrying a value: every attempt has its own value, so an acknowledged value must be in
    the log exactly once whatever happened to the unacknowledged ones."""

    def __init__(self, client: ClusterClient, topic: str, partition: int = 0,
                 timeout: float = 4.0) -> None:
        self.client, self.topic, self.partition = client, topic, partition
        self.timeout = timeout
        self.acked: list[str] = []
        self.failed: list[str] = []
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acked-producer", daemon=True)
        self._n = 0

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self._n += 1
            value = f"v{self._n}"
            try:
                self.client.produce(self.topic, self.partition, [value], acks=-1,
                                    timeout=self.timeout)
                self.acked.append(value)
            except TransportError as exc:
                self.failed.append(value)
                self.errors[exc.code.name] += 1
                time.sleep(0.02)

    def wait_acked(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        start = len(self.acked)
        while len(self.acked) < start + n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(self.acked) - start} of {n} acks "
                                   f"(errors {dict(self.errors)})")
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()


def assert_exactly_once(values: list[bytes | None], acked: list[str]) -> None:
    counts = Counter(v.decode() for v in values if v is not None)
    missing = [a for a in acked if counts[a] == 0]
    doubled = [a for a in acked if counts[a] > 1]
    assert not missing, f"{len(missing)} acknowledged records lost: {missing[:10]}"
    assert not doubled, f"acknowledged records stored twice: {doubled[:10]}"


__all__ = ["AckedProducer", "HookRecorder", "assert_exactly_once"]
