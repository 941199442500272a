"""The S3 object store on moto's S3 server: multipart uploads (concurrent, aborted on failure),
batched deletes, paginated listing, ranged reads, and what ``s3.prefix``, server-side
encryption and the storage class do to the objects in the bucket."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError
from kafka_tiers_s3.store import MAX_PARTS, S3ObjectStore

from kafka_tiers.api import (
    ByteRange,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)
from kafka_tiers.conformance.storage import SegmentBuilder
from kafka_tiers.plugins import load_remote_storage

pytestmark = pytest.mark.servers

MiB = 1024 * 1024


def _store(config: dict[str, str]) -> tuple[Any, S3ObjectStore]:
    rsm = load_remote_storage("s3", config)
    store = rsm.object_store
    assert isinstance(store, S3ObjectStore)
    return rsm, store


def _count_requests(store: S3ObjectStore, operation: str) -> list[dict[str, Any]]:
    """The parameters of every ``operation`` call the store's client makes."""
    seen: list[dict[str, Any]] = []
    store.client.meta.events.register(f"before-parameter-build.s3.{operation}",
                                      lambda params, **_: seen.append(params))
    return seen


class _FailingAfter(io.RawIOBase):
    """Yields ``data`` and then fails: a local file that cannot be read to its end."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._data.readinto(buffer)
        if n:
            return n
        raise OSError(5, "Input/output error")


def test_a_failed_local_read_aborts_the_upload_and_leaves_no_incomplete_upload(
        s3_config: dict[str, str], s3_server: Any, bucket: str) -> None:
    rsm, store = _store(s3_config)
    with rsm:
        aborts = _count_requests(store, "AbortMultipartUpload")
        data = io.BufferedReader(_FailingAfter(os.urandom(11 * MiB)))  # fails in part 3
        with pytest.raises(OSError):
            store.put("t-0/broken.log", data)
        assert len(aborts) == 1
        client = s3_server.client()
        assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
        assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_failed_part_aborts_after_the_parts_in_flight_end(
        s3_server: Any, bucket: str, make_config: Any) -> None:
    rsm, store = _store(make_config(s3_server.url, bucket,
                                    **{"s3.multipart.upload.concurrency": "3"}))
    with rsm:
        real_upload = store.upload_part
        finished: list[int] = []

        def upload_part(key: str, upload_id: str, number: int, data: bytes) -> str:
            if number == 3:
                raise ConnectionResetError("injected: connection reset while sending part 3")
            time.sleep(0.3)  # parts 1 and 2 are still in flight when part 3 fails
            tag = real_upload(key, upload_id, number, data)
            finished.append(number)
            return tag

        store.upload_part = upload_part  # type: ignore[method-assign]
        with pytest.raises(ConnectionResetError):
            store.put("t-0/broken.log", io.BytesIO(os.urandom(21 * MiB)), 21 * MiB)
        assert sorted(finished)[:2] == [1, 2]  # they ended before the abort...
        client = s3_server.client()
        # ...so the abort dropped them: no incomplete upload, no object
        assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
        assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_parts_go_up_concurrently_and_the_object_reads_back_whole(
        s3_server: Any, bucket: str, make_config: Any) -> None:
    rsm, store = _store(make_config(s3_server.url, bucket,
                                    **{"s3.multipart.upload.concurrency": "3"}))
    with rsm:
        real_upload = store.upload_part
        lock = threading.Lock()
        active = [0]
        peak = [0]

        def upload_part(key: str, upload_id: str, number: int, data: bytes) -> str:
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            try:
                time.sleep(0.2)
                return real_upload(key, upload_id, number, data)
            finally:
                with lock:
                    active[0] -= 1

        store.upload_part = upload_part  # type: ignore[method-assign]
        payload = os.urandom(22 * MiB + 123)  # 5 parts
        assert store.put("t-0/big.log", io.BytesIO(payload), len(payload)) == len(payload)
        assert 2 <= peak[0] <= 3
        head = s3_server.client().head_object(Bucket=bucket, Key="t-0/big.log")
        assert head["ETag"].strip('"').endswith("-5")  # a multipart object of 5 parts
        with store.get("t-0/big.log") as stream:
            assert hashlib.sha256(stream.read()).digest() == hashlib.sha256(payload).digest()
        edge = 5 * MiB - 2
        with store.get("t-0/big.log", ByteRange(edge, edge + 9)) as stream:
            assert stream.read() == payload[edge:edge + 10]


def test_objects_up_to_one_part_go_in_one_request(s3_config: dict[str, str]) -> None:
    rsm, store = _store(s3_config)
    with rsm:
        puts = _count_requests(store, "PutObject")
        creates = _count_requests(store, "CreateMultipartUpload")
        exactly_one_part = os.urandom(5 * MiB)
        assert store.put("t-0/one.log", io.BytesIO(exactly_one_part)) == 5 * MiB
        assert store.put("t-0/empty.log", io.BytesIO(b"")) == 0
        assert (len(puts), len(creates)) == (2, 0)
        with store.get("t-0/empty.log") as stream:
            assert stream.read() == b""


def test_the_part_size_grows_when_an_object_would_need_more_than_10000_parts(
        s3_config: dict[str, str]) -> None:
    rsm, store = _store(s3_config)
    with rsm:
        assert store.part_size_for(None) == 5 * MiB
        assert store.part_size_for(5 * MiB * MAX_PARTS) == 5 * MiB
        bigger = store.part_size_for(5 * MiB * MAX_PARTS + 1)
        assert bigger > 5 * MiB and bigger * MAX_PARTS >= 5 * MiB * MAX_PARTS + 1


def test_batched_delete_splits_more_than_1000_keys(
        s3_config: dict[str, str], s3_server: Any, bucket: str) -> None:
    client = s3_server.client()
    keys = [f"t-0/obj-{i:05d}" for i in range(2345)]
    present = [keys[0], keys[999], keys[1000], keys[1999], keys[2000], keys[-1]]
    for key in [*present, "t-0/kept"]:  # S3 ignores the keys of a batch that are missing
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    rsm, store = _store(s3_config)
    with rsm:
        batches = _count_requests(store, "DeleteObjects")
        store.delete_many(keys)
        sizes = [len(p["Delete"]["Objects"]) for p in batches]
        assert sizes == [1000, 1000, 345]
        sent = [o["Key"] for p in batches for o in p["Delete"]["Objects"]]
        assert sent == keys  # every key once, in order
        left = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
        assert left == ["t-0/kept"]
        store.delete_many(present)  # deleting again is fine


def test_listing_follows_every_page(s3_config: dict[str, str], s3_server: Any,
                                    bucket: str) -> None:
    client = s3_server.client()
    inside = [f"t-1/obj-{i:02d}" for i in range(25)]
    for i, key in enumerate([*inside, "t-10/other", "t-1-x"]):
        client.put_object(Bucket=bucket, Key=key, Body=b"y" * i)
    rsm, store = _store(s3_config)
    with rsm:
        store.list_page_size = 7
        pages = _count_requests(store, "ListObjectsV2")
        now_ms = time.time() * 1000
        found = list(store.list("t-1/"))
        assert sorted(i.key for i in found) == inside
        assert len(pages) == 4  # 7 + 7 + 7 + 4
        assert {i.key: i.size for i in found} == {k: n for n, k in enumerate(inside)}
        assert all(abs(i.last_modified_ms - now_ms) < 120_000 for i in found)


def test_a_missing_key_is_not_found(s3_config: dict[str, str]) -> None:
    rsm, store = _store(s3_config)
    with rsm:
        with pytest.raises(ClientError) as info:
            store.get("t-0/nothing.log")
        error = store.translate_error(info.value, "t-0/nothing.log")
        assert isinstance(error, RemoteResourceNotFoundError)
        assert "NoSuchKey" in str(error) and "t-0/nothing.log" in str(error)


def test_a_missing_bucket_is_a_clear_permanent_error(s3_server: Any, make_config: Any,
                                                     topic: str) -> None:
    from kafka_tiers.api import TopicPartition

    rsm = load_remote_storage("s3", make_config(s3_server.url, "kt-no-such-bucket-here"))
    with rsm, pytest.raises(RemoteStorageError) as info:
        rsm.list_remote_segments(TopicPartition(topic, 0))
    assert not info.value.retriable
    assert "bucket 'kt-no-such-bucket-here' does not exist" in str(info.value)
    assert not isinstance(info.value, RemoteResourceNotFoundError)


def test_prefix_encryption_and_storage_class_through_the_plugin(
        s3_server: Any, bucket: str, make_config: Any, tmp_path: Any, topic: str) -> None:
    config = make_config(s3_server.url, bucket, **{
        "s3.prefix": "/kafka/tier-a/", "key.prefix": "cluster-1",
        "s3.sse.kms.key.id": "arn:aws:kms:us-east-1:123456789012:key/kt-test-key",
        "s3.storage.class": "STANDARD_IA"})
    segments = SegmentBuilder(tmp_path, topic)
    segment = segments.make(100, log_size=11 * MiB)  # 3 parts: a multipart upload
    client = s3_server.client()
    with load_remote_storage("s3", config) as rsm:
        custom = rsm.copy_log_segment_data(segment.metadata, segment.data)
        assert custom is not None
        keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
        assert len(keys) == 2  # log and manifest (format 3: the small indexes are inline in it)
        assert all(k.startswith(f"kafka/tier-a/cluster-1/{topic}-0/") for k in keys)
        for key in keys:
            head = client.head_object(Bucket=bucket, Key=key)
            assert head["ServerSideEncryption"] == "aws:kms"
            assert head["SSEKMSKeyId"].endswith("kt-test-key")
            assert head["StorageClass"] == "STANDARD_IA"
        [listed] = rsm.list_remote_segments(segment.tp)
        assert listed.remote_log_segment_id == segment.metadata.remote_log_segment_id
        with rsm.fetch_log_segment(segment.metadata, 5 * MiB - 3, 5 * MiB + 3) as stream:
            assert stream.read() == segment.log[5 * MiB - 3:5 * MiB + 4]
        rsm.delete_log_segment_data(segment.metadata)
        assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_sse_s3_is_applied_to_single_and_multipart_objects(
        s3_server: Any, bucket: str, make_config: Any) -> None:
    rsm, store = _store(make_config(s3_server.url, bucket, **{"s3.sse.algorithm": "AES256"}))
    client = s3_server.client()
    with rsm:
        store.put("small", io.BytesIO(b"abc"))
        store.put("large", io.BytesIO(os.urandom(6 * MiB)))
        for key in ("small", "large"):
            head = client.head_object(Bucket=bucket, Key=key)
            assert head["ServerSideEncryption"] == "AES256"
            assert head.get("StorageClass", "STANDARD") == "STANDARD"


def _sent_headers(store: S3ObjectStore, operation: str) -> list[tuple[dict[str, str], bytes]]:
    """The headers and body of every ``operation`` request as it goes on the wire."""
    sent: list[tuple[dict[str, str], bytes]] = []

    def capture(request: Any, **_: Any) -> None:
        body = request.body
        raw = body if isinstance(body, bytes) else (body.read() if body is not None else b"")
        if body is not None and not isinstance(body, bytes):
            body.seek(0)
        sent.append(({k.lower(): v.decode("ascii") if isinstance(v, bytes) else v
                       for k, v in request.headers.items()}, raw))

    store.client.meta.events.register(f"before-send.s3.{operation}", capture)
    return sent


def _crc32c_b64(data: bytes) -> str:
    import base64

    import crc32c

    return base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode("ascii")


def test_every_upload_body_carries_its_crc32c_and_the_upload_declares_it(
        s3_config: dict[str, str], s3_server: Any, bucket: str) -> None:
    rsm, store = _store(s3_config)
    with rsm:
        creates = _count_requests(store, "CreateMultipartUpload")
        parts = _sent_headers(store, "UploadPart")
        puts = _sent_headers(store, "PutObject")
        data = os.urandom(12 * MiB)  # 3 parts of 5 MiB at most
        store.put("t-0/big.log", io.BytesIO(data), len(data))
        store.put("t-0/small.index", io.BytesIO(b"index bytes"), 11)
        assert [c.get("ChecksumAlgorithm") for c in creates] == ["CRC32C"]
        assert len(parts) == 3
        for headers, body in parts:
            assert headers["x-amz-checksum-crc32c"] == _crc32c_b64(body)
            assert headers["x-amz-sdk-checksum-algorithm"] == "CRC32C"
        # parts go up concurrently: their bodies, whatever the order, are the data's 3 parts
        assert sorted(body for _, body in parts) == sorted(
            data[i:i + 5 * MiB] for i in range(0, len(data), 5 * MiB))
        [(headers, body)] = puts
        assert body == b"index bytes"
        assert headers["x-amz-checksum-crc32c"] == _crc32c_b64(b"index bytes")
        client = s3_server.client()
        head = client.head_object(Bucket=bucket, Key="t-0/small.index", ChecksumMode="ENABLED")
        assert head["ChecksumCRC32C"] == _crc32c_b64(b"index bytes")
        assert client.get_object(Bucket=bucket, Key="t-0/big.log")["Body"].read() == data


def test_checksum_algorithm_none_sends_no_checksum_at_all(
        s3_server: Any, bucket: str, make_config: Any) -> None:
    rsm, store = _store(make_config(s3_server.url, bucket,
                                    **{"s3.checksum.algorithm": "none"}))
    with rsm:
        creates = _count_requests(store, "CreateMultipartUpload")
        parts = _sent_headers(store, "UploadPart")
        puts = _sent_headers(store, "PutObject")
        data = os.urandom(11 * MiB)
        store.put("t-0/big.log", io.BytesIO(data), len(data))
        store.put("t-0/small.index", io.BytesIO(b"x" * 100), 100)
        assert "ChecksumAlgorithm" not in creates[0]
        assert (len(parts), len(puts)) == (3, 1)
        for headers, _ in parts + puts:
            assert not [h for h in headers if h.startswith(("x-amz-checksum-",
                                                            "x-amz-sdk-checksum"))]
        assert s3_server.client().get_object(Bucket=bucket,
                                             Key="t-0/big.log")["Body"].read() == data


def test_crc32_is_computed_with_zlib(s3_server: Any, bucket: str, make_config: Any) -> None:
    import base64
    import zlib

    rsm, store = _store(make_config(s3_server.url, bucket, **{"s3.checksum.algorithm": "crc32"}))
    with rsm:
        sent = _sent_headers(store, "PutObject")
        store.put("t-0/small.index", io.BytesIO(b"some index"), 10)
        [(headers, _)] = sent
        assert headers["x-amz-checksum-crc32"] == base64.b64encode(
            zlib.crc32(b"some index").to_bytes(4, "big")).decode("ascii")
