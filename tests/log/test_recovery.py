"""Crash safety and KIP-263 startup: recovery after unclean shutdowns, lazy sanity checks,
damaged files (truncated, bit-flipped, missing) that are detected and never served."""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from kafka_tiers.log.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import RecordBatch

from .helpers import batch_of, crash, fill, read_all

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, max_index_size=4096)


def _segment_files(directory: Path, suffix: str = ".log") -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


def _batches_of(path: Path) -> list[RecordBatch]:
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        b = RecordBatch(data, pos)
        out.append(b)
        pos += b.size
    return out


def test_torn_tail_after_crash_is_truncated(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 120)
    log.flush()
    flushed = log.recovery_point
    fill(log, 5)
    crash(log)
    active = _segment_files(d)[-1]
    with open(active, "r+b") as fh:  # tear the last batch in half
        fh.truncate(active.stat().st_size - 20)
    log = Log.open(d, CONFIG, recovery_point=flushed, clean_shutdown=False)
    try:
        assert log.log_end_offset == 124  # the torn 125th record is gone, the rest kept
        assert read_all(log)[:120] == list(enumerate(values))
        assert log.load_report.truncated_bytes > 0
        assert log.append(batch_of([b"after"])).first_offset == 124
    finally:
        log.close()


def test_corrupt_middle_segment_removes_later_ones_on_unclean_start(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 300)
    crash(log)
    logs = _segment_files(d)
    assert len(logs) >= 4
    victim = logs[1]
    batches = _batches_of(victim)
    bad = batches[3]
    with open(victim, "r+b") as fh:
        fh.seek(bad.position + 40)
        byte = fh.read(1)
        fh.seek(bad.position + 40)
        fh.write(bytes([byte[0] ^ 0x10]))
    log = Log.open(d, CONFIG, recovery_point=0, clean_shutdown=False)
    try:
        assert log.log_end_offset == bad.base_offset
        assert read_all(log) == list(enumerate(values))[:bad.base_offset]
        assert len(_segment_files(d)) == 2  # later segments removed, as Kafka does
    finally:
        log.close()


def test_clean_shutdown_with_check_off_touches_only_the_active_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 300)
    log.close()
    log = Log.open(d, CONFIG, recovery_point=300, clean_shutdown=True, sanity_check_all=False)
    try:
        segs = log.segments()
        assert len(segs) > 3
        for seg in segs[:-1]:
            assert not seg.checked
            assert not seg.offset_index.loaded and not seg.time_index.loaded
            assert seg._fd is None and seg._size is None
        assert segs[-1].checked
        assert log.unchecked_segments == len(segs) - 1
        # first access of a segment checks that segment only
        log.read(segs[2].base_offset, 10)
        assert [s.checked for s in segs[:3]] == [False, False, True]
        assert log.check_segments() == len(segs) - 2
        assert log.unchecked_segments == 0
        assert read_all(log) == list(enumerate(values))
    finally:
        log.close()


def test_clean_shutdown_with_check_on_checks_every_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    fill(log, 300)
    log.close()
    victim = _segment_files(d, ".index")[1]
    victim.write_bytes(struct.pack(">ii", 999, 1))  # an entry pointing nowhere
    log = Log.open(d, CONFIG, recovery_point=300, clean_shutdown=True, sanity_check_all=True)
    try:
        assert log.unchecked_segments == 0
        assert [int(p.stem) for p in [victim]] == log.load_report.recovered
        entries = victim.read_bytes()
        assert len(entries) % 8 == 0 and struct.unpack_from(">ii", entries)[0] != 999
    finally:
        log.close()


@pytest.mark.parametrize("damage", ["garbage", "missing", "offsets", "timeindex"])
def test_lazily_found_bad_index_is_rebuilt_before_serving(tmp_path: Path, damage: str) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 300)
    log.close()
    index = _segment_files(d, ".index")[1]
    timeindex = _segment_files(d, ".timeindex")[1]
    if damage == "garbage":
        index.write_bytes(b"\x00\x01\x02")
    elif damage == "missing":
        index.unlink()
        timeindex.unlink()
    elif damage == "offsets":
        index.write_bytes(struct.pack(">iiii", 50, 0, 10, 4))
    else:
        timeindex.write_bytes(struct.pack(">qiqi", 9_999_999, 1, 5, 2))
    log = Log.open(d, CONFIG, recovery_point=300, clean_shutdown=True, sanity_check_all=False)
    try:
        base = int(index.stem)
        assert log.read(base + 3, 1).batches()[0].base_offset == base + 3
        assert base in log.load_report.recovered
        # damage found: the segments before it were checked too (document 002)
        assert log.segments()[0].checked
        assert read_all(log) == list(enumerate(values))
        assert log.offset_for_timestamp(1000 + base + 5).offset == base + 5
    finally:
        log.close()


def test_corrupt_batch_found_on_read_is_never_served(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 300)
    log.close()
    victim = _segment_files(d)[2]
    bad = _batches_of(victim)[4]
    with open(victim, "r+b") as fh:
        fh.seek(bad.position + 30)
        fh.write(b"\xff\xff")
    # the damage is in the log data with intact indexes: the sanity check cannot see it,
    # the CRC check on read does
    log = Log.open(d, CONFIG, recovery_point=300, clean_shutdown=True, sanity_check_all=False)
    try:
        served = read_all(log)
        original = dict(enumerate(values))
        assert all(original[o] == v for o, v in served)  # nothing corrupt or altered
        assert [o for o, _ in served if o < bad.base_offset] == list(range(bad.base_offset))
        assert bad.base_offset not in dict(served)
    finally:
        log.close()


def test_bad_batch_length_found_on_read_is_recovered(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 300)
    log.close()
    victim = _segment_files(d)[1]
    bad = _batches_of(victim)[3]
    size_before = victim.stat().st_size
    with open(victim, "r+b") as fh:
        fh.seek(bad.position + 8)
        fh.write(struct.pack(">i", 10**6))  # the size now runs far past the file
    log = Log.open(d, CONFIG, recovery_point=300, clean_shutdown=True, sanity_check_all=False)
    try:
        served = read_all(log)
        assert all(values[o] == v for o, v in served)
        assert [o for o, _ in served if o < bad.base_offset] == list(range(bad.base_offset))
        assert log.load_report.truncated_bytes == size_before - bad.position
        assert victim.stat().st_size == bad.position  # cut at the damaged batch
    finally:
        log.close()


# ---------------------------------------------------------------------- fuzzing

@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    d = tmp_path_factory.mktemp("pristine") / "t-0"
    log = Log.open(d, CONFIG)
    values = fill(log, 250, per_batch=3)
    log.close()
    return d, values


def _covered_positions(path: Path) -> list[int]:
    """Byte positions a CRC, size or magic check covers (not baseOffset/leader epoch)."""
    out = []
    for b in _batches_of(path):
        out += [p for p in range(b.position + 8, b.position + b.size)
                if not b.position + 12 <= p < b.position + 16]
    return out


def _check_served(log: Log, values: list[bytes], damage_offset: int) -> None:
    served = read_all(log)
    original = dict(enumerate(values))
    for offset, value in served:
        assert original[offset] == value, f"offset {offset} served altered data"
    got = {o for o, _ in served}
    missing = [o for o in range(damage_offset) if o not in got]
    assert not missing, f"lost records before the damage: {missing[:5]}"


@pytest.mark.parametrize("seed", range(24))
def test_fuzz_bit_flips(tmp_path: Path, pristine: tuple[Path, list[bytes]], seed: int) -> None:
    src, values = pristine
    rng = random.Random(seed)
    d = tmp_path / "t-0"
    shutil.copytree(src, d)
    files = _segment_files(d)
    victim = rng.choice(files)
    flips = rng.randint(1, 3)
    positions = rng.sample(_covered_positions(victim), flips)
    first_damaged = min(positions)
    damage_offset = _offset_at(victim, first_damaged)
    data = bytearray(victim.read_bytes())
    for p in positions:
        data[p] ^= 1 << rng.randrange(8)
    victim.write_bytes(bytes(data))
    mode = seed % 3
    log = Log.open(d, CONFIG, recovery_point=0 if mode == 0 else len(values),
                   clean_shutdown=mode != 0, sanity_check_all=mode == 1)
    try:
        _check_served(log, values, damage_offset)
    finally:
        log.close()


@pytest.mark.parametrize("seed", range(16))
def test_fuzz_truncations(tmp_path: Path, pristine: tuple[Path, list[bytes]], seed: int) -> None:
    src, values = pristine
    rng = random.Random(1000 + seed)
    d = tmp_path / "t-0"
    shutil.copytree(src, d)
    kind = rng.choice([".log", ".index", ".timeindex"])
    victim = rng.choice(_segment_files(d, kind))
    size = victim.stat().st_size
    cut = rng.randrange(0, max(size, 1))
    with open(victim, "r+b") as fh:
        fh.truncate(cut)
    pristine_log = src / victim.with_suffix(".log").name
    damage_offset = _offset_at(pristine_log, cut) if kind == ".log" else len(values)
    mode = seed % 3
    log = Log.open(d, CONFIG, recovery_point=0 if mode == 0 else len(values),
                   clean_shutdown=mode != 0, sanity_check_all=mode == 1)
    try:
        _check_served(log, values, damage_offset)
        if kind != ".log":
            assert len(read_all(log)) == len(values)  # index damage loses nothing
    finally:
        log.close()


@pytest.mark.parametrize("seed", range(8))
def test_fuzz_random_garbage_never_crashes_the_loader(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    d = tmp_path / "t-0"
    d.mkdir()
    for base in (0, 10, 20):
        (d / f"{base:020d}.log").write_bytes(rng.randbytes(rng.randrange(0, 3000)))
        (d / f"{base:020d}.index").write_bytes(rng.randbytes(rng.randrange(0, 100)))
        (d / f"{base:020d}.timeindex").write_bytes(rng.randbytes(rng.randrange(0, 100)))
    (d / "leader-epoch-checkpoint").write_bytes(b"0\n1\n0 0\n")
    log = Log.open(d, CONFIG, clean_shutdown=seed % 2 == 0, sanity_check_all=False,
                   recovery_point=0)
    try:
        assert read_all(log) == []
        assert log.append(batch_of([b"fresh"])).first_offset == log.log_end_offset - 1
    finally:
        log.close()


def test_leftovers_are_cleaned(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    fill(log, 100)
    log.close()
    (d / "00000000000000000000.log.deleted").write_bytes(b"x")
    (d / "00000000000000009999.index").write_bytes(b"")  # index without log
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"partial")
    log = Log.open(d, CONFIG, recovery_point=100, clean_shutdown=True)
    log.close()
    names = os.listdir(d)
    assert "00000000000000000000.log.deleted" not in names
    assert "00000000000000009999.index" not in names
    assert "leader-epoch-checkpoint.tmp" not in names


def _offset_at(log_file: Path, position: int) -> int:
    """The first offset of the batch holding byte ``position`` of a pristine log file."""
    for b in _batches_of(log_file):
        if b.position <= position < b.position + b.size:
            return b.base_offset
    return _first_offset_after(log_file, position)


def _first_offset_after(log_file: Path, position: int) -> int:
    batches = _batches_of(log_file)
    for b in batches:
        if b.position >= position:
            return b.base_offset
    return batches[-1].next_offset if batches else int(log_file.stem)


def test_leader_epochs_not_yet_written_are_rebuilt_by_recovery_after_a_crash(
        tmp_path: Path) -> None:
    """The epoch checkpoint is written when the log flushes, not on every change (Kafka's
    KAFKA-15046): after a crash, the entries it lacks are rebuilt from the batches above the
    recovery point, and entries of a truncation it did not see are dropped."""
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    log.append(batch_of([b"a", b"b"]), leader_epoch=1)
    log.append(batch_of([b"c"]), leader_epoch=3)
    log.flush()
    flushed = log.recovery_point
    assert [tuple(e) for e in LeaderEpochCheckpointFile(d / LEADER_EPOCH_CHECKPOINT).read()] \
        == [(1, 0), (3, 2)]
    log.leader_epoch_cache.assign(5, 3)  # a new leadership: memory only, until a flush
    log.append(batch_of([b"d", b"e"]), leader_epoch=5)
    log.append(batch_of([b"f"]), leader_epoch=6)
    assert len(LeaderEpochCheckpointFile(d / LEADER_EPOCH_CHECKPOINT).read()) == 2
    crash(log)
    log = Log.open(d, CONFIG, recovery_point=flushed, clean_shutdown=False)
    try:
        assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(1, 0), (3, 2), (5, 3),
                                                                         (6, 5)]
        log.flush()  # the checkpoint now holds epoch 6 too
        log.truncate_to(5)  # a follower's truncation: epoch 6 goes, in memory only
        assert (6, 5) in [tuple(e) for e in
                          LeaderEpochCheckpointFile(d / LEADER_EPOCH_CHECKPOINT).read()]
        crash(log)
        log = Log.open(d, CONFIG, recovery_point=5, clean_shutdown=False)
        # the file's entry beyond the log end is dropped when the log opens
        assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(1, 0), (3, 2), (5, 3)]
        log.flush()  # nothing to flush in the log, but the dirty epochs are written
        assert [tuple(e) for e in LeaderEpochCheckpointFile(d / LEADER_EPOCH_CHECKPOINT).read()
                ] == [(1, 0), (3, 2), (5, 3)]
        log.append(batch_of([b"g"]), leader_epoch=7)
        stale = log.recovery_point
        crash(log)
        log = Log.open(d, CONFIG, recovery_point=stale, clean_shutdown=False)
        assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(1, 0), (3, 2), (5, 3),
                                                                         (7, 5)]
        assert log.log_end_offset == 6
    finally:
        log.close()
    assert [tuple(e) for e in LeaderEpochCheckpointFile(d / LEADER_EPOCH_CHECKPOINT).read()] \
        == [(1, 0), (3, 2), (5, 3), (7, 5)]  # closing writes them
