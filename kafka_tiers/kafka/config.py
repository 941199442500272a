"""The Kafka listener's configuration keys (:data:`KAFKA_LISTENER_KEYS`, registered in
:data:`kafka_tiers.config.SECTIONS`). Names, syntax and defaults are Kafka's, except
``listeners``, which has no default: a broker opens a Kafka listener only when told to (the
sample ``server.properties`` and ``kafka-tiers broker start`` give one)."""

from __future__ import annotations

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.config import Bool, ConfigKey, Int, String


def _check_listeners(value: str) -> str | None:
    from kafka_tiers.kafka.listeners_config import listener_specs
    try:
        listener_specs({"listeners": value})
    except ConfigError as exc:
        if exc.key == "listener.security.protocol.map":  # a name of the map's, not the
            return None  # default's: the broker checks it against the map at start
        return str(exc).removeprefix("listeners: ")
    return None


KAFKA_LISTENER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("listeners", String(), None,
              "The Kafka-protocol listeners, NAME://HOST:PORT,... (e.g. "
              "PLAINTEXT://127.0.0.1:9092; port 0: any free port). Unset: no Kafka listener.",
              check=_check_listeners),
    ConfigKey("advertised.listeners", String(), None,
              "What Metadata tells clients per listener name (default: the bound address, "
              "127.0.0.1 for an empty or wildcard host)."),
    ConfigKey("listener.security.protocol.map", String(), None,
              "NAME:PROTOCOL,... (Kafka's default maps PLAINTEXT, SSL, SASL_PLAINTEXT and "
              "SASL_SSL to themselves); the protocols served and their keys: "
              "docs/security.md."),
    ConfigKey("max.connections", Int(min=1, bits=32), None,
              "Kafka-protocol connections open at once per broker; more are closed at once "
              "(one WARN a minute). Unset: the process's open-file limit (RLIMIT_NOFILE) less "
              "log.open.files.max and 256 for the rest (Kafka's default is unbounded). An idle "
              "connection costs a descriptor and a few hundred bytes, no thread."),
    ConfigKey("max.connections.per.ip", Int(min=1, bits=32), None,
              "Kafka-protocol connections open at once from one client address; more are "
              "closed at once. Unset: max.connections (Kafka's default is unbounded)."),
    ConfigKey("max.connection.creation.rate", Int(min=1, bits=32), 2147483647,
              "New Kafka-protocol connections a listener accepts per second (KIP-612; "
              "listener.name.<l>.max.connection.creation.rate per listener, the broker-wide "
              "value applies to each listener alone). Beyond it the listener stops accepting "
              "until the rate allows: new connections wait in the listen backlog, open ones "
              "are served as usual. Kafka's default: unbounded (2147483647)."),
    ConfigKey("connections.max.idle.ms", Int(min=1), 600000,
              "A Kafka-protocol connection with no request under way and none started for "
              "this long is closed (a request being read is bounded by request.timeout.ms)."),
    ConfigKey("queued.max.request.bytes", Int(min=-1), 104857600,
              "Bytes of Kafka requests being read or waiting for a handler, across all "
              "connections (Kafka's key; Kafka's default -1 is unbounded, here 100 MiB). A "
              "frame's announced size is reserved once its length prefix is read (nothing is "
              "allocated until bytes arrive); a connection whose next frame does not fit is "
              "not read until memory frees (a frame larger than the whole bound is read when "
              "nothing else is). -1: unbounded."),
    ConfigKey("request.handler.threads.max", Int(min=1, bits=32), 256,
              "Threads handling Kafka requests at once (made on demand, ended after 60 s "
              "idle); more requests wait in order. A waiting Fetch or acks=all Produce holds "
              "its thread while it waits. Not a Kafka key (Kafka's num.io.threads park waiting "
              "requests in purgatories instead)."),
    ConfigKey("socket.listen.backlog.size", Int(min=1, bits=32), 50,
              "The listen backlog of each listener socket."),
    ConfigKey("max.incremental.fetch.session.cache.slots", Int(min=0, bits=32), 1000,
              "Incremental fetch sessions (KIP-227) the broker keeps at once; a new one takes "
              "a free slot or that of a session idle for 120 s, else the client fetches "
              "without a session."),
    ConfigKey("auto.create.topics.enable", Bool(), False,
              "Metadata for an unknown topic creates it (num.partitions, "
              "default.replication.factor) through the placer. Off by default here "
              "(Kafka's default is on)."),
)

__all__ = ["KAFKA_LISTENER_KEYS"]
