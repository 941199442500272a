"""A broker whose remote tier is this plugin, loaded by ``remote.storage.manager.class=azure``
with ``rsm.config.azure.*`` keys: it tiers rolled segments and reads old offsets back (also
after a restart), and it starts while Azurite is down, serving local produce and fetch, then
tiers once Azurite is back."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api import TopicPartition

pytestmark = pytest.mark.servers

RECORDS = 100


def _value(i: int) -> bytes:
    return (f"azure-{i:05d}-".encode() * 20)[:200]


class _Brokers:
    """Starts brokers over one log dir; all are shut down at the end of the test."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.running: list[Any] = []

    def start(self, server: Any, container: str, fast: dict[str, str], *,
              background: bool = False, **extra: str) -> Any:
        from kafka_tiers.broker import Broker
        from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager

        config = {
            "log.dirs": str(self.log_dir), "broker.id": "1",
            "remote.log.storage.enable": "true",
            "remote.storage.manager.class": "azure",
            "rsm.config.azure.container.name": container,
            "rsm.config.azure.endpoint.url": server.url,
            "rsm.config.azure.account.name": server.account_name,
            "rsm.config.azure.account.key": server.account_key,
            "rsm.config.azure.upload.block.size": "65536",
            "remote.log.manager.task.interval.ms": "3600000",
            "remote.log.manager.task.retry.jitter": "0",
            **{f"rsm.config.{k}": v for k, v in fast.items()},
            **extra,
        }
        broker = Broker(config, hooks=Hooks(make_plugin_manager(load_entrypoints=False)),
                        background=background)
        broker.start()
        self.running.append(broker)
        return broker

    def stop(self, broker: Any) -> None:
        self.running.remove(broker)
        broker.shutdown()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[_Brokers]:
    factory = _Brokers(tmp_path / "logs")
    yield factory
    for broker in list(factory.running):
        with contextlib.suppress(Exception):
            broker.shutdown()


def _tiered_topic(broker: Any) -> TopicPartition:
    broker.create_topic("orders", 1, {"remote.storage.enable": "true", "segment.bytes": "4096",
                                      "local.retention.bytes": "0"})
    return TopicPartition("orders", 0)


def _produce(broker: Any, tp: TopicPartition, start: int, count: int) -> None:
    for i in range(start, start + count, 10):
        broker.produce(tp, [(f"k{j}".encode(), _value(j))
                            for j in range(i, min(i + 10, start + count))])


def _read(broker: Any, tp: TopicPartition, start: int, end: int) -> dict[int, str]:
    """offset -> tier for ``start..end-1``, checking every value."""
    tiers: dict[int, str] = {}
    offset = start
    while offset < end:
        result = broker.fetch(tp, offset, 4096)
        records = [r for r in result.records_list() if r.offset < end]
        assert records, f"nothing read at offset {offset} ({result.tier})"
        for record in records:
            assert record.offset == offset and record.value == _value(offset)
            tiers[offset] = result.tier
            offset += 1
    return tiers


def test_broker_tiers_to_azure_and_reads_old_offsets_back(
        brokers: _Brokers, azurite_server: Any, fresh_container: str,
        fast_retries: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    broker = brokers.start(azurite_server, fresh_container, fast_retries)
    tp = _tiered_topic(broker)
    _produce(broker, tp, 0, RECORDS)
    lg = broker.log(tp)
    rolled = lg.segment_bases()[:-1]
    assert len(rolled) >= 3
    result = broker.run_tiering()[tp]
    assert result.error is None
    assert [m.start_offset for m in result.copied] == rolled
    assert lg.num_segments == 1  # local retention removed every copied segment
    tiers = _read(broker, tp, 0, RECORDS)
    assert tiers[0] == "remote" and tiers[RECORDS - 1] == "local"
    # the segments are blobs of the container, manifests included
    names = [b.name for b in azurite_server.service_client()
             .get_container_client(fresh_container).list_blobs()]
    assert sum(n.endswith(".manifest") for n in names) == len(rolled)
    assert all(n.startswith("orders-0/") for n in names)
    ids = [m.segment_id for m in broker.rlm.remote_segments(tp)]
    brokers.stop(broker)

    again = brokers.start(azurite_server, fresh_container, fast_retries)
    assert [m.segment_id for m in again.rlm.remote_segments(tp)] == ids
    assert set(_read(again, tp, 0, rolled[-1]).values()) == {"remote"}
    assert not [r for r in caplog.records if azurite_server.account_key in r.getMessage()]


def test_broker_starts_while_azure_is_down_and_tiers_once_it_is_back(
        brokers: _Brokers, server_factory: Callable[..., Any],
        fast_retries: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """With the broker's own scheduler: copies fail (retriable) while Azurite is down, local
    produce and fetch work, and the scheduled retries tier everything once it is back."""
    from tests.servers.azurite import AzuriteServer

    caplog.set_level(logging.DEBUG)
    server = server_factory(AzuriteServer)
    container = server.create_container().container_name
    server.stop()
    broker = brokers.start(server, container, fast_retries, background=True, **{
        "remote.log.manager.task.interval.ms": "100",
        "remote.log.manager.task.retry.backoff.ms": "50",
        "remote.log.manager.task.retry.backoff.max.ms": "200"})  # started without Azure
    tp = _tiered_topic(broker)
    _produce(broker, tp, 0, RECORDS)
    assert set(_read(broker, tp, 0, RECORDS).values()) == {"local"}
    lg = broker.log(tp)
    rolled = lg.segment_bases()[:-1]
    assert len(rolled) >= 3

    def outage_reports() -> int:  # the remote log manager's warnings about its failed runs
        return sum(r.levelno == logging.WARNING and "orders-0" in r.getMessage()
                   and "RetriableRemoteStorageError" in r.getMessage()
                   and "unreachable" in r.getMessage() for r in caplog.records)

    _wait(lambda: outage_reports() >= 2, "tiering to fail (retriable) while Azure is down")
    assert lg.segment_bases()[:-1] == rolled  # nothing deleted locally while not copied

    server.start()
    _wait(lambda: lg.num_segments == 1, "tiering and local retention after the outage")
    assert [m.start_offset for m in broker.rlm.remote_segments(tp)] == rolled
    tiers = _read(broker, tp, 0, RECORDS)
    assert tiers[0] == "remote" and tiers[RECORDS - 1] == "local"
    _produce(broker, tp, RECORDS, 10)  # and the broker goes on
    assert _read(broker, tp, RECORDS, RECORDS + 10)
    assert not [r for r in caplog.records if server.account_key in r.getMessage()
                or server.account_key in (r.exc_text or "")]


def _wait(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
