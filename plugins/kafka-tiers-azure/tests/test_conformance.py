"""The whole kafka-tiers storage conformance suite against Azurite, through the plugin's
entry-point name ``azure`` (so this also proves the distribution is installed with its entry
point). Every run gets a fresh container; the suite gives every test its own key prefix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafka_tiers.conformance.storage import StorageSuite, StorageTarget

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def conformance_container(azurite_server: Any) -> str:
    """One container for the whole suite (each test gets its own key prefix in it)."""
    return str(azurite_server.create_container().container_name)


class TestAzureConformance(StorageSuite):
    """Every rule, multi-part (block) uploads and concurrency included: the plugin declares
    them. 64 KiB blocks keep the multi-part checks small; the large-segment check uses 24 MiB,
    the suite's default."""

    @pytest.fixture
    def storage_target(self, azurite_server: Any, conformance_container: str,
                       config_for: Callable[..., dict[str, str]]) -> StorageTarget:
        return StorageTarget.from_plugin("azure", config_for(azurite_server,
                                                             conformance_container))
