"""The object-store data path's format 3: chunked logs, zstd compression and its heuristic,
indexes inline or in one object, ranged chunk reads through the chunk cache, prefetch, format 2
segments still read, describe_segment and cache_stats."""

from __future__ import annotations

import io
import json
import os

import pytest

from kafka_tiers.api.errors import RemoteStorageError
from kafka_tiers.api.objectstore import ByteRange
from kafka_tiers.api.storage import (
    IndexType,
    RemoteLogSegmentState,
    StorageCapability,
)
from kafka_tiers.objectstore import manager as manager_module
from kafka_tiers.objectstore.keys import ObjectKind
from kafka_tiers.objectstore.manifest import (
    CRC32C,
    ManifestObject,
    SegmentManifest,
    new_hasher,
    next_commit_sequence,
)
from kafka_tiers.objectstore.transforms import CorruptChunkError
from tests.remote.data_path_helpers import (
    EPOCHS,
    INDEX_FILES,
    TP,
    counting,
    log_bytes,
    make_rsm,
    new_md,
    read,
    segment_files,
    stored_segment,
    wait_for,
)


@pytest.mark.parametrize("chunk_size", [1, 7, 4 << 20])
@pytest.mark.parametrize("compression", ["false", "true"])
def test_ranges_across_chunk_boundaries_equal_the_plaintext(tmp_path, chunk_size, compression):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": str(chunk_size),
                                         "compression.enabled": compression})
    log = log_bytes(301)
    md = new_md(size=len(log))
    rsm.copy_log_segment_data(md, segment_files(tmp_path / "seg", log))
    for start, end in [(0, None), (0, 0), (5, 6), (6, 7), (6, 14), (13, 200), (299, None),
                       (300, 300), (100, 10_000), (1, 299)]:
        want = log[start:] if end is None else log[start:end + 1]
        assert read(rsm, md, start, end) == want, (start, end)
    with rsm.fetch_log_segment(md, 3) as stream:  # small reads across chunks
        assert b"".join(iter(lambda: stream.read(5), b"")) == log[3:]
    for index_type, name in INDEX_FILES.items():
        with rsm.fetch_index(md, index_type) as stream:
            assert stream.read() == (tmp_path / "seg" / name).read_bytes()
    with rsm.fetch_index(md, IndexType.LEADER_EPOCH) as stream:
        assert stream.read() == EPOCHS
    rsm.close()


def test_manifest_is_format_3_and_objects_match_the_plaintext(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "100", "compression.enabled": "true"})
    log = log_bytes(1050)
    md = new_md(size=len(log))
    rsm.copy_log_segment_data(md, segment_files(tmp_path / "seg", log))
    raw = (tmp_path / "tier" / rsm.object_key(md, ObjectKind.MANIFEST)).read_bytes()
    doc = json.loads(raw)
    assert doc["format_version"] == 3 and doc["compression"] == "zstd"
    assert doc["encryption"] is None
    assert doc["chunks"]["chunk_size"] == 100 and len(doc["chunks"]["stored_sizes"]) == 11
    manifest = rsm.read_manifest(md)
    log_object = manifest.object(ObjectKind.LOG)
    assert log_object.matches(log) and log_object.size == 1050
    stored = (tmp_path / "tier" / rsm.object_key(md, ObjectKind.LOG)).read_bytes()
    assert len(stored) == log_object.stored_size == manifest.chunks.stored_size < 1050
    assert log_object.stored_matches(stored)
    for index_type, name in INDEX_FILES.items():
        obj = manifest.object(manager_module.INDEX_KINDS[index_type])
        assert obj.inline is not None and obj.stored_offset is None
        assert obj.matches((tmp_path / "seg" / name).read_bytes())
    # the small indexes live in the manifest: no object of their own
    names = sorted(p.name.rpartition(".")[2] for p in (tmp_path / "tier").rglob("*")
                   if p.is_file())
    assert names == ["log", "manifest"]
    assert json.loads(rsm.copy_log_segment_data(new_md(500, len(log)),
                                                segment_files(tmp_path / "s2", log)))["v"] == 1
    described = rsm.describe_segment(md)
    assert described == {"format_version": 3, "chunk_size": 100, "chunks": 11,
                         "original_size": 1050, "stored_size": len(stored),
                         "ratio": round(len(stored) / 1050, 4), "compression": "zstd",
                         "key_id": None, "indexes": "inline"}
    assert StorageCapability.DATA_TRANSFORMS in type(rsm).CAPABILITIES
    rsm.close()


def test_plain_segment_is_stored_byte_identical(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "64"})
    store = counting(rsm)
    log = log_bytes(1000)
    md = new_md(size=len(log))
    rsm.copy_log_segment_data(md, segment_files(tmp_path / "seg", log))
    assert (tmp_path / "tier" / rsm.object_key(md, ObjectKind.LOG)).read_bytes() == log
    assert rsm.read_manifest(md).chunks.stored_sizes is None
    assert dict(store.puts)[rsm.object_key(md, ObjectKind.LOG)] == 1000
    rsm.close()


def test_compression_heuristic_skips_a_segment_whose_first_batch_is_compressed(tmp_path):
    settings = {"compression.enabled": "true", "compression.heuristic.enabled": "true"}
    rsm = make_rsm(tmp_path / "tier", **settings)
    store = counting(rsm)
    compressed, plain = new_md(0, 5000), new_md(1000, 5000)
    log_c = log_bytes(5000, compressed_batch=True)
    log_p = log_bytes(5000)
    rsm.copy_log_segment_data(compressed, segment_files(tmp_path / "a", log_c))
    rsm.copy_log_segment_data(plain, segment_files(tmp_path / "b", log_p))
    assert rsm.read_manifest(compressed).compression is None
    assert rsm.read_manifest(plain).compression == "zstd"
    assert rsm.describe_segment(plain)["ratio"] < 0.5
    lengths = dict(store.puts)
    assert lengths[rsm.object_key(compressed, ObjectKind.LOG)] == 5000  # known: identity
    assert lengths[rsm.object_key(plain, ObjectKind.LOG)] is None  # unknown: compressing
    assert read(rsm, compressed, 0) == log_c and read(rsm, plain, 17, 4000) == log_p[17:4001]
    rsm.close()
    off = make_rsm(tmp_path / "tier2", **{"compression.enabled": "true"})
    md = new_md(size=len(log_c))
    off.copy_log_segment_data(md, segment_files(tmp_path / "c", log_c))
    assert off.read_manifest(md).compression == "zstd"  # heuristic off: compressed anyway
    off.close()


def test_a_fetch_reads_only_the_chunks_of_its_range(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true",
                                         "fetch.chunk.cache.class": "none"})
    store, md, log = stored_segment(rsm, tmp_path, 50_000)
    chunks = rsm.read_manifest(md).chunks
    assert read(rsm, md, 20_500, 21_499) == log[20_500:21_500]  # chunks 20 and 21
    ranges = sorted(store.log_gets(), key=lambda r: r.first)  # downloaded in parallel
    assert ranges == [ByteRange(chunks.stored_range(20)[0], chunks.stored_range(20)[1] - 1),
                      ByteRange(chunks.stored_range(21)[0], chunks.stored_range(21)[1] - 1)]
    rsm.close()


def test_plain_segment_partial_chunk_is_read_exactly(tmp_path):
    rsm = make_rsm(tmp_path / "tier")  # 4 MiB chunks: the whole log is one chunk
    store, md, log = stored_segment(rsm, tmp_path, 300_000)
    assert read(rsm, md, 150_000, 150_999) == log[150_000:151_000]
    assert store.log_gets() == [ByteRange(150_000, 150_999)]  # not the 4 MiB chunk
    rsm.close()


def test_chunks_are_cached_and_deleted_with_the_segment(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true"})
    store, md, log = stored_segment(rsm, tmp_path, 10_000)
    assert read(rsm, md, 0) == log
    assert len(store.log_gets()) == 10
    assert read(rsm, md, 2500, 7000) == log[2500:7001]
    assert len(store.log_gets()) == 10  # from the cache
    stats = rsm.cache_stats()
    assert stats["chunk_cache"]["entries"] == 10 and stats["downloads"] == 10
    assert stats["manifest_cache"]["hits"] >= 1
    rsm.delete_log_segment_data(md)
    assert rsm.cache_stats()["chunk_cache"]["entries"] == 0
    with pytest.raises(RemoteStorageError):
        read(rsm, md, 0)
    rsm.close()


def test_prefetch_loads_chunks_ahead(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000",
                                         "fetch.chunk.cache.prefetch.max.size": "3000"})
    store = counting(rsm)
    log = log_bytes(10_000)
    md = new_md(size=len(log))
    rsm.copy_log_segment_data(md, segment_files(tmp_path / "seg", log))
    rsm.prefetch(md, 5000, 2000)
    assert wait_for(lambda: rsm.cache_stats()["chunk_cache"]["entries"] == 2)
    store.gets.clear()
    assert read(rsm, md, 5000, 6999) == log[5000:7000]
    assert store.log_gets() == []  # served by the prefetched chunks
    rsm.close()
    # sequential reads: the second read starts where the first stopped and prefetches
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000",
                                         "fetch.chunk.cache.prefetch.max.size": "3000"})
    store = counting(rsm)
    assert read(rsm, md, 0, 999) == log[:1000]
    assert read(rsm, md, 1000, 1999) == log[1000:2000]
    # the sequential read opens a read-ahead stream: chunk 1 and the 3000 bytes past it
    # (chunks 2..4) come from one ranged read, besides chunk 0 the first read loaded
    assert wait_for(lambda: rsm.cache_stats()["chunk_cache"]["entries"] == 5)
    assert rsm.cache_stats()["downloads"] == 5
    assert len(store.log_gets()) == 2
    rsm.close()


def test_large_indexes_go_to_one_indexes_object(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"compression.enabled": "false"})
    store = counting(rsm)
    md = new_md(size=1000)
    data = segment_files(tmp_path / "seg", log_bytes(1000), index_size=40_000)
    rsm.copy_log_segment_data(md, data)
    manifest = rsm.read_manifest(md)
    offsets = sorted(o.stored_offset for o in manifest.objects if o.kind is not ObjectKind.LOG)
    assert offsets == [0, 40_000, 80_000, 120_000, 120_000 + len(EPOCHS)]
    key = rsm.object_key(md, ObjectKind.INDEXES)
    assert (tmp_path / "tier" / key).stat().st_size == 160_000 + len(EPOCHS)
    assert rsm.describe_segment(md)["indexes"] == "object"
    store.gets.clear()
    with rsm.fetch_index(md, IndexType.TIMESTAMP) as stream:
        assert stream.read() == (tmp_path / "seg" / "time").read_bytes()
    (got,) = [g for g in store.gets if not g[0].endswith(".manifest")]
    assert got[0] == key and got[1] is not None and got[1].size == 40_000
    # a changed byte in the indexes object is detected (stored crc32c)
    path = tmp_path / "tier" / key
    raw = bytearray(path.read_bytes())
    raw[45_000] ^= 0x01
    path.write_bytes(bytes(raw))
    fresh = make_rsm(tmp_path / "tier")
    with pytest.raises(CorruptChunkError, match="index/timeindex"):
        fresh.fetch_index(md, IndexType.TIMESTAMP)
    with rsm.fetch_index(md, IndexType.TIMESTAMP) as stream:  # cached before the change
        assert len(stream.read()) == 40_000
    rsm.delete_log_segment_data(md)
    assert not path.exists()
    fresh.close()
    rsm.close()


def test_orphaned_indexes_object_is_collected(tmp_path):
    rsm = make_rsm(tmp_path / "tier")
    md = new_md(size=100)
    rsm.copy_log_segment_data(md, segment_files(tmp_path / "seg", log_bytes(100),
                                                index_size=40_000))
    manifest_key = rsm.object_key(md, ObjectKind.MANIFEST)
    rsm.object_store.delete_many([manifest_key])
    collected = rsm.collect_orphans(0, TP)
    assert collected == sorted([rsm.object_key(md, ObjectKind.LOG),
                                rsm.object_key(md, ObjectKind.INDEXES)])
    rsm.close()


def test_format_2_segments_written_before_still_read(tmp_path):
    """A segment stored as format 2 wrote it: every object as it is, crc32c manifest."""
    root = tmp_path / "tier"
    rsm = make_rsm(root, **{"chunk.size": "7", "compression.enabled": "true"})
    md = new_md(size=500)
    log = log_bytes(500)
    contents = {ObjectKind.LOG: log, ObjectKind.OFFSET_INDEX: b"o" * 16,
                ObjectKind.TIME_INDEX: b"t" * 24, ObjectKind.PRODUCER_SNAPSHOT: b"s" * 8,
                ObjectKind.TRANSACTION_INDEX: b"x" * 34, ObjectKind.LEADER_EPOCH: EPOCHS}
    objects = []
    for kind, content in contents.items():
        key = rsm.object_key(md, kind)
        rsm.object_store.put(key, io.BytesIO(content), len(content))
        hasher = new_hasher(CRC32C)
        hasher.update(content)
        objects.append(ManifestObject(kind, key.rpartition("/")[2], len(content), CRC32C,
                                      hasher.hexdigest()))
    final = md.with_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    raw = SegmentManifest(final, tuple(objects), next_commit_sequence()).to_json()
    assert json.loads(raw)["format_version"] == 2 and b'"chunks"' not in raw
    rsm.object_store.put(rsm.object_key(md, ObjectKind.MANIFEST), io.BytesIO(raw), len(raw))
    assert rsm.list_remote_segments(TP) == [final]
    assert read(rsm, md, 0) == log and read(rsm, md, 6, 22) == log[6:23]
    with rsm.fetch_index(md, IndexType.TRANSACTION) as stream:
        assert stream.read() == b"x" * 34
    assert rsm.describe_segment(md)["format_version"] == 2
    assert rsm.describe_segment(md)["indexes"] == "objects"
    rsm.delete_log_segment_data(md)
    assert [p for p in root.rglob("*") if p.is_file() and ".kt-tmp" not in p.parts] == []
    rsm.close()


def test_a_corrupted_compressed_chunk_is_an_error_naming_it(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": "1000", "compression.enabled": "true"})
    md = new_md(size=5000)
    rsm.copy_log_segment_data(md, segment_files(tmp_path / "seg", log_bytes(5000)))
    chunks = rsm.read_manifest(md).chunks
    path = tmp_path / "tier" / rsm.object_key(md, ObjectKind.LOG)
    raw = bytearray(path.read_bytes())
    raw[chunks.stored_range(3)[0] + 8] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert read(rsm, md, 0, 2999)  # chunks before it are fine
    with pytest.raises(CorruptChunkError, match="log/3"):
        read(rsm, md, 2500, 3500)
    rsm.close()


def test_copy_of_an_unreadable_log_leaves_nothing(tmp_path):
    rsm = make_rsm(tmp_path / "tier", **{"compression.enabled": "true"})
    md = new_md(size=100)
    data = segment_files(tmp_path / "seg", log_bytes(100))
    os.unlink(data.log_segment)
    with pytest.raises(RemoteStorageError, match="cannot read local file") as info:
        rsm.copy_log_segment_data(md, data)
    assert not info.value.retriable
    assert [p for p in (tmp_path / "tier").rglob("*") if p.is_file()
            and ".kt-tmp" not in p.parts] == []
    rsm.close()
