"""The placement benchmark runs in quick mode and reports the balance it promises.

Only balance figures are asserted here; speed targets live in the benchmark itself.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "placement.py"


def test_quick_benchmark(capsys) -> None:
    module = runpy.run_path(str(BENCH))
    assert module["main"](["--quick", "--seed", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    report = json.loads(lines[-1])
    assert report["benchmark"] == "placement"
    assert isinstance(report["goal"], str) and isinstance(report["goal_met"], bool)
    checks = report["checks"]
    assert checks["flat_balanced"] and checks["tree_balanced"] and checks["small_leaders_balanced"]
    # The baseline shows the striped scheme's known leader imbalance on 4 brokers, 2 racks.
    assert report["results"]["small"]["striped-baseline"]["broker_leaders_max_min"] == 4
    assert report["results"]["tree"]["multi-level-rack"]["level1_partitions_below_spread"] == 0
