"""The whole kafka-tiers storage conformance suite against the ``hdfs`` plugin, selected by its
entry-point name (so this also proves the distribution is installed with its entry point), over
WebHDFS: the emulator of ``tests/servers/webhdfs``, or a real cluster when ``KT_HDFS_URL`` is
set. Every run uses a fresh base directory; the suite adds a fresh ``key.prefix`` per test."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_tiers.conformance.storage import StorageSuite, StorageTarget


@pytest.mark.servers
class TestHdfsConformance(StorageSuite):
    """Every rule, concurrency included (the plugin declares ``concurrent_access``)."""

    LARGE_SEGMENT_BYTES = 24 * 1024 * 1024

    @pytest.fixture
    def storage_target(self, hdfs_config: dict[str, Any]) -> StorageTarget:
        return StorageTarget.from_plugin("hdfs", hdfs_config)
