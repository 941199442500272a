"""Configuration: every bad value is one clear line naming its key (through the core's loader,
as the broker loads the plugin); credentials are never repeated; optional parts (Kerberos,
TLS) are wired as configured; ``configure`` sends no request."""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest
from kafka_tiers_hdfs import HdfsSettings
from kafka_tiers_hdfs.store import HdfsObjectStore

from kafka_tiers.api import ConfigError
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager
from kafka_tiers.plugins import load_remote_storage

GOOD = {"hdfs.namenode.url": "http://127.0.0.1:9", "hdfs.user": "kafka",
        "hdfs.base.dir": "/kafka/remote"}

#: the storage manager kafka-tiers builds around the store (what ``hdfs`` loads)
HdfsStorage = ObjectStoreRemoteStorageManager.for_store(HdfsObjectStore)


def _error(config: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_remote_storage("hdfs", config).close()
    return info.value


@pytest.mark.parametrize(("changes", "key", "needle"), [
    ({"hdfs.namenode.url": ""}, "hdfs.namenode.url", "hdfs.namenode.url is required"),
    ({"hdfs.namenode.url": "ftp://nn:21"}, "hdfs.namenode.url", "expected http(s)://host:port"),
    ({"hdfs.namenode.url": "http://nn:99999"}, "hdfs.namenode.url", "'http://nn:99999'"),
    ({"hdfs.namenode.url": "http://nn:9870,nn2:9870"}, "hdfs.namenode.url", "(URL 2)"),
    ({"hdfs.namenode.url": "http://nn:9870/?op=LISTSTATUS"}, "hdfs.namenode.url", "URL 1"),
    ({"hdfs.base.dir": ""}, "hdfs.base.dir", "hdfs.base.dir is required"),
    ({"hdfs.base.dir": "kafka/remote"}, "hdfs.base.dir", "expected an absolute HDFS path"),
    ({"hdfs.base.dir": "/kafka/../etc"}, "hdfs.base.dir", "without '.', '..'"),
    ({"hdfs.replication": "0"}, "hdfs.replication", "from 1 to 32767"),
    ({"hdfs.block.size": "1000"}, "hdfs.block.size", "multiples of 512"),
    ({"hdfs.block.size": "big"}, "hdfs.block.size", "expected an integer"),
    ({"hdfs.buffer.size": "-1"}, "hdfs.buffer.size", "expected an integer"),
    ({"hdfs.upload.chunk.size": "10"}, "hdfs.upload.chunk.size", "from 4096"),
    ({"hdfs.timeout.ms": "soon"}, "hdfs.timeout.ms", "expected an integer"),
    ({"hdfs.tls.verify": "yes"}, "hdfs.tls.verify", "expected true or false"),
    ({"hdfs.tls.ca.file": "/nonexistent/ca.pem"}, "hdfs.tls.ca.file", "no such file"),
    ({"hdfs.kerberos.enabled": "1"}, "hdfs.kerberos.enabled", "expected true or false"),
    ({"hdfs.kerberos.mutual.auth": "MAYBE"}, "hdfs.kerberos.mutual.auth", "REQUIRED"),
])
def test_bad_values_are_one_line_naming_the_key(changes: dict[str, str], key: str,
                                                needle: str) -> None:
    err = _error({**GOOD, **changes})
    assert err.key == key
    message = str(err)
    assert "\n" not in message
    assert key in message and needle in message
    assert message.startswith("remote storage plugin 'hdfs'")  # the core names the plugin


def test_ca_file_with_verification_off_is_refused(tmp_path: Any) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    err = _error({**GOOD, "hdfs.tls.ca.file": str(ca), "hdfs.tls.verify": "false"})
    assert err.key == "hdfs.tls.ca.file" and "hdfs.tls.verify=false" in str(err)


def test_credentials_in_a_url_are_refused_and_never_repeated(
        caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cr3t-Pa55"
    caplog.set_level(logging.DEBUG)
    err = _error({**GOOD, "hdfs.namenode.url": f"http://nn1:9870,https://alice:{secret}@nn2:9870"})
    assert err.key == "hdfs.namenode.url" and "URL 2 carries credentials" in str(err)
    assert err.value is None
    assert secret not in str(err) and secret not in repr(err.__dict__)
    assert all(secret not in r.getMessage() for r in caplog.records)


def test_defaults_and_every_key() -> None:
    settings = HdfsSettings.from_config(
        {"hdfs.namenode.url": " http://nn1:9870/ , https://nn2:9871", "hdfs.user": "kafka",
         "hdfs.base.dir": "/kafka//remote/", "hdfs.replication": "2",
         "hdfs.block.size": "2097152", "hdfs.buffer.size": "65536",
         "hdfs.upload.chunk.size": "262144", "hdfs.timeout.ms": "1500",
         "hdfs.kerberos.mutual.auth": "required", "hdfs.tls.verify": "false"})
    assert settings.namenode_urls == ("http://nn1:9870", "https://nn2:9871")
    assert settings.base_dir == "/kafka/remote"
    assert (settings.replication, settings.block_size, settings.buffer_size) == (2, 2097152,
                                                                               65536)
    assert settings.upload_chunk_size == 262144 and settings.timeout_s == 1.5
    assert settings.mutual_auth == "REQUIRED" and settings.tls_verify is False
    plain = HdfsSettings.from_config(GOOD)
    assert (plain.replication, plain.block_size, plain.buffer_size) == (None, None, None)
    assert plain.tls_verify is True and plain.kerberos is False
    assert plain.upload_chunk_size == 1 << 20 and plain.timeout_s == 30.0


def test_configure_sends_no_request_and_wires_tls(tmp_path: Any) -> None:
    # port 9 (discard) on loopback: nothing listens; configure must not notice
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    with load_remote_storage("hdfs", {**GOOD, "hdfs.tls.ca.file": str(ca)}) as rsm:
        store = rsm.object_store
        assert store.session.verify == str(ca)
        assert store.base_dir == "/kafka/remote"
    with load_remote_storage("hdfs", {**GOOD, "hdfs.tls.verify": "false"}) as rsm:
        assert rsm.object_store.session.verify is False


def test_kerberos_without_the_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hdfs.ext.kerberos", None)  # as if not installed
    err = _error({**GOOD, "hdfs.kerberos.enabled": "true"})
    assert err.key == "hdfs.kerberos.enabled"
    assert "pip install 'kafka-tiers-hdfs[kerberos]'" in str(err) and "\n" not in str(err)


def test_kerberos_client_is_built_only_when_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, Any]] = []

    class FakeKerberosClient:
        def __init__(self, url: str, **kwargs: Any) -> None:
            built.append({"url": url, **kwargs})

    fake = types.ModuleType("hdfs.ext.kerberos")
    fake.KerberosClient = FakeKerberosClient  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hdfs.ext.kerberos", fake)
    plugin = HdfsStorage()
    plugin.configure({**GOOD, "hdfs.user": ""})
    plugin.close()
    assert built == []  # simple authentication: InsecureClient
    plugin = HdfsStorage()
    plugin.configure({**GOOD, "hdfs.namenode.url": "https://nn1:9871,https://nn2:9871",
                      "hdfs.kerberos.enabled": "true", "hdfs.kerberos.principal": "kafka@EX",
                      "hdfs.kerberos.mutual.auth": "DISABLED"})
    try:
        [args] = built
        assert args["url"] == "https://nn1:9871;https://nn2:9871"
        assert args["mutual_auth"] == "DISABLED" and args["principal"] == "kafka@EX"
        assert args["proxy"] == "kafka"  # hdfs.user is impersonated (doas) under Kerberos
        assert args["session"] is plugin.object_store.session
        assert args["timeout"] == 30.0
    finally:
        plugin.close()


def test_the_hdfs_packages_per_call_info_lines_are_quiet_unless_asked_for(
        caplog: pytest.LogCaptureFixture) -> None:
    from kafka_tiers_hdfs.client import HDFS_LOGGER, quiet_hdfs_logging

    logger = logging.getLogger(HDFS_LOGGER)
    saved = logger.level
    try:
        logger.setLevel(logging.NOTSET)
        quiet_hdfs_logging()
        assert logger.level == logging.WARNING
        with caplog.at_level(logging.INFO):
            logging.getLogger("hdfs.client").info("Writing to %r.", "/x")
        assert "Writing to" not in caplog.text
        logger.setLevel(logging.DEBUG)  # an operator's choice stays
        quiet_hdfs_logging()
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(saved)
