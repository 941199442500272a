"""Kafka's error codes of the group APIs (those :mod:`kafka_tiers.kafka.errors` does not name)."""

from __future__ import annotations

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMED_OUT = 7
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
GROUP_AUTHORIZATION_FAILED = 30
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_MAX_SIZE_REACHED = 81
GROUP_SUBSCRIBED_TO_TOPIC = 86


class GroupError(Exception):
    """A group operation refused with a Kafka error code (one line naming the problem)."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.kafka_error_code = code


__all__ = [name for name in dir() if name.isupper()] + ["GroupError"]
