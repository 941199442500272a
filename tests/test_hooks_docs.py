"""Every snippet in docs/hooks.md runs: the plugin it shows is installed as a real distribution
(entry point from the TOML snippet, modules from the Python snippets), the shell snippets are run
by bash and their environment applied, the properties snippet is read as a broker config, and
the trace it shows is the trace the core logs."""

from __future__ import annotations

import importlib
import logging
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_tiers.api import LogDirInfo, TopicPartition
from kafka_tiers.config import BrokerConfig, read_properties
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
from tests.fakedist import make_dist

DOC = (Path(__file__).resolve().parents[1] / "docs" / "hooks.md").read_text()
SNIPPETS = re.findall(r"^```(\w+)\n(.*?)^```$", DOC, re.M | re.S)
RUNNERS = {"toml", "python", "bash", "text", "properties"}
TP = TopicPartition("orders", 3)
DIRS = [LogDirInfo("/x/disk-1", bytes_used=500), LogDirInfo("/x/disk-2", bytes_used=100),
        LogDirInfo("/x/disk-audit", bytes_used=900)]


def snippets(lang: str) -> list[str]:
    return [code for kind, code in SNIPPETS if kind == lang]


def module_name(code: str) -> str:
    """``# acme_audit/hooks.py`` on a snippet's first line -> ``acme_audit.hooks``."""
    first = code.splitlines()[0]
    match = re.fullmatch(r"# ([\w/]+)\.py", first)
    assert match, f"python snippet without its module path: {first!r}"
    return match.group(1).replace("/", ".")


def run_bash(code: str) -> dict[str, str]:
    """The KAFKA_TIERS_* environment a bash snippet leaves behind."""
    out = subprocess.run(["bash", "-euc", code + "\nenv -0"], capture_output=True, check=True,
                         env={"PATH": "/usr/bin:/bin"}).stdout.decode()
    pairs = (item.split("=", 1) for item in out.split("\0") if "=" in item)
    return {k: v for k, v in pairs if k.startswith("KAFKA_TIERS_")}


def test_every_snippet_kind_has_a_runner() -> None:
    assert SNIPPETS and {kind for kind, _ in SNIPPETS} <= RUNNERS
    assert len(snippets("toml")) == 1 and len(snippets("text")) == 1
    assert len(snippets("bash")) == 2 and len(snippets("properties")) == 1
    for code in snippets("python"):
        assert "from kafka_tiers.api import hookimpl" in code, module_name(code)


@pytest.fixture
def audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The documented plugin installed as distribution acme-audit; yields its entry-point name."""
    for name in [m for m in sys.modules if m.split(".")[0] == "acme_audit"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delenv("KAFKA_TIERS_TRACE_HOOKS", raising=False)
    monkeypatch.delenv("KAFKA_TIERS_BLOCK_HOOK_PLUGINS", raising=False)
    entry_points = tomllib.loads(snippets("toml")[0])["project"]["entry-points"]
    modules = {module_name(code): code for code in snippets("python")}
    modules["acme_audit.__init__"] = ""
    root = make_dist(tmp_path / "site", "acme-audit", "1.0", modules, entry_points)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    yield next(iter(entry_points["kafka_tiers"]))
    for name in [m for m in sys.modules if m.split(".")[0] == "acme_audit"]:
        del sys.modules[name]


def test_documented_plugin_is_loaded_and_called(audit: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    hooks = Hooks()
    assert hooks.pm.get_plugin(audit) is not None
    hooks.leader_elected(TP, 2, 5, [2, 1])
    assert capsys.readouterr().out == "orders-3: leader 2 (epoch 5), isr [2, 1]\n"


def test_trace_snippet_logs_the_documented_trace(audit: str, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    env = run_bash(snippets("bash")[0])
    assert env == {"KAFKA_TIERS_TRACE_HOOKS": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with caplog.at_level(logging.INFO, logger="kafka_tiers.plugins.hooks"):
        Hooks().leader_elected(TP, 2, 5, [2, 1])
    assert [r.getMessage() for r in caplog.records] == snippets("text")[0].splitlines()


def test_blocking_snippets_keep_the_plugin_from_loading(
    audit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    props = tmp_path / "server.properties"
    props.write_text(snippets("properties")[0])
    cfg = BrokerConfig(read_properties(props))
    assert cfg["hook.plugins.blocked"] == [audit]
    hooks = Hooks(blocked=cfg["hook.plugins.blocked"])
    hooks.leader_elected(TP, 2, 5, [2, 1])
    assert hooks.pm.get_plugin(audit) is None and capsys.readouterr().out == ""

    env = run_bash(snippets("bash")[1])
    assert env == {"KAFKA_TIERS_BLOCK_HOOK_PLUGINS": audit}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    hooks = Hooks()
    hooks.leader_elected(TP, 2, 5, [2, 1])
    assert hooks.pm.get_plugin(audit) is None and capsys.readouterr().out == ""


def test_wrapper_snippet_sees_the_choice(audit: str, caplog: pytest.LogCaptureFixture) -> None:
    timing = importlib.import_module("acme_audit.timing")
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[timing]))
    with caplog.at_level(logging.INFO, logger="acme_audit.timing"):
        assert hooks.choose_log_dir(TP, DIRS) == "/x/disk-2"
    assert re.fullmatch(r"orders-3 goes to /x/disk-2 \(chosen in [\d.]+ ms\)\n?",
                        caplog.records[0].getMessage())


def test_choose_log_dir_snippet_pins_a_topic_prefix(audit: str) -> None:
    disks = importlib.import_module("acme_audit.disks")
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[disks]))
    assert hooks.choose_log_dir(TopicPartition("audit.logins", 0), DIRS) == "/x/disk-audit"
    assert hooks.choose_log_dir(TP, DIRS) == "/x/disk-2"
