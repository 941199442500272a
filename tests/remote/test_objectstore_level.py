"""The object-store level: key layout, manifest format and versions, the commit protocol, and
the multi-part upload hook."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import crc32c
import pytest

from kafka_tiers.api import (
    ByteRange,
    IndexType,
    LogSegmentData,
    ManifestError,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    TopicPartition,
)
from kafka_tiers.conformance.storage.harness import TrackingObjectStore
from kafka_tiers.objectstore import (
    MANIFEST_FORMAT_VERSION,
    ManifestObject,
    ObjectKind,
    SegmentManifest,
    new_hasher,
    next_commit_sequence,
    parse_segment_key,
    partition_prefix,
    segment_key,
    validate_key,
)
from kafka_tiers.remote.local import LocalRemoteStorageManager
from tests.remote.backends import MemoryMultipartStore

TP = TopicPartition("orders.v1_eu-west", 12)


def metadata(start: int = 42, sid: str = "AbC_dEf-123") -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId(TP, sid), start, start + 99, 1234, 2,
                                    99, 5000, {3: start, 4: start + 50},
                                    custom_metadata=b"\x00\xffcustom",
                                    state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED)


def test_key_layout():
    sid = RemoteLogSegmentId(TP, "AbC_dEf-123")
    key = segment_key("tier/prod", sid, 42, ObjectKind.LOG)
    assert key == "tier/prod/orders.v1_eu-west-12/00000000000000000042-AbC_dEf-123.log"
    assert segment_key("", sid, 0, ObjectKind.MANIFEST) == (
        "orders.v1_eu-west-12/00000000000000000000-AbC_dEf-123.manifest")
    parsed = parse_segment_key(key)
    assert parsed is not None
    assert (parsed.partition_dir, parsed.start_offset, parsed.segment_id, parsed.kind) == (
        "tier/prod/orders.v1_eu-west-12/", 42, "AbC_dEf-123", ObjectKind.LOG)
    assert parse_segment_key(segment_key("p", sid, 2**63 - 1, ObjectKind.LEADER_EPOCH))
    for other in ("p/t-1/notes.txt", "p/t-1/42-x.log", "00000000000000000042-x.log",
                  "p/t-1/00000000000000000042-x.unknown"):
        assert parse_segment_key(other) is None
    assert partition_prefix("", TopicPartition("t", 1)) == "t-1/"


def test_illegal_topics_and_keys_are_refused():
    with pytest.raises(RemoteStorageError, match="cannot be stored"):
        partition_prefix("p", TopicPartition("a/b", 0))
    with pytest.raises(RemoteStorageError):
        partition_prefix("p", TopicPartition("..", 0))
    for bad in ("a/../b", "/a", "a//b", ""):
        with pytest.raises(RemoteStorageError):
            validate_key(bad)


def test_segment_ids_are_key_safe():
    ids = {RemoteLogSegmentId.generate(TP).id for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    for bad in ("", "-abc", "a/b", "a.b", "x" * 65):
        with pytest.raises(ValueError):
            RemoteLogSegmentId(TP, bad)


def test_manifest_round_trip():
    objects = (ManifestObject(ObjectKind.LOG, "x.log", 5000, "crc32c", "0badcafe"),)
    manifest = SegmentManifest(metadata(), objects, next_commit_sequence())
    raw = manifest.to_json()
    doc = json.loads(raw)
    # without a chunk index a manifest is format 2 (as written before format 3, and as read)
    assert doc["format_version"] == 2 and MANIFEST_FORMAT_VERSION == 3
    assert doc["objects"] == [{"kind": "log", "name": "x.log", "size": 5000,
                               "crc32c": "0badcafe"}]
    assert doc["segment"]["segment_leader_epochs"] == {"3": 42, "4": 92}
    assert SegmentManifest.from_json(raw) == manifest
    assert next_commit_sequence() > manifest.commit_sequence


def test_format_1_manifest_with_sha256_is_read_and_matches():
    content = b"L" * 1000
    digest = hashlib.sha256(content).hexdigest()
    doc = json.loads(SegmentManifest(metadata(), (), 7).to_json())
    doc["format_version"] = 1
    doc["objects"] = [{"kind": "log", "name": "x.log", "size": 1000, "sha256": digest}]
    raw = json.dumps(doc).encode()
    manifest = SegmentManifest.from_json(raw)
    (obj,) = manifest.objects
    assert (obj.checksum_algorithm, obj.checksum) == ("sha256", digest)
    assert obj.matches(content)
    assert not obj.matches(b"L" * 999 + b"M") and not obj.matches(content[:-1])
    again = json.loads(manifest.to_json())  # re-written as it was read
    assert again["format_version"] == 1 and again["objects"] == doc["objects"]
    doc["objects"][0] = {"kind": "log", "name": "x.log", "size": 1000, "crc32c": "00000000"}
    with pytest.raises(ManifestError, match="malformed"):  # a format 1 object has a sha256
        SegmentManifest.from_json(json.dumps(doc).encode())


def test_crc32c_checksums():
    content = b"123456789"
    obj = ManifestObject(ObjectKind.LOG, "x.log", 9, "crc32c", "e3069283")  # the check value
    assert obj.matches(content) and not obj.matches(b"123456788")
    hasher = new_hasher()
    for i in range(0, 9, 2):
        hasher.update(memoryview(content)[i:i + 2])
    assert hasher.hexdigest() == "e3069283"
    assert new_hasher("sha256").hexdigest() == hashlib.sha256(b"").hexdigest()
    with pytest.raises(ValueError):
        new_hasher("md5")
    with pytest.raises(ValueError):
        ManifestObject(ObjectKind.LOG, "x.log", 9, "md5", "00")


@pytest.mark.parametrize("crc", ["E3069283", "e306928", "e30692830", "", "xyzxyzxy"])
def test_malformed_crc32c_is_an_error(crc):
    doc = json.loads(SegmentManifest(metadata(), (), 1).to_json())
    doc["objects"] = [{"kind": "log", "name": "x.log", "size": 9, "crc32c": crc}]
    with pytest.raises(ManifestError, match="malformed"):
        SegmentManifest.from_json(json.dumps(doc).encode())


@pytest.mark.parametrize("version", [4, 0, "1", "2", "3", None, True, [2]])
def test_unknown_manifest_version_is_an_error(version):
    doc = json.loads(SegmentManifest(metadata(), (), 1).to_json())
    doc["format_version"] = version
    with pytest.raises(ManifestError, match="format_version") as info:
        SegmentManifest.from_json(json.dumps(doc).encode(), "k.manifest")
    assert info.value.format_version == version
    assert info.value.key == "k.manifest"


@pytest.mark.parametrize("mutate", [
    lambda d: d.pop("segment"),
    lambda d: d["segment"].update(start_offset=-1),
    lambda d: d["segment"].update(custom_metadata="***"),
    lambda d: d["objects"].append({"kind": "bogus", "name": "x", "size": 1,
                                   "crc32c": "00000000"}),
    lambda d: d["objects"].append({"kind": "log", "name": "x", "size": 1, "sha256": "00"}),
    lambda d: d.update(commit_sequence="soon"),
])
def test_malformed_manifests_are_errors(mutate):
    doc = json.loads(SegmentManifest(metadata(), (), 1).to_json())
    mutate(doc)
    with pytest.raises(ManifestError, match="malformed"):
        SegmentManifest.from_json(json.dumps(doc).encode())
    with pytest.raises(ManifestError, match="not valid JSON"):
        SegmentManifest.from_json(b"{nope")


def make_files(tmp_path: Path, log: bytes = b"L" * 1000) -> LogSegmentData:
    for name, content in (("log", log), ("index", b"i" * 16), ("time", b"t" * 24),
                          ("snap", b"s" * 8), ("txn", b"x" * 34)):
        (tmp_path / name).write_bytes(content)
    return LogSegmentData(tmp_path / "log", tmp_path / "index", tmp_path / "time",
                          tmp_path / "txn", tmp_path / "snap", b"0\n1\n0 42\n")


@pytest.fixture
def rsm(tmp_path):
    instance = LocalRemoteStorageManager()
    instance.configure({"dir": str(tmp_path / "tier"), "key.prefix": "kt"})
    holder = []
    instance.wrap_object_store(lambda s: holder.append(TrackingObjectStore(s)) or holder[0])
    instance.tracking = holder[0]
    yield instance
    instance.close()


def fresh(start: int = 42) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TP), start, start + 9, 1, 0, 1,
                                    1000, {0: start})


def test_commit_protocol_order(rsm, tmp_path):
    md = fresh()
    custom = rsm.copy_log_segment_data(md, make_files(tmp_path))
    puts = rsm.tracking.puts
    assert puts[-1].endswith(".manifest") and sum(p.endswith(".manifest") for p in puts) == 1
    # format 3: small indexes are inline in the manifest (no object of their own)
    assert {p.rpartition(".")[2] for p in puts} == {"log", "manifest"}
    assert rsm.tracking.deletes[0].endswith(".manifest")  # an earlier attempt is hidden first
    assert json.loads(custom) == {"v": 1, "objects": 6, "bytes": 1000 + 16 + 24 + 8 + 34 + 9}
    manifest = rsm.read_manifest(md)
    assert manifest.metadata.custom_metadata == custom
    log_object = manifest.object(ObjectKind.LOG)
    assert log_object.checksum_algorithm == "crc32c"
    assert log_object.checksum == f"{crc32c.crc32c(b'L' * 1000):08x}"
    assert log_object.matches(b"L" * 1000) and not log_object.matches(b"L" * 999 + b"M")
    rsm.tracking.deletes.clear()
    rsm.delete_log_segment_data(md)
    assert rsm.tracking.deletes[0].endswith(".manifest")
    # every kind: the six objects, .indexes, manifest; then the manifest once more (one a
    # concurrent rekey may have rewritten after the first delete)
    assert len(rsm.tracking.deletes) == 9 and rsm.tracking.deletes[-1] == rsm.tracking.deletes[0]


def test_data_without_manifest_is_invisible(rsm, tmp_path):
    md = fresh()
    rsm.copy_log_segment_data(md, make_files(tmp_path))
    rsm.object_store.delete_many([segment_key("kt", md.remote_log_segment_id, 42,
                                              ObjectKind.MANIFEST)])
    assert rsm.list_remote_segments(TP) == []
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(md, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(md, IndexType.OFFSET)


def test_a_newer_manifest_format_in_the_tier_is_reported(rsm, tmp_path):
    md = fresh()
    rsm.copy_log_segment_data(md, make_files(tmp_path))
    key = segment_key("kt", md.remote_log_segment_id, 42, ObjectKind.MANIFEST)
    with rsm.object_store.get(key) as stream:
        doc = json.loads(stream.read())
    doc["format_version"] = 4
    raw = json.dumps(doc).encode()
    rsm.object_store.put(key, io.BytesIO(raw), len(raw))
    with pytest.raises(ManifestError, match="format_version 4"):
        rsm.list_remote_segments(TP)
    with pytest.raises(ManifestError):
        rsm.fetch_log_segment(md, 0)


def test_truncated_object_is_an_error_not_short_data(rsm, tmp_path):
    md = fresh()
    rsm.copy_log_segment_data(md, make_files(tmp_path))
    key = segment_key("kt", md.remote_log_segment_id, 42, ObjectKind.LOG)
    rsm.object_store.put(key, io.BytesIO(b"short"), 5)
    with rsm.fetch_log_segment(md, 0) as stream, pytest.raises(RemoteStorageError,
                                                                 match="ended 995 bytes early"):
        stream.read()


def test_multipart_put_splits_and_aborts():
    store = MemoryMultipartStore(part_size=10)
    assert store.put("small", io.BytesIO(b"x" * 10)) == 10
    assert store.calls == ["put_object"]
    store.calls.clear()
    assert store.put("big", io.BytesIO(bytes(range(25)))) == 25
    assert store.calls == ["create", "part1", "part2", "part3", "complete"]
    with store.get("big", ByteRange(8, 12)) as stream:
        assert stream.read() == bytes(range(8, 13))

    class Failing(io.RawIOBase):
        def __init__(self):
            self.sent = 0

        def readable(self):
            return True

        def readinto(self, b):
            if self.sent >= 25:
                raise ConnectionResetError("lost")
            n = min(len(b), 5)
            b[:n] = b"z" * n
            self.sent += n
            return n

    store.calls.clear()
    with pytest.raises(ConnectionResetError):
        store.put("broken", io.BufferedReader(Failing()))
    assert store.calls == ["create", "part1", "part2", "abort"]
    assert "broken" not in store.objects and store.uploads == {}


def test_metadata_validation():
    with pytest.raises(ValueError, match="end_offset"):
        RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TP), 10, 9, 0, 0, 0, 0, {0: 10})
    with pytest.raises(ValueError, match="at least one epoch"):
        RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TP), 10, 19, 0, 0, 0, 0, {})
    with pytest.raises(ValueError, match="custom_metadata"):
        RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TP), 0, 0, 0, 0, 0, 0, {0: 0},
                                 custom_metadata="text")  # type: ignore[arg-type]
    md = fresh()
    assert md.with_custom_metadata(b"x").custom_metadata == b"x"
    assert md.with_state(RemoteLogSegmentState.DELETE_SEGMENT_STARTED).state.name == (
        "DELETE_SEGMENT_STARTED")
    assert md.topic_partition == TP and md.segment_id == md.remote_log_segment_id.id
