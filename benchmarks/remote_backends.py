"""Remote backends benchmark: each first-party storage plugin (S3 on moto, Azure Blob on Azurite,
HDFS on the WebHDFS emulator) against its own SDK's plain transfer of the same file, in the same
run, on the same server.

* copy: one rolled Kafka segment (256 MiB; 16 MiB with ``--quick``) of batches of 100 records x
  1 KiB, copied with the plugin's ``copy_log_segment_data`` (data, indexes, manifest last);
  baseline: the SDK's own plain upload of the same ``.log`` file (boto3 ``upload_file``, azure
  ``upload_blob``, hdfs ``client.upload``). Rounds alternate which goes first; medians reported.
* one-batch read: the broker's remote read path (the remote offset index, then a ranged fetch)
  of one batch from the middle of the remote segment: bytes transferred and latency, against
  the SDK's plain download of the whole file.

The remote tier's data path (issue 16), per backend, on a second plugin of the same backend with
``compression.enabled`` and ``encryption.enabled`` (4 MiB chunks, zstd, AES-256-GCM, an
RSA-2048 key pair made for the run):

* zstd+AES copy: the same segment copied by it, in the same rounds (the order rotating), against
  the plain plugin's copy;
* encrypted one-batch read: the same read on a fresh encrypted plugin (caches empty) whose store
  counts every byte it returns (manifest, indexes, log), against the stored size of the
  chunk(s) holding the bytes the reader asked for;
* sequential read: a consumer reading the whole encrypted segment with the broker's read path
  (offset index, then ``read_batches`` of 1 MiB per fetch), cold (a fresh plugin) and warm
  (again, from its memory chunk cache sized to hold the segment, prefetch 16 MiB); baseline:
  the store's own ``get`` of the plain plugin's log object (byte-identical to the segment)
  whole, read in 1 MiB pieces.

Goals, per backend: copy throughput at least 0.9x the plain upload; the one-batch read
transfers at most the batch plus 12 KiB of the log (the reader's 8 KiB slack past the batch and
up to one 4 KiB index interval before it). The zstd+AES copy at least 0.6x the plain plugin's
copy; the encrypted one-batch read transfers no more log than the chunk(s) holding it; the
sequential read warm at least 5x cold, cold at least 0.8x the store's plain download.

``--quick`` (a 16 MiB segment) is a smoke run, judged by the same rule but not the goal's size:
a copy's fixed round trips (the manifest deleted first and written last, four small objects
after the log; on HDFS each object a CREATE, its redirect and a RENAME) cost some 20-40 ms
whatever the segment's size, a third of a 16 MiB plain upload on the WebHDFS emulator, so HDFS
(and sometimes Azure) miss 0.9x there while meeting it at 256 MiB.

The servers are the project's test servers (``tests/servers``), started here on 127.0.0.1 as
child processes of their own (so they share no interpreter lock with the plugin's encoding,
only the machine's cores) and always stopped; the plugins must be installed (``pip install
./plugins/kafka-tiers-*``, as tox does). A backend whose server or plugin is unavailable is
reported under ``"skipped"`` with the reason, and the goal is then not met.

Usage: ``python benchmarks/remote_backends.py [--quick] [--backends s3,azure,hdfs]
[--rounds N]``. The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test servers live in tests/servers

from kafka_tiers.api import (  # noqa: E402
    IndexType,
    RemoteLogSegmentMetadata,
    TopicPartition,
)
from kafka_tiers.log.config import LogConfig  # noqa: E402
from kafka_tiers.log.log import Log  # noqa: E402
from kafka_tiers.log.records import ProducerRecord, build_batch  # noqa: E402
from kafka_tiers.objectstore.keys import ObjectKind  # noqa: E402
from kafka_tiers.plugins import load_remote_storage  # noqa: E402
from kafka_tiers.remote.index_cache import RemoteIndexCache  # noqa: E402
from kafka_tiers.remote.remote_log_manager import READ_SLACK_BYTES, read_batches  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))  # the data path's helpers are tiering.py's
from tiering import (  # noqa: E402
    CHUNK_SIZE,
    RangeRecorder,
    counting,
    covering_chunks_stored,
    key_pair_files,
    metadata_for,
    plain_download,
    segment_data,
    transformed_config,
)

MIB = 1 << 20
RECORDS_PER_BATCH = 100
VALUE_SIZE = 1024
TP = TopicPartition("bench", 0)
#: what a one-batch read may fetch beyond the batch: the reader's slack past the batch, plus up
#: to one index interval (log.index.interval.bytes) before it, where its index entry points.
RANGE_ALLOWANCE = READ_SLACK_BYTES + 4096


@dataclass
class Backend:
    """How to start one backend's server and configure its plugin."""

    name: str
    plugin_dir: str
    start: Callable[[], Any]
    config: Callable[[Any], dict[str, str]]


def _s3_server() -> Any:
    from tests.servers.moto_s3 import MotoS3Server

    return MotoS3Server()


def _s3_config(server: Any) -> dict[str, str]:
    return {"s3.bucket.name": server.create_bucket(), "s3.endpoint.url": server.url,
            "s3.region": "us-east-1", "s3.path.style.access.enabled": "true",
            "aws.access.key.id": "testing", "aws.secret.access.key": "testing"}


def _azure_server() -> Any:
    from tests.servers.azurite import AzuriteServer

    return AzuriteServer()


def _azure_config(server: Any) -> dict[str, str]:
    container = server.create_container()
    return {"azure.connection.string": server.connection_string,
            "azure.container.name": container.container_name}


def _hdfs_server() -> Any:
    from tests.servers.webhdfs import WebHdfsServer

    return WebHdfsServer()


def _hdfs_config(server: Any) -> dict[str, str]:
    return {"hdfs.namenode.url": server.url, "hdfs.user": server.user,
            "hdfs.base.dir": f"{server.base_path}/kt-bench-{uuid.uuid4().hex[:8]}"}


BACKENDS = {
    "s3": Backend("s3", "kafka-tiers-s3", _s3_server, _s3_config),
    "azure": Backend("azure", "kafka-tiers-azure", _azure_server, _azure_config),
    "hdfs": Backend("hdfs", "kafka-tiers-hdfs", _hdfs_server, _hdfs_config),
}


def load_plain_transfer(backend: Backend) -> ModuleType:
    """The plugin's baseline helper (``plugins/<dist>/tests/plain_transfer.py``), by path."""
    path = ROOT / "plugins" / backend.plugin_dir / "tests" / "plain_transfer.py"
    spec = importlib.util.spec_from_file_location(f"kt_bench_plain_{backend.name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_segment(work: Path, size: int) -> tuple[Any, Log]:
    """Append batches until one segment holds ``size`` bytes, roll it; returns its info."""
    log = Log.open(work / f"{TP.topic}-{TP.partition}",
                   LogConfig(segment_bytes=size + 4 * MIB))
    now = int(time.time() * 1000)
    while log.active_segment.size < size:
        records = [ProducerRecord(os.urandom(VALUE_SIZE // 2).hex().encode(), b"key-%d" % i,
                                  (), now) for i in range(RECORDS_PER_BATCH)]
        log.append(build_batch(records))
    log.roll()
    log.flush()
    return log.inactive_segments()[0], log


@contextlib.contextmanager
def running(server: Any) -> Iterator[Any]:
    try:
        server.start()
        yield server
    finally:
        server.close()


def bench_backend(backend: Backend, info: Any, work: Path, rounds: int,
                  keys: dict[str, str]) -> dict[str, Any]:
    plain = load_plain_transfer(backend)
    with running(backend.start()) as server:
        config = backend.config(server)
        enc_config = {**config, **transformed_config(keys)}
        plugin = load_remote_storage(backend.name, config)
        enc = load_remote_storage(backend.name, enc_config)
        try:
            data = segment_data(info, work)
            copy_s: list[float] = []
            plain_s: list[float] = []
            enc_s: list[float] = []
            md: RemoteLogSegmentMetadata | None = None
            enc_md: RemoteLogSegmentMetadata | None = None
            for i in range(rounds):
                order = ("copy", "plain", "enc")
                for what in order[i % 3:] + order[:i % 3]:
                    if what == "plain":
                        plain_s.append(plain.plain_upload(server, info.log_path))
                        continue
                    target, times = (plugin, copy_s) if what == "copy" else (enc, enc_s)
                    old: RemoteLogSegmentMetadata | None = md if what == "copy" else enc_md
                    if old is not None:
                        target.delete_log_segment_data(old)
                    new = metadata_for(TP, info)
                    start = time.perf_counter()
                    target.copy_log_segment_data(new, data)
                    times.append(time.perf_counter() - start)
                    if what == "copy":
                        md = new
                    else:
                        enc_md = new
            assert md is not None and enc_md is not None
            mib = info.size / MIB
            copy_rate = mib / statistics.median(copy_s)
            plain_rate = mib / statistics.median(plain_s)
            enc_rate = mib / statistics.median(enc_s)
            read = one_batch_read(plugin, md, info, work)
            _, whole_s = plain.plain_download(server, _plain_key(backend, info))
            plain_log_key = plugin.object_key(md, ObjectKind.LOG)
            enc_read = encrypted_one_batch_read(backend, enc_config, enc_md, info, work)
            seq = sequential_read(backend, enc_config, enc_md, info, work, plugin.object_store,
                                  plain_log_key)
        finally:
            plugin.close()
            enc.close()
    return {"copy_mib_per_s": round(copy_rate, 1), "plain_upload_mib_per_s": round(plain_rate, 1),
            "copy_vs_plain": round(copy_rate / plain_rate, 3), **read,
            "whole_file_download_ms": round(whole_s * 1000, 1),
            "zstd_aes_copy_mib_per_s": round(enc_rate, 1),
            "zstd_aes_copy_vs_plain_copy": round(enc_rate / copy_rate, 3),
            **enc_read, **seq,
            "copy_goal_met": copy_rate >= 0.9 * plain_rate,
            "range_goal_met": read["one_batch_bytes_fetched"]
            <= read["batch_bytes"] + RANGE_ALLOWANCE,
            "zstd_aes_copy_goal_met": enc_rate >= 0.6 * copy_rate,
            "enc_range_goal_met": enc_read["enc_one_batch_log_bytes_fetched"]
            <= enc_read["enc_one_batch_covering_chunks_stored_bytes"],
            "seq_warm_goal_met": seq["seq_warm_mib_per_s"] >= 5 * seq["seq_cold_mib_per_s"],
            "seq_cold_goal_met": seq["seq_cold_mib_per_s"]
            >= 0.8 * seq["seq_plain_download_mib_per_s"]}


GOALS = ("copy_goal_met", "range_goal_met", "zstd_aes_copy_goal_met", "enc_range_goal_met",
         "seq_warm_goal_met", "seq_cold_goal_met")


def encrypted_one_batch_read(backend: Backend, config: dict[str, str],
                             md: RemoteLogSegmentMetadata, info: Any,
                             work: Path) -> dict[str, Any]:
    """One batch from the middle of the encrypted segment on a fresh plugin (caches empty),
    every byte the store returns counted."""
    middle = (info.base_offset + info.next_offset) // 2
    plugin = load_remote_storage(backend.name, config)
    store = counting(plugin)
    reader = RangeRecorder(plugin)
    cache = RemoteIndexCache(work / f"index-cache-{uuid.uuid4().hex[:6]}", 16 * MIB)
    try:
        start = time.perf_counter()
        position = cache.lookup(md, middle, lambda m: plugin.fetch_index(m, IndexType.OFFSET))
        result = read_batches(reader, md, middle, 1, position)
        first_ms = (time.perf_counter() - start) * 1000
        counts = dict(store.read_bytes)
        gets = dict(store.gets)
        chunks, chunk_bytes = covering_chunks_stored(plugin, md, reader.ranges)
    finally:
        cache.close()
        plugin.close()
    if not result.records:
        raise RuntimeError(f"no batch read at offset {middle}")
    return {"enc_one_batch_bytes_fetched": sum(counts.values()),
            "enc_one_batch_log_bytes_fetched": counts.get("log", 0),
            "enc_one_batch_bytes_by_kind": counts, "enc_one_batch_gets_by_kind": gets,
            "enc_one_batch_covering_chunks": chunks,
            "enc_one_batch_covering_chunks_stored_bytes": chunk_bytes,
            "enc_one_batch_first_ms": round(first_ms, 2)}


def sequential_read(backend: Backend, config: dict[str, str], md: RemoteLogSegmentMetadata,
                    info: Any, work: Path, plain_store: Any, plain_log_key: str
                    ) -> dict[str, Any]:
    """A consumer reading the whole encrypted segment, cold then warm; against the store's
    plain download of the same bytes (the plain plugin's log object)."""
    got, plain_s = plain_download(plain_store, [plain_log_key])
    if got != info.size:
        raise RuntimeError(f"the plain download read {got} of {info.size} bytes")
    seq_config = {**config, "fetch.chunk.cache.class": "memory",
                  "fetch.chunk.cache.size": str(info.size + 64 * MIB),
                  "fetch.chunk.cache.prefetch.max.size": str(4 * CHUNK_SIZE),
                  "fetch.chunk.download.threads": "4"}
    plugin = load_remote_storage(backend.name, seq_config)
    store = counting(plugin)
    cache = RemoteIndexCache(work / f"index-cache-{uuid.uuid4().hex[:6]}", 16 * MIB)
    passes = []
    try:
        for _ in range(2):  # cold, then warm
            store.reset()
            offset, read = info.base_offset, 0
            start = time.perf_counter()
            while offset < info.next_offset:
                position = cache.lookup(md, offset,
                                        lambda m: plugin.fetch_index(m, IndexType.OFFSET))
                result = read_batches(plugin, md, offset, MIB, position)
                read += len(result.records)
                offset = result.next_offset
            passes.append((time.perf_counter() - start, read, sum(store.read_bytes.values())))
        stats = plugin.cache_stats() if hasattr(plugin, "cache_stats") else None
    finally:
        cache.close()
        plugin.close()
    (cold_s, cold_read, cold_bytes), (warm_s, warm_read, warm_bytes) = passes
    if cold_read != info.size or warm_read != info.size:
        raise RuntimeError(f"the consumer read {cold_read}/{warm_read} of {info.size} bytes")
    mib = info.size / MIB
    return {"seq_cold_mib_per_s": round(mib / cold_s, 1),
            "seq_warm_mib_per_s": round(mib / warm_s, 1),
            "seq_plain_download_mib_per_s": round(mib / plain_s, 1),
            "seq_warm_vs_cold": round(cold_s / warm_s, 2),
            "seq_cold_vs_plain_download": round(plain_s / cold_s, 3),
            "seq_cold_bytes_from_store": cold_bytes, "seq_warm_bytes_from_store": warm_bytes,
            "seq_cache": stats}


def _plain_key(backend: Backend, info: Any) -> str:
    name = Path(info.log_path).name
    return f"kt-plain-transfer/{name}" if backend.name == "hdfs" else name


def one_batch_read(plugin: Any, md: RemoteLogSegmentMetadata, info: Any,
                   work: Path) -> dict[str, Any]:
    """The broker's remote read of one batch from the middle of the segment."""
    middle = (info.base_offset + info.next_offset) // 2
    cache = RemoteIndexCache(work / f"index-cache-{uuid.uuid4().hex[:6]}", 16 * MIB)
    try:
        start = time.perf_counter()
        position = cache.lookup(md, middle, lambda m: plugin.fetch_index(m, IndexType.OFFSET))
        result = read_batches(plugin, md, middle, 1, position)
        first_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        position = cache.lookup(md, middle, lambda m: plugin.fetch_index(m, IndexType.OFFSET))
        read_batches(plugin, md, middle, 1, position)
        warm_ms = (time.perf_counter() - start) * 1000
    finally:
        cache.close()
    if not result.records:
        raise RuntimeError(f"no batch read at offset {middle}")
    return {"batch_bytes": len(result.records), "one_batch_bytes_fetched": result.bytes_fetched,
            "one_batch_first_ms": round(first_ms, 2), "one_batch_warm_ms": round(warm_ms, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 16 MiB segment")
    parser.add_argument("--backends", default="s3,azure,hdfs")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    size = (16 if args.quick else 256) * MIB
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; choose from {sorted(BACKENDS)}")
    figures: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="kt-bench-backends-") as tmp:
        work = Path(tmp)
        keys = key_pair_files(work / "keys")
        info, log = build_segment(work, size)
        try:
            for name in names:
                try:
                    figures[name] = bench_backend(BACKENDS[name], info, work, args.rounds,
                                                  keys)
                except Exception as exc:  # a missing server or plugin is reported, not fatal
                    skipped[name] = f"{type(exc).__name__}: {exc}"
                print(json.dumps({name: figures.get(name, skipped.get(name))}),
                      file=sys.stderr, flush=True)
        finally:
            log.close()
    met = bool(figures) and not skipped and all(
        f[goal] for f in figures.values() for goal in GOALS)
    print(json.dumps({
        "benchmark": "remote_backends",
        "goal": "per backend: the plugin's segment copy at least 0.9x the SDK's plain upload "
                "of the same file; a one-batch read from the middle of the remote segment "
                "transfers at most the batch plus 12 KiB of the log; the zstd+AES-GCM copy "
                "at least 0.6x the plain copy; an encrypted one-batch read transfers only the "
                "chunk(s) holding it (plus manifest and index); a sequential read of the "
                "encrypted segment warm at least 5x cold, cold at least 0.8x the store's "
                "plain download of the same bytes",
        "goals_missed": sorted({f"{name}.{goal}" for name, f in figures.items()
                                for goal in GOALS if not f[goal]}),
        "goal_met": met, "quick": args.quick, "segment_mib": round(info.size / MIB, 1),
        "servers": "each server (moto, Azurite, the WebHDFS emulator) runs as its own child "
                   "process (tests/servers' ServerProcess), not in this benchmark's process: "
                   "no GIL shared with the encoding, but the same 2 cores",
        "rounds": args.rounds, "backends": figures, "skipped": skipped}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
