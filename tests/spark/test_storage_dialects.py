"""``kafka-tiers spark audit|export --config``: a broker's ``server.properties`` (the plugin named
by ``remote.storage.manager.class``, ``--storage`` left out) works as well as a file of the
plugin's own keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.spark.helpers import produce_topic, start_broker

pytestmark = pytest.mark.slow


def test_audit_and_export_read_both_dialects(spark: Any, tmp_path: Path) -> None:
    from kafka_tiers.cli import cli

    broker = start_broker(tmp_path)
    try:
        topic = produce_topic(broker, "dialects", partitions=1, records=300)
    finally:
        broker.shutdown()
    remote = tmp_path / "remote"
    server = tmp_path / "server.properties"
    server.write_text(f"broker.id=0\nlog.dirs={tmp_path / 'logs'}\n"
                      "remote.log.storage.enable=true\nremote.storage.manager.class=local\n"
                      f"rsm.config.dir={remote}\n")
    own = tmp_path / "local.properties"
    own.write_text(f"dir={remote}\n")

    reports = {}
    for name, args in {"server": ["--config", str(server)],
                       "own": ["--storage", "local", "--config", str(own)]}.items():
        report = tmp_path / f"audit-{name}.json"
        result = CliRunner().invoke(cli, ["spark", "audit", *args, "--topics", "dialects",
                                          "--report", str(report)], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        reports[name] = json.loads(report.read_text())
    assert reports["server"]["ok"] and reports["server"]["segments"] >= 2
    assert reports["server"]["segment_details"] == reports["own"]["segment_details"]

    out = tmp_path / "export"
    result = CliRunner().invoke(cli, ["spark", "export", "--config", str(server), "--topic",
                                      "dialects", "--to", str(out), "--format", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"exported {len(topic.remote_rows())} record(s)" in result.output
