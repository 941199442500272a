"""What someone who can write to the bucket can do to a segment, and what a broker does about
it: an encrypted segment moved to another topic, partition or start offset, a chunk list
truncated, or a layout field of its manifest edited fails the GCM tags (every chunk's and
index's associated data binds the segment's identity and layout); a manifest downgraded to
"not encrypted" is refused by a broker with ``encryption.enabled=true`` unless
``encryption.plaintext.segments.readable=true``; and a hostile manifest cannot make a read
allocate more than a sane bound (chunk size, chunk count, manifest bytes, zstd frames)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import crc32c
import pytest
import zstandard

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import ManifestError, RemoteStorageError
from kafka_tiers.api.storage import (
    IndexType,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
)
from kafka_tiers.objectstore.chunk_index import MAX_CHUNK_SIZE, MAX_CHUNKS, ChunkIndex
from kafka_tiers.objectstore.data_settings import DataSettings
from kafka_tiers.objectstore.keys import ObjectKind
from kafka_tiers.objectstore.manifest import MAX_MANIFEST_BYTES, SegmentManifest
from kafka_tiers.objectstore.transforms import (
    ZSTD,
    CorruptChunkError,
    SegmentTransform,
    log_label,
    segment_context,
)
from kafka_tiers.remote.storage_config import reader_data_config
from tests.remote import test_encryption_at_rest as _at_rest
from tests.remote.test_encryption_at_rest import key_settings, make_rsm, read, segment

keys = _at_rest.keys  # the module-scoped key pair fixture (k1, k2)

TP = TopicPartition("payments", 0)
SIZE = 5_000
PLAINTEXT_KEY = "encryption.plaintext.segments.readable"


def new_md(start: int = 0, tp: TopicPartition = TP, size: int = SIZE,
           sid: str | None = None) -> RemoteLogSegmentMetadata:
    segment_id = (RemoteLogSegmentId(tp, sid) if sid is not None
                  else RemoteLogSegmentId.generate(tp))
    return RemoteLogSegmentMetadata(segment_id, start, start + 9, 1, 0, 1, size, {0: start})


def copied(tmp_path: Path, keys: Any, **extra: str) -> tuple[Any, RemoteLogSegmentMetadata]:
    """An encrypted, compressed segment of SIZE bytes in chunks of 1000."""
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true",
                                          **key_settings(keys, "k1", "k1"), **extra})
    md = new_md()
    rsm.copy_log_segment_data(md, segment(tmp_path / "seg", log_size=SIZE))
    return rsm, md


def tier_path(tmp_path: Path, rsm: Any, md: RemoteLogSegmentMetadata, kind: ObjectKind) -> Path:
    return tmp_path / "tier" / rsm.object_key(md, kind)


def move(tmp_path: Path, rsm: Any, md: RemoteLogSegmentMetadata,
         to: RemoteLogSegmentMetadata) -> None:
    """Copy every stored object of ``md`` to ``to``'s keys, its manifest edited to describe
    ``to`` (what a bucket writer can do)."""
    for kind in ObjectKind:
        src = tier_path(tmp_path, rsm, md, kind)
        if not src.exists():
            continue
        dst = tier_path(tmp_path, rsm, to, kind)
        dst.parent.mkdir(parents=True, exist_ok=True)
        data = src.read_bytes()
        if kind is ObjectKind.MANIFEST:
            doc = json.loads(data)
            doc["segment"].update(topic=to.topic_partition.topic,
                                  partition=to.topic_partition.partition,
                                  start_offset=to.start_offset, end_offset=to.end_offset,
                                  segment_leader_epochs={"0": to.start_offset})
            data = json.dumps(doc).encode()
        dst.write_bytes(data)


def fresh(tmp_path: Path, keys: Any, **extra: str) -> Any:
    return make_rsm(tmp_path / "tier", **key_settings(keys, "k1", "k1"), **extra)


def edit_manifest(tmp_path: Path, rsm: Any, md: RemoteLogSegmentMetadata, edit: Any) -> None:
    path = tier_path(tmp_path, rsm, md, ObjectKind.MANIFEST)
    doc = json.loads(path.read_bytes())
    edit(doc)
    path.write_bytes(json.dumps(doc).encode())


def log_of(doc: dict[str, Any]) -> dict[str, Any]:
    return next(o for o in doc["objects"] if o["kind"] == "log")


# -- identity: a moved or replayed segment fails its tags ---------------------------------------

@pytest.mark.parametrize("where", ["topic", "partition", "start_offset"])
def test_a_segment_moved_to_another_place_fails_its_tags(tmp_path, keys, where) -> None:
    rsm, md = copied(tmp_path, keys)
    sid = md.segment_id
    to = {"topic": new_md(tp=TopicPartition("public", 0), sid=sid),
          "partition": new_md(tp=TopicPartition("payments", 1), sid=sid),
          "start_offset": new_md(start=100, sid=sid)}[where]
    move(tmp_path, rsm, md, to)
    broker = fresh(tmp_path, keys)
    assert broker.list_remote_segments(to.topic_partition)[0].segment_id == sid  # listed
    with pytest.raises(CorruptChunkError, match="fails its authentication tag"):
        read(broker, to)
    with pytest.raises(CorruptChunkError, match="fails its authentication tag"):
        broker.fetch_index(to, IndexType.OFFSET)
    assert read(broker, md) == (tmp_path / "seg" / "log").read_bytes()  # the original reads


@pytest.mark.parametrize("field", ["chunk_size", "compression", "truncated", "size"])
def test_an_edited_layout_of_an_encrypted_segment_fails_its_tags(tmp_path, keys,
                                                                  field) -> None:
    rsm, md = copied(tmp_path, keys)

    def edit(doc: dict[str, Any]) -> None:
        chunks = doc["chunks"]
        if field == "chunk_size":  # the same stored chunks, read as chunks of 1250
            sizes = chunks["stored_sizes"]
            chunks["chunk_size"] = 1250
            chunks["stored_sizes"] = [*sizes[:3], sizes[3] + sizes[4]]
        elif field == "compression":
            doc["compression"] = None
        else:  # the last two chunks dropped (and, for "size", the segment's size with them)
            chunks["stored_sizes"] = chunks["stored_sizes"][:3]
            chunks["original_size"] = 3000
            log_of(doc).update(size=3000, stored_size=sum(chunks["stored_sizes"]))
            if field == "size":
                doc["segment"]["segment_size_in_bytes"] = 3000

    edit_manifest(tmp_path, rsm, md, edit)
    broker = fresh(tmp_path, keys)
    target = new_md(size=3000, sid=md.segment_id) if field == "size" else md
    if field == "truncated":  # the chunk index no longer holds the segment's size
        with pytest.raises(ManifestError, match="segment_size_in_bytes 5000"):
            read(broker, target)
        return
    with pytest.raises(CorruptChunkError, match="authentication tag"):
        read(broker, target)
    with pytest.raises(CorruptChunkError, match="authentication tag"):
        broker.fetch_index(target, IndexType.OFFSET)


def test_the_associated_data_binds_every_identity_and_layout_field() -> None:
    base = dict(topic="t", partition=0, start_offset=0, segment_id="s", chunk_size=1000,
                original_size=5000, compression=ZSTD)
    key = bytes(32)
    stored = SegmentTransform("s", ZSTD, key, context=segment_context(**base)).encode(
        log_label(0), b"x" * 1000)
    changes = dict(topic="u", partition=1, start_offset=1, segment_id="r", chunk_size=999,
                   original_size=4000, compression=None)
    for name, value in changes.items():
        other = SegmentTransform("s", ZSTD, key,
                                 context=segment_context(**{**base, name: value}))
        with pytest.raises(CorruptChunkError, match="authentication tag"):
            other.decode(log_label(0), stored, 1000)
    same = SegmentTransform("s", ZSTD, key, context=segment_context(**base))
    assert same.decode(log_label(0), stored, 1000) == b"x" * 1000
    with pytest.raises(CorruptChunkError, match="authentication tag"):
        same.decode(log_label(1), stored, 1000)
    with pytest.raises(ValueError, match="segment context"):
        SegmentTransform("s", None, key)


# -- downgrade: a manifest saying "not encrypted" ---------------------------------------------

def downgrade(tmp_path: Path, rsm: Any, md: RemoteLogSegmentMetadata) -> bytes:
    """Replace the segment's log by forged plaintext and its manifest by one saying "not
    encrypted"; the forged bytes."""
    forged = (b"FORGED-RECORDS!" * 400)[:SIZE]
    tier_path(tmp_path, rsm, md, ObjectKind.LOG).write_bytes(forged)
    crc = f"{crc32c.crc32c(forged):08x}"

    def edit(doc: dict[str, Any]) -> None:
        doc["encryption"] = None
        doc["compression"] = None
        doc["chunks"] = {"chunk_size": 1000, "original_size": SIZE, "stored_sizes": None}
        log_of(doc).update(size=SIZE, stored_size=SIZE, crc32c=crc, stored_crc32c=crc)

    edit_manifest(tmp_path, rsm, md, edit)
    return forged


def test_an_encrypting_broker_refuses_a_segment_that_is_not_encrypted(tmp_path, keys) -> None:
    rsm, md = copied(tmp_path, keys)
    forged = downgrade(tmp_path, rsm, md)
    with pytest.raises(ManifestError) as err:
        read(fresh(tmp_path, keys), md)
    message = str(err.value)
    assert str(md.remote_log_segment_id) in message and PLAINTEXT_KEY in message
    assert "\n" not in message
    with pytest.raises(ManifestError, match=PLAINTEXT_KEY):
        fresh(tmp_path, keys).fetch_index(md, IndexType.OFFSET)
    # the operator's opt-in (a tier holding segments from before encryption was enabled)
    assert read(fresh(tmp_path, keys, **{PLAINTEXT_KEY: "true"}), md) == forged
    # a broker that does not encrypt reads it as before
    plain = make_rsm(tmp_path / "tier", **key_settings(keys, None, "k1"))
    assert read(plain, md) == forged


def test_a_reader_given_the_brokers_settings_applies_its_policy(tmp_path, keys) -> None:
    rsm, md = copied(tmp_path, keys)
    downgrade(tmp_path, rsm, md)
    broker_settings = {"dir": str(tmp_path / "tier"), "key.prefix": "kt",
                       **key_settings(keys, "k1", "k1")}
    reader = make_rsm(tmp_path / "tier", **reader_data_config(broker_settings))
    with pytest.raises(ManifestError, match=PLAINTEXT_KEY):
        read(reader, md)
    # a reader with the private keys only (no active pair) reads whatever a manifest says
    only_private = {k: v for k, v in broker_settings.items()
                    if k != "encryption.key.pair.id"}
    assert reader_data_config(only_private)["encryption.enabled"] == "false"


def test_the_plaintext_key_defaults_to_false() -> None:
    assert DataSettings.from_config({}).plaintext_segments_readable is False
    assert not DataSettings.from_config({}).refuse_plaintext
    assert DataSettings.from_config({PLAINTEXT_KEY: "true"}).plaintext_segments_readable


# -- hostile manifests: bounded memory ------------------------------------------------------------

def test_chunk_size_and_chunk_count_are_bounded() -> None:
    assert MAX_CHUNK_SIZE == 64 << 20 and MAX_CHUNKS == 1 << 20
    with pytest.raises(ValueError, match=r"is not 1\.\.67108864"):
        ChunkIndex(256 << 20, 256 << 20, None)
    with pytest.raises(ValueError, match=r"raise chunk\.size"):
        ChunkIndex(1, MAX_CHUNKS + 1, None)
    with pytest.raises(ValueError, match="more than"):
        ChunkIndex.from_json({"chunk_size": 1, "original_size": MAX_CHUNKS + 1,
                              "stored_sizes": [1] * (MAX_CHUNKS + 1)})
    assert ChunkIndex(1, MAX_CHUNKS, None).count == MAX_CHUNKS


def test_a_copy_with_too_many_chunks_is_refused_naming_chunk_size(tmp_path) -> None:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1", "compression.enabled": "true"})
    folder = tmp_path / "seg"
    data = segment(folder, log_size=10)
    with open(folder / "log", "r+b") as fh:  # sparse: no disk used
        fh.truncate(MAX_CHUNKS + 1)
    with pytest.raises(RemoteStorageError, match=r"chunk\.size=1 ") as err:
        rsm.copy_log_segment_data(new_md(size=MAX_CHUNKS + 1), data)
    assert not err.value.retriable and "at least 2" in str(err.value)
    assert [p for p in (tmp_path / "tier").rglob("*") if p.is_file()] == []


def test_a_zstd_frame_declaring_more_than_its_chunk_is_refused_before_decoding() -> None:
    context = segment_context("t", 0, 0, "s", 1000, 1000, ZSTD)
    transform = SegmentTransform("s", ZSTD, context=context)
    bomb = zstandard.ZstdCompressor(write_content_size=True).compress(bytes(32 << 20))
    with pytest.raises(CorruptChunkError, match=r"zstd frame of 33554432 bytes.*not the 1000"):
        transform.decode(log_label(0), bomb, 1000)
    unsized = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = unsized.compress(b"y" * 1000) + unsized.flush()
    with pytest.raises(CorruptChunkError, match="-1"):
        transform.decode(log_label(0), frame, 1000)
    good = SegmentTransform("s", ZSTD, context=context).encode(log_label(0), b"z" * 1000)
    assert transform.decode(log_label(0), good, 1000) == b"z" * 1000


def test_a_manifest_larger_than_the_bound_is_refused_unparsed(tmp_path) -> None:
    rsm = make_rsm(tmp_path / "tier")
    md = new_md(size=100)
    rsm.copy_log_segment_data(md, segment(tmp_path / "seg", log_size=100))
    path = tier_path(tmp_path, rsm, md, ObjectKind.MANIFEST)
    raw = path.read_bytes()
    path.write_bytes(raw[:-1] + b" " * (MAX_MANIFEST_BYTES + 1 - len(raw)) + b"}")
    reads: list[int] = []
    original_get = rsm.object_store.get

    def get(key: str, byte_range: Any = None) -> Any:
        stream = original_get(key, byte_range)
        real_read = stream.read

        def counted(n: int = -1) -> bytes:
            assert n != -1 and n is not None, "a manifest is read with a bound"
            data = real_read(n)
            reads.append(len(data))
            return data
        stream.read = counted
        return stream

    rsm.object_store.get = get
    with pytest.raises(ManifestError, match=f"more than the {MAX_MANIFEST_BYTES}"):
        rsm.read_manifest(md)
    assert sum(reads) == MAX_MANIFEST_BYTES + 1
    with pytest.raises(ManifestError, match="more than the"):
        SegmentManifest.from_json(b" " * (MAX_MANIFEST_BYTES + 1))


def test_a_chunk_index_must_hold_the_segments_size(tmp_path) -> None:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true"})
    md = new_md()
    rsm.copy_log_segment_data(md, segment(tmp_path / "seg", log_size=SIZE))
    raw = tier_path(tmp_path, rsm, md, ObjectKind.MANIFEST).read_bytes()
    doc = json.loads(raw)
    doc["segment"]["segment_size_in_bytes"] = SIZE + 1
    with pytest.raises(ManifestError, match="holds 5000 bytes"):
        SegmentManifest.from_json(json.dumps(doc).encode())
    assert SegmentManifest.from_json(raw).chunks.original_size == SIZE  # type: ignore[union-attr]



def test_a_copy_whose_log_is_not_the_segments_size_is_refused(tmp_path) -> None:
    """Else its manifest would be unreadable (its chunk index must hold the size)."""
    rsm = make_rsm(tmp_path / "tier", **{"compression.enabled": "true"})
    with pytest.raises(RemoteStorageError, match="segment_size_in_bytes 5001") as err:
        rsm.copy_log_segment_data(new_md(size=SIZE + 1), segment(tmp_path / "seg",
                                                                  log_size=SIZE))
    assert not err.value.retriable
    assert [p for p in (tmp_path / "tier").rglob("*") if p.is_file()] == []
