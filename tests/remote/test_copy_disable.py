"""KIP-950: ``remote.log.copy.disable`` (no new copies, remote data still readable, local
segments kept by the total retention) and turning tiering off with
``remote.log.delete.on.disable`` (Kafka's refusal without it; the remote data deleted, the log
start offset valid), on the broker and through IncrementalAlterConfigs / AlterConfigs."""

from __future__ import annotations

import pytest

from kafka_tiers.api import ConfigError, TopicPartition
from kafka_tiers.log.errors import OffsetOutOfRangeError
from kafka_tiers.remote.config import DISABLE_WITHOUT_DELETE
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    produce,
    read_values,
    shutdown_brokers,  # noqa: F401
    value,
)
from tests.kafka.targets import LISTENER

TIERED = {"remote.storage.enable": "true", "segment.bytes": "2048"}

KAFKA_MESSAGE = (
    "It is invalid to disable remote storage without deleting remote data. If you want to "
    "keep the remote data and turn to read only, please set "
    "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote "
    "storage and delete all remote data, please set "
    "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")


def _remote_files(tmp_path) -> set[str]:
    root = tmp_path / "remote"
    while True:  # a directory deleted under the walk (a deletion in progress): walk again
        try:
            return {str(p.relative_to(root)) for p in root.rglob("*")
                    if p.is_file() and ".kt-tmp" not in p.parts}
        except FileNotFoundError:
            continue


def _tiered(broker, **extra: str) -> TopicPartition:
    broker.create_topic("t", 1, {**TIERED, **extra})
    tp = TopicPartition("t", 0)
    produce(broker, tp, 0, 40)
    broker.run_tiering()
    assert bool(broker.rlm.remote_segments(tp)) != (extra.get("remote.log.copy.disable") == "true")
    return tp


def test_the_refusal_is_kafkas_message() -> None:
    assert DISABLE_WITHOUT_DELETE == KAFKA_MESSAGE


def test_copy_disable_stops_new_copies_and_keeps_remote_data_readable(tmp_path) -> None:
    broker, _store, rec = make_broker(tmp_path)
    tp = _tiered(broker, **{"local.retention.bytes": "0"})
    copied = len(rec.of("segment_copied"))
    local_start = broker.log(tp).local_log_start_offset
    assert local_start > 0
    with pytest.raises(ConfigError, match=r"When `remote\.log\.copy\.disable` is set to true"):
        # Kafka: local.retention.* must then be -2 or the total retention
        broker.alter_topic_config("t", {**TIERED, "local.retention.bytes": "0",
                                        "remote.log.copy.disable": "true"})
    broker.alter_topic_config("t", {**TIERED, "remote.log.copy.disable": "true"})
    produce(broker, tp, 40, 40)
    broker.run_tiering()
    assert len(rec.of("segment_copied")) == copied  # nothing new copied
    assert broker.log(tp).local_log_start_offset == local_start  # kept: total retention -1
    got = read_values(broker, tp, 0, 80)
    assert {o: v for o, (v, _tier) in got.items()} == {i: value(i) for i in range(80)}
    assert got[0][1] == "remote"  # the remote data stays readable
    broker.alter_topic_config("t", dict(TIERED))  # copying again picks up where it stopped
    broker.run_tiering()
    assert len(rec.of("segment_copied")) > copied


def test_copy_disable_keeps_local_segments_by_the_total_retention(tmp_path) -> None:
    broker, _store, rec = make_broker(tmp_path)
    tp = _tiered(broker, **{"remote.log.copy.disable": "true"})
    assert not rec.of("segment_copied")  # created with copies off: nothing copied
    lg = broker.log(tp)
    inactive = lg.inactive_segments()
    keep = sum(info.size for info in inactive[-2:]) + lg.active_segment.size
    broker.alter_topic_config("t", {**TIERED, "remote.log.copy.disable": "true",
                                    "retention.bytes": str(keep)})
    broker.run_tiering()
    # never copied, yet deleted by the total retention (as Kafka 3.9+); the log start moves
    assert lg.local_log_start_offset == inactive[-2].base_offset
    assert lg.log_start_offset == lg.local_log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch(tp, 0)


def test_disabling_tiering_needs_delete_on_disable_then_deletes_the_remote_data(
        tmp_path) -> None:
    broker, _store, rec = make_broker(tmp_path)
    tp = _tiered(broker, **{"local.retention.bytes": "0"})
    remote = broker.rlm.remote_segments(tp)
    assert _remote_files(tmp_path)
    with pytest.raises(ConfigError) as refused:
        broker.alter_topic_config("t", {**TIERED, "remote.storage.enable": "false"})
    assert str(refused.value) == KAFKA_MESSAGE
    assert broker.topic("t").tiered  # nothing changed
    broker.alter_topic_config("t", {**TIERED, "remote.storage.enable": "false",
                                    "remote.log.delete.on.disable": "true"})
    assert not broker.tiered(tp)
    broker.run_tiering()
    deleted = {c[1].segment_id for c in rec.of("remote_segment_deleted")}
    assert deleted == {m.segment_id for m in remote}
    assert _remote_files(tmp_path) == set()
    assert tp not in broker.rlm.partitions()  # its tiering is stopped
    lg = broker.log(tp)
    assert lg.log_start_offset == lg.local_log_start_offset > 0  # a valid log start
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch(tp, 0)
    produce(broker, tp, 40, 10)  # the local log continues
    got = read_values(broker, tp, lg.log_start_offset, 50)
    assert {o: v for o, (v, _t) in got.items()} == {
        i: value(i) for i in range(lg.log_start_offset, 50)}
    with pytest.raises(ConfigError, match="cannot change from false to true"):
        broker.alter_topic_config("t", dict(TIERED))


def test_a_restart_before_the_cleanup_still_deletes_the_remote_data(tmp_path) -> None:
    """The topic config is the durable intent of delete-on-disable: a broker shut down
    before its RLM task ran takes the partition again at start (retried with backoff while
    the store fails), deletes only that partition's data (``t`` vs ``t-1``), releases it."""
    from tests.broker.helpers import STARTED

    broker, _store, _rec = make_broker(tmp_path)
    tp = _tiered(broker, **{"local.retention.bytes": "0"})
    broker.create_topic("t-1", 1, {**TIERED, "local.retention.bytes": "0"})
    other = TopicPartition("t-1", 0)
    produce(broker, other, 0, 40)
    broker.run_tiering()
    kept = {f for f in _remote_files(tmp_path) if f.startswith("t-1-0/")}
    assert kept and _remote_files(tmp_path) - kept
    broker.alter_topic_config("t", {**TIERED, "local.retention.bytes": "0",
                                    "remote.storage.enable": "false",
                                    "remote.log.delete.on.disable": "true"})
    broker.shutdown()  # before the RLM task ran
    STARTED.remove(broker)
    again, store, _rec = make_broker(tmp_path)
    assert tp in again.rlm.partitions()  # taken for the cleanup
    assert store is not None
    store.mode = "fail"
    result = again.rlm.run_once(tp)
    assert result.error is not None and tp in again.rlm.partitions()  # retried later
    assert again.rlm.next_run_in_ms(tp) > 0  # with backoff
    store.mode = "ok"
    assert again.rlm.run_once(tp).error is None
    assert _remote_files(tmp_path) == kept  # t-1 untouched
    assert tp not in again.rlm.partitions() and other in again.rlm.partitions()
    lg = again.log(tp)
    assert lg.log_start_offset == lg.local_log_start_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        again.fetch(tp, 0)


def test_the_switches_through_incremental_alter_configs(tmp_path) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    from tests.kafka.test_admin_configs import confluent_admin, outcome

    broker, _store, rec = make_broker(tmp_path, listeners=LISTENER)
    tp = _tiered(broker, **{"local.retention.bytes": "0"})
    admin = confluent_admin(broker.bootstrap_servers)

    def alter(**configs: str) -> object:
        [result] = outcome(admin.incremental_alter_configs([ConfigResource(
            "topic", "t", incremental_configs=[
                ConfigEntry(k.replace("_", "."), v,
                            incremental_operation=AlterConfigOpType.SET)
                for k, v in configs.items()])], request_timeout=10))
        return result

    refused = alter(remote_storage_enable="false")
    assert refused is not None and refused.code() == 40  # INVALID_CONFIG
    assert "It is invalid to disable remote storage without deleting remote data" in str(
        refused.str())
    [described] = outcome(admin.describe_configs([ConfigResource("topic", "t")],
                                                 request_timeout=10))
    assert described["remote.log.copy.disable"].value == "false"
    assert described["remote.log.delete.on.disable"].value == "false"
    assert alter(local_retention_bytes="-2", remote_log_copy_disable="true") is None
    copied = len(rec.of("segment_copied"))
    produce(broker, tp, 40, 40)
    broker.run_tiering()
    assert len(rec.of("segment_copied")) == copied
    assert alter(remote_storage_enable="false", remote_log_delete_on_disable="true") is None
    broker.run_tiering()
    assert _remote_files(tmp_path) == set()
    assert broker.log(tp).log_start_offset == broker.log(tp).local_log_start_offset


def test_a_cluster_deletes_the_remote_data_when_tiering_is_turned_off(tmp_path) -> None:
    from kafka_tiers.cluster.local_cluster import LocalCluster
    from tests.kafka.test_admin_topics import controller_of

    c = LocalCluster(tmp_path / "c", 3, overrides={
        "remote.log.storage.enable": "true", "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.manager.task.interval.ms": "3600000"}).start()
    try:
        cl = c.client()
        cl.create_topic("t", 1, 3, {**TIERED, "local.retention.bytes": "0"})
        tp = TopicPartition("t", 0)
        for i in range(60):
            cl.produce("t", 0, [f"value-{i:04d}-" + "x" * 40])
        leader = c.broker(cl.leader("t", 0, refresh=True))
        assert leader.rlm.run_once(tp).error is None  # the rolls copied (background tasks)
        assert leader.rlm.remote_segments(tp) and _remote_files(tmp_path)
        ctl_broker = controller_of(c)
        ctl, policy = ctl_broker.controller, ctl_broker.topic_configs

        def turn_off(delete: bool) -> None:
            new = {**TIERED, "local.retention.bytes": "0", "remote.storage.enable": "false",
                   **({"remote.log.delete.on.disable": "true"} if delete else {})}
            ctl.call(lambda: ctl.alter_topic_config(
                "t", lambda cur: policy.validate_change("t", cur, new)))

        with pytest.raises(ConfigError, match="invalid to disable remote storage"):
            turn_off(delete=False)
        turn_off(delete=True)
        # no task interval passes: the LeaderAndIsr of the new config runs the tasks now
        c.wait_until(lambda: not _remote_files(tmp_path), 15, "the remote data deleted")
        c.wait_until(lambda: all(tp not in c.broker(b).rlm.partitions() for b in c.live), 15,
                     "tiering stopped on every replica")
        lg = leader.log_manager.get_log(tp)
        assert lg.log_start_offset == lg.local_log_start_offset > 0
    finally:
        c.close()
