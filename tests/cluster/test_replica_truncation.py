"""A follower's truncation after a leader change (KIP-101/279): to where the leader's log
leaves its own, asking again while the leader answers with an older epoch."""

from __future__ import annotations

from pathlib import Path

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.cluster.replica_manager import Partition, _Fetcher, _FetchState
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import ProducerRecord, build_batch


class _RM:  # what _truncate_one reads of its replica manager
    broker_id = 9


def _log(tmp_path: Path, epochs: list[tuple[int, int]]) -> Log:
    lg = Log.open(tmp_path / "t-0")
    for epoch, count in epochs:
        for _ in range(count):  # one record per batch: truncation cuts at batch boundaries
            lg.append(build_batch([ProducerRecord(b"x")]), leader_epoch=epoch)
    return lg


def _fetcher() -> _Fetcher:
    f = _Fetcher.__new__(_Fetcher)  # no thread: only the truncation rule is exercised
    f.rm, f.leader_id = _RM(), 1  # type: ignore[assignment]
    return f


def test_divergent_epochs_are_truncated_in_steps(tmp_path: Path) -> None:
    lg = _log(tmp_path, [(3, 50), (6, 30)])
    assert lg.log_end_offset == 80
    p = Partition(TopicPartition("t", 0), lg)
    st = _FetchState(leader_epoch=7)
    f = _fetcher()
    # asked for epoch 6; the leader never had it: its epoch 5 ends at 100
    f._truncate_one(p, st, 6, 5, 100)
    assert lg.log_end_offset == 50 and not st.truncated  # our epoch 5 ends where 6 began
    latest = lg.leader_epoch_cache.latest_epoch
    assert latest == 3
    f._truncate_one(p, st, 3, 3, 40)  # the leader's epoch 3 ends at 40
    assert lg.log_end_offset == 40 and st.truncated
    lg.close()


def test_same_epoch_truncates_to_the_leaders_end_and_unknown_to_the_high_watermark(
        tmp_path: Path) -> None:
    lg = _log(tmp_path, [(2, 30)])
    p = Partition(TopicPartition("t", 0), lg)
    st = _FetchState(leader_epoch=3)
    _fetcher()._truncate_one(p, st, 2, 2, 25)
    assert lg.log_end_offset == 25 and st.truncated
    lg.update_high_watermark(10)
    st2 = _FetchState(leader_epoch=4)
    _fetcher()._truncate_one(p, st2, 2, -1, -1)
    assert lg.log_end_offset == 10 and st2.truncated
    lg.close()
