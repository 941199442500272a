"""The multi-broker cluster (document 003): a controller, replication between brokers and two
coordination stores (ZooKeeper and an embedded one). Import the modules you need; nothing
heavy is imported here.

``metadata_store``  the coordination interface and document 003's layout
``embedded_store``  the in-process store, durable in a local file
``zookeeper_store`` the ZooKeeper store (kazoo)
``transport``       requests between brokers (TCP on 127.0.0.1, or in-process loopback)
``controller``      election, topics, leader election, reassignment
``replica_manager`` leader/follower replicas, ISR, high watermark, acks=all
``member``          a broker's cluster membership (the broker itself is
                    :class:`kafka_tiers.broker.Broker`)
``local_cluster``   several brokers in one process
``client``          a small client: topics, produce, fetch, admin operations
``config``          the cluster's config keys
"""

__all__: list[str] = []
