"""Hook specs, the plugin manager, the facade, and the hooks' documentation."""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from pathlib import Path
from typing import Any

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


def test_api_exports_the_hookimpl_marker() -> None:
    import kafka_tiers.api as api

    assert api.hookimpl is hookspecs.hookimpl
    assert "hookimpl" in api.__all__


class NewStyleWrapper:
    """A ``wrapper=True`` implementation: sees the call, the other answers and the result."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    @hookimpl(wrapper=True)
    def kafka_tiers_choose_log_dir(self, topic_partition, log_dirs):
        self.seen.append(("call", topic_partition, [d.path for d in log_dirs]))
        result = yield
        self.seen.append(("result", result))
        return result

    @hookimpl(wrapper=True)
    def kafka_tiers_topic_created(self, topic):
        self.seen.append(("call", topic))
        results = yield
        self.seen.append(("result", results))
        return results


class OldStyleWrapper:
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    @hookimpl(hookwrapper=True)
    def kafka_tiers_leader_elected(self, topic_partition, leader):
        self.seen.append(("call", topic_partition, leader))
        outcome = yield
        self.seen.append(("result", outcome.get_result()))


def test_wrappers_see_every_call_and_its_result() -> None:
    new, old, rec = NewStyleWrapper(), OldStyleWrapper(), Recorder()
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[rec, new, old]))
    assert hooks.choose_log_dir(TP, DIRS) == "/d2"
    hooks.topic_created("orders", {0: [1, 2]})
    hooks.leader_elected(TP, 2, 5, [2, 1])
    assert new.seen == [("call", TP, ["/d1", "/d2", "/d3"]), ("result", "/d2"),
                        ("call", "orders"), ("result", [])]
    assert old.seen == [("call", TP, 2), ("result", [])]
    assert rec.calls == [("topic", "orders", {0: [1, 2]}), ("leader", TP, 2, (2, 1))]


def test_wrapper_can_replace_the_answer_and_is_blamed_for_a_bad_one() -> None:
    class Redirect:
        def __init__(self, path: str) -> None:
            self.path = path

        @hookimpl(wrapper=True)
        def kafka_tiers_choose_log_dir(self):
            yield
            return self.path

    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[Redirect("/d1")]))
    assert hooks.choose_log_dir(TP, DIRS) == "/d1"
    hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[Redirect("/d3")]))
    with pytest.raises(PluginError, match="hook wrapper chose log dir '/d3'"):
        hooks.choose_log_dir(TP, DIRS)


def test_failing_wrapper_is_logged_with_its_plugin_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class BrokenWrapper:
        @hookimpl(wrapper=True)
        def kafka_tiers_broker_up(self, broker_id):
            yield
            raise RuntimeError("wrapper bug")

    rec = Recorder()
    pm = make_plugin_manager(load_entrypoints=False, extra=[rec])
    pm.register(BrokenWrapper(), name="broken-wrapper")
    with caplog.at_level(logging.ERROR):
        Hooks(pm).broker_up(3, None)
    assert "broken-wrapper" in caplog.text and "kafka_tiers_broker_up" in caplog.text


def test_failing_first_result_plugin_is_named() -> None:
    class Crashing:
        @hookimpl
        def kafka_tiers_choose_log_dir(self):
            raise OSError("disk probe failed")

    pm = make_plugin_manager(load_entrypoints=False)
    pm.register(Crashing(), name="crashing-chooser")
    with pytest.raises(PluginError, match=r"crashing-chooser.*disk probe failed") as info:
        Hooks(pm).choose_log_dir(TP, DIRS)
    assert info.value.plugin == "crashing-chooser"


def test_wrong_argument_is_refused_with_plugin_name() -> None:
    class Wrong:
        @hookimpl
        def kafka_tiers_broker_up(self, broker_id, colour):  # pragma: no cover
            pass

    pm = make_plugin_manager(load_entrypoints=False)
    with pytest.raises(PluginError, match=r"wrong-args.*colour"):
        pm.register(Wrong(), name="wrong-args")


def test_trace_names_the_arguments_the_plugins_and_the_result(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("KAFKA_TIERS_TRACE_HOOKS", "1")
    pm = make_plugin_manager(load_entrypoints=False)
    pm.register(NewStyleWrapper(), name="timing-wrapper")
    hooks = Hooks(pm)
    Hooks(pm)  # a second facade on the same manager does not trace twice
    with caplog.at_level(logging.INFO, logger="kafka_tiers.plugins.hooks"):
        hooks.choose_log_dir(TP, DIRS)
        hooks.broker_up(7, "/dc1/r2")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("hook kafka_tiers_choose_log_dir(topic_partition=")
    assert lines[0].endswith("-> plugins: timing-wrapper, kafka_tiers.plugins.default_hooks")
    assert lines[1:] == ["hook kafka_tiers_choose_log_dir returned '/d2'",
                         "hook kafka_tiers_broker_up(broker_id=7, rack='/dc1/r2') "
                         "-> plugins: none",
                         "hook kafka_tiers_broker_up returned []"]


def test_no_trace_without_the_env_var(monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("KAFKA_TIERS_TRACE_HOOKS", raising=False)
    hooks = Hooks(make_plugin_manager(load_entrypoints=False))
    with caplog.at_level(logging.INFO, logger="kafka_tiers.plugins.hooks"):
        hooks.choose_log_dir(TP, DIRS)
    assert caplog.text == ""


AUDIT_PLUGIN = """
    from kafka_tiers.api import hookimpl
    SEEN = []

    @hookimpl
    def kafka_tiers_broker_up(broker_id, rack):
        SEEN.append((broker_id, rack))
    """


def _install_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str) -> Any:
    from tests.fakedist import make_dist

    root = make_dist(tmp_path / "site", f"{module.replace('_', '-')}", "0.1",
                     {module: AUDIT_PLUGIN}, {"kafka_tiers": {module.replace("_", "-"): module}})
    monkeypatch.syspath_prepend(str(root))
    return importlib.import_module(module)


@pytest.mark.parametrize("how", ["env", "config"])
def test_blocked_entry_point_plugin_is_not_called(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    module = f"acme_blocked_{how}"
    plugin = _install_audit(tmp_path, monkeypatch, module)
    name = module.replace("_", "-")
    blocked: list[str] = []
    if how == "env":
        monkeypatch.setenv("KAFKA_TIERS_BLOCK_HOOK_PLUGINS", f"{name}, not-installed-plugin")
    else:
        monkeypatch.delenv("KAFKA_TIERS_BLOCK_HOOK_PLUGINS", raising=False)
        from kafka_tiers.config import BrokerConfig

        cfg = BrokerConfig({"hook.plugins.blocked": f"{name},not-installed-plugin"})
        blocked = cfg["hook.plugins.blocked"]
    with caplog.at_level(logging.INFO, logger="kafka_tiers.plugins.hooks"):
        hooks = Hooks(blocked=blocked)
    hooks.broker_up(4, "/dc1/r1")
    assert plugin.SEEN == []
    assert hooks.pm.is_blocked(name) and hooks.pm.get_plugin(name) is None
    assert "hook plugins blocked" in caplog.text
    assert name in caplog.text and "not-installed-plugin (not installed)" in caplog.text

    monkeypatch.delenv("KAFKA_TIERS_BLOCK_HOOK_PLUGINS", raising=False)
    Hooks().broker_up(5, None)  # not blocked: loaded and called
    assert plugin.SEEN == [(5, None)]


def test_the_core_hook_module_cannot_be_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_TIERS_BLOCK_HOOK_PLUGINS", "kafka_tiers.plugins.default_hooks")
    hooks = Hooks(make_plugin_manager(load_entrypoints=False))
    assert hooks.choose_log_dir(TP, DIRS) == "/d2"


def test_broker_and_placement_service_block_what_their_config_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka_tiers.broker import Broker
    from kafka_tiers.config import BrokerConfig
    from kafka_tiers.placement.service import PlacementService

    monkeypatch.delenv("KAFKA_TIERS_BLOCK_HOOK_PLUGINS", raising=False)
    _install_audit(tmp_path, monkeypatch, "acme_blocked_broker")
    name = "acme-blocked-broker"
    config = {"log.dirs": str(tmp_path / "logs"), "hook.plugins.blocked": name}
    assert Broker(config).hooks.pm.is_blocked(name)
    assert PlacementService(BrokerConfig(config)).hooks.pm.is_blocked(name)
    del config["hook.plugins.blocked"]
    assert Broker(config).hooks.pm.get_plugin(name) is not None
    assert PlacementService(BrokerConfig(config)).hooks.pm.get_plugin(name) is not None
