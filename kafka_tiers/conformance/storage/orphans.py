"""Garbage collection: objects no manifest references, and superseded copies."""

from __future__ import annotations

import io

from kafka_tiers.api import (
    RemoteLogSegmentId,
    RemoteStorageManager,
)
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import check_contents, copy
from kafka_tiers.conformance.storage.harness import (
    SegmentBuilder,
    check,
    objects_of_segment,
    storage_test,
)
from kafka_tiers.conformance.storage.not_found import check_absent
from kafka_tiers.objectstore import (
    ObjectKind,
    ObjectStoreRemoteStorageManager,
    partition_prefix,
    segment_key,
)

RULE = "orphans-collected"
HOUR_MS = 3_600_000


class OrphanTests(StorageSuiteBase):
    """collect_orphans."""

    @storage_test(RULE, requires=("orphan_collection",))
    def test_unreferenced_objects_are_collected_when_old(
            self, rsm: RemoteStorageManager, segments: SegmentBuilder) -> None:
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        kept = segments.make(0)
        copy(rsm, kept)
        store = rsm.object_store
        stray_id = RemoteLogSegmentId.generate(kept.tp)
        stray = sorted(segment_key(rsm.key_prefix, stray_id, 500, kind)
                       for kind in (ObjectKind.LOG, ObjectKind.OFFSET_INDEX))
        for key in stray:
            store.put(key, io.BytesIO(b"garbage"), 7)
        prefix = partition_prefix(rsm.key_prefix, kept.tp)
        foreign = prefix + "notes.txt"
        store.put(foreign, io.BytesIO(b"not ours"), 8)
        check(RULE, rsm.collect_orphans(HOUR_MS, kept.tp) == [],
              "collect_orphans deleted garbage younger than the age it was given")
        check(RULE, rsm.collect_orphans(0, kept.tp, dry_run=True) == stray,
              "collect_orphans(dry_run=True) did not list exactly the garbage")
        check(RULE, objects_of_segment(store, prefix, stray_id.id) == stray,
              "a dry run deleted something")
        check(RULE, rsm.collect_orphans(0) == stray,
              "collect_orphans(0) did not delete exactly the garbage")
        check(RULE, objects_of_segment(store, prefix, stray_id.id) == [],
              "garbage remains after collect_orphans")
        check(RULE, [i.key for i in store.list(foreign)] == [foreign],
              "collect_orphans deleted an object outside the segment layout")
        check_contents(rsm, kept, RULE)

    @storage_test(RULE, requires=("orphan_collection",))
    def test_superseded_copies_are_collected(self, rsm: RemoteStorageManager,
                                             segments: SegmentBuilder) -> None:
        assert isinstance(rsm, ObjectStoreRemoteStorageManager)
        first = segments.make(0)
        copy(rsm, first)
        retry = segments.retry(first, new_id=True)
        copy(rsm, retry)
        collected = rsm.collect_orphans(0, first.tp)
        prefix = partition_prefix(rsm.key_prefix, first.tp)
        check(RULE, collected and all(first.metadata.segment_id in k for k in collected),
              f"collect_orphans(0) removed {collected}, expected the superseded copy")
        check(RULE, objects_of_segment(rsm.object_store, prefix, first.metadata.segment_id)
              == [], "the superseded copy was not fully collected")
        check_absent(rsm, first, RULE)
        check_contents(rsm, retry, RULE)
        check(RULE, [m.segment_id for m in rsm.list_remote_segments(first.tp)]
              == [retry.metadata.segment_id], "the newest copy is no longer listed")


__all__ = ["OrphanTests"]
