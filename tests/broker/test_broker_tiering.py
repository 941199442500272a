"""A broker with remote storage enabled: tiering end to end on the local backend, restart,
topic deletion, hooks, metrics, config errors, threads."""

from __future__ import annotations

import json

import pytest

from kafka_tiers.api import ConfigError, RemoteStorageError, TopicPartition
from kafka_tiers.broker import TOPICS_FILE, Broker, NotLeaderError, TopicExistsError
from kafka_tiers.log.errors import OffsetOutOfRangeError
from kafka_tiers.remote.metrics import prometheus_name
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    new_threads,
    produce,
    read_values,
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    tiered,
    value,
)


def test_tiering_end_to_end_and_restart(tmp_path):
    broker, _, rec = make_broker(tmp_path)
    tp = tiered(broker, local_retention_bytes="0")
    produce(broker, tp, 0, 100)
    lg = broker.log(tp)
    rolled = lg.segment_bases()[:-1]
    assert len(rolled) >= 4
    assert [c[1] for c in rec.of("segment_rolled")] == rolled
    result = broker.run_tiering()[tp]
    assert result.error is None
    assert [m.start_offset for m in result.copied] == rolled
    assert [c[1].start_offset for c in rec.of("segment_copied")] == rolled
    assert lg.num_segments == 1 and lg.local_log_start_offset == lg.segment_bases()[0]
    assert result.local_deleted == len(rolled)
    got = read_values(broker, tp, 0, 100)
    assert {o: v for o, (v, _) in got.items()} == {i: value(i) for i in range(100)}
    assert got[0][1] == "remote" and got[99][1] == "local"
    rows = broker.segments(tp)
    assert [(r.local, r.remote) for r in rows] == [(False, True)] * len(rolled) + [(True, False)]
    ids = [m.segment_id for m in broker.rlm.remote_segments(tp)]
    broker.shutdown()
    assert rec.of("broker_stopping") == [(1, True)]
    assert not new_threads()

    again, _, _ = make_broker(tmp_path)
    assert [m.segment_id for m in again.rlm.remote_segments(tp)] == ids
    assert read_values(again, tp, 0, 10)[3] == (value(3), "remote")
    assert again.log_start_offset(tp) == 0
    # the restarted broker continues: a new roll is copied after the last remote offset
    produce(again, tp, 100, 30)
    last_end = again.rlm.highest_remote_offset(tp)
    copied = again.run_tiering()[tp].copied
    assert copied and copied[0].start_offset == last_end + 1
    again.shutdown()


def test_only_rolled_segments_below_the_high_watermark_are_copied_earliest_first(tmp_path):
    broker, _, rec = make_broker(tmp_path)
    tp = tiered(broker)
    produce(broker, tp, 0, 60)
    lg = broker.log(tp)
    bases = lg.segment_bases()
    assert len(bases) >= 4
    lg.update_high_watermark(bases[2] + 1)  # inside the third segment
    copied = broker.run_tiering()[tp].copied
    assert [m.start_offset for m in copied] == bases[:2]
    assert all(m.end_offset < lg.high_watermark for m in copied)
    lg.update_high_watermark(lg.log_end_offset)
    copied = broker.run_tiering()[tp].copied
    assert [m.start_offset for m in copied] == bases[2:-1]  # never the active segment
    starts = [c[1].start_offset for c in rec.of("segment_copied")]
    assert starts == sorted(starts) == bases[:-1]
    assert broker.rlm.highest_remote_offset(tp) == bases[-1] - 1
    broker.shutdown()


def test_a_topic_that_is_not_tiered_stays_local(tmp_path):
    broker, store, _ = make_broker(tmp_path)
    broker.create_topic("plain", 1, {"segment.bytes": "2048"})
    tp = TopicPartition("plain", 0)
    produce(broker, tp, 0, 40)
    assert broker.run_tiering() == {}
    assert store.puts == []
    assert broker.fetch(tp, 0).tier == "local"
    broker.shutdown()


def test_topic_deletion_removes_remote_data_and_fires_hooks(tmp_path):
    broker, _, rec = make_broker(tmp_path)
    tp = tiered(broker)
    produce(broker, tp, 0, 50)
    copied = broker.run_tiering()[tp].copied
    assert copied
    assert any((tmp_path / "remote").rglob("*.log"))
    broker.delete_topic("t")
    assert not [p for p in (tmp_path / "remote").rglob("*") if p.is_file()
                and ".kt-tmp" not in p.parts]
    deleted = [c[1].segment_id for c in rec.of("remote_segment_deleted")]
    assert sorted(deleted) == sorted(m.segment_id for m in copied)
    assert "t" not in broker.topics()
    assert not (tmp_path / "b1" / "t-0").exists()
    broker.shutdown()
    again, _, _ = make_broker(tmp_path)
    assert again.topics() == {}
    again.shutdown()


def test_topic_deletion_while_the_remote_tier_is_down_keeps_the_topic(tmp_path):
    broker, store, _ = make_broker(tmp_path)
    tp = tiered(broker)
    produce(broker, tp, 0, 30)
    assert broker.run_tiering()[tp].copied
    store.mode = "fail"
    with pytest.raises(RemoteStorageError, match="injected outage"):
        broker.delete_topic("t")
    assert "t" in broker.topics() and broker.fetch(tp, 0).records
    assert broker.rlm.role(tp) == "leader"  # still tiered
    store.mode = "ok"
    broker.delete_topic("t")
    assert "t" not in broker.topics() and broker.rlm.partitions() == []
    assert not list((tmp_path / "remote").rglob("*.log"))


def test_topic_metadata_is_versioned_and_persisted(tmp_path):
    broker, _, rec = make_broker(tmp_path)
    tiered(broker, "orders", local_retention_ms="1000")
    assert rec.of("topic_created") == [("orders", {0: [1]})]
    with pytest.raises(TopicExistsError):
        broker.create_topic("orders")
    broker.shutdown()
    doc = json.loads((tmp_path / "b1" / TOPICS_FILE).read_text())
    assert doc["version"] == 1
    assert doc["topics"]["orders"]["config"]["local.retention.ms"] == "1000"
    doc["version"] = 99
    (tmp_path / "b1" / TOPICS_FILE).write_text(json.dumps(doc))
    with pytest.raises(Exception, match="format version 99"):
        make_broker(tmp_path)
    assert not new_threads()


def test_metrics_text_has_kafka_named_series_with_correct_values(tmp_path):
    broker, store, _ = make_broker(tmp_path)
    tp = tiered(broker)
    produce(broker, tp, 0, 60)
    lg = broker.log(tp)
    lg.update_high_watermark(lg.segment_bases()[1])  # one rolled segment below the HW
    broker.run_tiering()
    m = broker.metrics
    first = broker.rlm.remote_segments(tp)[0]
    assert m.value("RemoteCopyBytesPerSec", tp) == first.segment_size_in_bytes
    assert m.value("RemoteCopyRequestsPerSec", tp) == 1
    lag_segments = len(lg.segment_bases()) - 2
    lg.update_high_watermark(lg.log_end_offset)
    store.mode = "fail"  # the next copy fails: the lag stays, the error is counted
    assert broker.run_tiering()[tp].error is not None
    store.mode = "ok"
    assert m.value("RemoteCopyErrorsPerSec", tp) == 1
    assert m.value("RemoteCopyRequestsPerSec") == 2  # broker-wide
    assert m.value("RemoteCopyLagSegments", tp) == lag_segments
    lag_bytes = sum(s.size for s in lg.segments()[1:-1])
    assert m.value("RemoteCopyLagBytes", tp) == lag_bytes
    assert broker.fetch(tp, 0, 100).tier == "local"  # still local: not a remote fetch
    read = broker.rlm.read(tp, 0, 100)
    assert m.value("RemoteFetchBytesPerSec", tp) == read.bytes_fetched > 0
    text = broker.metrics_text()
    labels = 'partition="0",topic="t"'
    assert f'{prometheus_name("RemoteCopyBytesPerSec")}_total{{{labels}}} ' \
           f'{float(first.segment_size_in_bytes)}' in text
    assert f'{prometheus_name("RemoteFetchRequestsPerSec")}_total{{{labels}}} 1.0' in text
    assert f'{prometheus_name("RemoteFetchBytesPerSec")}_total ' in text  # broker-wide
    assert f'{prometheus_name("RemoteCopyLagSegments")}{{{labels}}} {float(lag_segments)}' \
        in text
    assert "# TYPE kafka_server_brokertopicmetrics_remotecopyerrorspersec_total counter" in text
    broker.shutdown()


@pytest.mark.parametrize(("broker_cfg", "topic_cfg", "needle"), [
    ({}, {"remote.storage.enable": "true", "retention.ms": "1000",
          "local.retention.ms": "5000"}, "local.retention.ms=5000 exceeds"),
    ({}, {"remote.storage.enable": "true", "retention.bytes": "1000"},
     None),
    ({}, {"remote.storage.enable": "true", "remote.retention.bytes": "100",
          "local.retention.bytes": "-1"}, "local.retention.bytes=-1 (unlimited) exceeds"),
    ({}, {"remote.storage.enable": "maybe"}, "invalid value 'maybe' for remote.storage.enable"),
    ({}, {"local.retention.ms": "-7"}, "invalid value '-7' for local.retention.ms"),
    ({}, {"no.such.key": "1"}, "unknown topic config key no.such.key"),
    ({"remote.log.storage.enable": "false"}, {"remote.storage.enable": "true"},
     "remote.storage.enable=true needs tiered storage on the broker"),
])
def test_topic_config_errors_are_one_clear_line(tmp_path, broker_cfg, topic_cfg, needle):
    broker, _, _ = make_broker(tmp_path, **{k.replace(".", "_"): v
                                            for k, v in broker_cfg.items()})
    try:
        if needle is None:
            broker.create_topic("ok", 1, topic_cfg)
            assert broker.topic("ok").tiering.local_retention_bytes == 1000
            return
        with pytest.raises(ConfigError) as err:
            broker.create_topic("bad", 1, topic_cfg)
        assert needle in str(err.value)
        assert "\n" not in str(err.value)
        assert "bad" not in broker.topics()
    finally:
        broker.shutdown()


@pytest.mark.parametrize(("cfg", "needle"), [
    ({"remote.log.manager.task.retry.jitter": "2"},
     "invalid value '2' for remote.log.manager.task.retry.jitter"),
    ({"remote.log.manager.task.retry.backoff.ms": "500",
      "remote.log.manager.task.retry.backoff.max.ms": "100"}, "is below"),
    ({"remote.log.storage.enable": "true", "remote.log.storage.system.enable": "false"},
     "are the same setting and disagree"),
    ({"remote.storage.manager.class": "no such"}, "entry-point name"),
    ({"remote.fetch.max.wait.ms": "0"}, "remote.fetch.max.wait.ms"),
])
def test_broker_config_errors_are_one_clear_line(tmp_path, cfg, needle):
    with pytest.raises(ConfigError) as err:
        Broker({"log.dirs": str(tmp_path / "x"), **cfg})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_unknown_storage_plugin_fails_the_start_with_the_installed_names(tmp_path):
    broker = Broker({"log.dirs": str(tmp_path / "x"), "remote.log.storage.enable": "true",
                     "remote.storage.manager.class": "nope"}, background=False)
    with pytest.raises(Exception, match="nope"):
        broker.start()
    assert not broker.started and not new_threads()


def test_produce_refused_on_a_follower_and_no_threads_after_shutdown(tmp_path):
    broker, _, _ = make_broker(tmp_path, background=True)
    tp = tiered(broker)
    assert new_threads()  # schedulers run
    broker.become_follower(tp)
    with pytest.raises(NotLeaderError):
        broker.produce(tp, [(b"k", b"v")])
    broker.become_leader(tp, 1)
    assert broker.produce(tp, [(b"k", b"v")]) == 0
    with pytest.raises(ValueError, match="stale leader epoch"):
        broker.become_leader(tp, 0)
    broker.fetch(tp, 0)
    broker.shutdown()
    assert new_threads() == []
    with pytest.raises(Exception, match="not started"):
        broker.produce(tp, [(b"k", b"v")])


def test_fetch_out_of_range(tmp_path):
    broker, _, _ = make_broker(tmp_path)
    tp = tiered(broker, remote_retention_bytes="4096", local_retention_bytes="0")
    produce(broker, tp, 0, 60)
    broker.run_tiering()
    start = broker.log(tp).log_start_offset
    assert start > 0
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch(tp, 0)
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch(tp, 61)
    assert broker.fetch(tp, 60).records == b""
    assert broker.fetch(tp, start).records_list()[0].offset == start
    broker.shutdown()


def test_remote_keys_accept_kafka_aliases_and_have_kafka_defaults():
    from kafka_tiers.config import BrokerConfig

    cfg = BrokerConfig({"remote.log.storage.system.enable": "true",
                        "remote.log.storage.manager.class.name": "my_pkg.tier:Tier",
                        "rsm.config.bucket": "b"})
    assert cfg["remote.log.storage.enable"] is True
    assert cfg["remote.storage.manager.class"] == "my_pkg.tier:Tier"
    assert cfg.prefixed("rsm.config.") == {"bucket": "b"}
    assert cfg["remote.fetch.max.wait.ms"] == 500
    assert cfg["remote.log.manager.task.retry.jitter"] == 0.2
    assert cfg["log.local.retention.ms"] == -2
