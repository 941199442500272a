"""The stable public surface of kafka-tiers: the only module a plugin imports.

It holds the plugin interfaces, their value types and the error tree. Everything else in
``kafka_tiers`` belongs to the core and may change between releases. ``SPI_VERSION`` follows
semantic versioning: a plugin written for 2.x works with every 2.y. SPI 2.0 moved the storage
manager built on an object store, the manifest, the key layout and the multipart engine out of
the API into the core (``kafka_tiers.objectstore``); see ``docs/migrating-to-spi-2.md``.

Plugins may declare the SPI range they support with the class attribute ``SUPPORTED_SPI``
(a PEP 440 specifier such as ``">=2.0,<3"``); the core refuses an incompatible plugin.
"""

from kafka_tiers.api.authorizer import (
    ANONYMOUS,
    AUTHORIZER_GROUP,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclStorage,
    Action,
    AuthorizationResult,
    Authorizer,
    KafkaPrincipal,
    PatternType,
    RequestIdentity,
    ResourcePattern,
    ResourceType,
)
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
    default_translate,
    validate_key,
)
from kafka_tiers.api.placement import PlacementSpec, ReplicaPlacer
from kafka_tiers.api.plugin import Plugin
from kafka_tiers.api.secret import Secret
from kafka_tiers.api.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    StorageCapability,
    check_range,
)

SPI_VERSION = "2.1.0"  # 2.1: the authorizer interface

__all__ = [
    "ANONYMOUS",
    "AUTHORIZER_GROUP",
    "SPI_VERSION",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclStorage",
    "Action",
    "AuthorizationResult",
    "Authorizer",
    "BrokerInfo",
    "ByteRange",
    "ClusterView",
    "ConfigError",
    "IndexType",
    "InvalidClusterError",
    "InvalidRangeError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "KafkaPrincipal",
    "KafkaTiersError",
    "LogDirInfo",
    "LogSegmentData",
    "ManifestError",
    "MultipartObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "PatternType",
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
    "RequestIdentity",
    "ResourcePattern",
    "ResourceType",
    "RetriableRemoteStorageError",
    "Secret",
    "StorageCapability",
    "TopicPartition",
    "check_range",
    "default_translate",
    "hookimpl",
    "validate_key",
]
