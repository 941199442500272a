"""docs/jbod.md covers JBOD operation and its config keys; the benchmark runs (quick) and ends
with one JSON line of figures (its speed goals are its own business, not asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kafka_tiers.log.config import LOG_KEYS

ROOT = Path(__file__).resolve().parents[2]


def test_docs_cover_jbod_operation() -> None:
    text = (ROOT / "docs" / "jbod.md").read_text()
    keys = {k.name: k for k in LOG_KEYS}
    for name in ("num.replica.move.threads", "intra.broker.throttled.rate", "log.dirs"):
        assert f"`{name}`" in text
        for alias in keys[name].aliases:
            assert f"`{alias}`" in text
    for needle in ("log-dirs describe", "log-dirs plan", "reassign", "--verify", "--execute",
                   "-future", "-delete", "KAFKA_STORAGE_ERROR", "LOG_DIR_NOT_FOUND",
                   "resumes", "promoted", "left", "deleted", ".kafka-tiers-admin",
                   "status-<id>.json", "broker-state.json", "log_dir_failed", "choose_log_dir",
                   "replica_moved", "on_all_dirs_offline",
                   "give --bootstrap-server to move replicas between brokers",
                   "benchmarks/replica_move.py"):
        assert needle in text, needle


def test_benchmark_quick_run_prints_one_json_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "replica_move.py"),
                           "--quick", "--dir", str(tmp_path), "--size-mib", "16",
                           "--throttle-mib", "4", "--rate-mib", "8"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["benchmark"] == "replica_move" and doc["goal"]
    assert isinstance(doc["goal_met"], bool)
    assert doc["bytes"] >= 16 << 20 and doc["copy_seconds"] > 0 and doc["move_seconds"] > 0
    assert doc["throttle_mib_s"] == 8 and doc["throttled_seconds"] > 0
    assert list(tmp_path.iterdir()) == []  # cleaned up
