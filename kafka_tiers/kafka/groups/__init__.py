"""Consumer groups, the classic protocol: the group coordinator and committed offsets kept in
the internal topic ``__consumer_offsets``.

- :mod:`.config`: the ``group.*`` / ``offsets.*`` keys (Kafka's names and defaults).
- :mod:`.records`: the records of ``__consumer_offsets`` (Kafka's offset-commit and
  group-metadata key/value schemas, byte for byte).
- :mod:`.group`: one group's state machine (Empty, PreparingRebalance, CompletingRebalance,
  Stable, Dead), members, protocol selection; no I/O.
- :mod:`.store`: one partition of ``__consumer_offsets`` as its coordinator holds it: loaded
  from the log, appended to through the replicated produce path, kept bounded by snapshots.
- :mod:`.coordinator`: the coordinator of one broker: which groups it coordinates, the
  internal topic's creation, the requests, the timers.

Kafka's counterpart: ``group-coordinator``'s ``GroupMetadataManager`` (classic groups) and
``OffsetMetadataManager``. Where we differ: the offsets topic is not compacted; its leader
writes a snapshot of the live records and moves the log start offset past the older ones.
"""

from __future__ import annotations

# the internal topics and what clients may not do to them: one rule, one module
from kafka_tiers.kafka.internal_topics import INTERNAL_TOPICS, OFFSETS_TOPIC, is_internal


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` of ``value`` (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(hashCode) % n`` as Kafka
    (``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "is_internal", "java_string_hash",
           "partition_for"]
