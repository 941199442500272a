"""kafka-tiers-hdfs: HDFS as the remote tier of kafka-tiers, over WebHDFS REST.

Entry point ``hdfs`` in ``kafka_tiers.remote_storage``
(``remote.storage.manager.class=hdfs``); see the README for the config keys.
"""

from kafka_tiers_hdfs.settings import HdfsSettings
from kafka_tiers_hdfs.storage import HdfsRemoteStorageManager
from kafka_tiers_hdfs.store import HdfsObjectStore, WebHdfsServerError

__all__ = ["HdfsObjectStore", "HdfsRemoteStorageManager", "HdfsSettings", "WebHdfsServerError"]
