"""kafka-tiers-azure: Azure Blob Storage as kafka-tiers' remote tier.

Select it with ``remote.storage.manager.class=azure`` and give its keys under ``rsm.config.``
(see the README). Built on the object-store level of :mod:`kafka_tiers.api`, the only part of
kafka-tiers it imports.
"""

from kafka_tiers_azure.config import AzureBlobConfig, CredentialKind
from kafka_tiers_azure.storage import AzureBlobRemoteStorageManager
from kafka_tiers_azure.store import AzureBlobStore

__all__ = ["AzureBlobConfig", "AzureBlobRemoteStorageManager", "AzureBlobStore",
           "CredentialKind"]
