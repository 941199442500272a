"""Plugin discovery and loading through real entry points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_tiers import plugins
from kafka_tiers.api import ConfigError, PluginError, ReplicaPlacer
from tests.fakedist import make_dist

GOOD = """
from kafka_tiers.api import ReplicaPlacer, ConfigError

class FirstBrokers(ReplicaPlacer):
    def configure(self, config):
        self.config = dict(config)
        if "bad" in config:
            raise ConfigError("bad is not allowed", key="bad")
    def place(self, spec, cluster, broker_ids=None):
        ids = [b.broker_id for b in cluster.usable_brokers]
        return [ids[:spec.replication_factor] for _ in range(spec.num_partitions)]

class OldSpi(FirstBrokers):
    SUPPORTED_SPI = ">=3.0,<4"

class Abstract(ReplicaPlacer):
    pass

class NotAPlacer:
    pass

class Exploding(FirstBrokers):
    def configure(self, config):
        raise RuntimeError("kaboom")
"""


@pytest.fixture
def fake_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_dist(
        tmp_path / "site", "acme-placers", "2.3.1",
        {"acme_placers": GOOD, "acme_broken": "import does_not_exist_anywhere\n"},
        {plugins.PLACER_GROUP: {
            "acme-first": "acme_placers:FirstBrokers",
            "acme-old": "acme_placers:OldSpi",
            "acme-abstract": "acme_placers:Abstract",
            "acme-notaplacer": "acme_placers:NotAPlacer",
            "acme-broken": "acme_broken:Placer",
            "acme-exploding": "acme_placers:Exploding",
        }},
    )
    monkeypatch.syspath_prepend(str(root))
    return root


def test_entry_point_name_loads_and_configures(fake_plugins: Path) -> None:
    placer = plugins.load_placer("acme-first", {"seed": "7"})
    assert isinstance(placer, ReplicaPlacer)
    assert placer.config == {"seed": "7"}


def test_import_path_loads(fake_plugins: Path) -> None:
    placer = plugins.load_placer("acme_placers:FirstBrokers")
    assert type(placer).__name__ == "FirstBrokers"


def test_unknown_name_lists_installed(fake_plugins: Path) -> None:
    with pytest.raises(PluginError) as err:
        plugins.load_placer("no-such-placer")
    msg = str(err.value)
    assert "unknown replica placer 'no-such-placer'" in msg
    assert "acme-first" in msg and "simple" in msg and "rack-aware" in msg
    assert err.value.cause == "unknown name"


@pytest.mark.parametrize(
    ("name", "fragment", "cause"),
    [
        ("acme-old", "supports SPI >=3.0,<4, but this kafka-tiers provides SPI 2.1.0",
         "incompatible SPI version"),
        ("acme-abstract", "does not implement place", "abstract methods left"),
        ("acme-notaplacer", "not a subclass of kafka_tiers.api.ReplicaPlacer",
         "does not implement the interface"),
        ("acme-broken", "cannot be loaded: ModuleNotFoundError", "import failed"),
        ("acme-exploding", "failed to configure: RuntimeError: kaboom", "configure failed"),
    ],
)
def test_broken_plugins_give_one_line_naming_plugin_and_distribution(
    fake_plugins: Path, name: str, fragment: str, cause: str
) -> None:
    with pytest.raises(PluginError) as err:
        plugins.load_placer(name)
    msg = str(err.value)
    assert "\n" not in msg
    assert fragment in msg
    assert f"'{name}' from acme-placers 2.3.1" in msg
    assert err.value.cause == cause


def test_config_error_from_plugin_names_plugin(fake_plugins: Path) -> None:
    with pytest.raises(ConfigError) as err:
        plugins.load_placer("acme-first", {"bad": "1"})
    assert "acme-first" in str(err.value) and err.value.key == "bad"


def test_malformed_and_missing_import_paths() -> None:
    with pytest.raises(PluginError, match="not an import path"):
        plugins.load_placer("a b:c")
    with pytest.raises(PluginError, match="cannot be imported"):
        plugins.load_placer("no_such_module_xyz:Placer")
    with pytest.raises(PluginError, match="has no attribute Nope"):
        plugins.load_placer("kafka_tiers.api:Nope")
    with pytest.raises(PluginError, match="empty name"):
        plugins.load_placer("  ")


def test_discover_reports_each_plugin(fake_plugins: Path) -> None:
    found = {(p.group, p.name): p for p in plugins.discover()}
    good = found[(plugins.PLACER_GROUP, "acme-first")]
    assert good.loads and good.distribution == "acme-placers" and good.version == "2.3.1"
    assert good.target == "acme_placers:FirstBrokers"
    bad = found[(plugins.PLACER_GROUP, "acme-old")]
    assert not bad.loads and "SPI" in (bad.error or "")
    assert found[(plugins.PLACER_GROUP, "rack-aware")].distribution == "kafka-tiers"


def test_check_spi_rejects_invalid_specifier() -> None:
    class Weird(ReplicaPlacer):
        SUPPORTED_SPI = "one point oh"

        def place(self, spec, cluster, broker_ids=None):  # pragma: no cover
            return None

    with pytest.raises(PluginError, match="is not a version range"):
        plugins.check_spi(Weird, "weird")


def test_plugins_list_cli_json_and_table(fake_plugins: Path) -> None:
    path = f"{fake_plugins}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    env = dict(os.environ, PYTHONPATH=path)
    out = subprocess.run([sys.executable, "-m", "kafka_tiers", "plugins", "list", "--format",
                          "json"], capture_output=True, text=True, env=env, check=True)
    import json

    data = json.loads(out.stdout)
    names = {(p["group"], p["name"]): p for p in data["plugins"]}
    assert names[(plugins.PLACER_GROUP, "acme-first")]["loads"] is True
    assert names[(plugins.PLACER_GROUP, "acme-broken")]["loads"] is False
    table = subprocess.run([sys.executable, "-m", "kafka_tiers", "plugins", "list"],
                           capture_output=True, text=True, env=env, check=True)
    assert "acme-first" in table.stdout and "acme-placers" in table.stdout
    assert "acme-broken: replica placer 'acme-broken' from acme-placers 2.3.1 cannot be loaded" \
        in " ".join(table.stdout.split())


HOOKS = """
from kafka_tiers.api import hookimpl

@hookimpl
def kafka_tiers_leader_elected(topic_partition, leader, leader_epoch, isr):
    pass
"""

MISSPELT_HOOK = """
from kafka_tiers.api import hookimpl

@hookimpl
def kafka_tiers_leader_electd(topic_partition, leader, leader_epoch, isr):
    pass
"""


def test_discover_says_a_hook_plugin_with_an_unknown_hook_does_not_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``plugins list`` says what the broker would say: a hook plugin implementing a hook that
    does not exist does not load, with the broker's reason."""
    root = make_dist(tmp_path / "site", "acme-hooks", "1.0",
                     {"acme_hooks_good": HOOKS, "acme_hooks_misspelt": MISSPELT_HOOK},
                     {plugins.HOOK_GROUP: {"good": "acme_hooks_good",
                                           "misspelt": "acme_hooks_misspelt"}})
    monkeypatch.syspath_prepend(str(root))
    found = {p.name: p for p in plugins.discover((plugins.HOOK_GROUP,))}
    assert found["good"].loads and found["good"].error is None
    assert not found["misspelt"].loads
    assert found["misspelt"].error is not None
    assert "hook plugin 'misspelt'" in found["misspelt"].error
    assert "kafka_tiers_leader_electd" in found["misspelt"].error
