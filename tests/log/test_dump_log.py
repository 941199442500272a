"""``kafka-tiers dump-log`` on our files, kafka-python-built files and damaged files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.cli import main
from kafka_tiers.cli.dump_log import dump_log
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log
from kafka_tiers.log.records import ProducerRecord, build_batch

from .helpers import fill


@pytest.fixture
def segment_dir(tmp_path: Path) -> Path:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4096, index_interval_bytes=200))
    fill(log, 100)
    log.append(build_batch([ProducerRecord(b"with-header", b"key", [("h", b"v")], 5)],
                           compression="gzip"), leader_epoch=4)
    log.close()
    return tmp_path / "t-0"


def test_text_output_lists_batches_and_records(segment_dir: Path) -> None:
    first = sorted(segment_dir.glob("*.log"))[0]
    result = CliRunner().invoke(dump_log, [str(first), "--print-data"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"Dumping {first}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ")
    assert "isvalid: true" in lines[2] and "compresscodec: none" in lines[2]
    assert lines[3].startswith("| offset: 0 CreateTime: 1000 keySize: ")


def test_json_output_and_compressed_headers(segment_dir: Path) -> None:
    last = sorted(segment_dir.glob("*.log"))[-1]
    result = CliRunner().invoke(dump_log, [str(last), "--print-data", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    batch = doc["files"][0]["batches"][-1]
    assert batch["compresscodec"] == "gzip" and batch["partitionLeaderEpoch"] == 4
    assert batch["records"][0]["headerKeys"] == ["h"]
    assert batch["records"][0]["payload"] == "with-header"


def test_verify_index_finds_mismatches(segment_dir: Path) -> None:
    index = sorted(segment_dir.glob("*.index"))[0]
    ok = CliRunner().invoke(dump_log, [str(index), "--verify-index", "--format", "json"])
    doc = json.loads(ok.output)["files"][0]
    assert doc["entries"] and doc["mismatches"] == []
    data = bytearray(index.read_bytes())
    struct.pack_into(">ii", data, 8, 1, 200)  # second entry now names the wrong offset
    index.write_bytes(bytes(data))
    bad = CliRunner().invoke(dump_log, [str(index), "--verify-index"])
    assert "Mismatches in" in bad.output
    timeindex = sorted(segment_dir.glob("*.timeindex"))[0]
    out = CliRunner().invoke(dump_log, [str(timeindex), "--verify-index", "--format", "json"])
    assert json.loads(out.output)["files"][0]["mismatches"] == []


def test_damaged_log_is_reported_not_crashed_on(segment_dir: Path) -> None:
    first = sorted(segment_dir.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF
    first.write_bytes(bytes(data[:-10]))
    out = CliRunner().invoke(dump_log, [str(first), "--format", "json"])
    doc = json.loads(out.output)["files"][0]
    assert [b["isValid"] for b in doc["batches"]].count(False) == 1
    assert "invalidBytesAt" in doc


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["dump-log", str(tmp_path / "missing.log")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "no such file" in err
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(SystemExit):
        main(["dump-log", str(tmp_path / "x.txt")])
    assert "cannot dump" in capsys.readouterr().err


def test_kafka_python_built_file(tmp_path: Path) -> None:
    pytest.importorskip("kafka.record")
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=4, batch_size=1 << 20)
    for i in range(20):
        builder.append(timestamp=2_000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    builder.close()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(builder.buffer()))
    out = CliRunner().invoke(dump_log, [str(path), "--print-data", "--format", "json"])
    (batch,) = json.loads(out.output)["files"][0]["batches"]
    assert batch["compresscodec"] == "zstd" and batch["isValid"]
    assert [r["payload"] for r in batch["records"]] == [f"v{i}" for i in range(20)]
