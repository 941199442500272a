"""kafka-tiers conformance pytest plugin (being written)."""
