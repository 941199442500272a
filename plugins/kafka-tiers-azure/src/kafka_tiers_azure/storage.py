"""The ``azure`` remote storage plugin: kafka-tiers' object-store level over Azure Blob Storage.

Only the store (:mod:`kafka_tiers_azure.store`) is Azure-specific; the key layout, the
manifest-last commit protocol, listing, retries, cleanup of failed copies and garbage collection
are inherited from :class:`kafka_tiers.api.ObjectStoreRemoteStorageManager`.

``configure`` makes no request: an unreachable service shows as retriable errors of the calls
(the broker retries them), a missing container as a non-retriable error naming it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_tiers.api import (
    ConfigError,
    ObjectStoreRemoteStorageManager,
    RemoteStorageError,
    StorageCapability,
)
from kafka_tiers.api.objectstore import normalize_prefix
from kafka_tiers_azure.config import PREFIX, AzureBlobConfig
from kafka_tiers_azure.store import AzureBlobStore


class AzureBlobRemoteStorageManager(ObjectStoreRemoteStorageManager):
    """Segments and indexes as block blobs of one container (entry point ``azure``).

    Keys are ``<azure.prefix>/<key.prefix>/<topic>-<partition>/<offset>-<id>.<kind>`` (empty
    prefixes left out): ``azure.prefix`` is this plugin's name for the key prefix, and the
    generic ``key.prefix`` (which the conformance suite sets per test) nests below it.
    See the README for every key.
    """

    SUPPORTED_SPI = ">=1.0,<2"
    CAPABILITIES = ObjectStoreRemoteStorageManager.CAPABILITIES | {
        StorageCapability.MULTIPART_UPLOAD, StorageCapability.CONCURRENT_ACCESS}

    def configure(self, config: Mapping[str, str]) -> None:
        """Check the ``azure.*`` keys and build the store (no request is made).

        Raises:
            ConfigError: a missing, malformed, conflicting or unknown key (one line naming it;
                never a secret's value).
        """
        try:
            outer = normalize_prefix(config.get(PREFIX, ""))
        except RemoteStorageError as exc:
            raise ConfigError(f"{PREFIX}: {exc}", key=PREFIX,
                              expected="/-separated parts of A-Z a-z 0-9 . _ - = + , @ ~"
                              ) from None
        inner = str(config.get("key.prefix", "") or "").strip().strip("/")
        merged = dict(config)
        merged["key.prefix"] = "/".join(p for p in (outer, inner) if p)
        super().configure(merged)

    def create_object_store(self, config: Mapping[str, str]) -> AzureBlobStore:
        """An :class:`AzureBlobStore` for the checked ``azure.*`` keys."""
        return AzureBlobStore(AzureBlobConfig.from_config(config))


__all__ = ["AzureBlobRemoteStorageManager"]
