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
              "SASL_SSL to themselves); PLAINTEXT is served today."),
    ConfigKey("max.connections", Int(min=1, bits=32), 1000,
              "Kafka-protocol connections accepted at once per broker; more are closed "
              "(Kafka's default is unbounded; each connection here has a thread)."),
    ConfigKey("connections.max.idle.ms", Int(min=1), 600000,
              "A Kafka-protocol connection silent this long is closed."),
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
