"""Kafka error codes for what the broker raises: one mapping used by every handler.

An exception may name its own code with a ``kafka_error_code`` attribute (the log engine's
idempotence errors do); otherwise the class decides. :func:`error_of` returns the code and
the message a response carries (Kafka's ``error_message`` fields), never a traceback; the
message is ``Secret``-hidden already where it came from a plugin.
"""

from __future__ import annotations

from kafka.errors import for_code

from kafka_tiers.api.errors import (
    ConfigError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementError,
    RemoteStorageError,
)
from kafka_tiers.cluster.transport import TransportError
from kafka_tiers.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTopicError,
    LogClosedError,
    LogDirError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_REQUIRED_ACKS = 21
INVALID_RECORD = 87
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
KAFKA_STORAGE_ERROR = 56
LOG_DIR_NOT_FOUND = 57
UNKNOWN_PRODUCER_ID = 59
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
OFFSET_NOT_AVAILABLE = 78
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
TRANSACTIONAL_ID_NOT_FOUND = 105


class KafkaApiError(Exception):
    """Raised inside a handler to answer with ``code`` and ``message``."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or name_of(code))
        self.kafka_error_code = code


def name_of(code: int) -> str:
    """Kafka's name of an error code (``NOT_LEADER_OR_FOLLOWER``)."""
    try:
        return str(for_code(code).__name__)
    except Exception:
        return f"error {code}"


def error_of(exc: BaseException) -> tuple[int, str]:
    """``(code, message)`` for an exception raised while serving a request."""
    code = getattr(exc, "kafka_error_code", None)
    if isinstance(code, int):
        return code, str(exc)
    # broker errors live in the broker module, which imports this package: by name
    name = type(exc).__name__
    if name == "UnknownTopicError":
        return UNKNOWN_TOPIC_OR_PARTITION, str(exc)
    if name == "TopicExistsError":
        return TOPIC_ALREADY_EXISTS, str(exc)
    if name == "NotLeaderError":
        return NOT_LEADER_OR_FOLLOWER, str(exc)
    if isinstance(exc, TransportError):
        return int(exc.code), str(exc)
    if isinstance(exc, OffsetOutOfRangeError):
        return OFFSET_OUT_OF_RANGE, str(exc)
    if isinstance(exc, RecordTooLargeError):
        return MESSAGE_TOO_LARGE, str(exc)
    if isinstance(exc, CorruptRecordError):
        return CORRUPT_MESSAGE, str(exc)
    if isinstance(exc, InvalidTopicError):
        return INVALID_TOPIC_EXCEPTION, str(exc)
    if isinstance(exc, InvalidRecordError):
        return INVALID_RECORD, str(exc)
    if isinstance(exc, LogDirError | LogClosedError):
        return KAFKA_STORAGE_ERROR, str(exc)
    if isinstance(exc, InvalidReplicationFactorError):
        return INVALID_REPLICATION_FACTOR, str(exc)
    if isinstance(exc, InvalidReplicaAssignmentError):
        return INVALID_REPLICA_ASSIGNMENT, str(exc)
    if isinstance(exc, PlacementError):
        return INVALID_REPLICA_ASSIGNMENT, str(exc)
    if isinstance(exc, ConfigError):
        return INVALID_CONFIG, str(exc)
    if isinstance(exc, RemoteStorageError):
        return KAFKA_STORAGE_ERROR, str(exc)
    return UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"


__all__ = ["KafkaApiError", "error_of", "name_of"]
