"""``kafka-tiers remote ls|describe|cat|verify`` (human and JSON output, one-line errors) and the
quick start's tiering section."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kafka_tiers.cli import cli
from tests.broker.helpers import (  # the fixtures are used by name
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    tiered_segments,
    value,
)


@pytest.fixture
def tier(tmp_path):
    """A remote tier holding the rolled segments of topic t, partition 0."""
    copied = tiered_segments(tmp_path, 40)
    config = tmp_path / "tier.properties"
    config.write_text(f"dir={tmp_path / 'remote'}\n")
    return {"config": str(config), "copied": copied, "root": tmp_path / "remote"}


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, ["remote", *args])
    assert result.exit_code == code, result.output
    return result.output


def base(tier, *extra: str) -> list[str]:
    return ["--storage", "local", "--config", tier["config"], "--topic", "t", *extra]


def test_ls_human_and_json(tier):
    copied = tier["copied"]
    doc = json.loads(run("ls", *base(tier, "--format", "json")))
    assert doc["version"] == 1 and doc["topic"] == "t" and doc["partition"] == 0
    assert [s["segment_id"] for s in doc["segments"]] == [m.segment_id for m in copied]
    assert [s["start_offset"] for s in doc["segments"]] == [m.start_offset for m in copied]
    assert doc["segments"][0]["size_bytes"] == copied[0].segment_size_in_bytes
    assert doc["segments"][0]["leader_epochs"] == {"0": 0}
    text = run("ls", *base(tier))
    assert copied[0].segment_id in text and f"{len(copied)} segments" in text
    empty = json.loads(run("ls", *base(tier, "--partition", "3", "--format", "json")))
    assert empty["segments"] == []


def test_describe_and_cat(tier):
    md = tier["copied"][1]
    doc = json.loads(run("describe", *base(tier, "--segment", md.segment_id,
                                           "--format", "json")))
    seg = doc["segment"]
    assert seg["start_offset"] == md.start_offset and seg["end_offset"] == md.end_offset
    assert seg["state"] == "COPY_SEGMENT_FINISHED"
    assert {o["kind"] for o in seg["objects"]} >= {"log", "index", "timeindex", "manifest"} - {
        "manifest"}
    assert all(o["checksum_algorithm"] == "crc32c" and len(o["checksum"]) == 8
               for o in seg["objects"])
    text = run("describe", *base(tier, "--segment", md.segment_id))
    assert "start_offset" in text and md.segment_id in text and "crc32c" in text
    doc = json.loads(run("cat", *base(tier, "--segment", md.segment_id, "--format", "json",
                                      "--max-records", "3")))
    assert [r["offset"] for r in doc["records"]] == [md.start_offset + i for i in range(3)]
    assert doc["records"][0]["value"]["text"] == value(md.start_offset).decode()
    assert doc["records"][0]["key"]["text"] == f"k{md.start_offset}"
    text = run("cat", *base(tier, "--segment", md.segment_id, "--from-offset",
                            str(md.start_offset + 1), "--max-records", "1"))
    assert text.startswith(f"offset={md.start_offset + 1} ")
    assert value(md.start_offset + 1).decode() in text


def test_verify_passes_then_detects_a_flipped_byte(tier):
    doc = json.loads(run("verify", *base(tier, "--format", "json")))
    assert doc["ok"] is True and all(s["ok"] for s in doc["segments"])
    assert sum(s["records"] for s in doc["segments"]) == tier["copied"][-1].end_offset + 1
    assert "all sound" in run("verify", *base(tier))
    md = tier["copied"][1]
    (log_file,) = [p for p in tier["root"].rglob(f"*{md.segment_id}.log")]
    data = bytearray(log_file.read_bytes())
    data[len(data) // 2] ^= 0x40
    log_file.write_bytes(bytes(data))
    doc = json.loads(run("verify", *base(tier, "--format", "json"), code=1))
    assert doc["ok"] is False
    broken = [s for s in doc["segments"] if not s["ok"]]
    assert [s["segment_id"] for s in broken] == [md.segment_id]
    assert any("CRC mismatch" in p for p in broken[0]["problems"])
    assert any("log content differs from the crc32c" in p for p in broken[0]["problems"])
    text = run("verify", *base(tier, "--segment", md.segment_id), code=1)
    assert "BROKEN" in text and "problems found" in text


def _manifest_file(tier, md):
    (path,) = [p for p in tier["root"].rglob(f"*{md.segment_id}.manifest")]
    return path


def as_format_2(path):
    """Rewrite a format 3 manifest of a segment stored as it is (no compression, no
    encryption: its log object is the log file) the way earlier releases wrote it: format 2,
    one object per index next to the manifest. Returns the manifest document."""
    doc = json.loads(path.read_bytes())
    if doc["format_version"] == 3:
        assert doc["compression"] is None and doc["encryption"] is None
        indexes = path.with_suffix(".indexes")
        for obj in doc["objects"]:
            if obj["kind"] != "log":
                stored = (base64.b64decode(obj["inline"]) if "inline" in obj else
                          indexes.read_bytes()[obj["stored_offset"]:
                                               obj["stored_offset"] + obj["stored_size"]])
                (path.parent / obj["name"]).write_bytes(stored)
            for field in ("stored_size", "stored_crc32c", "stored_offset", "inline"):
                obj.pop(field, None)
        for field in ("chunks", "compression", "encryption"):
            del doc[field]
        doc["format_version"] = 2
        indexes.unlink(missing_ok=True)
        path.write_text(json.dumps(doc))
    return doc


def test_verify_detects_a_wrong_crc32c_in_a_format_2_manifest(tier):
    md = tier["copied"][1]
    path = _manifest_file(tier, md)
    doc = as_format_2(path)
    assert doc["format_version"] == 2
    (log_entry,) = [o for o in doc["objects"] if o["kind"] == "log"]
    assert "sha256" not in log_entry and len(log_entry["crc32c"]) == 8
    log_entry["crc32c"] = f"{int(log_entry['crc32c'], 16) ^ 1:08x}"
    path.write_text(json.dumps(doc))
    doc = json.loads(run("verify", *base(tier, "--format", "json"), code=1))
    broken = [s for s in doc["segments"] if not s["ok"]]
    assert [s["segment_id"] for s in broken] == [md.segment_id]
    # the log itself is intact: only the manifest's checksum disagrees with it
    assert broken[0]["problems"] == ["log content differs from the crc32c in the manifest"]


def test_format_1_manifest_with_sha256_is_read_and_verified(tier):
    md = tier["copied"][1]
    path = _manifest_file(tier, md)
    doc = as_format_2(path)
    doc["format_version"] = 1
    for obj in doc["objects"]:
        (content_file,) = [p for p in tier["root"].rglob(obj["name"])]
        del obj["crc32c"]
        obj["sha256"] = hashlib.sha256(content_file.read_bytes()).hexdigest()
    path.write_text(json.dumps(doc))
    described = json.loads(run("describe", *base(tier, "--segment", md.segment_id,
                                                 "--format", "json")))
    assert all(o["checksum_algorithm"] == "sha256" and len(o["checksum"]) == 64
               for o in described["segment"]["objects"])
    doc = json.loads(run("verify", *base(tier, "--format", "json")))
    assert doc["ok"] is True and all(s["ok"] for s in doc["segments"])
    (log_file,) = [p for p in tier["root"].rglob(f"*{md.segment_id}.log")]
    data = bytearray(log_file.read_bytes())
    data[len(data) // 2] ^= 0x40
    log_file.write_bytes(bytes(data))
    doc = json.loads(run("verify", *base(tier, "--format", "json"), code=1))
    broken = [s for s in doc["segments"] if not s["ok"]]
    assert [s["segment_id"] for s in broken] == [md.segment_id]
    assert "log content differs from the sha256 in the manifest" in broken[0]["problems"]


def test_errors_are_one_line(tier, tmp_path):
    res = subprocess.run([sys.executable, "-m", "kafka_tiers", "remote", "describe",
                          *base(tier, "--segment", "nope")], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "no remote segment nope" in res.stderr
    res = subprocess.run([sys.executable, "-m", "kafka_tiers", "remote", "ls", "--storage",
                          "nope", "--set", f"dir={tmp_path}", "--topic", "t"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith("error: ")
    assert res.stderr.strip().count("\n") == 0


def test_quickstart_shows_data_going_to_and_coming_back_from_the_remote_tier():
    res = subprocess.run([sys.executable, "-m", "kafka_tiers", "quickstart", "--format", "json",
                          "--partitions", "3", "--records", "400"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["tiering"]
    assert doc["copied_segments"] >= 2 and doc["local_segments_deleted"] >= 2
    back = doc["read_back"]
    assert back["matches"] is True and back["records"] == 400
    assert back["from_remote"] > 0 and back["from_local"] > 0
    assert [s["remote"] for s in doc["segments"]][-1] is False
    assert all(s["remote"] and not s["local"] for s in doc["segments"][:-1])
    res = subprocess.run([sys.executable, "-m", "kafka_tiers", "quickstart"],
                         capture_output=True, text=True, timeout=120)
    assert "from the remote tier" in res.stdout and "all match" in res.stdout
