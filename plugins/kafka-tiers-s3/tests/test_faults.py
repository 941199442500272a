"""S3 goes away in the middle of a multipart copy: the copy fails quickly with a retriable
error, nothing of it becomes visible, no incomplete upload is left behind, and a retry succeeds
once S3 is back. Also: ``collect_orphans`` aborts the incomplete uploads a crash leaves."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka_tiers_s3.store import S3ObjectStore

from kafka_tiers.api import (
    RemoteResourceNotFoundError,
    RetriableRemoteStorageError,
)
from kafka_tiers.conformance.storage import SegmentBuilder
from kafka_tiers.conformance.storage.harness import objects_of_segment
from kafka_tiers.objectstore import partition_prefix
from kafka_tiers.plugins import load_remote_storage

pytestmark = pytest.mark.servers

MiB = 1024 * 1024
OUTAGE = {"s3.api.call.attempt.timeout": "2000", "s3.multipart.upload.concurrency": "2"}


def _fail_part_two(store: S3ObjectStore, outage: Any) -> threading.Event:
    """Make ``outage()`` happen just before part 2 of the next multipart upload is sent."""
    real = store.upload_part
    happened = threading.Event()

    def upload_part(key: str, upload_id: str, number: int, data: bytes) -> str:
        if number == 2 and not happened.is_set():
            happened.set()
            outage()
        return real(key, upload_id, number, data)

    store.upload_part = upload_part  # type: ignore[method-assign]
    return happened


def _read(stream: Any) -> bytes:
    with stream:
        return bytes(stream.read())


def test_the_server_stops_mid_copy_and_a_retry_succeeds_once_it_is_back(
        server_factory: Any, make_config: Any, tmp_path: Any, topic: str) -> None:
    from tests.servers.moto_s3 import MotoS3Server

    server = server_factory(MotoS3Server)  # a private server: this test stops it
    bucket = server.create_bucket()
    segments = SegmentBuilder(tmp_path, topic)
    segment = segments.make(0, log_size=16 * MiB)  # 4 parts of 5 MiB
    with load_remote_storage("s3", make_config(server.url, bucket, **OUTAGE)) as rsm:
        store = rsm.object_store
        happened = _fail_part_two(store, server.stop)
        started = time.monotonic()
        with pytest.raises(RetriableRemoteStorageError) as info:
            rsm.copy_log_segment_data(segment.metadata, segment.data)
        assert happened.is_set()
        assert time.monotonic() - started < 20  # botocore's few retries, then a clear error
        assert f"s3://{bucket}/" in str(info.value)
        assert store.pending_aborts == 1  # the abort could not get through either

        # while S3 is down every call fails retriably; nothing is listed or read
        with pytest.raises(RetriableRemoteStorageError):
            rsm.list_remote_segments(segment.tp)
        with pytest.raises(RetriableRemoteStorageError):
            rsm.fetch_log_segment(segment.metadata, 0)

        server.start()
        # moto keeps everything in memory, so the restarted server is empty: the bucket is
        # created again before retrying (a real S3 would still have it, and the objects).
        server.create_bucket(bucket)
        assert rsm.list_remote_segments(segment.tp) == []
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_log_segment(segment.metadata, 0)

        retry = segments.retry(segment, new_id=True)  # the broker retries with a new id
        rsm.copy_log_segment_data(retry.metadata, retry.data)
        [listed] = rsm.list_remote_segments(segment.tp)
        assert listed.remote_log_segment_id == retry.metadata.remote_log_segment_id
        assert _read(rsm.fetch_log_segment(retry.metadata, 0)) == retry.log
        assert store.pending_aborts == 0
        assert server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_an_outage_mid_copy_leaves_nothing_visible_and_no_incomplete_upload(
        tcp_proxy: Any, s3_server: Any, bucket: str, make_config: Any, tmp_path: Any,
        topic: str) -> None:
    """The same outage through a proxy that is cut and restored, so the bucket keeps what was
    in it: the failed copy is invisible afterwards, and its upload is aborted."""
    segments = SegmentBuilder(tmp_path, topic)
    earlier = segments.make(0, log_size=1000)
    segment = segments.make(10, log_size=11 * MiB)  # 3 parts
    direct = s3_server.client()  # past the proxy
    with load_remote_storage("s3", make_config(tcp_proxy.url, bucket, **OUTAGE)) as rsm:
        rsm.copy_log_segment_data(earlier.metadata, earlier.data)
        store = rsm.object_store
        _fail_part_two(store, tcp_proxy.cut)
        with pytest.raises(RetriableRemoteStorageError):
            rsm.copy_log_segment_data(segment.metadata, segment.data)
        # the abort could not get through: S3 holds an incomplete upload for now
        assert len(direct.list_multipart_uploads(Bucket=bucket).get("Uploads", [])) == 1

        tcp_proxy.restore()
        assert [m.start_offset for m in rsm.list_remote_segments(segment.tp)] == [0]
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_log_segment(segment.metadata, 0)
        prefix = partition_prefix(rsm.key_prefix, segment.tp)
        assert objects_of_segment(store, prefix, segment.metadata.segment_id) == []
        assert _read(rsm.fetch_log_segment(earlier.metadata, 0)) == earlier.log

        retry = segments.retry(segment, new_id=True)
        rsm.copy_log_segment_data(retry.metadata, retry.data)  # aborts the leftover first
        assert direct.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
        assert [m.start_offset for m in rsm.list_remote_segments(segment.tp)] == [0, 10]
        assert _read(rsm.fetch_log_segment(retry.metadata, 5 * MiB - 1, 5 * MiB)) == \
            retry.log[5 * MiB - 1:5 * MiB + 1]


def test_collect_orphans_aborts_incomplete_uploads_once_old_enough(
        s3_config: dict[str, str], s3_server: Any, bucket: str, topic: str) -> None:
    from kafka_tiers.api import TopicPartition

    client = s3_server.client()
    config = {**s3_config, "key.prefix": "cluster-1"}
    tp = TopicPartition(topic, 0)
    with load_remote_storage("s3", config) as rsm:
        left = f"cluster-1/{topic}-0/00000000000000000000-crashedcopy.log"
        client.create_multipart_upload(Bucket=bucket, Key=left)  # a broker died mid-upload
        client.create_multipart_upload(Bucket=bucket, Key="elsewhere/x.log")  # not ours

        def uploads() -> list[dict[str, Any]]:
            return sorted(client.list_multipart_uploads(Bucket=bucket).get("Uploads", []),
                          key=lambda u: u["Key"])

        # ages count from the upload's Initiated time as S3 reports it (moto reports a fixed
        # date in 2010, so "now" is taken relative to it)
        initiated = int(uploads()[0]["Initiated"].timestamp() * 1000)
        now = initiated + 60_000
        rsm.collect_orphans(3_600_000, now_ms=now)  # a minute old: kept
        rsm.collect_orphans(0, now_ms=now, dry_run=True)  # a dry run aborts nothing
        assert [u["Key"] for u in uploads()] == [left, "elsewhere/x.log"]
        rsm.collect_orphans(30_000, tp, now_ms=now)
        assert [u["Key"] for u in uploads()] == ["elsewhere/x.log"]
