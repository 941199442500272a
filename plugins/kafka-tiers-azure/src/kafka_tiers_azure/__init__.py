"""kafka-tiers-azure: Azure Blob Storage as kafka-tiers' remote tier.

Select it with ``remote.storage.manager.class=azure`` and give its keys under ``rsm.config.``
(see the README). Only the object store is registered (:class:`AzureBlobStore`, entry point
``azure`` in ``kafka_tiers.object_store``); kafka-tiers builds the storage manager around it.
:mod:`kafka_tiers.api` is the only part of kafka-tiers it imports.
"""

from kafka_tiers_azure.config import AzureBlobConfig, CredentialKind
from kafka_tiers_azure.store import AzureBlobStore

__all__ = ["AzureBlobConfig", "AzureBlobStore", "CredentialKind"]
