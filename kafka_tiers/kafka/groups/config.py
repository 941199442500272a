"""The group coordinator's configuration keys (:data:`GROUP_KEYS`, registered in
:data:`kafka_tiers.config.SECTIONS`). Names and defaults are Kafka's, except the two
``offsets.snapshot.*`` keys, which are ours: the offsets topic is kept bounded by snapshots
instead of log compaction (see :mod:`kafka_tiers.kafka.groups.store`)."""

from __future__ import annotations

from kafka_tiers.config import ConfigKey, Int

GROUP_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("group.initial.rebalance.delay.ms", Int(min=0, bits=32), 3000,
              "How long the first rebalance of an empty group waits for more members to "
              "join (each new member extends it, up to the rebalance timeout)."),
    ConfigKey("group.min.session.timeout.ms", Int(min=0, bits=32), 6000,
              "The smallest session timeout a member may ask for (smaller: "
              "INVALID_SESSION_TIMEOUT)."),
    ConfigKey("group.max.session.timeout.ms", Int(min=0, bits=32), 1800000,
              "The largest session timeout a member may ask for (larger: "
              "INVALID_SESSION_TIMEOUT)."),
    ConfigKey("group.max.size", Int(min=1, bits=32), 2147483647,
              "The most members of one group; a member beyond it gets GROUP_MAX_SIZE_REACHED."),
    ConfigKey("offsets.topic.num.partitions", Int(min=1, max=1000), 50,
              "Partitions of __consumer_offsets (a group's coordinator leads partition "
              "abs(hash(group id)) % this). Read when the topic is created; do not change it "
              "afterwards."),
    ConfigKey("offsets.topic.replication.factor", Int(min=1, max=32767), 3,
              "Replicas of __consumer_offsets in a cluster; until this many brokers are live "
              "FindCoordinator answers COORDINATOR_NOT_AVAILABLE. A standalone broker "
              "holds the topic's only replica; `kafka-tiers cluster start` sets "
              "min(3, --brokers) unless given."),
    ConfigKey("offsets.topic.segment.bytes", Int(min=14, bits=32), 104857600,
              "segment.bytes of __consumer_offsets (a snapshot frees whole segments only)."),
    ConfigKey("offsets.retention.minutes", Int(min=1, bits=32), 10080,
              "Committed offsets of a group that has been empty this long (of a group "
              "without members: since their commit) are deleted."),
    ConfigKey("offsets.retention.check.interval.ms", Int(min=1), 600000,
              "How often expired offsets are looked for."),
    ConfigKey("offset.metadata.max.bytes", Int(min=0, bits=32), 4096,
              "The longest metadata string of a committed offset (longer: "
              "OFFSET_METADATA_TOO_LARGE for that partition)."),
    ConfigKey("offsets.commit.timeout.ms", Int(min=1, bits=32), 5000,
              "How long a write to __consumer_offsets waits for the in-sync replicas "
              "(then REQUEST_TIMED_OUT)."),
    ConfigKey("offsets.snapshot.min.records", Int(min=1), 1000,
              "(ours) A partition of __consumer_offsets is snapshotted (its live records "
              "written again and its log start moved to them) once it holds this many "
              "records more than twice its live keys."),
)

__all__ = ["GROUP_KEYS"]
