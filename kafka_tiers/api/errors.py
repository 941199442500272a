"""The one error tree of kafka-tiers, rooted at :class:`KafkaTiersError`.

Errors carry the facts as attributes (plugin name, key, segment id, whether a retry may help) so
callers need not parse messages. No error ever carries a secret: messages name keys, never the
values of secret keys.
"""

from __future__ import annotations

from typing import Any


class KafkaTiersError(Exception):
    """Base of every error kafka-tiers raises on purpose.

    Attributes:
        retriable: True when repeating the same call later may succeed.
    """

    retriable: bool = False


class ConfigError(KafkaTiersError, ValueError):
    """A configuration value is missing, malformed or out of range.

    Attributes:
        key: the configuration key at fault (None when the problem is not one key).
        value: the offending value as given (None for secret keys, which are never repeated).
        expected: what would have been accepted, in words.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        value: Any = None,
        expected: str | None = None,
    ) -> None:
        super().__init__(message)
        self.key = key
        self.value = value
        self.expected = expected


class PluginError(KafkaTiersError):
    """A plugin could not be found, loaded, configured or used.

    Attributes:
        plugin: the name or import path the plugin was asked for by.
        distribution: the distribution that provides it, when known.
        cause: a short description of what went wrong.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin: str | None = None,
        distribution: str | None = None,
        cause: str | None = None,
    ) -> None:
        super().__init__(message)
        self.plugin = plugin
        self.distribution = distribution
        self.cause = cause


class PlacementError(KafkaTiersError):
    """Base of the replica placement errors."""


class InvalidClusterError(PlacementError, ValueError):
    """A cluster description is inconsistent (duplicate broker ids, negative ids, malformed
    racks or assignments)."""


class InvalidReplicationFactorError(PlacementError):
    """The replication factor cannot be met: it is <= 0, larger than the number of brokers
    available for placement, or no unfenced broker is available to lead.

    Attributes:
        replication_factor: the factor that was asked for.
        available_brokers: how many brokers were available for placement.
    """

    def __init__(
        self,
        message: str,
        *,
        replication_factor: int | None = None,
        available_brokers: int | None = None,
    ) -> None:
        super().__init__(message)
        self.replication_factor = replication_factor
        self.available_brokers = available_brokers


class InvalidReplicaAssignmentError(PlacementError):
    """A replica assignment is malformed (wrong size, duplicates, unknown or fenced leaders) or a
    placer cannot produce one for the request.

    Attributes:
        partition: the partition index at fault, when one is.
        placer: the placer that produced it, when known.
    """

    def __init__(
        self, message: str, *, partition: int | None = None, placer: str | None = None
    ) -> None:
        super().__init__(message)
        self.partition = partition
        self.placer = placer


class RemoteStorageError(KafkaTiersError):
    """Base of the remote (tiered) storage errors: a storage operation failed.

    Attributes:
        segment_id: the ``RemoteLogSegmentId.id`` the operation was about, when it was about one.
        plugin: the storage plugin's name, filled in by the core's wrapper when the plugin
            itself did not.
        retriable: True when repeating the same call later may succeed (a timeout, a throttled
            request); False for a permanent failure.
        resource: what the operation was about in words (``"segment"``, ``"index TRANSACTION"``,
            an object key), when known.
    """

    def __init__(
        self,
        message: str,
        *,
        segment_id: str | None = None,
        plugin: str | None = None,
        retriable: bool | None = None,
        resource: str | None = None,
    ) -> None:
        super().__init__(message)
        self.segment_id = segment_id
        self.plugin = plugin
        self.resource = resource
        if retriable is not None:
            self.retriable = retriable


class RetriableRemoteStorageError(RemoteStorageError):
    """A transient remote storage failure: the same call may succeed later."""

    retriable = True


class RemoteResourceNotFoundError(RemoteStorageError):
    """The segment, index or object asked for does not exist in the remote tier (never copied,
    copy failed, already deleted, or an optional index such as the transaction index that the
    segment does not have). Fetching never returns ``None`` for a missing resource: it raises
    this."""


class InvalidRangeError(RemoteStorageError, ValueError):
    """A fetch range is invalid: a negative start, an end before the start, or a start beyond
    the last byte of the segment.

    Attributes:
        start: the start position asked for (inclusive).
        end: the end position asked for (inclusive), or None for "to the end".
        size: the size of the segment in bytes, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        start: int | None = None,
        end: int | None = None,
        size: int | None = None,
        segment_id: str | None = None,
        plugin: str | None = None,
    ) -> None:
        super().__init__(message, segment_id=segment_id, plugin=plugin, retriable=False)
        self.start = start
        self.end = end
        self.size = size


class ManifestError(RemoteStorageError):
    """A segment manifest in the remote tier cannot be used: it is not valid JSON, misses a
    field, or carries a ``format_version`` this kafka-tiers does not read.

    Attributes:
        key: the manifest's object key.
        format_version: the version found, when one was found.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        format_version: object = None,
        segment_id: str | None = None,
    ) -> None:
        super().__init__(message, segment_id=segment_id, retriable=False, resource=key)
        self.key = key
        self.format_version = format_version


__all__ = [
    "ConfigError",
    "InvalidClusterError",
    "InvalidRangeError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "KafkaTiersError",
    "ManifestError",
    "PlacementError",
    "PluginError",
    "RemoteResourceNotFoundError",
    "RemoteStorageError",
    "RetriableRemoteStorageError",
]
