"""Spark pipelines over the remote tier: the ``kafka-tiers`` PySpark data source, the audit and
export jobs (``kafka-tiers spark ...``).

Optional: needs the ``spark`` extra (``pip install 'kafka-tiers[spark]'``: pyspark, pyarrow,
numpy, pandas, numba). Nothing in the core imports this package; importing it imports no
Spark module either, only :func:`register` does.
"""

from __future__ import annotations

from typing import Any

#: The data source's format name.
FORMAT = "kafka-tiers"


def register(spark: Any, *, pushdown: bool = True) -> None:
    """Register the ``kafka-tiers`` data source with a SparkSession.

    PySpark also finds it without this call (it imports the ``pyspark_kafka_tiers`` module
    this distribution ships); registering adds filter pushdown: with ``pushdown`` (and
    PySpark >= 4.1) the session's ``spark.sql.python.filterPushdown.enabled`` is set and
    filters on ``partition``, ``offset`` and ``timestamp`` prune what is read. It also makes
    Spark redact every ``rsm.config.*`` option in plans and the UI.

    Raises:
        ImportError: pyspark is not installed.
    """
    from kafka_tiers.spark.datasource import (
        HAS_PUSHDOWN,
        KafkaTiersDataSource,
        RegisteredKafkaTiersDataSource,
    )

    redact = spark.conf.get("spark.sql.redaction.options.regex", "(?i)url")
    if "rsm" not in redact:
        spark.conf.set("spark.sql.redaction.options.regex", f"{redact}|(?i)rsm\\.config\\..*")
    if pushdown and HAS_PUSHDOWN:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        spark.dataSource.register(RegisteredKafkaTiersDataSource)
    else:
        spark.dataSource.register(KafkaTiersDataSource)


__all__ = ["FORMAT", "register"]
