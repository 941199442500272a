"""kafka-tiers: an SDK and reference broker core for Kafka-style replica placement and tiered
storage plugins.

Plugins import only :mod:`kafka_tiers.api`; everything else in this package is the core's own.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
