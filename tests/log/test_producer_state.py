"""Producer state snapshots (Kafka's ``.snapshot`` layout) and their life in the log."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.crc import crc32c
from kafka_tiers.log.log import Log
from kafka_tiers.log.producer_state import (
    CorruptSnapshotError,
    ProducerStateEntry,
    encode_snapshot,
    read_snapshot,
)
from kafka_tiers.log.records import (
    ControlRecordType,
    ProducerRecord,
    build_batch,
    build_end_txn_marker,
)

from .helpers import crash

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256)


def test_snapshot_layout_is_kafkas(tmp_path: Path) -> None:
    entry = ProducerStateEntry(7, 2, 41, 1000, 4, 123456, 5, 990)
    data = encode_snapshot([entry])
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c(data[6:])
    assert data[10:] == struct.pack(">qhiqiqiq", 7, 2, 41, 1000, 4, 123456, 5, 990)
    path = tmp_path / "00000000000000001001.snapshot"
    path.write_bytes(data)
    assert read_snapshot(path) == [entry]
    bad = bytearray(data)
    bad[-1] ^= 1
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        read_snapshot(path)
    path.write_bytes(data[:-3])
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


def _produce(log: Log, pid: int, seq: int, n: int = 1, txn: bool = False) -> None:
    log.append(build_batch([ProducerRecord(b"p%d-%d" % (pid, seq + i)) for i in range(n)],
                           producer_id=pid, producer_epoch=3, base_sequence=seq,
                           transactional=txn))


def test_roll_writes_snapshots_and_tiering_sees_them(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    for i in range(60):
        _produce(log, pid=10 + i % 3, seq=i, n=2)
    infos = log.inactive_segments()
    assert infos
    for info in infos:
        assert info.producer_snapshot_path == tmp_path / "t-0" / f"{info.next_offset:020d}.snapshot"
        entries = {e.producer_id: e for e in read_snapshot(info.producer_snapshot_path)}
        assert set(entries) <= {10, 11, 12}
        assert max(e.last_offset for e in entries.values()) == info.next_offset - 1
    state = log.producer_state.producers
    assert state[10].producer_epoch == 3 and state[10].offset_delta == 1
    log.close()
    # clean shutdown: a snapshot at the log end offset
    assert (tmp_path / "t-0" / f"{log.log_end_offset:020d}.snapshot").exists()


def test_state_survives_restart_and_truncation(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    for i in range(40):
        _produce(log, pid=1, seq=2 * i, n=2)
    _produce(log, pid=2, seq=0)
    end = log.log_end_offset
    log.close()
    log = Log.open(d, CONFIG, recovery_point=end, clean_shutdown=True, sanity_check_all=False)
    assert log.producer_state.producers[1].last_sequence == 79
    assert log.producer_state.producers[2].last_offset == end - 1
    log.truncate_to(50)
    assert log.log_end_offset == 50
    assert 2 not in log.producer_state.producers
    assert log.producer_state.producers[1].last_offset == 49
    assert not [p for p in d.glob("*.snapshot") if int(p.stem) > 50]
    log.close()


def test_unclean_recovery_rebuilds_txn_index_and_open_transactions(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log.open(d, CONFIG)
    _produce(log, pid=5, seq=0, n=2, txn=True)
    for i in range(30):
        _produce(log, pid=6, seq=i)
    log.append(build_end_txn_marker(ControlRecordType.ABORT, producer_id=5, producer_epoch=3))
    _produce(log, pid=7, seq=0, txn=True)  # still open at the crash
    expected = log.collect_aborted(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset) for t in expected] == [(5, 0)]
    crash(log)
    for txn in d.glob("*.txnindex"):
        txn.unlink()
    log = Log.open(d, CONFIG, recovery_point=0, clean_shutdown=False)
    try:
        assert log.collect_aborted(0, log.log_end_offset) == expected
        assert log.producer_state.producers[7].current_txn_first_offset == \
            log.log_end_offset - 1
        assert log.producer_state.producers[5].current_txn_first_offset == -1
    finally:
        log.close()
