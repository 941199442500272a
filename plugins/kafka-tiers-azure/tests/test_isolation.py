"""The plugin depends on kafka-tiers' public surface only: importing it (and building its store
from a config) loads no ``kafka_tiers`` module outside ``kafka_tiers.api``."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
import kafka_tiers_azure
from kafka_tiers_azure import AzureBlobStore
store = AzureBlobStore.from_config({
    "azure.container.name": "tier", "azure.connection.string":
    "AccountName=kttest;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:9/kttest"})
store.close()
print(json.dumps(sorted(m for m in sys.modules if m == "kafka_tiers"
                        or m.startswith("kafka_tiers."))))
"""


def test_only_kafka_tiers_api_is_imported() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         check=True, timeout=60)
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert "kafka_tiers.api" in modules  # the check sees kafka_tiers modules at all
    outside = [m for m in modules if m not in ("kafka_tiers", "kafka_tiers.api")
               and not m.startswith("kafka_tiers.api.")]
    assert outside == []


def test_the_core_imports_no_azure_sdk() -> None:
    script = ("import sys, kafka_tiers.api, kafka_tiers.plugins, kafka_tiers.broker; "
              "print(sorted(m for m in sys.modules if m.startswith('azure')))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
