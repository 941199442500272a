"""Placement benchmark: 100,000 partitions at RF 3 on ~1,000 brokers, with every built-in placer.

Two clusters: 1,000 brokers in 10 flat racks (``/r0`` .. ``/r9``, so the multi-level placer can
run too), and a 3-DC x 4-rack tree with 83 brokers per rack (996 brokers: 1,000 do not split
evenly over 12 racks, and the fair-share figures are only meaningful for equal domains). Each
placer is timed and its quality figures printed: leader and replica max-min per broker, per rack
and per tree level, the largest distance from the fair share, and how many partitions span fewer
domains than ``min(#domains, RF)``.

The baseline is a re-implementation of the idea of Kafka's KRaft default, the striped placer
(racks taken round-robin from an offset that advances every partition, brokers round-robin within
each rack from an offset that advances every time the rack is used); only its quality is
compared, its speed is not meaningful.

A third, tiny cluster (4 brokers in 2 racks, 8 partitions at RF 2) shows the striped scheme's
known leader imbalance.

Usage: ``python benchmarks/placement.py [--quick] [--seed N]``. The last line printed is one JSON
object: ``{"benchmark": "placement", "goal": ..., "goal_met": ..., ...figures}``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

from kafka_tiers.api import BrokerInfo, ClusterView, PlacementSpec, ReplicaPlacer
from kafka_tiers.placement.multi_level_rack import MultiLevelRackPlacer
from kafka_tiers.placement.quality import PlacementQuality, placement_quality
from kafka_tiers.placement.rack_aware import RackAwarePlacer
from kafka_tiers.placement.simple import SimplePlacer
from kafka_tiers.placement.validation import validate_placement

TIME_LIMIT_S = 5.0


def flat_cluster(racks: int, per_rack: int) -> ClusterView:
    """Brokers ``0..racks*per_rack-1``, broker ``i`` in rack ``/r{i % racks}``."""
    return ClusterView(BrokerInfo(i, f"/r{i % racks}") for i in range(racks * per_rack))


def tree_cluster(dcs: int, racks: int, per_rack: int) -> ClusterView:
    """``dcs x racks`` racks ``/dc{d}/rack{r}`` of ``per_rack`` brokers, ids interleaved."""
    paths = [f"/dc{d}/rack{r}" for d in range(dcs) for r in range(racks)]
    return ClusterView(
        BrokerInfo(i, paths[i % len(paths)]) for i in range(len(paths) * per_rack)
    )


def striped_baseline(spec: PlacementSpec, cluster: ClusterView, seed: int) -> list[list[int]]:
    """The striped scheme (Kafka's KRaft default idea), for quality comparison only."""
    rng = random.Random(seed)
    racks: dict[str, list[int]] = {}
    for b in cluster.usable_brokers:
        racks.setdefault(b.rack or "", []).append(b.broker_id)
    names = sorted(racks)
    offsets = {r: rng.randrange(len(racks[r])) for r in names}
    rack_offset = rng.randrange(len(names))
    out: list[list[int]] = []
    for _ in range(spec.num_partitions):
        replicas: list[int] = []
        used: dict[str, int] = {}
        i = 0
        while len(replicas) < spec.replication_factor:
            rack = names[(rack_offset + i) % len(names)]
            i += 1
            brokers = racks[rack]
            k = used.get(rack, 0)
            if k == 0:
                offsets[rack] = (offsets[rack] + 1) % len(brokers)
            if k >= len(brokers):
                continue
            used[rack] = k + 1
            replicas.append(brokers[(offsets[rack] + k) % len(brokers)])
        rack_offset = (rack_offset + 1) % len(names)
        out.append(replicas)
    return out


def figures(q: PlacementQuality) -> dict[str, Any]:
    """The flat figures reported per placer."""
    out: dict[str, Any] = {
        "broker_replicas_max_min": q.broker_replicas.spread,
        "broker_leaders_max_min": q.broker_leaders.spread,
    }
    for lv in q.levels:
        key = lv.name.replace(" ", "")
        out[f"{key}_replicas_max_min"] = lv.replicas.spread
        out[f"{key}_leaders_max_min"] = lv.leaders.spread
        out[f"{key}_replicas_fair_dev"] = lv.replicas.max_fair_share_deviation
        out[f"{key}_partitions_below_spread"] = lv.partitions_below_spread
    return out


def run_one(
    name: str, cluster: ClusterView, spec: PlacementSpec, seed: int,
    placer: ReplicaPlacer | None,
) -> dict[str, Any]:
    """Time one placer (or the baseline when ``placer`` is None) and compute its figures."""
    start = time.perf_counter()
    if placer is None:
        result = striped_baseline(spec, cluster, seed)
    else:
        result = placer.place(spec, cluster)
    seconds = time.perf_counter() - start
    validate_placement(result, spec, cluster, placer_name=name)
    out = {"seconds": round(seconds, 3), **figures(placement_quality(result, cluster))}
    return out


def placers(seed: int) -> list[tuple[str, ReplicaPlacer | None]]:
    made: list[tuple[str, ReplicaPlacer | None]] = [("striped-baseline", None)]
    for name, cls in (("simple", SimplePlacer), ("rack-aware", RackAwarePlacer),
                      ("multi-level-rack", MultiLevelRackPlacer)):
        p = cls()
        p.configure({"seed": str(seed)})
        made.append((name, p))
    return made


def print_table(cluster_name: str, rows: dict[str, dict[str, Any]]) -> None:
    keys = sorted({k for r in rows.values() for k in r}, key=lambda k: (k != "seconds", k))
    print(f"\n== {cluster_name}")
    width = max(len(k) for k in keys)
    print(" " * width + "".join(f"{n:>18}" for n in rows))
    for k in keys:
        print(f"{k:<{width}}" + "".join(f"{rows[n].get(k, '-')!s:>18}" for n in rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds, for CI)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.quick:
        partitions, flat, tree = 2_000, (10, 10), (3, 4, 8)
    else:
        partitions, flat, tree = 100_000, (10, 100), (3, 4, 83)
    spec = PlacementSpec(partitions, 3)
    clusters = {
        "flat": flat_cluster(*flat),
        "tree": tree_cluster(*tree),
    }
    # The known weakness of the striped scheme: 4 brokers in 2 racks, RF 2.
    clusters["small"] = flat_cluster(2, 2)
    specs = {"flat": spec, "tree": spec, "small": PlacementSpec(8, 2)}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for cname, cluster in clusters.items():
        rows: dict[str, dict[str, Any]] = {}
        cspec = specs[cname]
        for pname, placer in placers(args.seed):
            rows[pname] = run_one(pname, cluster, cspec, args.seed, placer)
        results[cname] = rows
        print_table(
            f"{cname}: {len(cluster)} brokers, {cspec.num_partitions} partitions, "
            f"RF {cspec.replication_factor}",
            rows,
        )

    flat_r, tree_r = results["flat"], results["tree"]
    checks = {
        "time": all(r["seconds"] <= TIME_LIMIT_S for c in results.values()
                    for n, r in c.items() if n != "striped-baseline"),
        "flat_balanced": all(
            flat_r[n]["broker_replicas_max_min"] <= 1 and flat_r[n]["broker_leaders_max_min"] <= 1
            and flat_r[n]["rack_partitions_below_spread"] == 0
            for n in ("rack-aware", "multi-level-rack")
        ),
        "small_leaders_balanced": results["small"]["rack-aware"]["broker_leaders_max_min"] <= 1,
        "tree_balanced": (
            tree_r["multi-level-rack"]["broker_replicas_max_min"] <= 1
            and tree_r["multi-level-rack"]["broker_leaders_max_min"] <= 1
            and all(tree_r["multi-level-rack"][f"level{lv}_partitions_below_spread"] == 0
                    and tree_r["multi-level-rack"][f"level{lv}_replicas_fair_dev"] < 1
                    for lv in (1, 2))
        ),
    }
    line = {
        "benchmark": "placement",
        "goal": (
            f"each built-in placer places {partitions} partitions at RF 3 in <= "
            f"{TIME_LIMIT_S:g} s; "
            "rack-aware and multi-level-rack keep leader and replica max-min <= 1 per broker with "
            "full rack spread on the flat cluster, and multi-level-rack does so on the 3-DC x "
            "4-rack tree with full spread and fair share within one at both levels; rack-aware "
            "leaders differ by <= 1 on 4 brokers in 2 racks (8 partitions, RF 2)"
        ),
        "goal_met": all(checks.values()),
        "checks": checks,
        **{
            f"{c}_{n}_{k}": results[c][n][k]
            for c in ("flat", "tree")
            for n in ("simple", "rack-aware", "multi-level-rack")
            for k in ("seconds", "broker_leaders_max_min", "broker_replicas_max_min")
        },
        "small_striped_baseline_leaders_max_min":
            results["small"]["striped-baseline"]["broker_leaders_max_min"],
        "small_rack_aware_leaders_max_min":
            results["small"]["rack-aware"]["broker_leaders_max_min"],
        "partitions": partitions,
        "replication_factor": 3,
        "brokers": {c: len(cl) for c, cl in clusters.items()},
        "results": results,
    }
    print(json.dumps(line, sort_keys=False))
    return 0


__all__ = ["flat_cluster", "main", "striped_baseline", "tree_cluster"]

if __name__ == "__main__":
    sys.exit(main())
