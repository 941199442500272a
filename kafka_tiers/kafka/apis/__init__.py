"""The Kafka API handlers, one module per family; each module registers its handlers with
:func:`kafka_tiers.kafka.registry.handles` when imported (every module here is imported)."""
