"""``kafka-tiers spark audit`` and ``kafka-tiers spark export``: Spark jobs over the remote
tier, reading through the storage plugin with no broker in the path.

Both run on ``local[*]`` by default, on a cluster with ``--master``, or under ``spark-submit``
(this file is also a script: ``spark-submit --master yarn .../kafka_tiers/cli/spark.py audit
...``; the master then comes from spark-submit). They need the ``spark`` extra.

The config FILE is a broker's ``server.properties`` (the plugin is its
``remote.storage.manager.class``, so ``--storage`` may be left out; its settings are the
``rsm.config.*`` keys) or a properties file of the plugin's own keys (as after ``rsm.config.``),
read by :func:`kafka_tiers.remote.storage_config.storage_settings` like every command that takes
storage settings; ``--set k=v`` overrides a key. Values are never printed.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from kafka_tiers.cli.output import console, emit_json, parse_kv

if TYPE_CHECKING:
    from kafka_tiers.remote.storage_config import StorageSettings


def _require_spark() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(
            f"the spark jobs need the spark extra ({exc.name} is missing): "
            f"pip install 'kafka-tiers[spark]'") from None


def session(master: str | None, app: str, conf: dict[str, str]) -> Any:
    """A SparkSession: ``master`` when given; else spark-submit's, or ``local[*]``. UI off for
    local masters, session time zone UTC, ``rsm.config.*`` options redacted. An active session
    (a notebook's, a test's) is used as it is."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active

    builder = SparkSession.builder.appName(app)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master:
        builder = builder.master(master)
    elif not under_submit:
        builder = builder.master("local[*]")
    if (master or "local").startswith("local") and not under_submit:
        builder = builder.config("spark.ui.enabled", "false")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    builder = builder.config("spark.sql.redaction.options.regex",
                             "(?i)url|(?i)rsm\\.config\\..*")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("KAFKA_TIERS_SPARK_LOG_LEVEL", "ERROR"))
    return spark


_OUR_ERRORS = ("CorruptDataError", "ConfigError", "RemoteStorageError", "PluginError",
               "RemoteResourceNotFoundError", "ManifestError", "InvalidRangeError")


def spark_error(exc: BaseException) -> str:
    """One line for a failed Spark job: the kafka-tiers error raised in a task when there is
    one (Spark wraps it in a long Python traceback), else the first line of the message."""
    import re

    text = str(exc)
    for line in reversed(text.splitlines()):
        match = re.search(r"(?:\w+\.)*({}): (.*)".format("|".join(_OUR_ERRORS)), line)
        if match:
            return f"{match[1]}: {match[2].strip()}"
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return first.strip()


def _start(master: str | None, app: str, conf: dict[str, str]) -> Any:
    """:func:`session`, a failure to start Spark (a bad --master or --conf) as one line."""
    try:
        return session(master, app, conf)
    except Exception as exc:
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            raise click.ClickException(f"Spark did not start: {spark_error(exc)}") from None
        raise


def _no_active_session() -> bool:
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is None


def _settings(storage: str | None, config_file: str, overrides: tuple[str, ...]
              ) -> StorageSettings:
    from kafka_tiers.cli.remote import open_read_only
    from kafka_tiers.remote.storage_config import storage_settings

    settings = storage_settings(storage, config_file, parse_kv(overrides, "--set"))
    # fail fast, before Spark starts: the plugin loads and accepts its settings (opened
    # read-only, it creates nothing; a missing local dir is an error here)
    with open_read_only(settings):
        pass
    return settings


MASTER = click.option("--master", default=None, metavar="URL",
                      help="Spark master (local[*] unless run by spark-submit).")
CONF = click.option("--conf", "spark_conf", multiple=True, metavar="K=V",
                    help="A Spark configuration key (repeatable).")
STORAGE = click.option("--storage", metavar="NAME",
                       help="The storage plugin: entry-point name (local, s3, ...) or "
                            "pkg.module:Class. Default: remote.storage.manager.class of a "
                            "server.properties --config.")
CONFIG = click.option("--config", "config_file", required=True, metavar="FILE",
                      type=click.Path(exists=True, dir_okay=False),
                      help="A broker's server.properties (rsm.config.* keys), or a "
                           "properties file of the plugin's own keys.")
SET = click.option("--set", "overrides", multiple=True, metavar="K=V",
                   help="A configuration key overriding the file (repeatable).")


@click.group()
def spark() -> None:
    """Spark jobs over the remote tier: audit it, export a topic's history.

    \b
    Examples:
      kafka-tiers spark audit --storage s3 --config s3.properties
      kafka-tiers spark audit --config /etc/kafka/server.properties --topics orders
      kafka-tiers spark export --storage s3 --config s3.properties --topic orders \\
          --to /data/orders --format parquet
    """


@spark.command()
@STORAGE
@CONFIG
@SET
@click.option("--topics", multiple=True, metavar="T[,T...]",
              help="Topics to audit (default: every topic the plugin can list).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="The report on stdout: table for people, json for tools.")
@click.option("--report", "report_path", default="kafka-tiers-audit.json", show_default=True,
              metavar="FILE", help="Where the JSON report is written ('-' for none).")
@MASTER
@CONF
def audit(storage: str | None, config_file: str, overrides: tuple[str, ...],
          topics: tuple[str, ...], fmt: str, report_path: str, master: str | None,
          spark_conf: tuple[str, ...]) -> None:
    """Verify every remote segment in parallel: CRCs, offsets contiguous across segments,
    indexes consistent with the log, manifests consistent with the data.

    Prints a table (or JSON) and writes the JSON report; exits 1 when any fault is found.
    """
    _require_spark()
    from kafka_tiers.spark.audit import audit as run_audit

    settings = _settings(storage, config_file, overrides)
    names = [t.strip() for item in topics for t in item.split(",") if t.strip()] or None
    owned = _no_active_session()
    session_ = _start(master, "kafka-tiers audit", parse_kv(spark_conf, "--conf"))
    try:
        report = run_audit(session_, settings.plugin, dict(settings.config), names)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except Exception as exc:
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            raise click.ClickException(spark_error(exc)) from None
        raise
    finally:
        if owned:
            session_.stop()
    text = report.to_json()
    if report_path != "-":
        with open(report_path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    if fmt == "json":
        import json

        emit_json(json.loads(text))
    else:
        _print_audit(report, report_path)
    if not report.ok:
        sys.exit(1)


def _print_audit(report: Any, report_path: str) -> None:
    from rich.table import Table

    out = console()
    table = Table(title="Remote tier audit")
    for col in ("topic", "partition", "segments", "offsets", "records", "bytes", "faults"):
        table.add_column(col, justify="right" if col not in ("topic", "offsets") else "left")
    for row in report.partitions():
        table.add_row(row["topic"], str(row["partition"]), str(row["segments"]),
                      f"{row['first_offset']}-{row['last_offset']}", str(row["records"]),
                      str(row["bytes"]), str(row["faults"]))
    out.print(table)
    if report.faults:
        faults = Table(title=f"{len(report.faults)} fault(s)")
        for col in ("kind", "partition", "segment", "object", "position", "problem"):
            faults.add_column(col)
        for f in report.faults:
            faults.add_row(f.kind, f"{f.topic}-{f.partition}", f.segment_id or "",
                           f.object or "", "" if f.position is None else str(f.position),
                           f.message)
        out.print(faults)
    else:
        out.print(f"OK: {len(report.segments)} segment(s), no fault")
    if report_path != "-":
        out.print(f"report: {report_path}")


@spark.command()
@STORAGE
@CONFIG
@SET
@click.option("--topic", required=True, help="The topic to export.")
@click.option("--to", "to", required=True, metavar="PATH",
              help="Output directory (any path Spark writes: local, hdfs://, s3a://).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "json"]), default="parquet",
              show_default=True)
@click.option("--mode", type=click.Choice(["errorifexists", "overwrite", "append", "ignore"]),
              default="errorifexists", show_default=True,
              help="What to do when PATH holds data.")
@click.option("--option", "read_opts", multiple=True, metavar="K=V",
              help="A data source option, e.g. startingOffsets=... or mode=PERMISSIVE "
                   "(repeatable).")
@MASTER
@CONF
def export(storage: str | None, config_file: str, overrides: tuple[str, ...], topic: str, to: str,
           fmt: str, mode: str, read_opts: tuple[str, ...], master: str | None,
           spark_conf: tuple[str, ...]) -> None:
    """Export the history of a topic as files, partitioned by topic partition and UTC date
    (PATH/partition=N/date=YYYY-MM-DD/)."""
    _require_spark()
    from kafka_tiers.spark.export import export_topic, read_options

    settings = _settings(storage, config_file, overrides)  # usage errors first
    options = read_options(settings.plugin, topic, config_file=config_file,
                           config=parse_kv(overrides, "--set"),
                           extra=parse_kv(read_opts, "--option"))
    owned = _no_active_session()
    session_ = _start(master, "kafka-tiers export", parse_kv(spark_conf, "--conf"))
    try:
        result = export_topic(session_, options, to, fmt, mode=mode)
    except Exception as exc:
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            raise click.ClickException(spark_error(exc)) from None
        raise
    finally:
        if owned:
            session_.stop()
    console().print(f"exported {result.rows} record(s) of {topic} to {result.path} "
                    f"({result.format}, {result.files} file(s), {result.bytes} bytes)")


__all__ = ["audit", "export", "session", "spark", "spark_error"]

if __name__ == "__main__":  # spark-submit .../kafka_tiers/cli/spark.py audit ...
    from kafka_tiers.cli import main as _main

    _main(["spark", *sys.argv[1:]])
