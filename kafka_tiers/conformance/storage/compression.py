"""Compression: ``compression.enabled`` stores a segment's chunks zstd-compressed (smaller, read
back identical) and leaves them as they are when off; with ``compression.heuristic.enabled`` a
segment whose batches are already compressed by their producer is stored uncompressed."""

from __future__ import annotations

from kafka_tiers.conformance.storage.copy_fetch import copy
from kafka_tiers.conformance.storage.data_path import (
    DATA_TRANSFORMS,
    DataPath,
    DataPathSuiteBase,
    batches_log,
    check_reads,
    manifest_of,
)
from kafka_tiers.conformance.storage.harness import (
    SegmentBuilder,
    check,
    read_object,
    storage_test,
)
from kafka_tiers.objectstore.keys import ObjectKind

RULE = "compression"
HEURISTIC = "compression-heuristic"
LOG_BYTES = 60_000
CHUNK = "16384"


class CompressionTests(DataPathSuiteBase):
    """Compression on and off, and the heuristic (``data_transforms``)."""

    @storage_test(RULE, requires=(DATA_TRANSFORMS,))
    def test_compression_on_and_off(self, data_path: DataPath,
                                    segments: SegmentBuilder) -> None:
        plain = data_path.rsm({"chunk.size": CHUNK, "compression.enabled": "false"})
        packed = data_path.rsm({"chunk.size": CHUNK, "compression.enabled": "true"})
        guarded = data_path.guarded({"chunk.size": CHUNK})
        ranges = [(0, 0), (16383, 16384), (100, 50_000), (LOG_BYTES - 5, LOG_BYTES + 5)]
        for rsm, on, start in ((plain, False, 0), (packed, True, 1000)):
            segment = segments.make(start, log_bytes=batches_log(LOG_BYTES, seed=start))
            copy(rsm, segment)
            manifest = manifest_of(guarded, segment, RULE)
            log = manifest.object(ObjectKind.LOG)
            stored = read_object(rsm.object_store,
                                 rsm.object_key(segment.metadata, ObjectKind.LOG))
            size = len(segment.log)
            check(RULE, log is not None and log.size == size,
                  f"the manifest's log object is {log and log.size} bytes, not {size}")
            assert log is not None
            if on:
                check(RULE, manifest.compression == "zstd",
                      f"compression.enabled=true stored the segment with compression "
                      f"{manifest.compression!r}, not 'zstd'")
                check(RULE, len(stored) < size // 2,
                      f"compressed, JSON-like records of {size} bytes are stored in "
                      f"{len(stored)} bytes (expected less than half)")
            else:
                check(RULE, manifest.compression is None and stored == segment.log,
                      f"compression.enabled=false stored the segment with compression "
                      f"{manifest.compression!r} in {len(stored)} bytes (expected the "
                      f"{size} bytes as they are)")
            check(RULE, log.stored_size in (None, len(stored)),
                  f"the manifest says the log is stored in {log.stored_size} bytes; the "
                  f"object has {len(stored)}")
            described = guarded.describe_segment(segment.metadata)
            check(RULE, described.get("stored_size") == len(stored)
                  and described.get("original_size") == size,
                  f"describe_segment says {described.get('original_size')} bytes stored in "
                  f"{described.get('stored_size')}; the log has {size}, the object "
                  f"{len(stored)}")
            # either setting reads both kinds: the manifest says how each is stored
            check_reads(plain, segment, RULE, ranges=ranges)
            check_reads(packed, segment, RULE, ranges=ranges)
            check_reads(guarded, segment, RULE, ranges=ranges)

    @storage_test(HEURISTIC, requires=(DATA_TRANSFORMS,))
    def test_heuristic_leaves_compressed_batches_alone(self, data_path: DataPath,
                                                       segments: SegmentBuilder) -> None:
        settings = {"chunk.size": CHUNK, "compression.enabled": "true",
                    "compression.heuristic.enabled": "true"}
        rsm = data_path.rsm(settings)
        guarded = data_path.guarded(settings)
        for codec, start, want in (("gzip", 0, None), ("none", 1000, "zstd")):
            segment = segments.make(start, log_bytes=batches_log(LOG_BYTES, compression=codec,
                                                                 seed=start))
            copy(rsm, segment)
            manifest = manifest_of(guarded, segment, HEURISTIC)
            check(HEURISTIC, manifest.compression == want,
                  f"with compression.heuristic.enabled=true a segment of {codec} batches was "
                  f"stored with compression {manifest.compression!r}, expected {want!r}")
            described = guarded.describe_segment(segment.metadata)
            check(HEURISTIC, described.get("compression") == want,
                  f"describe_segment of a segment of {codec} batches says compression "
                  f"{described.get('compression')!r}, its manifest {want!r}")
            check_reads(guarded, segment, HEURISTIC, ranges=[(10, 20_000)])


__all__ = ["CompressionTests"]
