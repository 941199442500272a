"""Account keys and SAS tokens never reach an error message or a log record, even with every
logger at DEBUG: the SDK's HTTP logging, urllib3's request lines (which carry a SAS in their
URLs) and the plugin's own errors, on successes and on failures."""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kafka_tiers.api import RemoteStorageError
from kafka_tiers.api.secret import HIDDEN
from kafka_tiers.plugins import load_remote_storage

pytestmark = pytest.mark.servers


def _sas(server: Any, container: str) -> str:
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    return generate_container_sas(
        server.account_name, container, account_key=server.account_key,
        permission=ContainerSasPermissions(read=True, write=True, delete=True, list=True),
        expiry=datetime.now(UTC) + timedelta(hours=1))


def _signature(sas: str) -> str:
    return next(p for p in sas.split("&") if p.startswith("sig="))[4:]


def _leaks(records: list[logging.LogRecord], secrets: list[str]) -> list[str]:
    found = []
    for record in records:
        text = record.getMessage() + (record.exc_text or "") + (record.stack_info or "")
        if record.exc_info and record.exc_info[1] is not None:
            text += str(record.exc_info[1])
        found += [f"{record.name}: {text[:200]}" for s in secrets if s in text]
    return found


def _exercise(rsm: Any) -> list[str]:
    """Every store operation, a multi-block upload included; returns the error messages."""
    store = rsm.object_store
    store.put("s/big", io.BytesIO(b"b" * 200_000), 200_000)
    store.put("s/small", io.BytesIO(b"small"), 5)
    with store.get("s/big") as stream:
        assert len(stream.read()) == 200_000
    assert {i.key for i in store.list("s/")} == {"s/big", "s/small"}
    store.delete_many(["s/big", "s/small"])
    errors = []
    try:
        store.get("s/missing")
    except RemoteStorageError as exc:
        errors.append(str(exc))
    return errors


def test_sas_token_never_logged_or_in_errors(azurite_server: Any, fresh_container: str,
                                             config_for: Any,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sas = _sas(azurite_server, fresh_container)
    secrets = [sas, _signature(sas)]
    config = {**config_for(azurite_server, fresh_container), "azure.sas.token": sas,
              "azure.endpoint.url": azurite_server.url}
    del config["azure.connection.string"]
    with load_remote_storage("azure", config) as rsm:
        errors = _exercise(rsm)
        # a refused signature, and an unreachable endpoint
        forged = sas.replace(_signature(sas), "Zm9yZ2VkLXNpZ25hdHVyZQ%3D%3D")
        with load_remote_storage("azure", {**config, "azure.sas.token": forged}) as bad:
            with pytest.raises(RemoteStorageError) as info:
                bad.object_store.put_object("s/x", b"x")
            errors.append(str(info.value))
            secrets.append(forged)
        with load_remote_storage("azure", {**config, "azure.endpoint.url":
                                           "http://127.0.0.1:9/devstoreaccount1"}) as down:
            with pytest.raises(RemoteStorageError) as info:
                down.object_store.put_object("s/x", b"x")
            errors.append(str(info.value))
    urllib3_lines = [r for r in caplog.records if r.name == "urllib3.connectionpool"
                     and "devstoreaccount1" in r.getMessage()]
    assert urllib3_lines, "urllib3 logged no request line: the check below would prove nothing"
    assert any(HIDDEN in r.getMessage() for r in urllib3_lines)
    assert _leaks(caplog.records, secrets) == []
    assert not [e for e in errors if any(s in e for s in secrets)], errors


def test_account_key_and_connection_string_never_logged_or_in_errors(
        azurite_server: Any, fresh_container: str, config_for: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = azurite_server.account_key
    secrets = [key, azurite_server.connection_string]
    shared = {**config_for(azurite_server, fresh_container),
              "azure.account.name": azurite_server.account_name, "azure.account.key": key,
              "azure.endpoint.url": azurite_server.url}
    del shared["azure.connection.string"]
    errors = []
    for config in (config_for(azurite_server, fresh_container), shared):
        with load_remote_storage("azure", config) as rsm:
            errors += _exercise(rsm)
    wrong = "V1JPTkcta2V5LWJ1dC12YWxpZC1iYXNlNjQtV1JPTkcta2V5LWJ1dC12YWxpZC1iYXNlNjQ="
    with load_remote_storage("azure", {**shared, "azure.account.key": wrong}) as bad:
        with pytest.raises(RemoteStorageError) as info:
            list(bad.object_store.list(""))
        errors.append(str(info.value))
        secrets.append(wrong)
    assert any(r.name.startswith("azure.") for r in caplog.records)
    assert _leaks(caplog.records, secrets) == []
    assert not [e for e in errors if any(s in e for s in secrets)], errors


def test_without_the_plugin_urllib3_would_log_the_sas(azurite_server: Any, fresh_container: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Why the plugin holds its credentials as Secret: the same request through a bare SDK
    client with the SAS as a plain string (no Secret of it alive, so nothing hides it) puts the
    SAS signature into a DEBUG record."""
    from azure.storage.blob import ContainerClient

    caplog.set_level(logging.DEBUG)
    sas = _sas(azurite_server, fresh_container)
    with ContainerClient(azurite_server.url, fresh_container, credential=sas) as client:
        list(client.list_blobs())
    assert _leaks(caplog.records, [_signature(sas)])
