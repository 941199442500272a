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
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
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


#: Kafka's code for each exception class without its own ``kafka_error_code``, first match
#: wins (so a subclass comes before its base).
_CODE_BY_CLASS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int], ...] = (
    (OffsetOutOfRangeError, OFFSET_OUT_OF_RANGE),
    (RecordTooLargeError, MESSAGE_TOO_LARGE),
    (CorruptRecordError, CORRUPT_MESSAGE),
    (InvalidTopicError, INVALID_TOPIC_EXCEPTION),
    (InvalidRecordError, INVALID_RECORD),
    ((LogDirError, LogClosedError), KAFKA_STORAGE_ERROR),
    (InvalidReplicationFactorError, INVALID_REPLICATION_FACTOR),
    (PlacementError, INVALID_REPLICA_ASSIGNMENT),  # InvalidReplicaAssignmentError too
    (ConfigError, INVALID_CONFIG),
    (RemoteStorageError, KAFKA_STORAGE_ERROR),
)


def error_of(exc: BaseException) -> tuple[int, str]:
    """``(code, message)`` for an exception raised while serving a request: its own
    ``kafka_error_code`` (the log engine's and the broker's errors carry one), a transport
    error's code, else by class (:data:`_CODE_BY_CLASS`), else ``UNKNOWN_SERVER_ERROR``."""
    code = getattr(exc, "kafka_error_code", None)
    if isinstance(code, int):
        return int(code), str(exc)
    if isinstance(exc, TransportError):
        return int(exc.code), str(exc)
    for classes, mapped in _CODE_BY_CLASS:
        if isinstance(exc, classes):
            return mapped, str(exc)
    return UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"


__all__ = ["KafkaApiError", "error_of", "name_of"]
