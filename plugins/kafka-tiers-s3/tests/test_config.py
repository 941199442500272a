"""The plugin's settings: defaults, one-line errors naming the key, the boto3 client they build,
and where credentials come from (config, ``aws.profile``, boto3's default chain)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka_tiers_s3.config import PART_SIZE_DEFAULT, S3Config

from kafka_tiers.api import ConfigError, RemoteStorageError, TopicPartition
from kafka_tiers.plugins import load_remote_storage

MiB = 1024 * 1024


def test_defaults() -> None:
    cfg = S3Config.from_mapping({"s3.bucket.name": "my-tier"})
    assert (cfg.bucket, cfg.prefix, cfg.region, cfg.endpoint_url) == ("my-tier", "", None, None)
    assert cfg.part_size == PART_SIZE_DEFAULT == 25 * MiB
    assert (cfg.upload_concurrency, cfg.max_attempts) == (4, 3)
    assert (cfg.storage_class, cfg.sse_algorithm, cfg.sse_kms_key_id) == ("STANDARD", None, None)
    assert (cfg.connect_timeout, cfg.read_timeout) == (10.0, 60.0)
    assert cfg.addressing_style == "auto" and cfg.certificate_check and not cfg.checksum_check
    assert cfg.checksum_algorithm == "CRC32C"
    assert cfg.secrets == ()


def test_every_key_is_read() -> None:
    cfg = S3Config.from_mapping({
        "s3.bucket.name": "b-1", "s3.prefix": "/a/b/", "s3.region": "eu-west-1",
        "s3.endpoint.url": "https://minio.internal:9000", "s3.path.style.access.enabled": "TRUE",
        "s3.storage.class": "intelligent_tiering", "s3.sse.algorithm": "aws:kms",
        "s3.sse.kms.key.id": "alias/kafka", "s3.multipart.upload.part.size": str(8 * MiB),
        "s3.multipart.upload.concurrency": "2", "s3.api.call.timeout": "30000",
        "s3.api.call.attempt.timeout": "5000", "s3.retry.max.attempts": "5",
        "aws.access.key.id": "AKIAX", "aws.secret.access.key": "sec", "aws.session.token": "tok",
        "aws.certificate.check.enabled": "false", "aws.checksum.check.enabled": "true",
        "s3.checksum.algorithm": "crc32"})
    assert cfg.prefix == "a/b" and cfg.region == "eu-west-1" and cfg.checksum_algorithm == "CRC32"
    assert cfg.addressing_style == "path" and cfg.storage_class == "INTELLIGENT_TIERING"
    assert (cfg.sse_algorithm, cfg.sse_kms_key_id) == ("aws:kms", "alias/kafka")
    assert (cfg.part_size, cfg.upload_concurrency, cfg.max_attempts) == (8 * MiB, 2, 5)
    assert (cfg.api_call_timeout_ms, cfg.connect_timeout, cfg.read_timeout) == (30000, 5, 5)
    assert not cfg.certificate_check and cfg.checksum_check
    assert tuple(s.reveal() for s in cfg.secrets) == ("AKIAX", "sec", "tok")
    assert "sec" not in repr(cfg).replace("secrets", "") and "AKIAX" not in repr(cfg)


def test_checksum_algorithm_none_turns_upload_checksums_off() -> None:
    cfg = S3Config.from_mapping({"s3.bucket.name": "b-1", "s3.checksum.algorithm": "NONE"})
    assert cfg.checksum_algorithm is None


def test_a_kms_key_id_alone_means_sse_kms() -> None:
    cfg = S3Config.from_mapping({"s3.bucket.name": "b-1", "s3.sse.kms.key.id": "k"})
    assert cfg.sse_algorithm == "aws:kms"


@pytest.mark.parametrize(("config", "key", "needle"), [
    ({"s3.bucket.name": ""}, "s3.bucket.name", "s3.bucket.name is required"),
    ({"s3.bucket.name": "  "}, "s3.bucket.name", "s3.bucket.name is required"),
    ({"s3.bucket.name": "a/b"}, "s3.bucket.name", "invalid value 'a/b' for s3.bucket.name"),
    ({"s3.checksum.algorithm": "md5"}, "s3.checksum.algorithm",
     "invalid value 'MD5' for s3.checksum.algorithm: expected one of CRC32C, CRC32, NONE"),
    ({"s3.endpoint.url": "localhost:9000"}, "s3.endpoint.url",
     "invalid value 'localhost:9000' for s3.endpoint.url: expected an http:// or https:// URL"),
    ({"s3.path.style.access.enabled": "yes"}, "s3.path.style.access.enabled",
     "invalid value 'yes' for s3.path.style.access.enabled: expected true or false"),
    ({"s3.multipart.upload.part.size": "1048576"}, "s3.multipart.upload.part.size",
     "expected an integer from 5242880 to 5368709120"),
    ({"s3.multipart.upload.part.size": "5MB"}, "s3.multipart.upload.part.size",
     "invalid value '5MB' for s3.multipart.upload.part.size"),
    ({"s3.multipart.upload.concurrency": "0"}, "s3.multipart.upload.concurrency",
     "expected an integer from 1 to 64"),
    ({"s3.retry.max.attempts": "0"}, "s3.retry.max.attempts", "expected an integer from 1"),
    ({"s3.api.call.timeout": "-5"}, "s3.api.call.timeout", "expected an integer >= 1"),
    ({"s3.api.call.attempt.timeout": "soon"}, "s3.api.call.attempt.timeout",
     "invalid value 'soon'"),
    ({"s3.storage.class": "GLACIER"}, "s3.storage.class",
     "s3.storage.class=GLACIER is not supported: its objects must be restored"),
    ({"s3.storage.class": "COLD"}, "s3.storage.class",
     "invalid value 'COLD' for s3.storage.class: expected one of STANDARD,"),
    ({"s3.sse.algorithm": "rot13"}, "s3.sse.algorithm",
     "expected none, AES256, aws:kms, aws:kms:dsse"),
    ({"s3.sse.algorithm": "AES256", "s3.sse.kms.key.id": "k"}, "s3.sse.kms.key.id",
     "s3.sse.kms.key.id needs s3.sse.algorithm=aws:kms"),
    ({"s3.prefix": "a/../b"}, "s3.prefix", "invalid value 'a/../b' for s3.prefix"),
    ({"aws.access.key.id": "AKIAKEYSHOWNNEVER"}, "aws.secret.access.key",
     "aws.access.key.id and aws.secret.access.key must be given together"),
    ({"aws.secret.access.key": "secret-shown-never"}, "aws.access.key.id",
     "must be given together"),
    ({"aws.session.token": "token-shown-never"}, "aws.session.token",
     "aws.session.token needs aws.access.key.id and aws.secret.access.key"),
    ({"aws.access.key.id": "AKIAKEYSHOWNNEVER", "aws.secret.access.key": ""},
     "aws.secret.access.key",
     "aws.secret.access.key is empty"),
    ({"aws.access.key.id": "AKIAKEYSHOWNNEVER", "aws.secret.access.key": "secret-shown-never",
      "aws.profile": "p"},
     "aws.profile", "give either aws.profile or the static credentials"),
])
def test_errors_are_one_line_naming_the_key(config: dict[str, str], key: str,
                                            needle: str) -> None:
    full = {"s3.bucket.name": "my-tier", **config}
    with pytest.raises(ConfigError) as info:
        load_remote_storage("s3", full)  # through the entry point, as the broker does
    message = str(info.value)
    assert needle in message and "\n" not in message
    assert info.value.key == key
    for secret_key in ("aws.access.key.id", "aws.secret.access.key", "aws.session.token"):
        value = full.get(secret_key)
        if value:
            assert value not in message


def test_unknown_keys_are_reported_by_name(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_tiers_s3")
    S3Config.from_mapping({"s3.bucket.name": "b-1", "s3.bucket": "typo", "key.prefix": "x",
                           "aws.secret.key": "never-shown-value"})
    assert "ignoring unknown S3 plugin keys: aws.secret.key, s3.bucket" in caplog.text
    assert "never-shown-value" not in caplog.text and "key.prefix" not in caplog.text


def test_the_client_follows_the_settings(make_config: Any) -> None:
    config = make_config("http://127.0.0.1:9", "b-1", **{
        "s3.api.call.attempt.timeout": "1500", "s3.retry.max.attempts": "4",
        "s3.multipart.upload.concurrency": "8", "aws.checksum.check.enabled": "true"})
    with load_remote_storage("s3", config) as rsm:
        client = rsm.object_store.client
        cfg = client.meta.config
        assert cfg.retries == {"mode": "standard", "total_max_attempts": 4}
        assert (cfg.connect_timeout, cfg.read_timeout) == (1.5, 1.5)
        assert cfg.s3 == {"addressing_style": "path"}
        assert cfg.max_pool_connections == 16
        assert cfg.response_checksum_validation == "when_supported"
        assert client.meta.endpoint_url == "http://127.0.0.1:9"
        assert client.meta.region_name == "us-east-1"


def _send_one(fault_server: Any, config: dict[str, str]) -> str:
    """Make one request to the fault server; return the Authorization header it received."""
    fault_server.answer(403, "AccessDenied")
    with load_remote_storage("s3", config) as rsm, pytest.raises(RemoteStorageError):
        rsm.list_remote_segments(TopicPartition("t", 0))
    return fault_server.authorizations[-1]


def test_static_credentials_sign_the_requests(fault_server: Any, make_config: Any,
                                              credentials: dict[str, str]) -> None:
    auth = _send_one(fault_server, make_config(fault_server.url, "b-1"))
    assert f"Credential={credentials['access_key_id']}/" in auth


def test_credentials_from_a_profile(fault_server: Any, tmp_path: Any,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "aws"
    files.mkdir()
    (files / "credentials").write_text("[kt-tier]\naws_access_key_id = AKIAFROMPROFILE1\n"
                                       "aws_secret_access_key = profile-secret\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(files / "credentials"))
    config = {"s3.bucket.name": "b-1", "s3.endpoint.url": fault_server.url,
              "s3.region": "eu-west-1", "aws.profile": "kt-tier"}
    assert "Credential=AKIAFROMPROFILE1/" in _send_one(fault_server, config)
    with pytest.raises(ConfigError, match=r"aws\.profile: profile 'nope' is not in the AWS"):
        load_remote_storage("s3", {**config, "aws.profile": "nope"})


def test_credentials_from_the_default_chain(fault_server: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENVIRON01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    config = {"s3.bucket.name": "b-1", "s3.endpoint.url": fault_server.url,
              "s3.region": "us-east-1"}
    assert "Credential=AKIAFROMENVIRON01/" in _send_one(fault_server, config)


def test_no_credentials_anywhere_is_a_clear_permanent_error(fault_server: Any) -> None:
    config = {"s3.bucket.name": "b-1", "s3.endpoint.url": fault_server.url,
              "s3.region": "us-east-1"}
    with load_remote_storage("s3", config) as rsm, pytest.raises(RemoteStorageError) as info:
        rsm.list_remote_segments(TopicPartition("t", 0))
    assert not info.value.retriable
    assert "no usable AWS credentials" in str(info.value)
    assert fault_server.requests == []
