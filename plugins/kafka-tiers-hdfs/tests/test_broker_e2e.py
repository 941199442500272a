"""End to end: a broker whose ``server.properties`` says ``remote.storage.manager.class=hdfs``
(with ``rsm.config.*`` keys, as in the README) tiers rolled segments to HDFS, applies local
retention, reads old offsets back through the plugin (also after a restart), and deleting the
topic removes its remote data and prunes its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker import Broker
from kafka_tiers.config import BrokerConfig
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager

pytestmark = pytest.mark.servers

RECORDS = 150


def _value(i: int) -> bytes:
    return f"hdfs-e2e-{i:06d}|".encode() * 16


def _start(properties: Path) -> Broker:
    broker = Broker(BrokerConfig.from_file(properties),
                    hooks=Hooks(make_plugin_manager(load_entrypoints=False)), background=False)
    return broker.start()


def _read_back(broker: Broker, tp: TopicPartition, start: int, end: int) -> dict[int, str]:
    """Fetch offsets ``start..end-1``, checking every value; returns the tier of each."""
    tiers: dict[int, str] = {}
    offset = start
    while offset < end:
        result = broker.fetch(tp, offset, 8192)
        records = [r for r in result.records_list() if r.offset < end]
        assert records, f"nothing fetched at {offset}"
        for record in records:
            assert (record.offset, record.value) == (offset, _value(offset))
            tiers[offset] = result.tier
            offset += 1
    return tiers


def test_broker_tiers_to_hdfs_and_reads_back(webhdfs_server: Any, hdfs_run_dir: str,
                                             tmp_path: Path) -> None:
    base = f"{hdfs_run_dir}/e2e-{tmp_path.name}"
    properties = tmp_path / "server.properties"
    properties.write_text(f"""\
broker.id=1
log.dirs={tmp_path / "logs"}
remote.log.storage.enable=true
remote.storage.manager.class=hdfs
remote.log.manager.task.interval.ms=3600000
rsm.config.hdfs.namenode.url={webhdfs_server.url}
rsm.config.hdfs.user={webhdfs_server.user}
rsm.config.hdfs.base.dir={base}
rsm.config.key.prefix=cluster-a
""")
    client = webhdfs_server.client()
    broker = _start(properties)
    tp = TopicPartition("orders", 0)
    try:
        broker.create_topic(tp.topic, 1, {"remote.storage.enable": "true",
                                          "segment.bytes": "8192",
                                          "local.retention.bytes": "0"})
        for start in range(0, RECORDS, 10):
            broker.produce(tp, [(f"k{i}".encode(), _value(i)) for i in range(start, start + 10)])
        rolled = broker.log(tp).segment_bases()[:-1]
        assert len(rolled) >= 3
        result = broker.run_tiering()[tp]
        assert result.error is None
        assert [m.start_offset for m in result.copied] == rolled
        assert broker.log(tp).local_log_start_offset > 0  # old offsets are only remote now
        tiers = _read_back(broker, tp, 0, RECORDS)
        assert tiers[0] == "remote" and tiers[RECORDS - 1] == "local"
        # the layout in HDFS: one manifest (and its objects) per rolled segment
        names = client.list(f"{base}/cluster-a/orders-0")
        manifests = sorted(n for n in names if n.endswith(".manifest"))
        assert [int(n[:20]) for n in manifests] == rolled
        assert not [n for n in names if n.startswith(".")]  # no temporary file left
        ids = [m.segment_id for m in broker.rlm.remote_segments(tp)]
    finally:
        broker.shutdown()

    again = _start(properties)  # a restarted broker finds the segments in HDFS
    try:
        assert [m.segment_id for m in again.rlm.remote_segments(tp)] == ids
        assert set(_read_back(again, tp, 0, 20).values()) == {"remote"}
        again.delete_topic(tp.topic)
        assert client.status(f"{base}/cluster-a/orders-0", strict=False) is None  # pruned
        assert client.list(base) == []
    finally:
        again.shutdown()
