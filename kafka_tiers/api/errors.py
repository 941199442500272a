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


__all__ = [
    "ConfigError",
    "InvalidClusterError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "KafkaTiersError",
    "PlacementError",
    "PluginError",
]
