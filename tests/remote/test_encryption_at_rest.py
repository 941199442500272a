"""Encryption at rest in the object-store data path: nothing of the plaintext reaches the
store, every stored byte is authenticated, a missing key is named, and key rotation (new
segments on the new pair, old ones still read, rekey moving them without touching data)."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import ManifestError, RemoteStorageError
from kafka_tiers.api.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
)
from kafka_tiers.objectstore.encryption import KeyUnwrapError, UnknownKeyError
from kafka_tiers.objectstore.keys import ObjectKind
from kafka_tiers.objectstore.transforms import CorruptChunkError
from tests.remote.data_path_helpers import key_pair_files, make_rsm

TP = TopicPartition("payments", 0)
MARKER = b"CARD-4111-1111-1111-1111"
EPOCHS = b"0\n1\n0 7\n"


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("keys")
    return {key_id: key_pair_files(folder, key_id) for key_id in ("k1", "k2")}


def key_settings(keys: dict[str, tuple[Path, Path]], active: str | None, *pairs: str,
                 public_only: tuple[str, ...] = ()) -> dict[str, str]:
    settings = {"encryption.enabled": "true" if active else "false",
                "encryption.key.pairs": ",".join(pairs)}
    if active:
        settings["encryption.key.pair.id"] = active
    for key_id in pairs:
        pub, priv = keys[key_id]
        settings[f"encryption.key.pairs.{key_id}.public.key.file"] = str(pub)
        if key_id not in public_only:
            settings[f"encryption.key.pairs.{key_id}.private.key.file"] = str(priv)
    return settings


def segment(folder: Path, log_size: int = 20_000, index_size: int = 200) -> LogSegmentData:
    folder.mkdir(parents=True, exist_ok=True)
    line = b"payment " + MARKER + b" amount 12.50;"
    (folder / "log").write_bytes((line * (log_size // len(line) + 1))[:log_size])
    noise = random.Random(index_size)
    for name in ("index", "time", "txn", "snap"):  # the marker, then incompressible bytes
        (folder / name).write_bytes((MARKER + noise.randbytes(index_size))[:index_size])
    return LogSegmentData(folder / "log", folder / "index", folder / "time", folder / "txn",
                          folder / "snap", EPOCHS + MARKER)


def new_md(start: int = 0, size: int = 20_000) -> RemoteLogSegmentMetadata:
    """Metadata of a segment whose log has ``size`` bytes (``segment``'s default)."""
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(TP), start, start + 9, 1, 0, 1,
                                    size, {0: start})


def read(rsm: Any, md: RemoteLogSegmentMetadata, start: int = 0, end: int | None = None
         ) -> bytes:
    with rsm.fetch_log_segment(md, start, end) as stream:
        return stream.read()


def stored_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and ".kt-tmp" not in p.parts]


@pytest.mark.parametrize("compression", ["false", "true"])
@pytest.mark.parametrize("index_size", [200, 40_000])  # inline, then one .indexes object
def test_no_plaintext_reaches_the_store(tmp_path, keys, compression, index_size):
    root = tmp_path / "tier"
    rsm = make_rsm(root, **{"chunk.size": "1000", "compression.enabled": compression},
                   **key_settings(keys, "k1", "k1"))
    md = new_md()
    data = segment(tmp_path / "seg", index_size=index_size)
    rsm.copy_log_segment_data(md, data)
    files = stored_files(root)
    assert {f.suffix for f in files} == ({".log", ".manifest"} if index_size == 200
                                         else {".log", ".indexes", ".manifest"})
    for path in files:
        content = path.read_bytes()
        assert MARKER not in content, path
        assert base64.b64encode(MARKER)[:16] not in content, path  # nor inline in base64
        assert b"payment " not in content, path
    log = data.log_segment.read_bytes()
    assert read(rsm, md) == log and read(rsm, md, 999, 2001) == log[999:2002]
    with rsm.fetch_index(md, IndexType.TIMESTAMP) as stream:
        assert stream.read() == data.time_index.read_bytes()
    with rsm.fetch_index(md, IndexType.LEADER_EPOCH) as stream:
        assert stream.read() == EPOCHS + MARKER
    manifest = rsm.read_manifest(md)
    assert manifest.encryption is not None and manifest.encryption.key_id == "k1"
    assert manifest.object(ObjectKind.LOG).matches(log)  # checksums of the plaintext
    if compression == "false":  # encryption only: the length is known, 28 bytes per chunk
        assert manifest.chunks.stored_size == len(log) + 20 * 28
    described = rsm.describe_segment(md)
    assert described["key_id"] == "k1" and described["chunks"] == 20
    rsm.close()


def test_segments_get_their_own_data_key(tmp_path, keys):
    rsm = make_rsm(tmp_path / "tier", **key_settings(keys, "k1", "k1"))
    a, b = new_md(0), new_md(100)
    rsm.copy_log_segment_data(a, segment(tmp_path / "a"))
    rsm.copy_log_segment_data(b, segment(tmp_path / "b"))
    wrapped = {rsm.read_manifest(md).encryption.wrapped_key for md in (a, b)}
    assert len(wrapped) == 2
    ring = rsm.data_settings.key_ring
    data_keys = {ring.unwrap("k1", w) for w in wrapped}
    assert len(data_keys) == 2
    rsm.close()


def flip(path: Path, position: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[position] ^= 0x01
    path.write_bytes(bytes(raw))


def test_a_flipped_byte_in_any_stored_chunk_is_detected(tmp_path, keys):
    root = tmp_path / "tier"
    settings = {"chunk.size": "1000", **key_settings(keys, "k1", "k1")}
    writer = make_rsm(root, **settings)
    md = new_md(size=5000)
    writer.copy_log_segment_data(md, segment(tmp_path / "seg", log_size=5000))
    chunks = writer.read_manifest(md).chunks
    log_path = root / writer.object_key(md, ObjectKind.LOG)
    original = log_path.read_bytes()
    for chunk in range(chunks.count):
        first, end = chunks.stored_range(chunk)
        for position in (first, first + 12, end - 1):  # nonce, ciphertext, tag
            flip(log_path, position)
            reader = make_rsm(root, **settings)
            with pytest.raises(CorruptChunkError, match=f"chunk log/{chunk} of segment") as info:
                read(reader, md)
            assert "authentication tag" in str(info.value) and not info.value.retriable
            reader.close()
            log_path.write_bytes(original)
    # a chunk moved to another place fails too (the place is bound into the tag)
    first0, end0 = chunks.stored_range(0)
    first1, end1 = chunks.stored_range(1)
    swapped = original[first1:end1] + original[first0:end0] + original[end1:]
    log_path.write_bytes(swapped)
    reader = make_rsm(root, **settings)
    with pytest.raises(CorruptChunkError, match="log/0"):
        read(reader, md, 0, 10)
    reader.close()
    writer.close()


def manifest_doc(root: Path, rsm: Any, md: RemoteLogSegmentMetadata) -> tuple[Path, dict]:
    path = root / rsm.object_key(md, ObjectKind.MANIFEST)
    return path, json.loads(path.read_bytes())


def test_a_flipped_byte_in_an_index_is_detected(tmp_path, keys):
    root = tmp_path / "tier"
    settings = key_settings(keys, "k1", "k1")
    rsm = make_rsm(root, **settings)
    inline_md, object_md = new_md(0), new_md(100)
    rsm.copy_log_segment_data(inline_md, segment(tmp_path / "a"))
    rsm.copy_log_segment_data(object_md, segment(tmp_path / "b", index_size=40_000))
    # inline: change one stored byte of the offset index inside the manifest
    path, doc = manifest_doc(root, rsm, inline_md)
    (entry,) = [o for o in doc["objects"] if o["kind"] == "index"]
    stored = bytearray(base64.b64decode(entry["inline"]))
    stored[20] ^= 0x01
    entry["inline"] = base64.b64encode(bytes(stored)).decode()
    path.write_bytes(json.dumps(doc).encode())
    # in the object: a byte of the time index
    manifest = rsm.read_manifest(object_md)
    time_obj = manifest.object(ObjectKind.TIME_INDEX)
    flip(root / rsm.object_key(object_md, ObjectKind.INDEXES), time_obj.stored_offset + 30)
    reader = make_rsm(root, **settings)
    with pytest.raises(CorruptChunkError, match="index/index"):
        reader.fetch_index(inline_md, IndexType.OFFSET)
    with pytest.raises(CorruptChunkError, match="index/timeindex"):
        reader.fetch_index(object_md, IndexType.TIMESTAMP)
    with reader.fetch_index(object_md, IndexType.OFFSET) as stream:  # its neighbour is fine
        assert len(stream.read()) == 40_000
    reader.close()
    rsm.close()


def test_a_changed_wrapped_key_is_detected(tmp_path, keys):
    root = tmp_path / "tier"
    settings = key_settings(keys, "k1", "k1")
    rsm = make_rsm(root, **settings)
    md = new_md()
    rsm.copy_log_segment_data(md, segment(tmp_path / "seg"))
    path, doc = manifest_doc(root, rsm, md)
    wrapped = bytearray(base64.b64decode(doc["encryption"]["wrapped_key"]))
    wrapped[100] ^= 0x01
    doc["encryption"]["wrapped_key"] = base64.b64encode(bytes(wrapped)).decode()
    path.write_bytes(json.dumps(doc).encode())
    reader = make_rsm(root, **settings)
    with pytest.raises(KeyUnwrapError, match="does not decrypt with key pair 'k1'") as info:
        read(reader, md)
    assert isinstance(info.value, ManifestError) and isinstance(info.value, RemoteStorageError)
    with pytest.raises(KeyUnwrapError):
        reader.fetch_index(md, IndexType.OFFSET)
    reader.close()
    rsm.close()


def test_a_missing_key_is_reported_by_its_id(tmp_path, keys):
    root = tmp_path / "tier"
    writer = make_rsm(root, **key_settings(keys, "k1", "k1"))
    md = new_md()
    writer.copy_log_segment_data(md, segment(tmp_path / "seg"))
    writer.close()
    only_k2 = make_rsm(root, **key_settings(keys, None, "k2"))
    with pytest.raises(UnknownKeyError, match="key pair 'k1'") as info:
        read(only_k2, md)
    assert info.value.key_id == "k1" and "encryption.key.pairs.k1.private.key.file" in str(
        info.value)
    only_k2.close()
    public_only = make_rsm(root, **key_settings(keys, None, "k1", public_only=("k1",)))
    with pytest.raises(UnknownKeyError, match="k1"):
        public_only.fetch_index(md, IndexType.OFFSET)
    public_only.close()
    no_keys = make_rsm(root)
    with pytest.raises(UnknownKeyError, match="k1") as info:
        read(no_keys, md)
    assert info.value.key_id == "k1"
    assert no_keys.describe_segment(md)["key_id"] == "k1"  # the manifest alone: no key needed
    no_keys.close()


def test_key_rotation_and_rekey(tmp_path, keys):
    root = tmp_path / "tier"
    old_writer = make_rsm(root, **key_settings(keys, "k1", "k1"))
    old = new_md(0)
    old_data = segment(tmp_path / "old")
    old_writer.copy_log_segment_data(old, old_data)
    old_writer.close()
    # the new pair becomes active: new segments use it, old ones still read
    rsm = make_rsm(root, **key_settings(keys, "k2", "k1", "k2"))
    new = new_md(100)
    new_data = segment(tmp_path / "new")
    rsm.copy_log_segment_data(new, new_data)
    assert rsm.describe_segment(new)["key_id"] == "k2"
    assert rsm.describe_segment(old)["key_id"] == "k1"
    assert read(rsm, old) == old_data.log_segment.read_bytes()
    data_before = {p: p.read_bytes() for p in stored_files(root) if p.suffix != ".manifest"}
    manifest_before = rsm.read_manifest(old)
    # rekey moves the old segment to k2: manifest rewritten, data untouched
    assert rsm.rekey(old) is True
    assert rsm.rekey(old) is False and rsm.rekey(new) is False  # already on the active pair
    after = rsm.read_manifest(old)
    assert after.encryption.key_id == "k2"
    assert after.commit_sequence == manifest_before.commit_sequence
    assert after.objects == manifest_before.objects and after.chunks == manifest_before.chunks
    assert {p: p.read_bytes() for p in stored_files(root) if p.suffix != ".manifest"} == \
        data_before
    assert read(rsm, old, 10, 500) == old_data.log_segment.read_bytes()[10:501]
    rsm.close()
    # k1 is no longer needed: a reader with k2 alone reads both
    k2_only = make_rsm(root, **key_settings(keys, None, "k2"))
    assert read(k2_only, old) == old_data.log_segment.read_bytes()
    assert read(k2_only, new) == new_data.log_segment.read_bytes()
    with k2_only.fetch_index(old, IndexType.TRANSACTION) as stream:
        assert stream.read() == old_data.transaction_index.read_bytes()
    assert k2_only.list_remote_segments(TP)[0].segment_id == old.segment_id
    k2_only.close()


def test_rekey_of_a_plain_segment_is_a_no_op(tmp_path, keys):
    root = tmp_path / "tier"
    rsm = make_rsm(root)
    md = new_md()
    rsm.copy_log_segment_data(md, segment(tmp_path / "seg"))
    rsm.close()
    rsm = make_rsm(root, **key_settings(keys, "k1", "k1"))
    assert rsm.rekey(md) is False
    rsm.close()
