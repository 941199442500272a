"""kafka-tiers-hdfs: HDFS as the remote tier of kafka-tiers, over WebHDFS REST.

Entry point ``hdfs`` in ``kafka_tiers.object_store`` (``remote.storage.manager.class=hdfs``):
only the object store is registered, kafka-tiers builds the storage manager around it. See the
README for the config keys.
"""

from kafka_tiers_hdfs.settings import HdfsSettings
from kafka_tiers_hdfs.store import HdfsObjectStore, WebHdfsServerError

__all__ = ["HdfsObjectStore", "HdfsSettings", "WebHdfsServerError"]
