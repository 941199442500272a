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


__all__ = [
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidRecordError",
    "InvalidTopicError",
    "LogClosedError",
    "LogDirError",
    "LogError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
]
