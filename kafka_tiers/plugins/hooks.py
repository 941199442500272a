"""The plugin manager for lifecycle hooks, and the typed facade the core calls them through.

Core code never calls ``pm.hook.*`` directly: it calls a :class:`Hooks` method, which names
every hook once, with its types. Hook plugins are found through the entry-point group
``kafka_tiers``; the core's own implementations
(:mod:`kafka_tiers.plugins.default_hooks`) register the same way. Set
``KAFKA_TIERS_TRACE_HOOKS=1`` to log every hook call and result.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pluggy

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import PluginError
from kafka_tiers.api.logdirs import LogDirInfo
from kafka_tiers.plugins import hookspecs

log = logging.getLogger(__name__)

#: the core's own hook modules, registered before any entry-point plugin
DEFAULT_PLUGINS: tuple[str, ...] = ("kafka_tiers.plugins.default_hooks",)


def make_plugin_manager(
    *, load_entrypoints: bool = True, extra: Iterable[object] = ()
) -> pluggy.PluginManager:
    """Build a plugin manager with the specs, the default plugins, the installed entry-point
    plugins (unless ``load_entrypoints`` is False, as in the project's own tests) and ``extra``
    plugin objects or modules.

    Raises:
        PluginError: a plugin implements a hook that does not exist (misspelt) or with wrong
            arguments; the message names the plugin.
    """
    import importlib

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if load_entrypoints:
        try:
            pm.load_setuptools_entrypoints(hookspecs.PROJECT)
        except Exception as exc:
            raise PluginError(f"a hook plugin failed to load: {type(exc).__name__}: {exc}",
                              cause="import failed") from None
    for plugin in extra:
        pm.register(plugin)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"hook plugin {exc.plugin!r}: {exc}", plugin=str(exc.plugin),
                          cause="unknown hook") from None
    return pm


def _impls(caller: Any) -> list[Any]:
    """The plain implementations of a hook in pluggy's call order (wrappers excluded)."""
    return [i for i in reversed(caller.get_hookimpls())
            if not (getattr(i, "hookwrapper", False) or getattr(i, "wrapper", False))]


class Hooks:
    """One typed method per hook. Notification hooks never raise: a failing implementation is
    logged with its plugin's name and the others still run."""

    def __init__(self, pm: pluggy.PluginManager | None = None) -> None:
        self.pm = pm if pm is not None else make_plugin_manager()
        self.trace = os.environ.get("KAFKA_TIERS_TRACE_HOOKS") == "1"

    def _call(self, name: str, impl: Any, kwargs: Mapping[str, Any]) -> Any:
        result = impl.function(**{a: kwargs[a] for a in impl.argnames})
        if self.trace:
            log.info("hook %s -> %s: %r", name, impl.plugin_name, result)
        return result

    def _notify(self, name: str, **kwargs: Any) -> None:
        for impl in _impls(getattr(self.pm.hook, name)):
            try:
                self._call(name, impl, kwargs)
            except Exception:
                log.exception("hook %s of plugin %s failed", name, impl.plugin_name)

    def broker_started(self, broker_id: int, config: Mapping[str, Any]) -> None:
        self._notify("kafka_tiers_broker_started", broker_id=broker_id, config=config)

    def broker_stopping(self, broker_id: int, clean: bool = True) -> None:
        self._notify("kafka_tiers_broker_stopping", broker_id=broker_id, clean=clean)

    def broker_up(self, broker_id: int, rack: str | None) -> None:
        self._notify("kafka_tiers_broker_up", broker_id=broker_id, rack=rack)

    def broker_down(self, broker_id: int) -> None:
        self._notify("kafka_tiers_broker_down", broker_id=broker_id)

    def topic_created(self, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
        self._notify("kafka_tiers_topic_created", topic=topic, assignment=assignment)

    def segment_rolled(self, tp: TopicPartition, base_offset: int, next_offset: int) -> None:
        self._notify("kafka_tiers_segment_rolled", topic_partition=tp, base_offset=base_offset,
                     next_offset=next_offset)

    def segment_copied(self, tp: TopicPartition, metadata: Any) -> None:
        self._notify("kafka_tiers_segment_copied", topic_partition=tp, metadata=metadata)

    def segment_copy_failed(self, tp: TopicPartition, metadata: Any,
                            error: BaseException) -> None:
        self._notify("kafka_tiers_segment_copy_failed", topic_partition=tp, metadata=metadata,
                     error=error)

    def remote_segment_deleted(self, tp: TopicPartition, metadata: Any) -> None:
        self._notify("kafka_tiers_remote_segment_deleted", topic_partition=tp,
                     metadata=metadata)

    def leader_elected(self, tp: TopicPartition, leader: int, leader_epoch: int,
                       isr: Sequence[int]) -> None:
        self._notify("kafka_tiers_leader_elected", topic_partition=tp, leader=leader,
                     leader_epoch=leader_epoch, isr=list(isr))

    def isr_changed(self, tp: TopicPartition, isr: Sequence[int], leader_epoch: int) -> None:
        self._notify("kafka_tiers_isr_changed", topic_partition=tp, isr=list(isr),
                     leader_epoch=leader_epoch)

    def replica_moved(self, tp: TopicPartition, source_dir: str, destination_dir: str) -> None:
        self._notify("kafka_tiers_replica_moved", topic_partition=tp, source_dir=source_dir,
                     destination_dir=destination_dir)

    def log_dir_failed(self, log_dir: str, partitions: Sequence[TopicPartition],
                       error: BaseException) -> None:
        self._notify("kafka_tiers_log_dir_failed", log_dir=log_dir,
                     partitions=list(partitions), error=error)

    def choose_log_dir(self, tp: TopicPartition, log_dirs: Sequence[LogDirInfo]) -> str:
        """The directory for a new replica: the first non-None answer of the hook, which
        must be the path of an online directory in ``log_dirs``.

        Raises:
            PluginError: no directory is online, or a plugin answered with a path that is not
                an online directory of ``log_dirs``.
        """
        online = {d.path for d in log_dirs if d.online}
        if not online:
            raise PluginError(f"no online log directory for {tp}", cause="all dirs offline")
        name = "kafka_tiers_choose_log_dir"
        for impl in _impls(getattr(self.pm.hook, name)):
            choice = self._call(name, impl, {"topic_partition": tp, "log_dirs": list(log_dirs)})
            if choice is None:
                continue
            if choice not in online:
                raise PluginError(
                    f"hook plugin {impl.plugin_name} chose log dir {choice!r} for {tp}, "
                    f"which is not an online log dir", plugin=impl.plugin_name,
                    cause="bad log dir")
            return str(choice)
        raise PluginError(f"no hook chose a log dir for {tp}", cause="no answer")


__all__ = ["DEFAULT_PLUGINS", "Hooks", "make_plugin_manager"]
