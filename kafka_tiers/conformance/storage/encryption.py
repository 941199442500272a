"""Encryption at rest: no stored object holds a plaintext marker put in every record and index;
a flipped byte in any stored chunk of the log, in an index (in the ``.indexes`` object or inline
in the manifest) or in the wrapped data key is detected on read (a ``RemoteStorageError``, never
other data); a data key wrapped with a key pair that is not configured is reported naming its
id; after a key rotation old segments stay readable and new ones use the new pair; ``rekey``
re-wraps a data key by rewriting the manifest only."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from kafka_tiers.api import IndexType
from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.data_path import (
    DATA_TRANSFORMS,
    DataPath,
    DataPathSuiteBase,
    batches_log,
    check_reads,
    expect_detected,
    manifest_of,
    raw_manifest,
    replace_object,
    write_manifest,
)
from kafka_tiers.conformance.storage.harness import (
    Segment,
    SegmentBuilder,
    check,
    flip_byte,
    objects_of_segment,
    read_object,
    storage_test,
    write_object,
)
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager, partition_prefix
from kafka_tiers.objectstore.keys import INDEX_KINDS, ObjectKind
from kafka_tiers.objectstore.manifest import WrappedDataKey

AT_REST = "encrypted-at-rest"
TAMPER = "tamper-detected"
UNKNOWN_KEY = "unknown-key-named"
ROTATION = "key-rotation"
REKEY = "rekey-rewraps-manifest-only"

#: readers that see every byte stored: no chunk or manifest cache
UNCACHED = {"fetch.chunk.cache.class": "none", "fetch.manifest.cache.size": "0"}


def marked_indexes(marker: bytes, large: bool = False) -> dict[IndexType, bytes]:
    """Index contents holding ``marker`` (``large``: over 64 KiB together, too much to be
    inlined in the manifest)."""
    filler = b"\x00" * (40_000 if large else 64)
    return {IndexType.OFFSET: marker * 4 + filler, IndexType.TIMESTAMP: filler + marker,
            IndexType.PRODUCER_SNAPSHOT: marker + b"snapshot" + (filler if large else b""),
            IndexType.TRANSACTION: b"txn" + marker, IndexType.LEADER_EPOCH:
            b"0\n1\n0 0\n" + marker}


def stored_objects(rsm: ObjectStoreRemoteStorageManager, segment: Segment) -> dict[str, bytes]:
    """Every stored object of the segment, read raw, by key."""
    store = rsm.object_store
    prefix = partition_prefix(rsm.key_prefix, segment.tp)
    return {key: read_object(store, key)
            for key in objects_of_segment(store, prefix, segment.metadata.segment_id)}


class EncryptionTests(DataPathSuiteBase):
    """Encryption at rest (``data_transforms``)."""

    @pytest.mark.parametrize("compressed", [False, True], ids=["aes", "zstd-aes"])
    @storage_test(AT_REST, requires=(DATA_TRANSFORMS,))
    def test_no_plaintext_at_rest(self, data_path: DataPath, segments: SegmentBuilder,
                                  compressed: bool) -> None:
        marker = f"kt-plaintext-{uuid.uuid4().hex[:12]}".encode()
        settings = {"chunk.size": "8192", "compression.enabled": str(compressed).lower(),
                    **data_path.encryption("k1", ["k1"])}
        rsm = data_path.rsm(settings)
        segment = segments.make(0, log_bytes=batches_log(30_000, marker=marker),
                                index_bytes=marked_indexes(marker))
        check(AT_REST, segment.log.count(marker) >= 100, "the suite's segment lacks its marker")
        copy(rsm, segment)
        manifest = manifest_of(rsm, segment, AT_REST)
        check(AT_REST, manifest.encryption is not None and manifest.encryption.key_id == "k1",
              f"encryption.enabled=true with key pair k1 stored the segment with encryption "
              f"{manifest.encryption and manifest.encryption.key_id!r}")
        objects = stored_objects(rsm, segment)
        check(AT_REST, any(k.endswith(".log") for k in objects),
              f"no stored log object among {sorted(objects)}")
        for key, data in objects.items():
            check(AT_REST, marker not in data,
                  f"the stored object {key} holds the plaintext marker {marker.decode()} "
                  f"{data.count(marker)} times: it is not encrypted")
        check_reads(rsm, segment, AT_REST, ranges=[(0, 100), (8191, 8192), (20_000, 29_999)])

    @pytest.mark.parametrize("compressed", [False, True], ids=["aes", "zstd-aes"])
    @storage_test(TAMPER, requires=(DATA_TRANSFORMS,))
    def test_flipped_byte_in_a_log_chunk_is_detected(self, data_path: DataPath,
                                                     segments: SegmentBuilder,
                                                     compressed: bool) -> None:
        settings = {"chunk.size": "4096", "compression.enabled": str(compressed).lower(),
                    **data_path.encryption("k1", ["k1"])}
        rsm = data_path.rsm(settings)
        segment = segments.make(0, log_bytes=batches_log(18_000)[:18_000])
        copy(rsm, segment)
        chunks = manifest_of(rsm, segment, TAMPER).chunks
        assert chunks is not None
        store = rsm.object_store
        key = rsm.object_key(segment.metadata, ObjectKind.LOG)
        original = read_object(store, key)
        md = segment.metadata
        for i in range(chunks.count):
            lo, hi = chunks.stored_range(i)
            position = (lo, (lo + hi) // 2, hi - 1)[i % 3]  # nonce, body, tag in turn
            write_object(store, key, flip_byte(original, position))
            first, end = chunks.original_range(i)
            what = f"flipping stored byte {position} (chunk {i} of {chunks.count})"
            # a new reader: no download of the untouched object may still be in flight
            reader = data_path.rsm(settings | UNCACHED)
            try:
                expect_detected(TAMPER, what, reader.fetch_log_segment, md, first, end - 1)
                expect_detected(TAMPER, what, reader.fetch_log_segment, md, 0)
            finally:
                write_object(store, key, original)
        check_reads(data_path.rsm(settings | UNCACHED), segment, TAMPER)

    @pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
    @storage_test(TAMPER, requires=(DATA_TRANSFORMS,))
    def test_flipped_byte_in_an_index_is_detected(self, data_path: DataPath,
                                                  segments: SegmentBuilder,
                                                  large: bool) -> None:
        settings = data_path.encryption("k1", ["k1"])
        rsm = data_path.rsm(settings)
        segment = segments.make(0, log_size=5000,
                                index_bytes=marked_indexes(b"index", large=large))
        copy(rsm, segment)
        manifest = raw_manifest(rsm, segment)
        in_object = [t for t in segment.indexes
                     if (o := manifest.object(INDEX_KINDS[t])) and o.inline is None]
        if large:
            check(TAMPER, in_object, "indexes of over 64 KiB together are all inline in the "
                  "manifest; expected them in the segment's .indexes object")
        store = rsm.object_store
        indexes_key = rsm.object_key(segment.metadata, ObjectKind.INDEXES)
        for index_type in segment.indexes:
            kind = INDEX_KINDS[index_type]
            obj = manifest.object(kind)
            check(TAMPER, obj is not None, f"the manifest lists no {kind.value} object")
            assert obj is not None
            reader = data_path.rsm(settings | UNCACHED)
            if obj.inline is not None:
                what = f"flipping a byte of the inline {index_type.name} index in the manifest"
                tampered = replace_object(manifest, kind,
                                          inline=flip_byte(obj.inline, len(obj.inline) // 2))
                write_manifest(rsm, segment, tampered)
                try:
                    expect_detected(TAMPER, what, reader.fetch_index, segment.metadata,
                                    index_type)
                finally:
                    write_manifest(rsm, segment, manifest)
            else:
                check(TAMPER, obj.stored_offset is not None and obj.stored_size,
                      f"the {kind.value} index is neither inline nor placed in the "
                      ".indexes object")
                assert obj.stored_offset is not None and obj.stored_size is not None
                original = read_object(store, indexes_key)
                position = obj.stored_offset + obj.stored_size // 2
                what = (f"flipping byte {position} of the .indexes object (in the "
                        f"{index_type.name} index)")
                write_object(store, indexes_key, flip_byte(original, position))
                try:
                    expect_detected(TAMPER, what, reader.fetch_index, segment.metadata,
                                    index_type)
                finally:
                    write_object(store, indexes_key, original)
        check_reads(data_path.rsm(settings | UNCACHED), segment, TAMPER)

    @storage_test(TAMPER, requires=(DATA_TRANSFORMS,))
    def test_flipped_byte_in_the_wrapped_key_is_detected(self, data_path: DataPath,
                                                         segments: SegmentBuilder) -> None:
        settings = data_path.encryption("k1", ["k1"])
        rsm = data_path.rsm(settings)
        segment = segments.make(0, log_size=5000)
        copy(rsm, segment)
        manifest = raw_manifest(rsm, segment)
        check(TAMPER, manifest.encryption is not None, "the encrypted segment's manifest has "
              "no wrapped data key")
        assert manifest.encryption is not None
        wrapped = manifest.encryption.wrapped_key
        for position in (0, len(wrapped) // 2, len(wrapped) - 1):
            tampered = replace(manifest, encryption=WrappedDataKey(
                manifest.encryption.key_id, flip_byte(wrapped, position)))
            write_manifest(rsm, segment, tampered)
            reader = data_path.rsm(settings | UNCACHED)
            what = f"flipping byte {position} of the wrapped data key"
            expect_detected(TAMPER, what, reader.fetch_log_segment, segment.metadata, 0)
            expect_detected(TAMPER, what, reader.fetch_index, segment.metadata,
                            IndexType.OFFSET)
        write_manifest(rsm, segment, manifest)
        check_reads(data_path.rsm(settings | UNCACHED), segment, TAMPER)

    @storage_test(UNKNOWN_KEY, requires=(DATA_TRANSFORMS,))
    def test_unknown_key_is_reported_by_id(self, data_path: DataPath,
                                           segments: SegmentBuilder) -> None:
        writer = data_path.rsm(data_path.encryption("k1", ["k1"]))
        segment = segments.make(0, log_size=5000)
        copy(writer, segment)
        md = segment.metadata
        for label, reader in (
                ("a reader with only key pair k2", data_path.rsm(
                    data_path.encryption("k2", ["k2"]))),
                ("a reader with only key pair k2, through the core's wrapper",
                 data_path.guarded(data_path.encryption("k2", ["k2"]))),
                ("a reader without encryption settings", data_path.rsm())):
            for what, fn, args in (("fetch_log_segment", reader.fetch_log_segment, (md, 0)),
                                   ("fetch_index", reader.fetch_index,
                                    (md, IndexType.OFFSET))):
                err = expect_detected(UNKNOWN_KEY, f"copying with key pair k1, {what} of "
                                      f"{label}", fn, *args)
                check(UNKNOWN_KEY, "k1" in str(err),
                      f"{what} of a segment encrypted with key pair k1, by {label}, raised "
                      f"{type(err).__name__} without naming the key id k1: {err}")

    @storage_test(ROTATION, requires=(DATA_TRANSFORMS,))
    def test_rotation_keeps_old_segments_readable(self, data_path: DataPath,
                                                  segments: SegmentBuilder) -> None:
        before = data_path.rsm(data_path.encryption("k1", ["k1"]))
        old = segments.make(0, log_size=9000)
        copy(before, old)
        rotated = data_path.rsm(data_path.encryption("k2", ["k1", "k2"]))
        new = segments.make(1000, log_size=9000)
        copy(rotated, new)
        for segment, key_id in ((old, "k1"), (new, "k2")):
            manifest = manifest_of(rotated, segment, ROTATION)
            got = manifest.encryption.key_id if manifest.encryption else None
            check(ROTATION, got == key_id,
                  f"segment at {segment.metadata.start_offset} is wrapped with {got!r}, "
                  f"expected {key_id!r} (the active key pair when it was copied)")
        for reader in (rotated, data_path.guarded(data_path.encryption(None, ["k1", "k2"]))):
            check_reads(reader, old, ROTATION, ranges=[(4000, 4100)])
            check_reads(reader, new, ROTATION, ranges=[(4000, 4100)])

    @storage_test(REKEY, requires=(DATA_TRANSFORMS,))
    def test_rekey_rewrites_only_the_manifest(self, data_path: DataPath,
                                              segments: SegmentBuilder) -> None:
        old_writer = data_path.rsm(data_path.encryption("k1", ["k1"]))
        segment = segments.make(0, log_size=20_000)
        copy(old_writer, segment)
        rsm = data_path.rsm()
        before = stored_objects(rsm, segment)
        rotated = data_path.encryption("k2", ["k1", "k2"])
        guarded = data_path.guarded(rotated)
        done = guarded.rekey(segment.metadata)
        check(REKEY, done is True, f"rekey of a segment wrapped with k1, k2 active, returned "
              f"{done!r}, not True")
        after = stored_objects(rsm, segment)
        check(REKEY, sorted(before) == sorted(after),
              f"rekey changed the segment's objects: {sorted(before)} -> {sorted(after)}")
        for key, data in before.items():
            if key.endswith("." + ObjectKind.MANIFEST.value):
                check(REKEY, after[key] != data, "rekey left the manifest as it was")
            else:
                check(REKEY, after[key] == data,
                      f"rekey rewrote the data object {key} (only the manifest may change)")
        manifest = raw_manifest(rsm, segment)
        check(REKEY, manifest.encryption is not None and manifest.encryption.key_id == "k2",
              f"after rekey the manifest names key pair "
              f"{manifest.encryption and manifest.encryption.key_id!r}, not 'k2'")
        check_reads(data_path.rsm(data_path.encryption(None, ["k2"])), segment, REKEY,
                    ranges=[(5000, 15_000)])
        check_reads(guarded, segment, REKEY)
        again = guarded.rekey(segment.metadata)
        check(REKEY, again is False,
              f"rekey of a segment already wrapped with the active pair returned {again!r}, "
              "not False")


__all__ = ["EncryptionTests", "marked_indexes", "stored_objects"]
