"""DeleteRecords on a tiered topic: the remote segments wholly below the new log start offset
are deleted even when the leader restarts before its remote log manager's task ran (the log
start offset is checkpointed, and a leader's remote retention deletes below it)."""

from __future__ import annotations

from kafka_tiers.broker import Broker
from tests.broker.helpers import (  # the fixtures are used by name
    make_broker,
    produce,
    read_values,
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    tiered,
    value,
)


def test_remote_deletions_of_delete_records_survive_a_restart(tmp_path) -> None:
    broker, _, _ = make_broker(tmp_path)
    tp = tiered(broker, local_retention_bytes="0")
    produce(broker, tp, 0, 100)
    assert broker.run_tiering()[tp].error is None
    segs = broker.rlm.remote_segments(tp)
    assert len(segs) >= 3
    cut = segs[2].start_offset + 1  # segments 0 and 1 lie wholly below it, 2 holds it
    assert broker.delete_records(tp, cut) == cut
    broker.shutdown()  # before the remote log manager's task ran: nothing deleted yet

    again: Broker = make_broker(tmp_path)[0]
    assert again.log_start_offset(tp) == cut
    result = again.run_tiering()[tp]
    assert result.error is None
    assert [m.segment_id for m in result.remote_deleted] == [m.segment_id for m in segs[:2]]
    assert [m.segment_id for m in again.rlm.storage.list_remote_segments(tp)][:1] == \
        [segs[2].segment_id]
    assert again.log_start_offset(tp) == cut
    assert read_values(again, tp, cut, cut + 3)[cut] == (value(cut), "remote")
    again.shutdown()
