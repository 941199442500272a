"""The whole kafka-tiers storage conformance suite against the ``s3`` plugin on moto's S3
server, selected by its entry-point name (so this also proves the distribution is installed
with its entry point). Every test gets a fresh random ``key.prefix``; the bucket is fresh per
test too."""

from __future__ import annotations

import pytest

from kafka_tiers.conformance.storage import StorageSuite, StorageTarget

pytestmark = pytest.mark.servers


class TestS3Conformance(StorageSuite):
    """Every rule, multipart and concurrency included (the plugin declares both). Parts are
    S3's minimum, 5 MiB, so the multipart checks run on segments of 12.5-15 MiB."""

    LARGE_SEGMENT_BYTES = 12 * 1024 * 1024

    @pytest.fixture
    def storage_target(self, s3_config: dict[str, str]) -> StorageTarget:
        return StorageTarget.from_plugin("s3", s3_config)

