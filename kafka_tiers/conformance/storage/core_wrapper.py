"""The plugin behind the core's wrapper (kafka_tiers.remote.guarded), as the broker uses it:
results pass its validation and the plugin's errors keep their types."""

from __future__ import annotations

from kafka_tiers.api import (
    IndexType,
    InvalidRangeError,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.copy_fetch import check_contents
from kafka_tiers.conformance.storage.harness import (
    SegmentBuilder,
    check,
    expect_raises,
    storage_test,
)

RULE = "core-wrapper"


class CoreWrapperTests(StorageSuiteBase):
    """Through the core's wrapper."""

    @storage_test(RULE)
    def test_results_pass_the_core_checks(self, guarded_rsm: RemoteStorageManager,
                                          segments: SegmentBuilder) -> None:
        made = [segments.make(s, log_size=500) for s in (300, 0, 200, 100)]
        for segment in made:
            # the wrapper refuses custom metadata that is not bytes or over 128 bytes
            guarded_rsm.copy_log_segment_data(segment.metadata, segment.data)
        retry = segments.retry(made[0], new_id=True)
        guarded_rsm.copy_log_segment_data(retry.metadata, retry.data)
        # the wrapper refuses an unsorted listing or two segments of one start offset
        listed = guarded_rsm.list_remote_segments(made[0].tp)
        check(RULE, [m.start_offset for m in listed] == [0, 100, 200, 300],
              f"listed {[m.start_offset for m in listed]}")
        guarded_rsm.list_remote_segments(made[0].tp, 150)
        for segment in (*made[1:], retry):
            check_contents(guarded_rsm, segment, RULE)

    @storage_test(RULE)
    def test_errors_keep_their_types(self, guarded_rsm: RemoteStorageManager,
                                     segments: SegmentBuilder) -> None:
        segment = segments.make(0, with_transaction_index=False)
        missing = segments.make(1000)
        guarded_rsm.copy_log_segment_data(segment.metadata, segment.data)
        for fn, args, expected in (
                (guarded_rsm.fetch_log_segment, (missing.metadata, 0),
                 RemoteResourceNotFoundError),
                (guarded_rsm.fetch_index, (segment.metadata, IndexType.TRANSACTION),
                 RemoteResourceNotFoundError),
                (guarded_rsm.fetch_log_segment, (segment.metadata, len(segment.log)),
                 InvalidRangeError)):
            err = expect_raises(RULE, expected, fn, *args)
            check(RULE, getattr(err, "plugin", None),
                  f"{type(err).__name__} through the wrapper does not name the plugin")


__all__ = ["CoreWrapperTests"]
