"""The plugin manager for lifecycle hooks, and the typed facade the core calls them through.

Core code never calls ``pm.hook.*`` directly: it calls a :class:`Hooks` method, which names
every hook once, with its types, and calls it through pluggy (``pm.hook.<name>(...)``), so
pluggy's ordering (``tryfirst``/``trylast``), wrappers (``wrapper=True`` and the older
``hookwrapper=True``) and call monitoring all apply. Hook plugins are found through the
entry-point group ``kafka_tiers``; the core's own implementations
(:mod:`kafka_tiers.plugins.default_hooks`) register the same way.

What the manager adds to pluggy (:class:`HookManager`):

- each plain implementation of a notification hook is isolated when it registers: an exception
  it raises is logged with its plugin's name and the hook's, and the next implementation still
  runs;
- an exception in a first-result implementation becomes a
  :class:`~kafka_tiers.api.PluginError` naming the plugin, and the facade knows which plugin
  gave the answer it checks;
- a plugin that implements a hook that does not exist, or asks for an argument a hook does not
  have, is refused with a :class:`~kafka_tiers.api.PluginError` naming it.

Environment:

- ``KAFKA_TIERS_TRACE_HOOKS=1`` logs (logger ``kafka_tiers.plugins.hooks``, level INFO) every
  hook call with its arguments and the plugins it reaches, then its result, through pluggy's
  ``add_hookcall_monitoring``.
- ``KAFKA_TIERS_BLOCK_HOOK_PLUGINS=name1,name2`` (and the broker key ``hook.plugins.blocked``)
  keeps the named entry-point plugins from loading, through pluggy's ``set_blocked``; a blocked
  name that is not installed is fine.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import logging
import os
import reprlib
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pluggy

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import PluginError
from kafka_tiers.api.logdirs import LogDirInfo
from kafka_tiers.api.storage import RemoteLogSegmentMetadata
from kafka_tiers.plugins import hookspecs

log = logging.getLogger(__name__)

#: the core's own hook modules, registered before any entry-point plugin
DEFAULT_PLUGINS: tuple[str, ...] = ("kafka_tiers.plugins.default_hooks",)

#: set to 1 to log every hook call, the plugins it reaches and its result
TRACE_ENV = "KAFKA_TIERS_TRACE_HOOKS"
#: comma-separated entry-point names of hook plugins not to load
BLOCK_ENV = "KAFKA_TIERS_BLOCK_HOOK_PLUGINS"
#: the broker configuration key that does the same as :data:`BLOCK_ENV`
BLOCK_KEY = "hook.plugins.blocked"

#: (plugin name, answer) of the first-result implementation that answered last in this context
_ANSWERED_BY: contextvars.ContextVar[tuple[str, object] | None] = contextvars.ContextVar(
    "kafka_tiers_hook_answered_by", default=None)

#: plugin managers whose calls are already traced (tracing is enabled once per manager)
_TRACED: weakref.WeakSet[pluggy.PluginManager] = weakref.WeakSet()


def _short_repr() -> Callable[[object], str]:
    shortened = reprlib.Repr()  # the keyword form needs Python 3.12
    shortened.maxstring = shortened.maxother = 80
    shortened.maxlist = shortened.maxdict = 8
    shortened.maxlevel = 3
    return shortened.repr


#: a value as the trace shows it: its repr, cut short
_short = _short_repr()


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _isolated(hook: str, plugin: str, function: Callable[..., object], *,
              firstresult: bool) -> Callable[..., object]:
    """``function`` (one plugin's implementation of ``hook``) with the manager's rules around
    it: a notification's exception is logged and swallowed, a first-result exception becomes a
    PluginError naming the plugin, and a first-result answer records who gave it."""

    @functools.wraps(function)
    def call(*args: object, **kwargs: object) -> object:
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            if firstresult:
                raise PluginError(f"hook plugin {plugin} failed in {hook}: "
                                  f"{type(exc).__name__}: {exc}", plugin=plugin,
                                  cause="hook raised") from exc
            log.exception("hook %s of plugin %s failed", hook, plugin)
            return None
        if firstresult and result is not None:
            _ANSWERED_BY.set((plugin, result))
        return result

    return call


class HookManager(pluggy.PluginManager):
    """pluggy's plugin manager for the ``kafka_tiers`` hooks, with the specs added and every
    plain implementation isolated as it registers (see the module docstring).

    Wrappers (``wrapper=True``, ``hookwrapper=True``) are registered as pluggy registers them:
    they see every call and its result.
    """

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)

    def register(self, plugin: object, name: str | None = None) -> str | None:
        """Register ``plugin`` as pluggy does; return its name, or None when it is blocked.

        Raises:
            PluginError: it implements a hook with an argument the hook does not have, or a
                wrapper that is not a generator; the message names the plugin.
            ValueError: the plugin, or its name, is already registered (pluggy's rule).
        """
        try:
            plugin_name = super().register(plugin, name)
        except pluggy.PluginValidationError as exc:
            label = name or self.get_canonical_name(plugin)
            raise PluginError(f"hook plugin {label}: {_one_line(exc)}", plugin=label,
                              cause="invalid hook implementation") from None
        if plugin_name is None:
            return None
        for caller in self.get_hookcallers(plugin) or ():
            if caller.spec is None:
                continue  # an unknown hook: check_pending() refuses it
            firstresult = bool(caller.spec.opts.get("firstresult"))
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and not (impl.wrapper or impl.hookwrapper):
                    # pluggy marks HookImpl.function Final; replacing it with the isolated
                    # call is how one implementation's failure stays its own
                    impl.function = _isolated(  # type: ignore[misc]  # Final in pluggy
                        caller.name, plugin_name, impl.function, firstresult=firstresult)
        return plugin_name


def blocked_plugins(configured: Iterable[str] = ()) -> list[str]:
    """The hook plugin names to block: ``configured`` (the broker's ``hook.plugins.blocked``)
    and those in ``KAFKA_TIERS_BLOCK_HOOK_PLUGINS``, without duplicates, in that order."""
    names = list(configured) + os.environ.get(BLOCK_ENV, "").split(",")
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def _block(pm: pluggy.PluginManager, names: Sequence[str]) -> None:
    from kafka_tiers.plugins.loader import HOOK_GROUP, installed_names

    installed = set(installed_names(HOOK_GROUP))
    shown = []
    for name in names:
        if name in DEFAULT_PLUGINS:
            log.warning("not blocking %s: it is the core's own hook module", name)
            continue
        pm.set_blocked(name)
        shown.append(name if name in installed else f"{name} (not installed)")
    if shown:
        log.info("hook plugins blocked (%s / %s): %s", BLOCK_KEY, BLOCK_ENV, ", ".join(shown))


def enable_tracing(pm: pluggy.PluginManager) -> None:
    """Log every hook call of ``pm`` (arguments, the plugins reached in call order) and its
    result or error, at INFO on this module's logger. Calling it again for the same manager
    changes nothing."""
    if pm in _TRACED:
        return
    _TRACED.add(pm)

    def before(hook: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        args = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
        plugins = ", ".join(i.plugin_name for i in reversed(impls))
        log.info("hook %s(%s) -> plugins: %s", hook, args, plugins or "none")

    def after(outcome: pluggy.Result[Any], hook: str, impls: Sequence[pluggy.HookImpl],
              kwargs: Mapping[str, Any]) -> None:
        if outcome.exception is None:
            log.info("hook %s returned %s", hook, _short(outcome.get_result()))
        else:
            log.info("hook %s raised %s: %s", hook, type(outcome.exception).__name__,
                     outcome.exception)

    pm.add_hookcall_monitoring(before, after)


def make_plugin_manager(
    *, load_entrypoints: bool = True, extra: Iterable[object] = (),
    blocked: Iterable[str] = (),
) -> HookManager:
    """Build a plugin manager with the specs, the default plugins, the installed entry-point
    plugins (unless ``load_entrypoints`` is False, as in the project's own tests) and ``extra``
    plugin objects or modules.

    Args:
        load_entrypoints: load the plugins of the entry-point group ``kafka_tiers``.
        extra: more plugins, registered after the entry-point ones (so called before them).
        blocked: entry-point names not to load (the broker's ``hook.plugins.blocked``); the
            names in ``KAFKA_TIERS_BLOCK_HOOK_PLUGINS`` are added. Names that are not
            installed are fine; the blocked ones are logged.

    Raises:
        PluginError: a plugin fails to import, implements a hook that does not exist
            (misspelt) or with wrong arguments; the message names the plugin.
    """
    pm = HookManager()
    for name in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    _block(pm, blocked_plugins(blocked))
    if load_entrypoints:
        try:
            pm.load_setuptools_entrypoints(hookspecs.PROJECT)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"a hook plugin failed to load: {type(exc).__name__}: {exc}",
                              cause="import failed") from None
    for plugin in extra:
        pm.register(plugin)
    _check_pending(pm)
    return pm


def _check_pending(pm: pluggy.PluginManager) -> None:
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) or str(exc.plugin)
        raise PluginError(f"hook plugin {name!r}: {_one_line(exc)}", plugin=name,
                          cause="unknown hook") from None


def check_hook_plugin(name: str, plugin: object) -> None:
    """Check one hook plugin as :func:`make_plugin_manager` would load it: registered alone
    beside the specs, every hook it implements must exist and take known arguments.

    Args:
        name: its entry-point name (used in the message).
        plugin: the loaded module or object.

    Raises:
        PluginError: the message :func:`make_plugin_manager` would raise for it.
    """
    pm = HookManager()
    pm.register(plugin, name=name)
    _check_pending(pm)


def _wrapper_of(exc: BaseException, caller: pluggy.HookCaller) -> str:
    """The plugin whose wrapper of ``caller`` raised ``exc`` (found in its traceback)."""
    codes = {}
    for impl in caller.get_hookimpls():
        if impl.wrapper or impl.hookwrapper:
            code = getattr(impl.function, "__code__", None)
            if code is not None:
                codes[code] = impl.plugin_name
    culprit = "unknown"
    tb = exc.__traceback__
    while tb is not None:
        culprit = codes.get(tb.tb_frame.f_code, culprit)
        tb = tb.tb_next
    return culprit


class Hooks:
    """One typed method per hook, each calling it through pluggy.

    Notification hooks never raise: a failing implementation is logged with its plugin's name
    and the others still run; a failing wrapper is logged with its plugin's name too.

    Args:
        pm: the plugin manager; by default :func:`make_plugin_manager` with every installed
            hook plugin except the ``blocked`` ones.
        blocked: entry-point names not to load when the manager is built here (the broker
            passes its ``hook.plugins.blocked``); ignored when ``pm`` is given.
    """

    def __init__(self, pm: pluggy.PluginManager | None = None, *,
                 blocked: Iterable[str] = ()) -> None:
        self.pm = pm if pm is not None else make_plugin_manager(blocked=blocked)
        self.trace = os.environ.get(TRACE_ENV) == "1"
        if self.trace:
            enable_tracing(self.pm)

    def _notify(self, caller: pluggy.HookCaller, **kwargs: Any) -> None:
        try:
            caller(**kwargs)
        except Exception as exc:  # only a wrapper can raise: plain implementations are isolated
            log.exception("hook %s: the wrapper of plugin %s failed", caller.name,
                          _wrapper_of(exc, caller))

    def broker_started(self, broker_id: int, config: Mapping[str, Any]) -> None:
        self._notify(self.pm.hook.kafka_tiers_broker_started, broker_id=broker_id,
                     config=config)

    def broker_stopping(self, broker_id: int, clean: bool = True) -> None:
        self._notify(self.pm.hook.kafka_tiers_broker_stopping, broker_id=broker_id,
                     clean=clean)

    def broker_up(self, broker_id: int, rack: str | None) -> None:
        self._notify(self.pm.hook.kafka_tiers_broker_up, broker_id=broker_id, rack=rack)

    def broker_down(self, broker_id: int) -> None:
        self._notify(self.pm.hook.kafka_tiers_broker_down, broker_id=broker_id)

    def topic_created(self, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
        self._notify(self.pm.hook.kafka_tiers_topic_created, topic=topic,
                     assignment=assignment)

    def segment_rolled(self, tp: TopicPartition, base_offset: int, next_offset: int) -> None:
        self._notify(self.pm.hook.kafka_tiers_segment_rolled, topic_partition=tp,
                     base_offset=base_offset, next_offset=next_offset)

    def segment_copied(self, tp: TopicPartition, metadata: RemoteLogSegmentMetadata) -> None:
        self._notify(self.pm.hook.kafka_tiers_segment_copied, topic_partition=tp,
                     metadata=metadata)

    def segment_copy_failed(self, tp: TopicPartition, metadata: RemoteLogSegmentMetadata,
                            error: BaseException) -> None:
        self._notify(self.pm.hook.kafka_tiers_segment_copy_failed, topic_partition=tp,
                     metadata=metadata, error=error)

    def remote_segment_deleted(self, tp: TopicPartition,
                               metadata: RemoteLogSegmentMetadata) -> None:
        self._notify(self.pm.hook.kafka_tiers_remote_segment_deleted, topic_partition=tp,
                     metadata=metadata)

    def leader_elected(self, tp: TopicPartition, leader: int, leader_epoch: int,
                       isr: Sequence[int]) -> None:
        self._notify(self.pm.hook.kafka_tiers_leader_elected, topic_partition=tp,
                     leader=leader, leader_epoch=leader_epoch, isr=list(isr))

    def isr_changed(self, tp: TopicPartition, isr: Sequence[int], leader_epoch: int) -> None:
        self._notify(self.pm.hook.kafka_tiers_isr_changed, topic_partition=tp, isr=list(isr),
                     leader_epoch=leader_epoch)

    def replica_moved(self, tp: TopicPartition, source_dir: str, destination_dir: str) -> None:
        self._notify(self.pm.hook.kafka_tiers_replica_moved, topic_partition=tp,
                     source_dir=source_dir, destination_dir=destination_dir)

    def log_dir_failed(self, log_dir: str, partitions: Sequence[TopicPartition],
                       error: BaseException) -> None:
        self._notify(self.pm.hook.kafka_tiers_log_dir_failed, log_dir=log_dir,
                     partitions=list(partitions), error=error)

    def choose_log_dir(self, tp: TopicPartition, log_dirs: Sequence[LogDirInfo]) -> str:
        """The directory for a new replica: the first non-None answer of the hook, which
        must be the path of an online directory in ``log_dirs``.

        Raises:
            PluginError: no directory is online, a plugin (or a wrapper) failed, or the answer
                is not the path of an online directory of ``log_dirs``; the message names the
                plugin.
        """
        online = {d.path for d in log_dirs if d.online}
        if not online:
            raise PluginError(f"no online log directory for {tp}", cause="all dirs offline")
        caller = self.pm.hook.kafka_tiers_choose_log_dir
        token = _ANSWERED_BY.set(None)
        try:
            choice = caller(topic_partition=tp, log_dirs=list(log_dirs))
            answered = _ANSWERED_BY.get()
        except PluginError:
            raise
        except Exception as exc:
            culprit = _wrapper_of(exc, caller)
            raise PluginError(f"hook {caller.name}: the wrapper of plugin {culprit} failed: "
                              f"{type(exc).__name__}: {exc}", plugin=culprit,
                              cause="hook raised") from exc
        finally:
            _ANSWERED_BY.reset(token)
        if choice is None:
            raise PluginError(f"no hook chose a log dir for {tp}", cause="no answer")
        if choice not in online:
            plugin = (answered[0] if answered is not None and answered[1] == choice
                      else "a hook wrapper")
            raise PluginError(
                f"hook plugin {plugin} chose log dir {choice!r} for {tp}, "
                f"which is not an online log dir", plugin=plugin, cause="bad log dir")
        return str(choice)


__all__ = ["BLOCK_ENV", "BLOCK_KEY", "DEFAULT_PLUGINS", "TRACE_ENV", "HookManager", "Hooks",
           "blocked_plugins", "check_hook_plugin", "enable_tracing", "make_plugin_manager"]
