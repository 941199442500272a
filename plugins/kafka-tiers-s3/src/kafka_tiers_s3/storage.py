"""The ``s3`` remote storage plugin: kafka-tiers' object-store level on an S3 bucket.

Select it in ``server.properties``::

    remote.log.storage.enable=true
    remote.storage.manager.class=s3
    rsm.config.s3.bucket.name=my-kafka-tier
    rsm.config.s3.region=eu-west-1

The key layout, the manifest-last commit protocol, listing, idempotent retries and deletes, and
garbage collection come from :class:`kafka_tiers.api.ObjectStoreRemoteStorageManager`; the
bucket operations are :class:`kafka_tiers_s3.store.S3ObjectStore`'s. Settings:
:class:`kafka_tiers_s3.config.S3Config` and the README.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from kafka_tiers.api import ObjectStoreRemoteStorageManager, StorageCapability, TopicPartition
from kafka_tiers.api.objectstore import partition_prefix
from kafka_tiers_s3.config import S3Config
from kafka_tiers_s3.store import S3ObjectStore

log = logging.getLogger(__name__)


class S3RemoteStorageManager(ObjectStoreRemoteStorageManager):
    """The ``s3`` storage plugin (entry point ``s3`` in ``kafka_tiers.remote_storage``).

    Thread-safe: one boto3 client serves every call. Large segments go up in multipart uploads
    that are aborted on failure.
    """

    SUPPORTED_SPI = ">=1.0,<2"
    CAPABILITIES = ObjectStoreRemoteStorageManager.CAPABILITIES | {
        StorageCapability.MULTIPART_UPLOAD, StorageCapability.CONCURRENT_ACCESS}

    def create_object_store(self, config: Mapping[str, str]) -> S3ObjectStore:
        """Read the ``s3.*`` / ``aws.*`` keys and build the store (no request is sent yet).

        Raises:
            ConfigError: a missing, malformed or contradictory setting (one line naming the
                key, never a secret value).
        """
        return S3ObjectStore(S3Config.from_mapping(config))

    def collect_orphans(self, min_age_ms: int, topic_partition: TopicPartition | None = None,
                        *, now_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """The object-store level's garbage collection, plus: incomplete multipart uploads
        under the same prefix started at least ``min_age_ms`` ago are aborted (a copy that
        died mid-upload leaves one; S3 bills its parts until it is aborted). The returned keys
        are those of deleted objects, as the base class documents.

        Raises:
            RemoteStorageError: listing, deleting or aborting failed (repeat the call).
        """
        keys = super().collect_orphans(min_age_ms, topic_partition, now_ms=now_ms,
                                       dry_run=dry_run)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if topic_partition is not None:
            prefix = partition_prefix(self.key_prefix, topic_partition)
        else:
            prefix = f"{self.key_prefix}/" if self.key_prefix else ""
        store = self.object_store
        while not isinstance(store, S3ObjectStore) and hasattr(store, "inner"):
            store = store.inner  # wrapped for instrumentation or fault injection
        if isinstance(store, S3ObjectStore):
            s3 = store
            uploads = self._call(lambda: s3.abort_incomplete_uploads(
                prefix, now - min_age_ms, dry_run=dry_run), key=prefix or None)
            if uploads:
                log.info("%s %d incomplete multipart uploads under %r",
                         "found" if dry_run else "aborted", len(uploads), prefix)
        return keys


__all__ = ["S3RemoteStorageManager"]
