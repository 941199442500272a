"""The plugin imports only ``kafka_tiers.api`` from kafka-tiers, and the core never imports
boto3: checked in fresh interpreters, so nothing imported by the test run hides a violation."""

from __future__ import annotations

import json
import subprocess
import sys


def _modules_after(code: str) -> list[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_plugin_imports_only_the_public_api_of_kafka_tiers() -> None:
    modules = _modules_after(
        "import kafka_tiers_s3, kafka_tiers_s3.store, "
        "kafka_tiers_s3.config, kafka_tiers_s3.errors\n"
        "from kafka_tiers_s3.config import known_storage_classes\n"
        "known_storage_classes()\n"
        "kafka_tiers_s3.S3ObjectStore(kafka_tiers_s3.S3Config.from_mapping("
        "{'s3.bucket.name': 'b-1', 's3.region': 'us-east-1', "
        "'aws.access.key.id': 'a', 'aws.secret.access.key': 'b'})).close()")
    core = [m for m in modules if m.startswith("kafka_tiers.")
            and m != "kafka_tiers.api" and not m.startswith("kafka_tiers.api.")]
    assert "kafka_tiers.api" in modules and "boto3" in modules
    assert core == []


def test_loading_kafka_tiers_api_does_not_import_boto3() -> None:
    modules = _modules_after("import kafka_tiers.api, kafka_tiers.plugins")
    assert not [m for m in modules if m.split(".")[0] in ("boto3", "botocore",
                                                          "kafka_tiers_s3")]
