"""``remote cat`` checks what ``remote verify`` checks (one function, manifest checksum
included), and leader epochs that go down along a log are flagged by ``remote verify``,
``remote cat``, ``dump-log`` and every reader of :func:`verified_batches`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_tiers.cli import main
from kafka_tiers.log.errors import CorruptRecordError
from kafka_tiers.log.records import (
    ProducerRecord,
    build_batch,
    epoch_violations,
    set_partition_leader_epoch,
    verified_batches,
)
from tests.broker.helpers import (  # the fixtures are used by name
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
)
from tests.remote.test_cli_cat_verifies import _batches, _cat, _log_file, tier  # noqa: F401


def _verify(tier, md, capsys) -> tuple[int, dict]:  # noqa: F811
    with pytest.raises(SystemExit) as exit_info:
        main(["remote", "verify", "--storage", "local", "--config", tier["config"], "--topic",
              "t", "--segment", md.segment_id, "--format", "json"])
    out = capsys.readouterr()
    assert exit_info.value.code in (0, 1), out.err
    return exit_info.value.code or 0, json.loads(out.out)


def test_cat_refuses_what_verify_calls_broken_manifest_checksum(tier, capsys):  # noqa: F811
    md = tier["copied"][1]
    path = _log_file(tier, md)
    data = bytearray(path.read_bytes())
    last = _batches(bytes(data))[-1]
    set_partition_leader_epoch(data, last.position, 9)  # outside the CRC, epochs still rise
    path.write_bytes(bytes(data))
    code, doc = _verify(tier, md, capsys)
    assert code == 1 and any("manifest" in p for p in doc["segments"][0]["problems"])
    for extra in ((), ("--format", "json"), ("--max-records", "1")):
        code, out, err = _cat(tier, md, *extra, capsys=capsys)
        assert code == 2 and out == ""
        (line,) = err.strip().splitlines()
        assert line.startswith("error: ") and "manifest" in line and md.segment_id in line


def test_verify_and_cat_flag_a_leader_epoch_going_down(tier, capsys):  # noqa: F811
    md = tier["copied"][1]
    path = _log_file(tier, md)
    n = md.end_offset - md.start_offset + 1
    assert n >= 2
    size, pad = len(path.read_bytes()), 0
    for _ in range(5):  # the store checks the object's length: pad the last value to it
        data = (build_batch([ProducerRecord(b"x")] * (n - 1), base_offset=md.start_offset,
                            partition_leader_epoch=7)
                + build_batch([ProducerRecord(b"y" * pad)], base_offset=md.end_offset,
                              partition_leader_epoch=0))  # valid CRCs, offsets in order
        pad += size - len(data)
    assert len(data) == size
    path.write_bytes(data)
    batches = _batches(data)
    code, doc = _verify(tier, md, capsys)
    problems = doc["segments"][0]["problems"]
    assert code == 1
    assert any(f"byte {batches[1].position}" in p and "partitionLeaderEpoch 0 is below 7" in p
               for p in problems)
    code, out, err = _cat(tier, md, capsys=capsys)
    assert code == 2 and out == "" and err.startswith("error: ")


def _two_batches(first_epoch: int, second_epoch: int) -> bytes:
    return (build_batch([ProducerRecord(b"a")], base_offset=0,
                        partition_leader_epoch=first_epoch)
            + build_batch([ProducerRecord(b"b")], base_offset=1,
                          partition_leader_epoch=second_epoch))


def test_epoch_violations_names_each_drop_once():
    assert epoch_violations([0, 0, 3, 3, 5]) == {}
    assert epoch_violations([-1, 2, -1, 2]) == {}
    assert set(epoch_violations([7, 0, 0, 8, 1])) == {1, 4}


def test_verified_batches_refuses_a_decreasing_epoch():
    assert len(verified_batches(_two_batches(0, 7))) == 2
    with pytest.raises(CorruptRecordError, match="partitionLeaderEpoch 0 is below 7"):
        verified_batches(_two_batches(7, 0))


def test_dump_log_flags_a_decreasing_epoch(tmp_path: Path, capsys):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(_two_batches(7, 0))
    with pytest.raises(SystemExit):
        main(["dump-log", str(log), "--format", "json"])
    (result,) = json.loads(capsys.readouterr().out)["files"]
    first, second = result["batches"]
    assert first["isValid"] and not second["isValid"]
    assert "below 7" in second["epochProblem"]
    with pytest.raises(SystemExit):
        main(["dump-log", str(log)])
    assert "| invalid leader epoch: partitionLeaderEpoch 0 is below 7" in capsys.readouterr().out
