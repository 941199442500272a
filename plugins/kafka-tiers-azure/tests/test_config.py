"""Configuration checks: one line naming the key, secrets never repeated, the credential the
keys select (no server needed: ``configure`` makes no request)."""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest
from kafka_tiers_azure import AzureBlobConfig, CredentialKind
from kafka_tiers_azure.store import BackoffRetry

from kafka_tiers.api import ConfigError, Secret
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager
from kafka_tiers.plugins import load_remote_storage

KEY = "c2VjcmV0LWFjY291bnQta2V5LW5ldmVyLXRvLWJlLXNob3du"  # base64, a stand-in account key
SAS = "sv=2024-08-04&sr=c&sp=rwdl&se=2030-01-01T00%3A00%3A00Z&sig=TOPSECRETsignature%3D"
CONN = ("DefaultEndpointsProtocol=https;AccountName=kttest;"
        f"AccountKey={KEY};EndpointSuffix=core.windows.net")
SECRETS = (KEY, SAS, "TOPSECRETsignature", CONN)


def _load(config: dict[str, str]) -> ObjectStoreRemoteStorageManager:
    return load_remote_storage("azure", config)  # type: ignore[return-value]


@pytest.mark.parametrize(("config", "key", "words"), [
    ({}, "azure.container.name", "is required"),
    ({"azure.container.name": "Bad_Name", "azure.connection.string": CONN},
     "azure.container.name", "expected 3-63 characters"),
    ({"azure.container.name": "ab--cd", "azure.connection.string": CONN},
     "azure.container.name", "without '--'"),
    ({"azure.container.name": "tier"}, "azure.account.name",
     "one of azure.connection.string, azure.account.name or azure.endpoint.url"),
    ({"azure.container.name": "tier", "azure.connection.string": CONN,
      "azure.account.key": KEY}, "azure.account.key", "cannot be set together"),
    ({"azure.container.name": "tier", "azure.connection.string": CONN,
      "azure.sas.token": SAS}, "azure.sas.token", "cannot be set together"),
    ({"azure.container.name": "tier", "azure.connection.string": "no pairs at all"},
     "azure.connection.string", "malformed"),
    ({"azure.container.name": "tier", "azure.connection.string": f"AccountKey={KEY}"},
     "azure.connection.string", "names no AccountName"),
    ({"azure.container.name": "tier", "azure.account.name": "kttest",
      "azure.account.key": KEY, "azure.sas.token": SAS}, "azure.sas.token", "give one"),
    ({"azure.container.name": "tier", "azure.account.name": "kttest",
      "azure.account.key": "not base64 " + KEY}, "azure.account.key", "not valid base64"),
    ({"azure.container.name": "tier", "azure.endpoint.url": "http://h/acct",
      "azure.account.key": KEY}, "azure.account.name", "needs azure.account.name"),
    ({"azure.container.name": "tier", "azure.account.name": "kttest",
      "azure.sas.token": SAS.replace("sig=", "sg=")}, "azure.sas.token", "no sig="),
    ({"azure.container.name": "tier", "azure.account.name": "KT_Test"},
     "azure.account.name", "3-24 characters"),
    ({"azure.container.name": "tier", "azure.endpoint.url": "ftp://host/acct",
      "azure.sas.token": SAS}, "azure.endpoint.url", "http(s) URL"),
    ({"azure.container.name": "tier", "azure.endpoint.url": f"https://h/acct?{SAS}",
      "azure.account.name": "kttest"}, "azure.endpoint.url", "must not have a query"),
    ({"azure.container.name": "tier", "azure.connection.string": CONN,
      "azure.upload.block.size": "1024"}, "azure.upload.block.size", "from 65536 to"),
    ({"azure.container.name": "tier", "azure.connection.string": CONN,
      "azure.upload.concurrency": "many"}, "azure.upload.concurrency", "an integer from 1"),
    ({"azure.container.name": "tier", "azure.connection.string": CONN,
      "azure.retry.backoff.ms": "2000", "azure.retry.backoff.max.ms": "1000"},
     "azure.retry.backoff.max.ms", "must be at least"),
    ({"azure.container.name": "tier", "azure.connection.string": CONN,
      "azure.upload.blocksize": "65536"}, "azure.upload.blocksize", "unknown key"),
    ({"azure.container.name": "tier", "azure.connection.string": CONN,
      "azure.prefix": "a/../b"}, "azure.prefix", "bad part"),
])
def test_config_errors_are_one_line_naming_the_key_without_secrets(
        config: dict[str, str], key: str, words: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as info:
        _load(config)
    message = str(info.value)
    assert key in message and words in message, message
    assert "\n" not in message
    assert info.value.key == key
    for secret in SECRETS:
        assert secret not in message
        assert secret not in repr(info.value.value)
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        assert not any(secret in text for secret in SECRETS), text


def test_each_credential_kind_is_chosen_by_its_keys() -> None:
    base = {"azure.container.name": "tier"}
    assert AzureBlobConfig.from_config({**base, "azure.connection.string": CONN}
                                       ).credential_kind is CredentialKind.CONNECTION_STRING
    shared = AzureBlobConfig.from_config({**base, "azure.account.name": "kttest",
                                          "azure.account.key": KEY})
    assert shared.credential_kind is CredentialKind.SHARED_KEY
    assert shared.account_url == "https://kttest.blob.core.windows.net"
    sas = AzureBlobConfig.from_config({**base, "azure.sas.token": "?" + SAS,
                                       "azure.endpoint.url": "https://kttest.blob.core.chinacloudapi.cn/"})
    assert sas.credential_kind is CredentialKind.SAS
    assert sas.sas_token is not None
    assert sas.sas_token.reveal() == SAS  # the leading "?" is dropped
    assert sas.account_url == "https://kttest.blob.core.chinacloudapi.cn"
    default = AzureBlobConfig.from_config({**base, "azure.account.name": "kttest"})
    assert default.credential_kind is CredentialKind.DEFAULT_CREDENTIAL
    for config in (shared, sas, default):
        assert not any(secret in repr(config) for secret in SECRETS)
    conn = AzureBlobConfig.from_config({**base, "azure.connection.string": CONN})
    assert Secret.hide(f"key {KEY}") == "key <hidden>"  # the key inside counts as secret
    assert [s.reveal() for s in conn.secrets] == [CONN]


def test_defaults_and_tuning_keys_reach_the_client() -> None:
    rsm = _load({"azure.container.name": "tier", "azure.connection.string": CONN,
                 "azure.upload.block.size": "131072", "azure.upload.concurrency": "3",
                 "azure.retry.total": "5", "azure.retry.backoff.ms": "100",
                 "azure.retry.backoff.max.ms": "300", "azure.connection.timeout.ms": "1500"})
    with rsm:
        store = rsm.object_store
        assert store.part_size == 131072 and store.upload_concurrency == 3  # type: ignore[attr-defined]
        policy = store.container._pipeline._impl_policies  # type: ignore[attr-defined]
        retry = next(p for p in policy if isinstance(p, BackoffRetry))
        assert retry.total_retries == 5
        waits = [retry.get_backoff_time({"count": n}) for n in range(1, 7)]
        assert 0.05 <= waits[0] <= 0.1 and all(w <= 0.3 for w in waits)
        assert max(waits[3:]) > 0.1  # grows until the cap
    plain = AzureBlobConfig.from_config({"azure.container.name": "tier",
                                         "azure.connection.string": CONN})
    assert (plain.block_size, plain.upload_concurrency, plain.retry_total) == (8 << 20, 4, 3)


def test_prefixes_nest_azure_prefix_then_key_prefix() -> None:
    with _load({"azure.container.name": "tier", "azure.connection.string": CONN,
                "azure.prefix": "/prod/kafka/", "key.prefix": "run-1"}) as rsm:
        assert rsm.key_prefix == "prod/kafka/run-1"
    with _load({"azure.container.name": "tier", "azure.connection.string": CONN}) as rsm:
        assert rsm.key_prefix == ""


def test_default_azure_credential_needs_the_identity_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "azure.identity", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'kafka-tiers-azure\[identity\]'"):
        _load({"azure.container.name": "tier", "azure.account.name": "kttest"})


def test_default_azure_credential_is_used_without_a_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []

    class FakeCredential:  # stands in for azure.identity.DefaultAzureCredential
        def __init__(self) -> None:
            made.append(self)

        def get_token(self, *scopes: str, **kwargs: Any) -> Any:
            raise AssertionError("no request is made by configure")

        def close(self) -> None:
            made.append("closed")

    fake = types.ModuleType("azure.identity")
    fake.DefaultAzureCredential = FakeCredential  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "azure.identity", fake)
    with _load({"azure.container.name": "tier", "azure.account.name": "kttest"}) as rsm:
        container = rsm.object_store.container  # type: ignore[attr-defined]
        assert len(made) == 1 and container.credential is made[0]
        assert container.url.startswith("https://kttest.blob.core.windows.net/tier")
    assert made[1:] == ["closed"]
    with pytest.raises(ConfigError, match="only supported with HTTPS"):  # tokens need TLS
        _load({"azure.container.name": "tier", "azure.endpoint.url": "http://127.0.0.1:9/a"})

