"""benchmarks/wire.py runs (``--quick``) and ends with one JSON line holding every figure and
its baseline; the goals are the benchmark's business, not asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.servers]


def test_wire_benchmark_quick_run_prints_its_figures() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "wire.py"), "--quick"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["benchmark"] == "wire" and doc["quick"] is True and doc["goal"]
    assert isinstance(doc["goal_met"], bool) and doc["skipped"] == {}
    assert set(doc["goals"]) == {"produce", "consume_local", "consume_remote_local",
                                 "consume_remote_s3", "latency", "tls"}
    for figure, baseline in [("produce_mb_s", "log_append_mb_s"),
                             ("consume_local_mb_s", "sendfile_mb_s"),
                             ("consume_remote_local_mb_s", "fetch_log_segment_local_mb_s"),
                             ("consume_remote_s3_mb_s", "fetch_log_segment_s3_mb_s"),
                             ("tls_produce_sasl_ssl_mb_s", "tls_produce_plaintext_mb_s"),
                             ("tls_consume_sasl_ssl_mb_s", "tls_consume_plaintext_mb_s")]:
        assert doc[figure] > 0 and doc[baseline] > 0, (figure, baseline)
    assert doc["raw_fetch_local_mb_s"] > 0
    assert doc["consume_remote_local_segments"] >= 2 and doc["consume_remote_s3_segments"] >= 2
    assert 0 < doc["latency_p50_ms"] <= doc["latency_p99_ms"]
    assert doc["latency_records"] == 10000
    # one broker per process (ZooKeeper), and the one-process cluster beside it
    assert doc["latency_setup"] == "3 broker processes, ZooKeeper metadata store"
    assert 0 < doc["latency_one_process_p50_ms"] <= doc["latency_one_process_p99_ms"]
    assert doc["latency_one_process_records"] == 10000
    # the record sizes of the figures are stated; every round's figure is reported
    assert doc["produce_record_bytes"] == 1024 and doc["consume_record_bytes"] == 65536
    for runs in ("consume_local_runs_mb_s", "sendfile_runs_mb_s",
                 "consume_remote_local_runs_mb_s", "fetch_log_segment_local_runs_mb_s",
                 "consume_remote_s3_runs_mb_s", "fetch_log_segment_s3_runs_mb_s"):
        assert len(doc[runs]) == 3 and all(x > 0 for x in doc[runs]), runs
