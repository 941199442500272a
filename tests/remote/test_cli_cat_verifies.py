"""``kafka-tiers remote cat`` verifies every batch (CRC, magic, offsets) before it prints a
record: a corrupt segment prints nothing, one ``error:`` line, exit status 2."""

from __future__ import annotations

import json
import struct

import pytest

from kafka_tiers.cli import main
from kafka_tiers.log.records import RecordBatch
from tests.broker.helpers import (  # the fixtures are used by name
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    tiered_segments,
)


@pytest.fixture
def tier(tmp_path):
    """A remote tier holding the rolled segments of topic t, partition 0."""
    copied = tiered_segments(tmp_path, 40)
    config = tmp_path / "tier.properties"
    config.write_text(f"dir={tmp_path / 'remote'}\n")
    return {"config": str(config), "copied": copied, "root": tmp_path / "remote"}


def _cat(tier, md, *extra: str, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["remote", "cat", "--storage", "local", "--config", tier["config"], "--topic", "t",
              "--segment", md.segment_id, *extra])
    out = capsys.readouterr()
    return exit_info.value.code or 0, out.out, out.err


def _log_file(tier, md):
    (path,) = [p for p in tier["root"].rglob(f"*{md.segment_id}.log")]
    return path


def _batches(data: bytes) -> list[RecordBatch]:
    out, pos = [], 0
    while pos < len(data):
        out.append(RecordBatch(data, pos))
        pos += out[-1].size
    return out


def test_cat_says_what_it_verified(tier, capsys):
    md = tier["copied"][1]
    code, out, err = _cat(tier, md, "--max-records", "2", capsys=capsys)
    assert code == 0 and out.startswith(f"offset={md.start_offset} ")
    assert "verified" in err and "CRC-32C" in err and "offsets" in err
    code, out, _ = _cat(tier, md, "--format", "json", capsys=capsys)
    doc = json.loads(out)
    assert doc["verified"]["batches"] >= 1
    assert set(doc["verified"]["checks"]) == {"crc32c", "magic", "offsets", "leader_epochs",
                                              "size", "indexes", "manifest_checksums"}


def test_cat_refuses_a_batch_failing_its_crc(tier, capsys):
    md = tier["copied"][1]
    path = _log_file(tier, md)
    data = bytearray(path.read_bytes())
    last = _batches(bytes(data))[-1]
    data[last.position + last.size - 1] ^= 0x01  # inside the CRC's range, last batch
    path.write_bytes(bytes(data))
    for extra in ((), ("--max-records", "1"), ("--format", "json")):
        code, out, err = _cat(tier, md, *extra, capsys=capsys)
        assert code == 2 and out == ""
        (line,) = err.strip().splitlines()
        assert line.startswith("error: ") and "CRC mismatch" in line
        assert md.segment_id in line and f"byte {last.position}" in line


def test_cat_refuses_a_damaged_base_offset(tier, capsys):
    md = tier["copied"][1]
    path = _log_file(tier, md)
    data = bytearray(path.read_bytes())
    first = _batches(bytes(data))[0]
    for shift in (4, -4):  # a flipped bit of the baseOffset, outside the CRC: up or down
        struct.pack_into(">q", data, first.position, first.base_offset + shift)
        path.write_bytes(bytes(data))
        code, out, err = _cat(tier, md, capsys=capsys)
        assert code == 2 and out == ""
        (line,) = err.strip().splitlines()
        assert line.startswith("error: ") and f"baseOffset {first.base_offset + shift}" in line
