"""botocore errors become kafka-tiers storage errors: throttling, 5xx, timeouts and connection
failures are retriable (after botocore's own few retries), a missing key is not-found, access
denied is permanent and not retried. Checked on every mapping rule, then over real HTTP
exchanges with a server on 127.0.0.1 that answers with chosen S3 errors."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore import exceptions as bx
from kafka_tiers_s3.errors import CallTimeoutError, translate
from urllib3.exceptions import ProtocolError

from kafka_tiers.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
    TopicPartition,
)
from kafka_tiers.plugins import load_remote_storage


def _client_error(status: int, code: str, message: str = "details") -> bx.ClientError:
    return bx.ClientError({"Error": {"Code": code, "Message": message},
                           "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")


NOT_FOUND = RemoteResourceNotFoundError
RETRIABLE = RetriableRemoteStorageError
PERMANENT = RemoteStorageError


@pytest.mark.parametrize(("status", "code", "kind", "words"), [
    (404, "NoSuchKey", NOT_FOUND, "NoSuchKey, HTTP 404"),
    (404, "404", NOT_FOUND, "HTTP 404"),  # HEAD: no body, the status is the code
    (404, "NoSuchUpload", NOT_FOUND, "NoSuchUpload"),
    (404, "NoSuchBucket", PERMANENT, "bucket 'b' does not exist"),
    (503, "SlowDown", RETRIABLE, "throttled: S3 GetObject of s3://b/k/x.log failed (SlowDown"),
    (400, "ThrottlingException", RETRIABLE, "throttled"),
    (429, "TooManyRequests", RETRIABLE, "throttled"),
    (500, "InternalError", RETRIABLE, "InternalError, HTTP 500"),
    (503, "ServiceUnavailable", RETRIABLE, "ServiceUnavailable"),
    (502, "BadGateway", RETRIABLE, "HTTP 502"),
    (400, "RequestTimeout", RETRIABLE, "RequestTimeout"),
    (409, "OperationAborted", RETRIABLE, "OperationAborted"),
    (403, "AccessDenied", PERMANENT, "access denied: S3 GetObject of s3://b/k/x.log"),
    (403, "InvalidAccessKeyId", PERMANENT, "access denied"),
    (403, "SignatureDoesNotMatch", PERMANENT, "access denied"),
    (400, "ExpiredToken", PERMANENT, "access denied"),
    (403, "InvalidObjectState", PERMANENT, "access denied"),
    (400, "KMS.NotFoundException", PERMANENT, "access denied"),
    (403, "403", PERMANENT, "access denied"),
    (400, "InvalidArgument", PERMANENT, "InvalidArgument, HTTP 400"),
    (416, "InvalidRange", PERMANENT, "InvalidRange"),
    (400, "BadDigest", RETRIABLE, "damaged on the way"),
    (400, "XAmzContentChecksumMismatch", RETRIABLE, "sent again"),
])
def test_client_errors(status: int, code: str, kind: type, words: str) -> None:
    error = translate(_client_error(status, code), bucket="b", key="k/x.log")
    assert type(error) is kind
    assert error.retriable is (kind is RETRIABLE)
    assert words in str(error)
    if kind is not PERMANENT or code != "NoSuchBucket":
        assert error.resource == "k/x.log"


@pytest.mark.parametrize(("exc", "kind", "words"), [
    (bx.EndpointConnectionError(endpoint_url="http://127.0.0.1:9/b"), RETRIABLE,
     "S3 unreachable"),
    (bx.ConnectTimeoutError(endpoint_url="http://127.0.0.1:9/b"), RETRIABLE, "Timeout"),
    (bx.ReadTimeoutError(endpoint_url="http://127.0.0.1:9/b"), RETRIABLE, "ReadTimeoutError"),
    (bx.ConnectionClosedError(endpoint_url="http://127.0.0.1:9/b"), RETRIABLE, "Closed"),
    (bx.ResponseStreamingError(error="reset"), RETRIABLE, "ResponseStreamingError"),
    (bx.IncompleteReadError(actual_bytes=1, expected_bytes=2), RETRIABLE, "IncompleteRead"),
    (ProtocolError("Connection broken"), RETRIABLE, "while reading"),
    (CallTimeoutError("s3.api.call.timeout spent"), RETRIABLE, "s3.api.call.timeout"),
    (bx.NoCredentialsError(), PERMANENT, "no usable AWS credentials"),
    (bx.PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"), PERMANENT,
     "no usable AWS credentials"),
    (bx.SSLError(endpoint_url="https://s3.example", error="certificate verify failed"),
     PERMANENT, "aws.certificate.check.enabled"),
    (bx.ParamValidationError(report="Invalid bucket name"), PERMANENT, "invalid S3 request"),
])
def test_client_library_errors(exc: BaseException, kind: type, words: str) -> None:
    error = translate(exc, bucket="b", key="k")
    assert type(error) is kind and error.retriable is (kind is RETRIABLE)
    assert words in str(error)


@pytest.mark.parametrize("code", ["InvalidArgument", "NotImplemented", "InvalidRequest"])
def test_a_service_refusing_the_checksum_headers_is_told_how_to_turn_them_off(code: str) -> None:
    error = translate(_client_error(400, code, "x-amz-checksum-crc32c is not supported"),
                      bucket="b", key="k/x.log")
    assert type(error) is PERMANENT and not error.retriable
    assert "s3.checksum.algorithm=NONE" in str(error)
    plain = translate(_client_error(400, code, "bad part number"), bucket="b", key="k/x.log")
    assert "s3.checksum.algorithm" not in str(plain)


def test_foreign_errors_are_left_to_the_default_mapping() -> None:
    assert translate(ValueError("x"), bucket="b", key=None) is None
    assert translate(ConnectionResetError("x"), bucket="b", key=None) is None


def test_secret_values_are_scrubbed_from_messages() -> None:
    exc = _client_error(403, "SignatureDoesNotMatch", "expected key s3cr3t-Value in request")
    error = translate(exc, bucket="b", key="k", secrets=["s3cr3t-Value"])
    assert "s3cr3t-Value" not in str(error) and "<hidden>" in str(error)


# --------------------------------------------------------------------------------------------
# Over HTTP


def _metadata(topic: str) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate(TopicPartition(topic, 0)), start_offset=0, end_offset=9,
        max_timestamp_ms=0, broker_id=0, event_timestamp_ms=0, segment_size_in_bytes=10,
        segment_leader_epochs={0: 0})


def _rsm(fault_server: Any, make_config: Any, **extra: str) -> Any:
    return load_remote_storage("s3", make_config(fault_server.url, "kt-bucket", **extra))


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (500, "InternalError"),
                                              (503, "ServiceUnavailable")])
def test_throttling_and_5xx_are_retried_by_botocore_then_retriable(
        fault_server: Any, make_config: Any, topic: str, status: int, code: str) -> None:
    fault_server.answer(status, code)
    started = time.monotonic()
    with _rsm(fault_server, make_config) as rsm, pytest.raises(RemoteStorageError) as info:
        rsm.list_remote_segments(TopicPartition(topic, 0))
    assert isinstance(info.value, RetriableRemoteStorageError) and info.value.retriable
    assert code in str(info.value) and "s3://kt-bucket/" in str(info.value)
    assert len(fault_server.requests) == 2  # s3.retry.max.attempts=2: botocore retried once
    assert time.monotonic() - started < 10


def test_access_denied_is_permanent_and_not_retried(fault_server: Any, make_config: Any,
                                                     topic: str) -> None:
    fault_server.answer(403, "AccessDenied", "Access Denied")
    with _rsm(fault_server, make_config) as rsm, pytest.raises(RemoteStorageError) as info:
        rsm.fetch_log_segment(_metadata(topic), 0)
    assert not info.value.retriable
    assert str(info.value).startswith("access denied: S3 GetObject of s3://kt-bucket/")
    assert "check the credentials" in str(info.value)
    assert len(fault_server.requests) == 1


def test_a_missing_object_is_not_found(fault_server: Any, make_config: Any,
                                       topic: str) -> None:
    fault_server.answer(404, "NoSuchKey", "The specified key does not exist.")
    metadata = _metadata(topic)
    with _rsm(fault_server, make_config) as rsm, pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(metadata, 0)
    assert len(fault_server.requests) == 1
    assert fault_server.requests[0][1].endswith(".manifest")  # the manifest is read first


def test_dropped_connections_are_retried_then_retriable(fault_server: Any, make_config: Any,
                                                        topic: str) -> None:
    fault_server.mode = "drop"
    with _rsm(fault_server, make_config) as rsm, pytest.raises(RetriableRemoteStorageError):
        rsm.list_remote_segments(TopicPartition(topic, 0))
    assert len(fault_server.requests) == 2


def test_a_body_cut_short_is_retriable(fault_server: Any, make_config: Any) -> None:
    fault_server.mode = "short"
    with _rsm(fault_server, make_config) as rsm:
        store = rsm.object_store
        with store.get("k") as stream, pytest.raises(Exception) as info:
            stream.read()
        error = store.translate_error(info.value, "k")
        assert isinstance(error, RetriableRemoteStorageError), info.value


def test_connection_refused_is_retriable_and_quick(make_config: Any, topic: str) -> None:
    from tests.servers.base import free_port

    config = make_config(f"http://127.0.0.1:{free_port()}", "kt-bucket")
    started = time.monotonic()
    with load_remote_storage("s3", config) as rsm, \
            pytest.raises(RetriableRemoteStorageError) as info:
        rsm.list_remote_segments(TopicPartition(topic, 0))
    assert "S3 unreachable" in str(info.value)
    assert time.monotonic() - started < 10


def test_the_attempt_timeout_bounds_each_attempt(fault_server: Any, make_config: Any,
                                                 topic: str) -> None:
    fault_server.mode = "hang"
    started = time.monotonic()
    with _rsm(fault_server, make_config, **{"s3.api.call.attempt.timeout": "300"}) as rsm, \
            pytest.raises(RetriableRemoteStorageError) as info:
        rsm.list_remote_segments(TopicPartition(topic, 0))
    assert "ReadTimeout" in str(info.value)
    assert len(fault_server.requests) == 2
    assert time.monotonic() - started < 4  # two 0.3 s attempts and one backoff (< 1 s)


def test_the_call_timeout_stops_further_attempts(fault_server: Any, make_config: Any,
                                                 topic: str) -> None:
    fault_server.mode = "hang"
    started = time.monotonic()
    # botocore's first retry waits a random 0-1 s: a 1.5 s budget always has room for a second
    # attempt (300 ms + at most 1 s) and never for ten
    config = {"s3.api.call.attempt.timeout": "300", "s3.api.call.timeout": "1500",
              "s3.retry.max.attempts": "10"}
    with _rsm(fault_server, make_config, **config) as rsm, \
            pytest.raises(RetriableRemoteStorageError) as info:
        rsm.list_remote_segments(TopicPartition(topic, 0))
    elapsed = time.monotonic() - started
    assert "s3.api.call.timeout" in str(info.value)
    assert 2 <= len(fault_server.requests) < 10
    # 10 attempts would take 3 s of timeouts plus up to ~60 s of backoff
    assert elapsed < 7
