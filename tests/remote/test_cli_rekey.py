"""``kafka-tiers remote describe|cat|verify`` on an encrypted, compressed, chunked tier, and
``kafka-tiers remote rekey`` after a key rotation: only manifests are rewritten, a second run
rekeys nothing, output never holds key material, errors are one line naming the key pair."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kafka_tiers.conformance.storage import write_key_pair
from tests.broker.helpers import (  # the fixtures are used by name
    shutdown_brokers,  # noqa: F401
    thread_baseline,  # noqa: F401
    tiered_segments,
    value,
)
from tests.cli_run import kt

CHUNK_SIZE = 512


@pytest.fixture
def tier(tmp_path: Path) -> dict:
    """A ``local`` remote tier of topic t, partition 0: segments chunked, zstd-compressed and
    encrypted with key pair k1; key pair k2 made too (not yet used)."""
    keys = tmp_path / "keys"
    keys.mkdir()
    k1, k2 = write_key_pair(keys, "k1"), write_key_pair(keys, "k2")
    data_keys = {"chunk.size": str(CHUNK_SIZE), "compression.enabled": "true",
                 "encryption.enabled": "true", "encryption.key.pair.id": "k1",
                 "encryption.key.pairs": "k1", **k1}
    copied = tiered_segments(tmp_path, 40,
                             **{f"rsm.config.{k}": v for k, v in data_keys.items()})
    assert len(copied) >= 3
    return {"copied": copied, "root": tmp_path / "remote", "k1": k1, "k2": k2,
            "dir": tmp_path}


def write_config(tier: dict, name: str, **keys: str) -> str:
    path = tier["dir"] / name
    keys = {"dir": str(tier["root"]), **keys}
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return str(path)


def run(*args: str, code: int = 0) -> str:
    """``kafka-tiers remote ARGS`` through the real entry point (error boundary included);
    stdout, or stderr when the exit status is 2 (an error line)."""
    ran = kt("remote", *args)
    assert ran.code == code, (ran.out, ran.err)
    return ran.err if code == 2 else ran.out


def base(config: str, *extra: str) -> list[str]:
    return ["--storage", "local", "--config", config, "--topic", "t", *extra]


def manifests(tier: dict) -> dict[str, dict]:
    return {p.name: json.loads(p.read_bytes()) for p in tier["root"].rglob("*.manifest")}


def data_objects(tier: dict) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in tier["root"].rglob("*")
            if p.is_file() and not p.name.endswith(".manifest")}


def reader(tier: dict, *pairs: str) -> str:
    """A plugin keys file with the private keys of ``pairs`` only (a reader's), as a broker's
    settings would say it: ``encryption.enabled=true`` without an active pair, and a disk
    chunk cache in a directory that must never be made (readers use memory)."""
    keys = {"encryption.enabled": "true", "fetch.chunk.cache.class": "disk",
            "fetch.chunk.cache.path": str(tier["dir"] / "broker-cache")}
    if pairs:
        keys["encryption.key.pairs"] = ",".join(pairs)
    for pid in pairs:
        keys.update({k: v for k, v in tier[pid].items() if k.endswith("private.key.file")})
    return write_config(tier, f"reader-{'-'.join(pairs) or 'none'}.properties", **keys)


def test_describe_shows_chunks_compression_key_id_and_cache_counters(tier: dict) -> None:
    config = reader(tier, "k1")
    md = tier["copied"][1]
    doc = json.loads(run("describe", *base(config, "--segment", md.segment_id,
                                           "--format", "json")))
    assert doc["version"] == 3
    seg = doc["segment"]
    data = seg["data"]
    assert data["format_version"] == 3 and data["chunk_size"] == CHUNK_SIZE
    assert data["original_size"] == md.segment_size_in_bytes
    assert data["chunks"] == -(-md.segment_size_in_bytes // CHUNK_SIZE) >= 2
    assert data["compression"] == "zstd" and data["stored_size"] < data["original_size"]
    assert data["ratio"] == pytest.approx(data["stored_size"] / data["original_size"],
                                          abs=1e-3)
    assert data["key_id"] == "k1" and data["encrypted"] is True
    cache = seg["cache"]
    assert {"chunk_cache", "manifest_cache", "downloads"} <= set(cache)
    assert {"hits", "misses"} <= set(cache["chunk_cache"]) and cache["downloads"] >= 0
    (log_object,) = [o for o in seg["objects"] if o["kind"] == "log"]
    assert log_object["size"] == md.segment_size_in_bytes
    assert log_object["stored_size"] == data["stored_size"]
    text = run("describe", *base(config, "--segment", md.segment_id))
    assert "format_version           3" in text
    assert f"of {CHUNK_SIZE} bytes" in text and "zstd" in text
    assert "data key wrapped with key pair k1" in text and "chunk cache" in text
    wrapped = manifests(tier)[f"{md.start_offset:020d}-{md.segment_id}.manifest"]
    assert wrapped["encryption"]["wrapped_key"] not in text + json.dumps(doc)


def test_cat_and_verify_read_the_encrypted_tier_and_name_a_missing_key(tier: dict) -> None:
    md = tier["copied"][1]
    doc = json.loads(run("verify", *base(reader(tier, "k1"), "--format", "json")))
    assert doc["ok"] and sum(s["records"] for s in doc["segments"]) == \
        tier["copied"][-1].end_offset + 1
    assert all("manifest_checksums" in s["checks"] for s in doc["segments"])
    doc = json.loads(run("cat", *base(reader(tier, "k1"), "--segment", md.segment_id,
                                      "--max-records", "2", "--format", "json")))
    assert [r["value"]["text"] for r in doc["records"]] == \
        [value(md.start_offset).decode(), value(md.start_offset + 1).decode()]
    for config in (reader(tier), reader(tier, "k2")):
        out = run("cat", *base(config, "--segment", md.segment_id), code=2)
        (line,) = out.strip().splitlines()
        assert line.startswith("error: ") and "key pair 'k1'" in line
        assert "encryption.key.pairs.k1.private.key.file" in line
    assert not (tier["dir"] / "broker-cache").exists()  # readers keep chunks in memory


def test_rekey_rewraps_manifests_only_and_is_idempotent(tier: dict) -> None:
    rotated = write_config(tier, "rotated.properties", **{
        "encryption.key.pair.id": "k2", "encryption.key.pairs": "k1,k2",
        **tier["k1"], **tier["k2"]})
    before_manifests, before_data = manifests(tier), data_objects(tier)
    segments = len(tier["copied"])

    dry = json.loads(run("rekey", *base(rotated, "--dry-run", "--format", "json")))
    assert dry["dry_run"] is True and dry["active_key_id"] == "k2"
    assert (dry["rekeyed"], dry["already_current"], dry["not_encrypted"], dry["failed"]) == \
        (segments, 0, 0, 0)
    assert {r["from_key_id"] for r in dry["segments"]} == {"k1"}
    assert manifests(tier) == before_manifests  # a dry run changes nothing

    text = run("rekey", *base(rotated))
    assert f"{segments} rekeyed" in text and "k1 -> k2" in text
    after = manifests(tier)
    assert data_objects(tier) == before_data  # segment data untouched
    assert after.keys() == before_manifests.keys()
    for name, doc in after.items():
        old = before_manifests[name]
        assert doc["encryption"]["key_id"] == "k2"
        assert doc["encryption"]["wrapped_key"] != old["encryption"]["wrapped_key"]
        assert {k: v for k, v in doc.items() if k != "encryption"} == \
            {k: v for k, v in old.items() if k != "encryption"}

    again = json.loads(run("rekey", *base(rotated, "--format", "json")))
    assert (again["rekeyed"], again["already_current"], again["failed"]) == (0, segments, 0)
    assert manifests(tier) == after
    # k1 can be retired: k2's private key alone reads everything
    doc = json.loads(run("verify", *base(reader(tier, "k2"), "--format", "json")))
    assert doc["ok"] and len(doc["segments"]) == segments
    for out in (text, json.dumps(dry), json.dumps(again)):
        assert "BEGIN" not in out
        for doc in list(before_manifests.values()) + list(after.values()):
            assert doc["encryption"]["wrapped_key"] not in out
            assert base64.b64decode(doc["encryption"]["wrapped_key"]).hex() not in out


def test_rekey_of_one_segment_and_its_failures(tier: dict) -> None:
    md = tier["copied"][0]
    # the old pair's private key is missing: that segment fails, named by key id; status 1
    only_k2 = write_config(tier, "only-k2.properties", **{
        "encryption.key.pair.id": "k2", "encryption.key.pairs": "k2", **tier["k2"]})
    doc = json.loads(run("rekey", *base(only_k2, "--partition", "0", "--format", "json"),
                         code=1))
    assert doc["failed"] == len(tier["copied"]) and doc["rekeyed"] == 0
    assert all("'k1'" in r["error"] and "\n" not in r["error"] for r in doc["segments"])
    text = run("rekey", *base(only_k2), code=1)
    assert "FAILED" in text and f"{len(tier['copied'])} failed" in text
    # one segment only
    rotated = write_config(tier, "rotated.properties", **{
        "encryption.key.pair.id": "k2", "encryption.key.pairs": "k1,k2",
        **tier["k1"], **tier["k2"]})
    doc = json.loads(run("rekey", *base(rotated, "--segment", md.segment_id,
                                        "--format", "json")))
    assert doc["rekeyed"] == 1 and [r["segment_id"] for r in doc["segments"]] == \
        [md.segment_id]
    keys = {d["segment"]["id"]: d["encryption"]["key_id"] for d in manifests(tier).values()}
    assert keys[md.segment_id] == "k2"
    assert sorted(keys.values()) == ["k1"] * (len(keys) - 1) + ["k2"]
    # no active pair: one line, status 2, nothing rewritten
    before = manifests(tier)
    out = run("rekey", *base(reader(tier, "k1")), code=2)
    (line,) = out.strip().splitlines()
    assert line.startswith("error: ") and "encryption.key.pair.id" in line
    assert manifests(tier) == before


def test_rekey_counts_segments_that_are_not_encrypted(tmp_path: Path) -> None:
    copied = tiered_segments(tmp_path, 20)
    keys = tmp_path / "keys"
    keys.mkdir()
    config = tmp_path / "plain.properties"
    settings = {"dir": str(tmp_path / "remote"), "encryption.key.pair.id": "k1",
                "encryption.key.pairs": "k1", **write_key_pair(keys, "k1")}
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    doc = json.loads(run("rekey", *base(str(config), "--format", "json")))
    assert doc["not_encrypted"] == len(copied) and doc["rekeyed"] == 0
    assert doc["partitions"] == [0]
