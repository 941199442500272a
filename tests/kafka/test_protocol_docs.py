"""docs/kafka-protocol.md: its API table is the registry's (what ApiVersions advertises), its
links are public, the README and the CLI page point at it; benchmarks/codec.py prints its one
JSON line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from kafka_tiers.kafka.registry import apis
from tests.docs_pages import checked_page_text

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "kafka-protocol.md"


def documented_apis(text: str) -> dict[int, tuple[str, int, int]]:
    """The rows of the page's API table: key -> (name, min version, max version)."""
    table = text.split("<!-- api-table: begin -->", 1)[1].split("<!-- api-table: end -->", 1)[0]
    rows: dict[int, tuple[str, int, int]] = {}
    for line in table.splitlines():
        m = re.fullmatch(r"\| (\d+) \| (\w+) \| (\d+)(?:-(\d+))? \|", line.strip())
        if m:
            low = int(m[3])
            assert int(m[1]) not in rows, f"API key {m[1]} listed twice"
            rows[int(m[1])] = (m[2], low, int(m[4]) if m[4] else low)
    return rows


def test_the_api_table_is_the_registry() -> None:
    served = {a.key: (a.name, a.min_version, a.max_version) for a in apis().values()}
    documented = documented_apis(PAGE.read_text())
    missing = {k: v for k, v in served.items() if documented.get(k) != v}
    extra = {k: v for k, v in documented.items() if k not in served}
    assert not missing and not extra, (
        f"docs/kafka-protocol.md's API table differs from the registry: served but not (or "
        f"otherwise) listed {missing}; listed but not served {extra}")


def test_the_table_parser_sees_a_drift() -> None:
    text = PAGE.read_text().replace("| 18 | ApiVersions | 0-4 |", "| 18 | ApiVersions | 0-3 |")
    assert documented_apis(text)[18] == ("ApiVersions", 0, 3)


def test_links_are_public_and_the_page_is_linked() -> None:
    text = checked_page_text(PAGE)
    for kip in re.findall(r"https://cwiki\.apache\.org/confluence/display/KAFKA/(\S+?)\)",
                          text):
        assert kip.startswith("KIP-"), kip
    for section in ("## Out of scope", "## Pointing clients at a broker", "## The listener keys",
                    "## The codec", "kcat -b", "confluent_kafka", "KafkaAdminClient"):
        assert section in text, section
    assert "(docs/kafka-protocol.md)" in (ROOT / "README.md").read_text()
    assert "(kafka-protocol.md)" in (ROOT / "docs" / "cli.md").read_text()


def test_codec_benchmark_prints_one_json_line() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "codec.py"), "--quick"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["benchmark"] == "codec" and isinstance(doc["goal_met"], bool)
    assert set(doc["per_api"]) == {"produce", "fetch", "metadata", "offset_commit"}
    kp = doc["per_api"]["produce"]["kafka_python"]
    assert kp["decode_per_s"] > 0 and kp["encode_per_s"] > 0
    assert doc["mix_requests_per_s"]["kafka_python"] > 0
    if doc["kio_version"] is not None:  # the bench extra installed: kio measured too
        assert doc["per_api"]["fetch"]["kio"]["decode_per_s"] > 0
    else:
        assert doc["mix_requests_per_s"]["kio"] is None and "kio_missing" in doc
