"""``kafka-tiers dump-log``: print the content of ``.log``, ``.index`` and ``.timeindex`` files,
like Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``).

Every batch of a ``.log`` is checked before it is shown: magic and CRC, and the offset rules
for the header fields the CRC does not cover (base offsets strictly increase from the file's
base offset, each batch ends before the next starts). A batch failing either is shown with
``isvalid: false`` and the reason, and its records are never printed."""

from __future__ import annotations

import json
import mmap
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click


def _open_map(path: Path) -> mmap.mmap | bytes:
    from kafka_tiers.log.errors import LogDirError

    try:
        if not stat.S_ISREG(os.stat(path).st_mode) and not path.is_dir():  # a fifo would block
            raise LogDirError(f"{path} is not a regular file (a device, fifo or socket); give "
                              "a segment file", path=str(path))
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return b""
            return mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise LogDirError(f"{path}: no such file", path=str(path)) from None
    except IsADirectoryError:
        raise LogDirError(f"{path} is a directory, not a segment file", path=str(path)) from None
    except OSError as exc:
        raise LogDirError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from None


def _base_offset(path: Path) -> int:
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    return bytes(data).decode("utf-8", errors="backslashreplace")


def _scan(buf: Any) -> Iterator[tuple[int, Any, str | None]]:
    """(position, batch or None, problem) for each batch; stops at the first bad size."""
    from kafka_tiers.log.errors import CorruptRecordError
    from kafka_tiers.log.records import LOG_OVERHEAD, RecordBatch

    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            yield pos, None, f"{end - pos} trailing bytes are not a batch"
            return
        try:
            batch = RecordBatch(buf, pos)
        except CorruptRecordError as exc:
            yield pos, None, str(exc)
            return
        yield pos, batch, None
        pos += batch.size


def _batch_dict(batch: Any, position: int, print_data: bool,
                offset_problem: str | None = None,
                epoch_problem: str | None = None) -> dict[str, Any]:
    """One batch as Kafka's dump shows it; ``isValid`` is false when the magic, the CRC, the
    offset rules (``offset_problem``) or the leader epoch order (``epoch_problem``: an epoch
    below the batch before) fail, and ``problem`` / ``offsetProblem`` / ``epochProblem`` say
    why. Records of an invalid batch are never printed."""
    from kafka_tiers.log.errors import CorruptRecordError
    from kafka_tiers.log.records import leader_epoch_problem

    problem = None
    try:
        batch.validate()
        problem = leader_epoch_problem(batch.partition_leader_epoch)
    except CorruptRecordError as exc:
        problem = str(exc)
    valid = problem is None and offset_problem is None and epoch_problem is None
    ts_name = "LogAppendTime" if batch.timestamp_type else "CreateTime"
    out: dict[str, Any] = {
        "baseOffset": batch.base_offset, "lastOffset": batch.last_offset,
        "count": batch.records_count, "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence, "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional, "isControl": batch.is_control,
        "position": position, "timestampType": ts_name, "maxTimestamp": batch.max_timestamp,
        "size": batch.size, "magic": batch.magic,
        "compresscodec": batch.compression.name.lower() if batch.attributes & 7 <= 4
        else f"unknown({batch.attributes & 7})",
        "crc": batch.crc, "isValid": valid,
    }
    if problem is not None:
        out["problem"] = problem
    if offset_problem is not None:
        out["offsetProblem"] = offset_problem
    if epoch_problem is not None:
        out["epochProblem"] = epoch_problem
    if print_data and valid:
        try:
            recs = []
            for rec in batch.records():
                recs.append({
                    "offset": rec.offset, "timestamp": rec.timestamp,
                    "keySize": -1 if rec.key is None else len(rec.key),
                    "valueSize": -1 if rec.value is None else len(rec.value),
                    "headerKeys": [k for k, _ in rec.headers],
                    "key": _text(rec.key), "payload": _text(rec.value),
                })
            out["records"] = recs
        except CorruptRecordError as exc:
            out["recordsError"] = str(exc)
    return out


def _dump_log(path: Path, print_data: bool) -> dict[str, Any]:
    from kafka_tiers.log.records import epoch_violations, offset_violations

    buf = _open_map(path)
    batches = []
    problem = None
    problem_at = None
    try:
        found = []
        for pos, batch, err in _scan(buf):
            if batch is None:
                problem, problem_at = err, pos
                break
            found.append((pos, batch))
        bad = offset_violations([(b.base_offset, b.last_offset) for _, b in found],
                                _base_offset(path))
        drops = epoch_violations([b.partition_leader_epoch for _, b in found])
        for i, (pos, batch) in enumerate(found):
            batches.append(_batch_dict(batch, pos, print_data, bad.get(i), drops.get(i)))
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    out: dict[str, Any] = {"file": str(path), "type": "log",
                           "startingOffset": _base_offset(path), "batches": batches}
    if problem is not None:
        out["invalidBytesAt"] = problem_at
        out["problem"] = problem
    return out


def _batch_ends(log_path: Path) -> tuple[dict[int, tuple[int, int, int]], str | None]:
    """last offset -> (position, max timestamp so far, batch max timestamp) from a log."""
    buf = _open_map(log_path)
    ends: dict[int, tuple[int, int, int]] = {}
    best = -1
    problem = None
    try:
        for pos, batch, err in _scan(buf):
            if batch is None:
                problem = f"{log_path}: {err} at byte {pos}"
                break
            best = max(best, batch.max_timestamp)
            ends[batch.last_offset] = (pos, best, batch.max_timestamp)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    return ends, problem


def _dump_index(path: Path, kind: str, verify: bool) -> dict[str, Any]:
    import struct

    entry = struct.Struct(">ii") if kind == "index" else struct.Struct(">qi")
    buf = _open_map(path)
    base = _base_offset(path)
    entries: list[dict[str, int]] = []
    try:
        n = len(buf) // entry.size
        for i in range(n):
            a, b = entry.unpack_from(buf, i * entry.size)
            if i > 0 and a == 0 and b == 0:
                break  # preallocated tail of an index that was not trimmed
            if kind == "index":
                entries.append({"offset": base + a, "position": b})
            else:
                entries.append({"timestamp": a, "offset": base + b})
        trailing = len(buf) % entry.size
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
    out: dict[str, Any] = {"file": str(path), "type": kind, "entries": entries}
    if trailing:
        out["problem"] = f"{trailing} trailing bytes are not a whole entry"
    if verify:
        mismatches: list[str] = []
        log_path = path.with_name(path.name.rsplit(".", 1)[0] + ".log")
        if not log_path.exists():
            mismatches.append(f"no log file {log_path.name} to verify against")
        else:
            ends, problem = _batch_ends(log_path)
            if problem:
                mismatches.append(problem)
            by_pos = {pos: off for off, (pos, _b, _m) in ends.items()}
            prev = None
            for e in entries:
                if kind == "index":
                    off, pos = e["offset"], e["position"]
                    if prev is not None and off <= prev:
                        mismatches.append(f"index offset {off} is not above {prev}")
                    if pos not in by_pos:
                        mismatches.append(
                            f"index offset {off}, position {pos}: no batch starts there")
                    elif by_pos[pos] != off:
                        mismatches.append(f"index offset {off}, log offset {by_pos[pos]}")
                    prev = off
                else:
                    ts, off = e["timestamp"], e["offset"]
                    if prev is not None and ts <= prev:
                        mismatches.append(f"index timestamp {ts} is not above {prev}")
                    if off not in ends:
                        mismatches.append(f"time index offset {off}: no batch ends there")
                    elif ends[off][1] != ts:
                        mismatches.append(
                            f"index timestamp {ts}, log timestamp {ends[off][1]} (offset {off})")
                    prev = ts
        out["mismatches"] = mismatches
    return out


def _print_text(result: dict[str, Any], echo: Callable[[str], None]) -> None:
    echo(f"Dumping {result['file']}")
    if result["type"] == "log":
        echo(f"Log starting offset: {result['startingOffset']}")
        for b in result["batches"]:
            echo(
                f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: "
                f"{b['count']} baseSequence: {b['baseSequence']} lastSequence: "
                f"{b['lastSequence']} producerId: {b['producerId']} producerEpoch: "
                f"{b['producerEpoch']} partitionLeaderEpoch: {b['partitionLeaderEpoch']} "
                f"isTransactional: {str(b['isTransactional']).lower()} isControl: "
                f"{str(b['isControl']).lower()} position: {b['position']} "
                f"{b['timestampType']}: {b['maxTimestamp']} size: {b['size']} magic: "
                f"{b['magic']} compresscodec: {b['compresscodec']} crc: {b['crc']} "
                f"isvalid: {str(b['isValid']).lower()}")
            for r in b.get("records", ()):
                echo(f"| offset: {r['offset']} {b['timestampType']}: {r['timestamp']} "
                     f"keySize: {r['keySize']} valueSize: {r['valueSize']} headerKeys: "
                     f"[{', '.join(r['headerKeys'])}] key: {r['key']} payload: {r['payload']}")
            if "problem" in b:
                echo(f"| invalid batch: {b['problem']}")
            if "offsetProblem" in b:
                echo(f"| invalid offsets: {b['offsetProblem']}")
            if "epochProblem" in b:
                echo(f"| invalid leader epoch: {b['epochProblem']}")
            if "recordsError" in b:
                echo(f"| invalid records: {b['recordsError']}")
        if "problem" in result:
            echo(f"Found invalid bytes at position {result['invalidBytesAt']}: "
                 f"{result['problem']}")
    else:
        for e in result["entries"]:
            if result["type"] == "index":
                echo(f"offset: {e['offset']} position: {e['position']}")
            else:
                echo(f"timestamp: {e['timestamp']} offset: {e['offset']}")
        if "problem" in result:
            echo(f"Problem: {result['problem']}")
        if "mismatches" in result:
            if result["mismatches"]:
                echo(f"Mismatches in {result['file']}:")
                for m in result["mismatches"]:
                    echo(f"  {m}")
            else:
                echo("Index verified against the log: no mismatches")


def dump_files(files: list[Path], *, print_data: bool = False,
               verify_index: bool = False) -> list[dict[str, Any]]:
    """Dump each file (by suffix: ``.log``, ``.index``, ``.timeindex``) into a dict.

    Raises:
        LogDirError: a file is missing, unreadable, or of a kind that cannot be dumped.
    """
    from kafka_tiers.log.errors import LogDirError

    out = []
    for path in files:
        if path.suffix == ".log":
            out.append(_dump_log(path, print_data))
        elif path.suffix == ".index":
            out.append(_dump_index(path, "index", verify_index))
        elif path.suffix == ".timeindex":
            out.append(_dump_index(path, "timeindex", verify_index))
        else:
            raise LogDirError(f"{path}: cannot dump this file (expected .log, .index or "
                              ".timeindex)", path=str(path))
    return out


@click.command("dump-log")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--print-data", is_flag=True, help="Print each record (key, payload, headers).")
@click.option("--verify-index", is_flag=True,
              help="Check index entries against the .log file next to them.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
def dump_log(files: tuple[Path, ...], print_data: bool, verify_index: bool, fmt: str) -> None:
    """Dump segment files: batches of .log files, entries of .index and .timeindex files.

    \b
    Examples:
      kafka-tiers dump-log /var/kafka/t-0/00000000000000000000.log --print-data
      kafka-tiers dump-log t-0/00000000000000000000.index --verify-index
      kafka-tiers dump-log t-0/*.log --format json
    """
    results = dump_files(list(files), print_data=print_data, verify_index=verify_index)
    if fmt == "json":
        click.echo(json.dumps({"files": results}, indent=None))
    else:
        for result in results:
            _print_text(result, click.echo)


__all__ = ["dump_files", "dump_log"]
