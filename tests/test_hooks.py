"""Hook specs, the plugin manager, the facade, and the hooks' documentation."""

from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path

import pytest

from kafka_tiers.api import LogDirInfo, PluginError, TopicPartition
from kafka_tiers.plugins import hookspecs
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
from kafka_tiers.plugins.hookspecs import hookimpl

DOCS = Path(__file__).resolve().parents[1] / "docs" / "hooks.md"
TP = TopicPartition("orders", 3)


def spec_names() -> list[str]:
    return sorted(n for n in dir(hookspecs) if n.startswith("kafka_tiers_"))


def test_every_hook_documented_with_exact_signature() -> None:
    text = DOCS.read_text()
    documented = dict(re.findall(r"^### (kafka_tiers_\w+)\(([^)]*)\)$", text, re.M))
    assert sorted(documented) == spec_names()
    for name in spec_names():
        params = list(inspect.signature(getattr(hookspecs, name)).parameters)
        assert documented[name] == ", ".join(params), name
        section = text.split(f"### {name}(", 1)[1].split("\n### ", 1)[0]
        for param in params:
            assert f"`{param}`" in section, f"{name}: argument {param} undocumented"


def test_facade_has_one_method_per_hook() -> None:
    methods = {m for m in dir(Hooks) if not m.startswith("_")} - {"pm", "trace"}
    assert {f"kafka_tiers_{m}" for m in methods} == set(spec_names())


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @hookimpl
    def kafka_tiers_leader_elected(self, topic_partition, leader, isr):
        self.calls.append(("leader", topic_partition, leader, tuple(isr)))

    @hookimpl
    def kafka_tiers_topic_created(self, topic, assignment):
        self.calls.append(("topic", topic, dict(assignment)))


class Failing:
    @hookimpl
    def kafka_tiers_leader_elected(self, leader):
        raise RuntimeError("plugin bug")


def test_notifications_reach_plugins_with_subset_of_arguments() -> None:
    rec = Recorder()
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[rec]))
    hooks.leader_elected(TP, 2, 5, [2, 1])
    hooks.topic_created("orders", {0: [1, 2]})
    assert rec.calls == [("leader", TP, 2, (2, 1)), ("topic", "orders", {0: [1, 2]})]


def test_failing_notification_is_logged_and_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = Recorder()
    pm = make_plugin_manager(load_entrypoints=False, extra=[rec])
    pm.register(Failing(), name="failing-plugin")
    with caplog.at_level(logging.ERROR):
        Hooks(pm).leader_elected(TP, 1, 1, [1])
    assert rec.calls and rec.calls[0][0] == "leader"
    assert "failing-plugin" in caplog.text and "kafka_tiers_leader_elected" in caplog.text


def test_misspelt_hook_is_refused_with_plugin_name() -> None:
    class Typo:
        @hookimpl
        def kafka_tiers_leader_elekted(self, leader):  # pragma: no cover
            pass

    with pytest.raises(PluginError, match=r"unknown hook|kafka_tiers_leader_elekted"):
        make_plugin_manager(load_entrypoints=False, extra=[Typo()])


DIRS = [LogDirInfo("/d1", bytes_used=500, replica_count=1),
        LogDirInfo("/d2", bytes_used=100, replica_count=9),
        LogDirInfo("/d3", online=False, bytes_used=0)]


def test_default_log_dir_choice_is_least_bytes_used_online() -> None:
    hooks = Hooks(make_plugin_manager(load_entrypoints=False))
    assert hooks.choose_log_dir(TP, DIRS) == "/d2"
    tie = [LogDirInfo("/a", bytes_used=5, replica_count=2),
           LogDirInfo("/b", bytes_used=5, replica_count=1)]
    assert hooks.choose_log_dir(TP, tie) == "/b"


def test_plugin_choice_wins_and_bad_choice_is_refused() -> None:
    class Pinned:
        def __init__(self, answer):
            self.answer = answer

        @hookimpl
        def kafka_tiers_choose_log_dir(self, topic_partition, log_dirs):
            return self.answer

    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[Pinned("/d1")]))
    assert hooks.choose_log_dir(TP, DIRS) == "/d1"
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[Pinned(None)]))
    assert hooks.choose_log_dir(TP, DIRS) == "/d2"
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[Pinned("/d3")]))
    with pytest.raises(PluginError, match="not an online log dir"):
        hooks.choose_log_dir(TP, DIRS)


def test_no_online_dir_is_an_error() -> None:
    hooks = Hooks(make_plugin_manager(load_entrypoints=False))
    with pytest.raises(PluginError, match="no online log directory"):
        hooks.choose_log_dir(TP, [LogDirInfo("/x", online=False)])


def test_trace_logs_calls(monkeypatch: pytest.MonkeyPatch,
                          caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("KAFKA_TIERS_TRACE_HOOKS", "1")
    hooks = Hooks(make_plugin_manager(load_entrypoints=False))
    with caplog.at_level(logging.INFO, logger="kafka_tiers.plugins.hooks"):
        hooks.choose_log_dir(TP, DIRS)
    assert "kafka_tiers_choose_log_dir" in caplog.text and "/d2" in caplog.text


def test_entry_point_hook_plugin_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    from tests.fakedist import make_dist

    root = make_dist(tmp_path / "site", "acme-audit", "0.1", {"acme_audit": """
        from kafka_tiers.plugins.hookspecs import hookimpl
        SEEN = []

        @hookimpl
        def kafka_tiers_broker_up(broker_id, rack):
            SEEN.append((broker_id, rack))
        """}, {"kafka_tiers": {"audit": "acme_audit"}})
    monkeypatch.syspath_prepend(str(root))
    hooks = Hooks(make_plugin_manager())
    hooks.broker_up(4, "/dc1/r1")
    import acme_audit  # type: ignore[import-not-found]

    assert acme_audit.SEEN == [(4, "/dc1/r1")]
