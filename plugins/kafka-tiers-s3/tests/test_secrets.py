"""No credential given in the config ever appears in a log record (botocore's DEBUG request
logs included) or in an error message, whether calls succeed or fail."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafka_tiers.api import ConfigError, RemoteStorageError, TopicPartition
from kafka_tiers.conformance.storage import SegmentBuilder
from kafka_tiers.plugins import load_remote_storage
from kafka_tiers.remote.guarded import GuardedRemoteStorage

pytestmark = pytest.mark.servers


def _everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(repr(record.args))
        if record.exc_info and record.exc_info[1] is not None:
            parts.append(logging.Formatter().formatException(record.exc_info))
    return "\n".join(parts)


def test_no_secret_in_any_log_record_or_error(
        s3_server: Any, bucket: str, make_config: Any, credentials: dict[str, str],
        fault_server: Any, caplog: pytest.LogCaptureFixture, tmp_path: Any,
        topic: str) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, botocore's request and signing logs too
    secrets = list(credentials.values())
    extra = {"aws.session.token": credentials["session_token"]}
    seen: list[BaseException] = []

    # a segment's whole life, through the core's wrapper as the broker calls the plugin
    segment = SegmentBuilder(tmp_path, topic).make(0, log_size=6 * 1024 * 1024)  # multipart
    with GuardedRemoteStorage.load("s3", make_config(s3_server.url, bucket, **extra)) as rsm:
        rsm.copy_log_segment_data(segment.metadata, segment.data)
        with rsm.fetch_log_segment(segment.metadata, 10, 20) as stream:
            assert stream.read() == segment.log[10:21]
        assert rsm.list_remote_segments(segment.tp)
        rsm.delete_log_segment_data(segment.metadata)

    # failures, on the plugin itself (no wrapper to hide anything)
    for status, code in ((403, "SignatureDoesNotMatch"), (503, "SlowDown"), (404, "NoSuchKey")):
        fault_server.answer(status, code, "The request signature we calculated does not match")
        with load_remote_storage("s3", make_config(fault_server.url, "b-1", **extra)) as plugin:
            with pytest.raises(RemoteStorageError) as info:
                plugin.list_remote_segments(TopicPartition(topic, 0))
            seen.append(info.value)
            assert secrets[0] not in repr(plugin.object_store)
    from tests.servers.base import free_port

    unreachable = make_config(f"http://127.0.0.1:{free_port()}", "b-1", **extra)
    with load_remote_storage("s3", unreachable) as plugin, \
            pytest.raises(RemoteStorageError) as info:
        plugin.list_remote_segments(TopicPartition(topic, 0))
    seen.append(info.value)
    for bad in ({"aws.secret.access.key": ""}, {"aws.profile": "p"},
                {"s3.multipart.upload.part.size": "1"}):
        with pytest.raises(ConfigError) as config_info:
            load_remote_storage("s3", make_config(s3_server.url, bucket, **extra, **bad))
        seen.append(config_info.value)
        assert config_info.value.value is None or config_info.value.value not in secrets

    logged = _everything_logged(caplog)
    assert "Authorization" in logged  # botocore did log the signed requests...
    assert "<hidden>" in logged  # ...with the credentials replaced
    for secret in secrets:
        assert secret not in logged
        for error in seen:
            assert secret not in str(error) and secret not in repr(error.args)
            cause = error.__cause__
            assert cause is None or secret not in str(cause)
