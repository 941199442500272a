"""Broker configuration from server.properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_tiers.api import ConfigError
from kafka_tiers.config import BrokerConfig, ConfigKey, Int, List, String, read_properties


def test_properties_syntax_as_java_reads_it(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_text("# comment\n! also a comment\nbroker.id = 4\nbroker.rack:/dc1/r2\n"
                 "placer.seed 7\nlong.value=a,\\\n    b\n")
    props = read_properties(f)
    assert props["broker.id"] == "4" and props["broker.rack"] == "/dc1/r2"
    assert props["placer.seed"] == "7" and props["long.value"] == "a,b"
    cfg = BrokerConfig.from_file(f)
    assert cfg["broker.id"] == 4 and cfg["broker.rack"] == "/dc1/r2"
    assert cfg.prefixed("placer.") == {"seed": "7"}


def test_defaults_and_alias() -> None:
    assert BrokerConfig({})["broker.replica.placer"] == "rack-aware"
    cfg = BrokerConfig({"replica.placer.class.name": "multi-level-rack"})
    assert cfg["broker.replica.placer"] == "multi-level-rack"
    assert cfg["replica.placer.class.name"] == "multi-level-rack"
    with pytest.raises(ConfigError, match="are the same setting and disagree"):
        BrokerConfig({"broker.replica.placer": "simple",
                      "replica.placer.class.name": "rack-aware"})
    assert BrokerConfig({"broker.replica.placer": "simple",
                         "replica.placer.class.name": "simple"})["broker.replica.placer"] \
        == "simple"


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("broker.id", "abc", "invalid value 'abc' for broker.id: expected an integer >= 0"),
    ("broker.id", "-3", "expected an integer >= 0"),
    ("broker.replica.placer", "my placer!", "expected an entry-point name"),
])
def test_bad_values_name_key_value_and_expectation(key: str, value: str, fragment: str
                                                   ) -> None:
    with pytest.raises(ConfigError) as err:
        BrokerConfig({key: value})
    assert fragment in str(err.value)
    assert err.value.key == key and err.value.value == value


def test_secret_values_never_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_tiers.config as config_mod

    secret_keys = (ConfigKey("test.secret.port", Int(min=1), 1, secret=True),)
    monkeypatch.setattr(config_mod, "TEST_SECRET_KEYS", secret_keys, raising=False)
    monkeypatch.setattr(config_mod, "SECTIONS",
                        (*config_mod.SECTIONS, "kafka_tiers.config:TEST_SECRET_KEYS"))
    with pytest.raises(ConfigError) as err:
        BrokerConfig({"test.secret.port": "hunter2"})
    assert "hunter2" not in str(err.value) and err.value.value is None
    cfg = BrokerConfig({"test.secret.port": "5"})
    assert ("test.secret.port", "<hidden>", False) in list(cfg.describe())


def test_value_types() -> None:
    assert List(Int(min=0), min_items=1).parse("1, 2,,3") == [1, 2, 3]
    with pytest.raises(ValueError):
        List(Int(min=0), min_items=1).parse(" , ")
    with pytest.raises(ValueError):
        String(pattern=r"[a-z]+").parse("ABC")


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.from_file(tmp_path / "missing.properties")


def test_config_show_cli(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from kafka_tiers.cli import cli

    f = tmp_path / "server.properties"
    f.write_text("broker.id=2\n")
    res = CliRunner().invoke(cli, ["config", "show", "--config", str(f), "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["key"]: r for r in json.loads(res.output)["settings"]}
    assert rows["broker.id"] == {"key": "broker.id", "value": "2", "default": False}
    assert rows["broker.replica.placer"]["default"] is True
