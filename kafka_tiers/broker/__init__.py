"""The broker: one assembly for a standalone broker and a cluster member.

``broker``         :class:`Broker`, the one composition root (logs, remote tier, metrics,
                   hooks, topic configuration, and the cluster membership of a cluster member)
``topics``         topic configuration: the topic-level keys, their resolution and validation,
                   and the standalone broker's topics file
``admin_channel``  the file channel between the CLI and a running broker's log dirs

``from kafka_tiers.broker import Broker`` is the usual import.
"""

from kafka_tiers.broker.broker import (
    TOPIC_CONFIG_KEYS,
    TOPICS_FILE,
    TOPICS_FORMAT_VERSION,
    WORK_DIR,
    Broker,
    BrokerError,
    FetchResult,
    NotLeaderError,
    SegmentRow,
    TopicExistsError,
    TopicInfo,
    UnknownTopicError,
)

__all__ = [
    "TOPICS_FILE",
    "TOPICS_FORMAT_VERSION",
    "TOPIC_CONFIG_KEYS",
    "WORK_DIR",
    "Broker",
    "BrokerError",
    "FetchResult",
    "NotLeaderError",
    "SegmentRow",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicError",
]
