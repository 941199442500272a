"""The quick start shows a real Kafka client producing to and consuming from its broker's
Kafka listener, the old offsets served from the remote tier (confluent-kafka when installed,
else kafka-python)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.cli import cli
from kafka_tiers.cli.quickstart import CLIENT_RECORDS


def _quickstart(work: Path, *extra: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["quickstart", "--dir", str(work), "--records", "300",
                                   "--partitions", "3", *extra], catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


def test_quickstart_kafka_client_reads_the_remote_tier(tmp_path: Path) -> None:
    code, out, err = _quickstart(tmp_path / "qs", "--format", "json")
    assert code == 0, err
    tiering = json.loads(out)["tiering"]
    kc = tiering["kafka_client"]
    assert kc["client"] == "confluent-kafka" and kc["client_version"]
    host, _, port = kc["bootstrap_servers"].partition(":")
    assert host == "127.0.0.1" and int(port) not in (0, 9092)  # a free port, not the sample's
    # the quick start's broker is PLAINTEXT on loopback only (docs/security.md secures one)
    assert kc["security_protocol"] == "PLAINTEXT"
    assert kc["produced"] == CLIENT_RECORDS
    assert kc["produced_offsets"] == [300, 300 + CLIENT_RECORDS - 1]
    assert kc["consumed"] == 300 + CLIENT_RECORDS and kc["matches"] is True
    assert kc["from_remote"] == tiering["local_log_start_offset"] > 0


def test_quickstart_shows_the_kafka_client(tmp_path: Path) -> None:
    code, out, err = _quickstart(tmp_path / "qs")
    assert code == 0, err
    text = " ".join(out.split())
    assert "a Kafka client (confluent-kafka" in text
    assert f"then consumed {300 + CLIENT_RECORDS} records from offset 0" in text
    assert "served from the remote tier: all match" in text
    assert ("the quick-start broker's listener is PLAINTEXT on 127.0.0.1 only (no TLS, no SASL, "
            "no ACLs); docs/security.md secures a broker") in text


def test_quickstart_without_confluent_kafka_uses_kafka_python(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """The quickstart tox env without the clients extra: kafka-python (a core dependency)."""
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import fails as if missing
    code, out, err = _quickstart(tmp_path / "qs", "--format", "json")
    assert code == 0, err
    kc = json.loads(out)["tiering"]["kafka_client"]
    assert kc["client"] == "kafka-python"
    assert kc["matches"] is True and kc["consumed"] == 300 + CLIENT_RECORDS
    assert kc["from_remote"] > 0
