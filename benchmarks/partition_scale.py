"""Partition scale benchmark: 20,000 partitions on one broker under ``ulimit -n 1024``.

A standalone broker runs in a child process whose ``RLIMIT_NOFILE`` is set to 1,024 before
anything is imported. It creates the partitions (RF 1, topics of 1,000 partitions), produces one
record to and fetches one record from each (8 clients at once), shuts down cleanly, starts again
and fetches every record once more. The broker runs with the default configuration (its logs
load and close on ``num.recovery.threads.per.data.dir`` = 2 threads; more only add contention
for the interpreter lock, the loading being CPU-bound). The parent samples ``/proc/<child>/fd``
every few milliseconds throughout (the child also counts its own at each step). The child
reports the time of each phase and the memory (RSS) added per partition.

Goal (the issue's): every produce and fetch succeeds, peak descriptors <= 900, start-up after
the clean shutdown < 10 s. The machine's load average is printed too: the wall times of a
shared machine are inflated by the other processes (``startup_cpu_s`` is the broker's own CPU).

Baseline, measured in the same run: the same steps at a smaller count (``--baseline``
partitions, no descriptor limit) with the handle cache disabled (``log.open.files.max`` so
large nothing is ever closed): the descriptors a partition then holds (3: its ``.log`` and two
index maps; before this change 5, as ``.index``/``.timeindex`` were held twice; Kafka holds at
least 2 per segment).

Usage: ``python benchmarks/partition_scale.py [--quick] [--partitions N] [--baseline N]
[--dir DIR]``. The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

FD_LIMIT = 1024
FD_GOAL = 900
STARTUP_GOAL_S = 10.0
PER_TOPIC = 1000
#: clients producing / fetching at once
THREADS = 8


def _fds(pid: int | str = "self") -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def child(args: argparse.Namespace) -> None:
    """The broker process: the steps, one JSON line of figures on stdout."""
    if args.fd_limit:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.fd_limit, args.fd_limit))
    from kafka_tiers.api import TopicPartition
    from kafka_tiers.broker.broker import Broker
    from kafka_tiers.log.handles import HANDLES

    config = {"log.dirs": args.log_dir}  # every other key at its default
    if args.open_files_max:
        config["log.open.files.max"] = str(args.open_files_max)
    n = args.partitions
    topics = [(f"scale-{t}", min(PER_TOPIC, n - t * PER_TOPIC))
              for t in range((n + PER_TOPIC - 1) // PER_TOPIC)]
    out: dict[str, Any] = {}
    peak = [0]

    def note() -> None:
        peak[0] = max(peak[0], _fds())

    broker = Broker(config, background=False).start()
    fds_before, rss_before = _fds(), _rss_bytes()
    t0 = time.perf_counter()
    tps: list[TopicPartition] = []
    for name, count in topics:
        tps += broker.create_topic(name, partitions=count)
        note()
    out["create_s"] = time.perf_counter() - t0
    out["fds_after_create"] = _fds()
    def produce(i: int) -> int:
        broker.produce(tps[i], [b"value-%d" % i])
        if i % 200 == 0:
            note()
        return 1

    def fetch(i: int) -> int:
        if i % 200 == 0:
            note()
        return int(broker.fetch(tps[i], 0).records_list()[0].value == b"value-%d" % i)

    with ThreadPoolExecutor(THREADS) as pool:  # THREADS clients, one record each call
        t0 = time.perf_counter()
        produced = sum(pool.map(produce, range(len(tps))))
        out["produce_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        fetched = sum(pool.map(fetch, range(len(tps))))
        out["fetch_s"] = time.perf_counter() - t0
    note()
    out["held_fds_per_partition"] = (_fds() - fds_before) / n
    out["rss_per_partition_bytes"] = (_rss_bytes() - rss_before) / n
    out["log_fds_metric"] = len(HANDLES)
    t0 = time.perf_counter()
    broker.shutdown()
    out["shutdown_s"] = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    broker = Broker(config, background=False).start()
    out["startup_s"] = time.perf_counter() - t0
    out["startup_cpu_s"] = time.process_time() - c0
    note()
    with ThreadPoolExecutor(THREADS) as pool:
        refetched = sum(pool.map(fetch, range(len(tps))))
    broker.shutdown()
    out.update(produced=produced, fetched=fetched, refetched=refetched,
               peak_fds_self=peak[0])
    print(json.dumps(out), flush=True)


def run_child(partitions: int, *, fd_limit: int, open_files_max: int | None,
              work: Path) -> dict[str, Any]:
    """Run :func:`child` in a new process, sampling its descriptors from here."""
    log_dir = work / f"broker-{partitions}-{open_files_max}"
    cmd = [sys.executable, __file__, "--child", "--partitions", str(partitions),
           "--log-dir", str(log_dir), "--fd-limit", str(fd_limit)]
    if open_files_max:
        cmd += ["--open-files-max", str(open_files_max)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _fds(proc.pid))
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    done.set()
    sampler.join()
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = stderr.strip().splitlines()[-5:]
        return {"crashed": True, "returncode": proc.returncode, "stderr_tail": tail,
                "peak_fds": peak[0]}
    result: dict[str, Any] = json.loads(lines[-1])
    result["peak_fds"] = max(peak[0], result["peak_fds_self"])
    shutil.rmtree(log_dir, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 partitions (smoke run)")
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--baseline", type=int, default=None,
                        help="partitions of the cache-disabled baseline (default 250)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help="where to work (default: a new temporary dir); left "
                        "empty")
    parser.add_argument("--log-dir", help=argparse.SUPPRESS)
    parser.add_argument("--fd-limit", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--open-files-max", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    partitions = args.partitions or (2000 if args.quick else 20000)
    baseline_n = args.baseline or (100 if args.quick else 250)
    work = Path(tempfile.mkdtemp(prefix="partition-scale-", dir=args.dir))
    try:
        print(f"baseline: {baseline_n} partitions, handle cache disabled, no fd limit",
              flush=True)
        base = run_child(baseline_n, fd_limit=0, open_files_max=1 << 30, work=work)
        print(f"  {json.dumps(base)}", flush=True)
        print(f"scale: {partitions} partitions under RLIMIT_NOFILE={FD_LIMIT}", flush=True)
        t0 = time.perf_counter()
        res = run_child(partitions, fd_limit=FD_LIMIT, open_files_max=None, work=work)
        wall = time.perf_counter() - t0
        print(f"  {json.dumps(res)}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ok = not res.get("crashed")
    all_served = ok and res["produced"] == res["fetched"] == res["refetched"] == partitions
    goal_met = bool(all_served and res["peak_fds"] <= FD_GOAL
                    and res["startup_s"] < STARTUP_GOAL_S)
    fig = (lambda k, nd=3: round(res[k], nd) if ok else None)  # noqa: E731
    print(json.dumps({
        "benchmark": "partition_scale",
        "goal": (f"{partitions} partitions (RF 1) on one broker under ulimit -n {FD_LIMIT}: "
                 f"every produce and fetch succeeds, peak descriptors <= {FD_GOAL}, start-up "
                 f"after a clean shutdown < {STARTUP_GOAL_S:g} s"),
        "goal_met": goal_met,
        "partitions": partitions,
        "fd_limit": FD_LIMIT,
        "threads": THREADS,
        "all_succeeded": all_served,
        "peak_fds": res.get("peak_fds"),
        "create_s": fig("create_s", 2),
        "create_ms_per_partition": (round(res["create_s"] * 1000 / partitions, 3)
                                    if ok else None),
        "produce_s": fig("produce_s", 2),
        "fetch_s": fig("fetch_s", 2),
        "shutdown_s": fig("shutdown_s", 2),
        "startup_s": fig("startup_s", 2),
        "startup_cpu_s": fig("startup_cpu_s", 2),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "rss_per_partition_bytes": fig("rss_per_partition_bytes", 0),
        "held_fds_per_partition": fig("held_fds_per_partition", 4),
        "baseline_partitions": baseline_n,
        "baseline_held_fds_per_partition": (None if base.get("crashed")
                                            else round(base["held_fds_per_partition"], 3)),
        "baseline_peak_fds": base.get("peak_fds"),
        "baseline_would_need_fds": (None if base.get("crashed") else
                                    round(base["held_fds_per_partition"] * partitions)),
        "wall_s": round(wall, 1),
        "error": None if ok else res.get("stderr_tail"),
    }))


if __name__ == "__main__":
    main()
