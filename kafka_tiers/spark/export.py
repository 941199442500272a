"""The export job: a topic's history as Parquet or JSON files, partitioned by topic partition
and (UTC) date of the record timestamp::

    <to>/partition=0/date=2026-11-21/part-....parquet

Rows have the data source's columns (``key``, ``value``, ``topic``, ``offset``, ``timestamp``,
``timestampType``, ``headers``; ``partition`` and ``date`` are in the directory names). JSON
files hold binary values base64-encoded, as Spark's JSON writer does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FORMATS = ("parquet", "json")
SAVE_MODES = ("error", "errorifexists", "overwrite", "append", "ignore")


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote.

    Attributes:
        path: the output directory.
        format: parquet or json.
        rows: records in the output (earlier ones included after an append).
        files: data files in the output (0 when ``to`` is not a local path).
        bytes: their total size.
    """

    path: str
    format: str
    rows: int
    files: int
    bytes: int


def read_options(storage: str, topic: str, *, config_file: str | None = None,
                 config: Mapping[str, str] | None = None,
                 extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Data source options for reading ``topic`` through ``storage``: the plugin's keys as
    ``rsm.config.*`` (from ``config_file`` via ``rsm.config.file``, and ``config``)."""
    opts = {"storage": storage, "topic": topic}
    if config_file:
        opts["rsm.config.file"] = os.path.abspath(config_file)
    for key, value in (config or {}).items():
        opts[f"rsm.config.{key}"] = str(value)
    opts.update(extra or {})
    return opts


def export_topic(spark: Any, options: Mapping[str, str], to: str, fmt: str = "parquet", *,
                 mode: str = "errorifexists") -> ExportResult:
    """Write the rows the ``kafka-tiers`` data source reads with ``options`` under ``to``.

    Raises:
        ValueError: an unknown format or save mode.
        pyspark errors: the read or the write failed (a corrupt batch fails the job in
            FAILFAST mode, naming the object and position).
    """
    from pyspark.sql import functions as F

    from kafka_tiers.spark import register

    if fmt not in FORMATS:
        raise ValueError(f"format must be parquet or json, got {fmt!r}")
    if mode not in SAVE_MODES:
        raise ValueError(f"mode must be one of {', '.join(SAVE_MODES)}, got {mode!r}")
    register(spark)
    df = spark.read.format("kafka-tiers").options(**dict(options)).load()
    day = F.date_from_unix_date(
        F.floor(F.unix_micros(F.col("timestamp")) / F.lit(86_400_000_000)).cast("int"))
    out = df.withColumn("date", day)
    out.write.mode(mode).partitionBy("partition", "date").format(fmt).save(to)
    files = 0
    size = 0
    for root, _dirs, names in os.walk(to) if os.path.isdir(to) else ():
        for name in names:
            if name.startswith("part-"):
                files += 1
                size += os.path.getsize(os.path.join(root, name))
    rows = spark.read.format(fmt).load(to).count()
    return ExportResult(to, fmt, rows, files, size)


__all__ = ["FORMATS", "SAVE_MODES", "ExportResult", "export_topic", "read_options"]
