"""The stable public surface of kafka-tiers: the only module a plugin imports.

It holds the plugin interfaces, their value types and the error tree. Everything else in
``kafka_tiers`` belongs to the core and may change between releases. ``SPI_VERSION`` follows
semantic versioning: a plugin written for 1.x works with every 1.y.

Plugins may declare the SPI range they support with the class attribute ``SUPPORTED_SPI``
(a PEP 440 specifier such as ``">=1.0,<2"``); the core refuses an incompatible plugin.
"""

from kafka_tiers.api.cluster import BrokerInfo, ClusterView, TopicPartition
from kafka_tiers.api.errors import (
    ConfigError,
    InvalidClusterError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    KafkaTiersError,
    PlacementError,
    PluginError,
)
from kafka_tiers.api.logdirs import LogDirInfo
from kafka_tiers.api.placement import PlacementSpec, ReplicaPlacer
from kafka_tiers.api.plugin import Plugin

SPI_VERSION = "1.0.0"

__all__ = [
    "SPI_VERSION",
    "BrokerInfo",
    "ClusterView",
    "ConfigError",
    "InvalidClusterError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "KafkaTiersError",
    "LogDirInfo",
    "PlacementError",
    "PlacementSpec",
    "Plugin",
    "PluginError",
    "ReplicaPlacer",
    "TopicPartition",
]
