"""Run every benchmark in this directory and collect the JSON line each one ends with.

Usage: ``python benchmarks/run_all.py [--quick] [NAME ...]``. Each benchmark runs in its own
process; its last output line must be its JSON result. Prints every result line, then one JSON
summary line. Exits 1 when a benchmark crashed or printed no JSON result (a goal not met is a
figure, reported as ``goal_met: false``, not a crash).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("names", nargs="*", help="benchmark names (file stems); default all")
    args = parser.parse_args(argv)
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)
    if args.names:
        scripts = [p for p in scripts if p.stem in args.names]
    results, crashed = [], []
    for script in scripts:
        cmd = [sys.executable, str(script), *(["--quick"] if args.quick else [])]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()]
        try:
            result = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            result = None
        if proc.returncode != 0 or not isinstance(result, dict) or "goal_met" not in result:
            crashed.append(script.stem)
            sys.stderr.write(f"{script.stem}: exit {proc.returncode}\n{proc.stderr[-2000:]}\n")
            continue
        result["wall_seconds"] = round(time.perf_counter() - start, 2)
        results.append(result)
        print(json.dumps(result), flush=True)
    print(json.dumps({"benchmark": "all", "goal": "every benchmark meets its goal",
                      "goal_met": not crashed and all(r["goal_met"] for r in results),
                      "ran": [r["benchmark"] for r in results], "crashed": crashed,
                      "goals_missed": [r["benchmark"] for r in results if not r["goal_met"]]}))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
