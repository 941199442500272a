"""kafka-tiers-s3: Amazon S3 (and S3-compatible) remote storage for kafka-tiers.

``remote.storage.manager.class=s3`` with ``rsm.config.s3.bucket.name=...``; see the README for
every setting. The plugin registers only its object store (:class:`S3ObjectStore`, entry point
``s3`` in ``kafka_tiers.object_store``); kafka-tiers builds the storage manager around it. It
imports only :mod:`kafka_tiers.api` from kafka-tiers.
"""

from kafka_tiers_s3.config import S3Config
from kafka_tiers_s3.store import S3ObjectStore

__version__ = "0.1.0"

__all__ = ["S3Config", "S3ObjectStore", "__version__"]
