"""``benchmarks/tiering.py`` runs (quick) and ends with one JSON line holding every row of the
remote tier's data path (issue 16). Speed targets are the benchmark's business, not asserted
here; what a read fetches is not a speed, and is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

GOALS = ("copy_goal_met", "range_goal_met", "one_batch_speed_goal_met", "zstd_aes_copy_goal_met",
         "enc_range_goal_met", "enc_latency_goal_met", "seq_warm_goal_met", "seq_cold_goal_met")


@pytest.mark.slow
def test_tiering_quick_run_prints_every_row() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tiering.py"), "--quick",
                           "--seq-mib", "16"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["benchmark"] == "tiering" and doc["goal"]
    assert all(isinstance(doc[g], bool) for g in GOALS)
    assert doc["goal_met"] == all(doc[g] for g in GOALS)
    assert doc["tier_zstd_aes_copy_mib_per_s"] > 0 and doc["tier_plain_copy_mib_per_s"] > 0
    # the encrypted one-batch read: counted at the store, only the chunks it needs
    assert doc["enc_one_batch_bytes_by_kind"].get("manifest", 0) > 0
    assert 0 < doc["enc_one_batch_log_bytes_fetched"] \
        <= doc["enc_one_batch_covering_chunks_stored_bytes"]
    assert doc["enc_one_batch_covering_chunks"] in (1, 2)
    assert doc["enc_range_goal_met"]
    # the sequential read: the warm pass comes from the chunk cache, not the store
    assert doc["seq_cold_bytes_from_store"] > 0
    assert doc["seq_warm_bytes_from_store"] == 0
    assert doc["seq_read_mib"] >= 15 and not doc["seq_read_is_issue_size"]
    # JSON-like records compress (zstd), hex text about 2x
    assert 0 < doc["json_compression_ratio"] < 0.5
    assert 0.4 < doc["hex_segment_stored_ratio"] < 0.7
