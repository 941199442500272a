"""The docs describe every log setting, and both benchmarks run (quick) and end with one JSON
line of figures. Speed targets are the benchmarks' business, not asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_tiers.log.config import LOG_KEYS

ROOT = Path(__file__).resolve().parents[2]


def test_docs_describe_every_log_key_and_file() -> None:
    text = (ROOT / "docs" / "log-format.md").read_text()
    for key in LOG_KEYS:
        assert f"`{key.name}`" in text or key.name in text, key.name
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "leader-epoch-checkpoint", "meta.properties",
                 ".kafka_cleanshutdown", ".txnindex", ".snapshot", "kafka-tiers-segment-list",
                 "sanity.check.all.logs.enabled", "dump-log"):
        assert name in text, name


@pytest.mark.parametrize("script", ["startup.py", "log_throughput.py"])
def test_benchmark_quick_run_prints_one_json_line(script: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick",
                           "--dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    doc = json.loads(lines[-1])
    assert doc["benchmark"] == script.removesuffix(".py")
    assert isinstance(doc["goal_met"], bool) and doc["goal"]
    if script == "startup.py":
        assert doc["segments"] >= 600 and doc["segments_x10"] == 10 * doc["segments"]
        assert doc["check_on_s"] > 0 and doc["check_off_s"] > 0
    else:
        assert doc["append_mb_s"] > 0 and doc["kafka_python_decode_records_s"] > 0
    assert list(tmp_path.iterdir()) == []  # cleaned up after itself
