"""The log engine: Kafka-compatible record batches, segments, indexes and partition logs.

Main entry points: :class:`~kafka_tiers.log.log.Log` (one partition),
:class:`~kafka_tiers.log.log_manager.LogManager` (a broker's log dirs),
:func:`~kafka_tiers.log.records.build_batch` / :class:`~kafka_tiers.log.records.RecordBatch`
(the v2 record format). The on-disk layout is described in ``docs/log-format.md``.
"""

from kafka_tiers.log.compression import CompressionType
from kafka_tiers.log.config import LOG_KEYS, LogConfig
from kafka_tiers.log.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTopicError,
    LogClosedError,
    LogDirError,
    LogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kafka_tiers.log.log import AppendInfo, FetchData, Log
from kafka_tiers.log.log_manager import LogManager, StartupReport
from kafka_tiers.log.records import (
    ProducerRecord,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
)
from kafka_tiers.log.segment import LogSegment, SegmentInfo

__all__ = [
    "LOG_KEYS",
    "AppendInfo",
    "CompressionType",
    "CorruptIndexError",
    "CorruptRecordError",
    "FetchData",
    "InvalidRecordError",
    "InvalidTopicError",
    "Log",
    "LogClosedError",
    "LogConfig",
    "LogDirError",
    "LogError",
    "LogManager",
    "LogSegment",
    "OffsetOutOfRangeError",
    "ProducerRecord",
    "Record",
    "RecordBatch",
    "RecordTooLargeError",
    "SegmentInfo",
    "StartupReport",
    "TimestampType",
    "build_batch",
]
