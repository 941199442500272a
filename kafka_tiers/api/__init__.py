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
    InvalidRangeError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    KafkaTiersError,
    ManifestError,
    PlacementError,
    PluginError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
)
from kafka_tiers.api.hooks import hookimpl
from kafka_tiers.api.logdirs import LogDirInfo
from kafka_tiers.api.objectstore import (
    ByteRange,
    MultipartObjectStore,
    ObjectInfo,
    ObjectStore,
    ObjectStoreRemoteStorageManager,
)
from kafka_tiers.api.placement import PlacementSpec, ReplicaPlacer
from kafka_tiers.api.plugin import Plugin
from kafka_tiers.api.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    StorageCapability,
)

SPI_VERSION = "1.0.0"

__all__ = [
    "SPI_VERSION",
    "BrokerInfo",
    "ByteRange",
    "ClusterView",
    "ConfigError",
    "IndexType",
    "InvalidClusterError",
    "InvalidRangeError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "KafkaTiersError",
    "LogDirInfo",
    "LogSegmentData",
    "ManifestError",
    "MultipartObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "ObjectStoreRemoteStorageManager",
    "PlacementError",
    "PlacementSpec",
    "Plugin",
    "PluginError",
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentState",
    "RemoteResourceNotFoundError",
    "RemoteStorageError",
    "RemoteStorageManager",
    "ReplicaPlacer",
    "RetriableRemoteStorageError",
    "StorageCapability",
    "TopicPartition",
    "hookimpl",
]
