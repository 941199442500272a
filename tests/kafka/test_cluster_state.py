"""What handlers read of a standalone broker follows its leadership state, as Produce and
Fetch do: a follower partition has no leader, a new epoch is told at once."""

from __future__ import annotations

from pathlib import Path

from kafka_tiers.api import TopicPartition
from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.cluster_state import ClusterState


def test_standalone_state_follows_leadership(tmp_path: Path) -> None:
    with Broker({"broker.id": "7", "log.dirs": str(tmp_path / "d"),
                 "listeners": "PLAINTEXT://127.0.0.1:0"}, background=False) as b:
        b.create_topic("t", 2)
        tp = TopicPartition("t", 0)
        state = ClusterState(b, "PLAINTEXT")
        assert [(e.node_id, e.host) for e in state.brokers()] == [(7, "127.0.0.1")]
        part = state.partition(tp)
        assert part is not None and part.leader == 7 and part.isr == (7,)
        b.become_follower(tp)
        part = state.partition(tp)
        assert part is not None and part.leader == -1 and part.offline == ()
        b.become_leader(tp, 5)
        part = state.partition(tp)
        assert part is not None and (part.leader, part.leader_epoch) == (7, 5)
        assert state.partition(TopicPartition("t", 2)) is None
        assert state.topic("nope") is None and state.topic_names() == ["t"]
        assert ClusterState(b, "OTHER").brokers() == []
