"""The plugin imports only ``kafka_tiers.api`` from kafka-tiers, like a third party's; the core
never imports the ``hdfs`` package."""

from __future__ import annotations

import json
import subprocess
import sys


def _modules_after(code: str) -> list[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_plugin_imports_only_the_public_api() -> None:
    modules = _modules_after("import kafka_tiers_hdfs, kafka_tiers_hdfs.client, "
                             "kafka_tiers_hdfs.store, kafka_tiers_hdfs.settings")
    ours = [m for m in modules if m == "kafka_tiers" or m.startswith("kafka_tiers.")]
    assert "kafka_tiers.api" in ours
    outside = [m for m in ours if m != "kafka_tiers" and not m.startswith("kafka_tiers.api")]
    assert outside == [], f"the plugin imported core modules: {outside}"
    assert "hdfs.ext.kerberos" not in modules  # only when hdfs.kerberos.enabled=true


def test_loading_through_the_entry_point_does_not_need_more() -> None:
    modules = _modules_after(
        "from importlib.metadata import entry_points\n"
        "[ep] = [e for e in entry_points(group='kafka_tiers.object_store') if e.name == 'hdfs']\n"
        "ep.load().from_config({'hdfs.namenode.url': 'http://127.0.0.1:9', 'hdfs.user': 'u', "
        "'hdfs.base.dir': '/x'}).close()")
    outside = [m for m in modules if m.startswith("kafka_tiers.")
               and not m.startswith("kafka_tiers.api")]
    assert outside == []


def test_the_core_does_not_import_hdfs() -> None:
    modules = _modules_after("import kafka_tiers.broker, kafka_tiers.plugins, "
                             "kafka_tiers.remote.local")
    assert "hdfs" not in modules and "kafka_tiers_hdfs" not in modules
