"""The core's own hook implementations, registered like any plugin (called last)."""

from __future__ import annotations

from collections.abc import Sequence

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.hooks import hookimpl
from kafka_tiers.api.logdirs import LogDirInfo


@hookimpl(trylast=True)
def kafka_tiers_choose_log_dir(
    topic_partition: TopicPartition, log_dirs: Sequence[LogDirInfo]
) -> str | None:
    """The online directory with the fewest bytes used (design document 000: better than
    round-robin); ties go to the fewest replicas, then to the first listed."""
    online = [(d.bytes_used, d.replica_count, i, d.path) for i, d in enumerate(log_dirs)
              if d.online]
    if not online:
        return None
    return min(online)[3]


__all__ = ["kafka_tiers_choose_log_dir"]
