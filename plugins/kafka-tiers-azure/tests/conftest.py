"""Fixtures of the Azure plugin's tests: plugin configs pointing at Azurite (the repository's
``azurite_server`` session fixture, or a private server from ``server_factory``), with fast
retries so that an outage fails in well under a second."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

#: Retries quick enough for tests: one retry after 10-20 ms, 2 s to connect.
FAST = {
    "azure.retry.total": "1",
    "azure.retry.backoff.ms": "20",
    "azure.retry.backoff.max.ms": "50",
    "azure.connection.timeout.ms": "2000",
    "azure.read.timeout.ms": "10000",
}


def azure_config(server: Any, container: str, **extra: str) -> dict[str, str]:
    """The plugin's keys for a container of an Azurite server (connection string, 64 KiB
    blocks, fast retries); ``extra`` keys given as ``azure_x_y=`` become ``azure.x.y``."""
    config = {"azure.connection.string": server.connection_string,
              "azure.container.name": container,
              "azure.upload.block.size": "65536",
              **FAST}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return config


@pytest.fixture
def fresh_container(azurite_server: Any) -> str:
    """A new empty container on the shared Azurite server."""
    return azurite_server.create_container().container_name


@pytest.fixture
def plugin_config(azurite_server: Any, fresh_container: str) -> dict[str, str]:
    """The plugin's config for :func:`fresh_container`."""
    return azure_config(azurite_server, fresh_container)


def load_helper(name: str) -> ModuleType:
    """Import a helper module of this directory by path, under a name no other plugin's tests
    use (several plugins have a ``plain_transfer.py``)."""
    unique = f"kafka_tiers_azure_tests_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fast_retries() -> dict[str, str]:
    """:data:`FAST` (the retry and timeout keys) as a fixture."""
    return dict(FAST)


@pytest.fixture
def config_for() -> Callable[..., dict[str, str]]:
    """:func:`azure_config` as a fixture (test modules cannot import this conftest)."""
    return azure_config


@pytest.fixture
def helper() -> Callable[[str], ModuleType]:
    """:func:`load_helper` as a fixture."""
    return load_helper
