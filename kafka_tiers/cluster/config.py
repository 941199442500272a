"""The cluster's broker configuration keys (:data:`CLUSTER_KEYS`, registered in
:data:`kafka_tiers.config.SECTIONS`): the metadata store, the listener, replication and the
controller, and the byte bounds of requests (``socket.request.max.bytes``,
``fetch.max.bytes``; the count bounds are :mod:`kafka_tiers.placement.limits`). Names and
defaults are Kafka's where Kafka has the key."""

from __future__ import annotations

from kafka_tiers.cluster.transport import SOCKET_REQUEST_MAX_BYTES
from kafka_tiers.config import Bool, Choice, ConfigKey, Int, String

#: Kafka's default of ``fetch.max.bytes``.
FETCH_MAX_BYTES = 57671680


CLUSTER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("metadata.store", Choice("embedded", "zookeeper"), "embedded",
              "Where cluster metadata lives: embedded (one process, a local file) or "
              "zookeeper."),
    ConfigKey("metadata.dir", String(), None,
              "The embedded store's directory (default: <first log dir>/metadata)."),
    ConfigKey("zookeeper.connect", String(), None,
              "ZooKeeper connect string, e.g. 127.0.0.1:2181 or 127.0.0.1:2181/chroot."),
    ConfigKey("zookeeper.session.timeout.ms", Int(min=50, bits=32), 18000,
              "Session timeout: a broker silent this long is dead (ephemeral nodes go)."),
    ConfigKey("port", Int(min=0, max=65535), 0,
              "The port of the brokers' internal transport (replication and controller "
              "requests) on 127.0.0.1; 0: any free port, registered in the metadata store. "
              "Kafka clients use listeners."),
    ConfigKey("replica.lag.time.max.ms", Int(min=1), 30000,
              "A follower not caught up for this long leaves the ISR."),
    ConfigKey("replica.fetch.wait.max.ms", Int(min=0, bits=32), 500,
              "How long a follower fetch waits at the leader for new data."),
    ConfigKey("replica.fetch.max.bytes", Int(min=1024, bits=32), 1 << 20,
              "Bytes per partition per follower fetch."),
    ConfigKey("min.insync.replicas", Int(min=1, bits=32), 1,
              "Replicas in the ISR needed for an acks=all produce."),
    ConfigKey("unclean.leader.election.enable", Bool(), False,
              "Elect an out-of-ISR replica when no ISR replica is alive (data loss)."),
    ConfigKey("default.replication.factor", Int(min=1, bits=32), 1,
              "Replication factor of topics created without one."),
    ConfigKey("num.partitions", Int(min=1, bits=32), 1,
              "Partitions of topics created without a count."),
    ConfigKey("controlled.shutdown.enable", Bool(), True,
              "Move leadership away through the controller before stopping."),
    ConfigKey("controlled.shutdown.max.retries", Int(min=0, bits=32), 3,
              "Controlled shutdown attempts before stopping anyway."),
    ConfigKey("auto.leader.rebalance.enable", Bool(), True,
              "Periodically move leadership back to preferred replicas."),
    ConfigKey("leader.imbalance.check.interval.seconds", Int(min=1), 300,
              "How often the controller checks preferred leaders."),
    ConfigKey("request.timeout.ms", Int(min=1, bits=32), 30000,
              "Timeout of requests between brokers and of acks=all produce waits."),
    ConfigKey("controller.batch.writes", Bool(), True,
              "Write partition states in atomic multi-writes (one round trip per batch)."),
    ConfigKey("controller.batch.size", Int(min=1, max=100000), 2500,
              "Partition states per multi-write (at most 512 KiB of them)."),
    ConfigKey("socket.request.max.bytes", Int(min=1024, bits=32), SOCKET_REQUEST_MAX_BYTES,
              "The largest request frame the broker reads; a larger one is read and dropped "
              "in small chunks and answered INVALID_REQUEST, never held in memory."),
    ConfigKey("fetch.max.bytes", Int(min=1024, bits=32), FETCH_MAX_BYTES,
              "The most record bytes one fetch response carries (the first batch found is "
              "sent whole even when larger, so a consumer always progresses)."),
)

__all__ = ["CLUSTER_KEYS", "FETCH_MAX_BYTES"]
