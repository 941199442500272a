"""The ``kafka-tiers`` PySpark data source: a topic's history read from the remote tier (or a
broker's log dirs) through the storage plugins, with no broker in the path.

::

    spark.read.format("kafka-tiers")
        .option("storage", "s3").option("rsm.config.bucket", "tiered")
        .option("topic", "orders").load()

One input partition per remote segment (split by the offset index above
``maxBytesPerPartition``), planned from ``list_remote_segments``; each task fetches only the
byte range its offsets need and yields Arrow record batches. Options: see ``docs/spark.md``.

Filter pushdown (PySpark >= 4.1, ``spark.sql.python.filterPushdown.enabled=true``): with option
``pushFilters=true`` (set by :func:`kafka_tiers.spark.register`), filters on ``partition`` and
``offset`` (``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``) prune segments and byte ranges and are
applied exactly by the reader; filters on ``timestamp`` prune segments and are also evaluated by
Spark. Without pushdown, the ``startingOffsets`` / ``endingOffsets`` / ``partitions`` /
``startingTimestamp`` / ``endingTimestamp`` options do the same.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafka_tiers.spark.arrow import SPARK_SCHEMA_DDL
from kafka_tiers.spark.planning import LATEST, ReadOptions, SegmentSlice, plan

try:  # PySpark >= 4.1
    from pyspark.sql.datasource import (
        EqualTo,
        Filter,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )
    HAS_PUSHDOWN = True
except ImportError:  # pragma: no cover - PySpark 4.0
    HAS_PUSHDOWN = False
    Filter = object  # type: ignore[assignment,misc]  # PySpark 4.0 has no Filter class

NAME = "kafka-tiers"


class KafkaTiersDataSource(DataSource):
    """The ``kafka-tiers`` batch data source (see the module docstring).

    Options are validated when the read is planned; a bad one fails the query with a
    ``ConfigError`` naming it.
    """

    @classmethod
    def name(cls) -> str:
        """``kafka-tiers``."""
        return NAME

    def schema(self) -> str:
        """Spark's Kafka source schema: key, value, topic, partition, offset, timestamp,
        timestampType, headers."""
        return SPARK_SCHEMA_DDL

    def default_options(self) -> dict[str, str]:
        """Options applied under the user's (none for the discovered source)."""
        return {}

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader for these options; with ``pushFilters=true`` one that takes filters.

        Raises:
            ConfigError: a missing or malformed option.
        """
        merged = dict(self.default_options())
        merged.update({str(k).lower(): v for k, v in self.options.items()})
        opts = ReadOptions.parse(merged)
        if opts.push_filters and HAS_PUSHDOWN:
            return KafkaTiersPushdownReader(opts, schema)
        return KafkaTiersReader(opts, schema)


class KafkaTiersReader(DataSourceReader):
    """Plans slices on the driver side and reads each in a task.

    Args:
        options: the parsed options.
        schema: the read schema (Spark's).
    """

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.partition_values: set[int] | None = None
        self.partition_lo: int | None = None
        self.partition_hi: int | None = None  # exclusive
        self.offset_lo: int | None = None
        self.offset_hi: int | None = None  # exclusive
        self.offset_values: set[int] | None = None

    def _storage(self) -> Any:
        if self.options.source == "local":
            return None
        from kafka_tiers.spark.reading import load_storage

        assert self.options.storage is not None
        return load_storage(self.options.storage, self.options.storage_config)

    def _bounds(self, start: int, end: int) -> tuple[int, int]:
        if self.offset_lo is not None:
            start = max(start, self.offset_lo)
        if self.offset_hi is not None:
            end = self.offset_hi if end == LATEST else min(end, self.offset_hi)
        return start, end

    def partitions(self) -> Sequence[InputPartition]:
        """One input partition per planned :class:`SegmentSlice`."""
        values, lo, hi = self.partition_values, self.partition_lo, self.partition_hi

        def keep(p: int) -> bool:
            return ((values is None or p in values) and (lo is None or p >= lo)
                    and (hi is None or p < hi))

        slices = plan(self.options, self._storage(), keep, self._bounds)
        return [InputPartition(s) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The rows of one slice, as ``pyarrow.RecordBatch`` values of Spark's schema.

        Raises:
            CorruptDataError: FAILFAST and a corrupt batch (naming object and position).
            RemoteStorageError: a fetch failed.
        """
        from pyspark.sql.pandas.types import to_arrow_schema

        from kafka_tiers.spark.reading import read_slice

        piece = partition.value
        if not isinstance(piece, SegmentSlice):
            return iter(())  # nothing planned: Spark's single empty partition
        wanted_offsets = self.offset_values
        schema = to_arrow_schema(self.schema, timezone="UTC")
        batches = read_slice(piece, self._storage() if piece.source == "remote" else None,
                             mode=self.options.mode,
                             max_records_per_batch=self.options.max_records_per_batch,
                             schema=schema,
                             corrupt_batches_path=self.options.corrupt_batches_path)
        if wanted_offsets is None:
            return batches
        return _only_offsets(batches, wanted_offsets)


def _only_offsets(batches: Iterable[Any], offsets: set[int]) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pa.array(sorted(offsets), pa.int64())
    for rb in batches:
        kept = rb.filter(pc.is_in(rb.column("offset"), value_set=values))
        if kept.num_rows:
            yield kept


def _column(f: Any) -> str | None:
    attr = getattr(f, "attribute", None)
    if isinstance(attr, tuple) and len(attr) == 1:
        return str(attr[0])
    return None


def _millis(value: Any) -> int | None:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return None  # a zone-less value: leave it to Spark
        return int(value.timestamp() * 1000)
    return None


class KafkaTiersPushdownReader(KafkaTiersReader):
    """A reader that takes filters on ``partition``, ``offset`` and ``timestamp``."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Keep the filters on partition and offset (applied exactly here); use those on
        timestamp to prune segments and give them back to Spark; give back every other."""
        for f in filters:
            column = _column(f)
            value = getattr(f, "value", None)
            if column in ("partition", "offset") and self._take(column, f, value):
                continue
            if column == "timestamp":
                self._prune_time(f, value)
            yield f

    def _take(self, column: str, f: Any, value: Any) -> bool:
        if isinstance(f, In):
            values = {int(v) for v in value if isinstance(v, int) and not isinstance(v, bool)}
            if len(values) != len(value):
                return False
        elif isinstance(value, int) and not isinstance(value, bool):
            values = None
        else:
            return False
        if column == "partition":
            if isinstance(f, EqualTo):
                values = {value}
            if values is not None:
                current = self.partition_values
                self.partition_values = values if current is None else current & values
                return True
            lo, hi = _range(f, value)
            if lo is None and hi is None:
                return False
            if lo is not None:
                self.partition_lo = lo if self.partition_lo is None else max(self.partition_lo,
                                                                             lo)
            if hi is not None:
                self.partition_hi = hi if self.partition_hi is None else min(self.partition_hi,
                                                                             hi)
            return True
        # offset
        if isinstance(f, EqualTo):
            values = {value}
        if values is not None:
            current = self.offset_values
            self.offset_values = values if current is None else current & values
            lo, hi = min(values, default=0), max(values, default=-1) + 1
        else:
            lo, hi = _range(f, value)
            if lo is None and hi is None:
                return False
        if lo is not None:
            self.offset_lo = lo if self.offset_lo is None else max(self.offset_lo, lo)
        if hi is not None:
            self.offset_hi = hi if self.offset_hi is None else min(self.offset_hi, hi)
        return True

    def _prune_time(self, f: Any, value: Any) -> None:
        ms = _millis(value)
        if ms is None:
            return
        opts = self.options
        if isinstance(f, GreaterThan | GreaterThanOrEqual):
            lo = ms - 1  # a superset: Spark applies the exact filter
            if opts.min_timestamp is None or lo > opts.min_timestamp:
                self.options = dataclasses.replace(opts, min_timestamp=lo)
        elif isinstance(f, LessThan | LessThanOrEqual):
            hi = ms + 2
            if opts.max_timestamp is None or hi < opts.max_timestamp:
                self.options = dataclasses.replace(opts, max_timestamp=hi)
        elif isinstance(f, EqualTo):
            self.options = dataclasses.replace(
                opts, min_timestamp=max(ms - 1, opts.min_timestamp or ms - 1),
                max_timestamp=min(ms + 2, opts.max_timestamp or ms + 2))


def _range(f: Any, value: int) -> tuple[int | None, int | None]:
    """``[lo, hi)`` of an integer comparison filter."""
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return None, value
    if isinstance(f, LessThanOrEqual):
        return None, value + 1
    return None, None


class RegisteredKafkaTiersDataSource(KafkaTiersDataSource):
    """The data source as :func:`kafka_tiers.spark.register` registers it: filter pushdown on
    by default (``register`` also enables it in the session)."""

    def default_options(self) -> dict[str, str]:
        return {"pushfilters": "true"}


__all__ = [
    "HAS_PUSHDOWN",
    "NAME",
    "KafkaTiersDataSource",
    "KafkaTiersPushdownReader",
    "KafkaTiersReader",
    "RegisteredKafkaTiersDataSource",
]
