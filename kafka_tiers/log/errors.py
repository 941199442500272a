"""Errors of the log engine, all subclasses of :class:`~kafka_tiers.api.errors.KafkaTiersError`.

Each error carries the facts as attributes (file, position, offset) so callers need not parse
messages.
"""

from __future__ import annotations

from kafka_tiers.api.errors import KafkaTiersError


class LogError(KafkaTiersError):
    """Base of every log engine error."""


class CorruptRecordError(LogError):
    """Bytes that should hold a record batch do not: bad size, magic, CRC or record structure.

    Attributes:
        path: the file holding the bytes, when they came from a file.
        position: the byte position of the batch in that file or buffer, when known.
    """

    def __init__(self, message: str, *, path: str | None = None,
                 position: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.position = position


class InvalidRecordError(LogError, ValueError):
    """A caller handed the log records it must refuse (bad offsets, bad timestamps, too large).

    The log is unchanged when this is raised.
    """


class RecordTooLargeError(InvalidRecordError):
    """A batch is larger than the segment size allows."""


class OffsetOutOfRangeError(LogError):
    """An offset outside ``[log start offset, log end offset]`` was asked for.

    Attributes:
        offset: the offset asked for.
        log_start_offset: the first offset the log (locally) holds.
        log_end_offset: the next offset the log will assign.
    """

    def __init__(self, message: str, *, offset: int, log_start_offset: int,
                 log_end_offset: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidTopicError(LogError, ValueError):
    """A topic name or partition directory name is not one Kafka accepts.

    Attributes:
        topic: the name at fault.
    """

    def __init__(self, message: str, *, topic: str | None = None) -> None:
        super().__init__(message)
        self.topic = topic


class LogDirError(LogError):
    """A log directory or one of its files cannot be read, written or trusted.

    Attributes:
        path: the directory or file at fault.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CorruptIndexError(LogError):
    """An index file fails its sanity check (its owner rebuilds it from the log).

    Attributes:
        path: the index file.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class LogClosedError(LogError):
    """The log (or segment) was closed or deleted and can no longer be used."""


class ProducerStateError(InvalidRecordError):
    """A producer's batch breaks the idempotence rules (Kafka's ``ProducerAppendInfo``
    checks on a client's append). Nothing of the request is appended.

    Attributes:
        kafka_error_code: the Kafka error code a Produce response carries.
        producer_id: the producer.
        producer_epoch: the batch's epoch.
        base_sequence: the batch's first sequence.
        expected: what the log expected (the next sequence, or the current epoch).
        offset: the offset the batch would have taken.
    """

    kafka_error_code = -1

    def __init__(self, message: str, *, producer_id: int, producer_epoch: int,
                 base_sequence: int, expected: int, offset: int) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.expected = expected
        self.offset = offset


class OutOfOrderSequenceError(ProducerStateError):
    """The batch's first sequence is not the producer's last sequence + 1 (a gap, an
    overlap, or a new epoch not starting at 0): Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER."""

    kafka_error_code = 45


class DuplicateSequenceError(ProducerStateError):
    """The batch was written before but is older than the batches the log remembers
    (the last 5 per producer), so its offsets cannot be answered:
    DUPLICATE_SEQUENCE_NUMBER (clients count it as written)."""

    kafka_error_code = 46


class InvalidProducerEpochError(ProducerStateError):
    """The batch's producer epoch is older than the one the log holds (a fenced producer):
    INVALID_PRODUCER_EPOCH, what Kafka 2.7+ answers a Produce with (PRODUCER_FENCED is for
    the transaction APIs)."""

    kafka_error_code = 47


class TransactionsUnsupportedError(InvalidRecordError):
    """A client sent a transactional batch: this broker has no transaction coordinator, so
    the transaction could never end (read_committed consumers would wait for ever).
    Answered with INVALID_TXN_STATE, what Kafka answers a transactional batch whose
    transaction it does not know (KIP-890 verification)."""

    kafka_error_code = 48

    def __init__(self, message: str, *, producer_id: int) -> None:
        super().__init__(message)
        self.producer_id = producer_id


__all__ = [
    "CorruptIndexError",
    "CorruptRecordError",
    "DuplicateSequenceError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTopicError",
    "LogClosedError",
    "LogDirError",
    "LogError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerStateError",
    "RecordTooLargeError",
    "TransactionsUnsupportedError",
]
