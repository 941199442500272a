"""Finding and loading plugins: entry points (through stevedore) or import paths.

A plugin is named in configuration either by its entry-point name in its group
(``multi-level-rack``) or by an import path ``pkg.module:Class``.

Remote storage comes in two kinds: a :class:`~kafka_tiers.api.RemoteStorageManager` (group
``kafka_tiers.remote_storage``) or an :class:`~kafka_tiers.api.ObjectStore` (group
``kafka_tiers.object_store``), around which the core builds its storage manager
(:meth:`kafka_tiers.objectstore.ObjectStoreRemoteStorageManager.for_store`). A storage name is
looked up in both groups; when both hold it, ``kafka_tiers.remote_storage`` wins (a warning
says so). An import path may name a class of either kind. Loading checks that the class
implements the expected interface and supports this core's :data:`kafka_tiers.api.SPI_VERSION`,
creates it, and hands it its configuration. Every failure is one :class:`PluginError` line naming
the plugin, its distribution and the cause.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import inspect
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from kafka_tiers.api import SPI_VERSION
from kafka_tiers.api.errors import ConfigError, KafkaTiersError, PluginError
from kafka_tiers.api.placement import ReplicaPlacer
from kafka_tiers.api.plugin import Plugin
from kafka_tiers.api.secret import Secret
from kafka_tiers.plugins.secrets import secret_config, secret_keys_of

log = logging.getLogger(__name__)

PLACER_GROUP = "kafka_tiers.replica_placer"
STORAGE_GROUP = "kafka_tiers.remote_storage"
OBJECT_STORE_GROUP = "kafka_tiers.object_store"
HOOK_GROUP = "kafka_tiers"
AUTHORIZER_GROUP = "kafka_tiers.authorizer"

#: group -> what its plugins are called in messages
KINDS = {PLACER_GROUP: "replica placer", STORAGE_GROUP: "remote storage plugin",
         OBJECT_STORE_GROUP: "object store plugin", HOOK_GROUP: "hook plugin",
         AUTHORIZER_GROUP: "authorizer"}

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class PluginInfo:
    """One discovered plugin.

    Attributes:
        group: the entry-point group.
        name: the entry-point name.
        target: ``module:attribute`` it points at.
        distribution: the distribution that declares it (None when unknown).
        version: that distribution's version.
        loads: whether importing it and checking its interface and SPI range succeeded.
        error: why it does not load, in one line.
    """

    group: str
    name: str
    target: str
    distribution: str | None
    version: str | None
    loads: bool
    error: str | None = None


def _entry_points(group: str) -> list[md.EntryPoint]:
    eps: dict[str, md.EntryPoint] = {}
    for ep in md.entry_points(group=group):
        eps.setdefault(ep.name, ep)
    return sorted(eps.values(), key=lambda e: e.name)


def installed_names(group: str) -> list[str]:
    """Entry-point names installed in ``group``, sorted."""
    return [ep.name for ep in _entry_points(group)]


def _dist_of_ep(ep: md.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


def _dist_of_module(module: str) -> str | None:
    top = module.split(".", 1)[0]
    dists = md.packages_distributions().get(top)
    return dists[0] if dists else None


def _interface_for(group: str) -> type[Any]:
    if group == PLACER_GROUP:
        return ReplicaPlacer
    if group == STORAGE_GROUP:
        from kafka_tiers.api.storage import RemoteStorageManager

        return RemoteStorageManager
    if group == OBJECT_STORE_GROUP:
        from kafka_tiers.api.objectstore import ObjectStore

        return ObjectStore
    if group == AUTHORIZER_GROUP:
        from kafka_tiers.api.authorizer import Authorizer

        return Authorizer
    raise ValueError(f"no interface for group {group}")


def _storage_manager_of(obj: Any) -> Any:
    """An ObjectStore class becomes the storage manager class the core builds around it;
    anything else is returned as it is."""
    from kafka_tiers.api.objectstore import ObjectStore

    if inspect.isclass(obj) and issubclass(obj, ObjectStore) and not inspect.isabstract(obj):
        from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager

        return ObjectStoreRemoteStorageManager.for_store(obj)
    return obj


def check_spi(cls: type, label: str) -> None:
    """Refuse a plugin class whose ``SUPPORTED_SPI`` excludes this core's SPI version.

    Raises:
        PluginError: the range excludes ``SPI_VERSION`` or is not a valid specifier.
    """
    declared = getattr(cls, "SUPPORTED_SPI", None)
    if declared is None:
        spec = SpecifierSet(f">={Version(SPI_VERSION).major},<{Version(SPI_VERSION).major + 1}")
        declared_text = f"any {Version(SPI_VERSION).major}.x (undeclared)"
    else:
        try:
            spec = SpecifierSet(str(declared))
        except InvalidSpecifier:
            raise PluginError(f"{label}: SUPPORTED_SPI {declared!r} is not a version range",
                              plugin=label, cause="invalid SUPPORTED_SPI") from None
        declared_text = str(declared)
    if Version(SPI_VERSION) not in spec:
        raise PluginError(
            f"{label} supports SPI {declared_text}, but this kafka-tiers provides SPI "
            f"{SPI_VERSION}", plugin=label, cause="incompatible SPI version")


def _label(kind: str, name: str, dist: str | None, version: str | None) -> str:
    where = f" from {dist} {version}" if dist and version else (f" from {dist}" if dist else "")
    return f"{kind} {name!r}{where}"


def resolve_class(group: str, name_or_path: str) -> tuple[type[Plugin], str]:
    """Find the plugin class named ``name_or_path`` in ``group`` without creating it.

    For ``kafka_tiers.remote_storage`` the result is always a ``RemoteStorageManager`` class:
    the name is looked up in ``kafka_tiers.remote_storage`` and then in
    ``kafka_tiers.object_store``, an import path may name either kind, and an object store
    class comes back as the storage manager class the core builds around it. For
    ``kafka_tiers.object_store`` the store class itself comes back.

    Returns:
        The class and a label naming the plugin and its distribution, for messages.

    Raises:
        PluginError: unknown name (the message lists the installed names), import failure,
            not a class implementing the group's interface, or an incompatible SPI range.
    """
    if group == STORAGE_GROUP:
        return _resolve_storage(name_or_path)
    return _resolve(group, name_or_path)


def _resolve_storage(name_or_path: str) -> tuple[type[Plugin], str]:
    name = (name_or_path or "").strip()
    if ":" not in name and name:
        managers = {ep.name for ep in _entry_points(STORAGE_GROUP)}
        stores = {ep.name for ep in _entry_points(OBJECT_STORE_GROUP)}
        if name in stores and name not in managers:  # named by users as a storage plugin
            cls, label = _resolve(OBJECT_STORE_GROUP, name, kind=KINDS[STORAGE_GROUP])
            return _storage_manager_of(cls), label
        if name in stores:
            log.warning("storage plugin name %r is registered in both %s and %s; using the "
                        "%s one", name, STORAGE_GROUP, OBJECT_STORE_GROUP, STORAGE_GROUP)
        if name not in managers:
            installed = ", ".join(sorted(managers | stores)) or "none"
            raise PluginError(f"unknown {KINDS[STORAGE_GROUP]} {name!r}; installed: "
                              f"{installed}", plugin=name, cause="unknown name")
    cls, label = _resolve(STORAGE_GROUP, name, also=OBJECT_STORE_GROUP)
    return _storage_manager_of(cls), label


def _resolve(group: str, name_or_path: str, also: str | None = None,
             kind: str | None = None) -> tuple[type[Any], str]:
    """Resolve in ``group``; an import path may also name a class of group ``also``; ``kind``
    is what the plugin is called in messages (default: the group's)."""
    kind = kind or KINDS[group]
    iface = _interface_for(group)
    name = (name_or_path or "").strip()
    if not name:
        raise PluginError(f"no {kind} named (empty name)", cause="empty name")
    if ":" in name:
        if not _IMPORT_PATH.match(name):
            raise PluginError(f"{kind} {name!r} is not an import path of the form pkg.module:Class",
                              plugin=name, cause="malformed import path")
        module_name, _, attr = name.partition(":")
        dist = _dist_of_module(module_name)
        label = _label(kind, name, dist, None)
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except ImportError as exc:
            raise PluginError(f"{label} cannot be imported: {exc}", plugin=name,
                              distribution=dist, cause="import failed") from None
        except AttributeError:
            raise PluginError(f"{label}: module {module_name} has no attribute {attr}",
                              plugin=name, distribution=dist, cause="missing attribute") from None
    else:
        eps = {ep.name: ep for ep in _entry_points(group)}
        if name not in eps:
            installed = ", ".join(sorted(eps)) or "none"
            raise PluginError(f"unknown {kind} {name!r}; installed: {installed}",
                              plugin=name, cause="unknown name")
        dist, version = _dist_of_ep(eps[name])
        label = _label(kind, name, dist, version)
        obj = _load_with_stevedore(group, name, label, dist)
    ifaces = (iface,) if also is None else (iface, _interface_for(also))
    if not (inspect.isclass(obj) and issubclass(obj, ifaces)):
        wanted = " or ".join(f"kafka_tiers.api.{i.__name__}" for i in ifaces)
        raise PluginError(f"{label} is {obj!r}, not a subclass of {wanted}",
                          plugin=name, cause="does not implement the interface")
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        raise PluginError(f"{label} does not implement {missing}", plugin=name,
                          cause="abstract methods left")
    check_spi(obj, label)
    return obj, label


def _load_with_stevedore(group: str, name: str, label: str, dist: str | None) -> Any:
    from stevedore import driver, extension
    from stevedore.exception import NoMatches

    # stevedore keeps a per-process list of each group's entry points, taken on first use; a
    # plugin installed (or put on sys.path) since then would be listed by discover() but not
    # loadable. Drop the group's list so loading sees what discovery sees.
    extension.ExtensionManager.ENTRY_POINT_CACHE.pop(group, None)
    failure: list[BaseException] = []

    def on_failure(_manager: Any, _ep: Any, exc: BaseException) -> None:
        failure.append(exc)

    try:
        mgr = driver.DriverManager(namespace=group, name=name, invoke_on_load=False,
                                   on_load_failure_callback=on_failure)
    except NoMatches:
        cause = failure[0] if failure else None
        detail = f"{type(cause).__name__}: {cause}" if cause else "it failed to load"
        raise PluginError(f"{label} cannot be loaded: {detail}", plugin=name,
                          distribution=dist, cause="import failed") from None
    except RuntimeError as exc:  # several plugins under one name
        raise PluginError(f"{label}: {exc}", plugin=name, distribution=dist,
                          cause="ambiguous name") from None
    return mgr.driver


def create(group: str, name_or_path: str, config: Mapping[str, str | Secret] | None = None
           ) -> Plugin:
    """Create and configure the plugin ``name_or_path`` of ``group``.

    Raises:
        PluginError: see :func:`resolve_class`; also when creating or configuring it raises
            anything but a :class:`ConfigError`.
        ConfigError: the plugin refused its configuration (the message names the plugin).
    """
    cls, label = resolve_class(group, name_or_path)
    if group == OBJECT_STORE_GROUP:  # an object store is loaded as its storage manager
        cls = _storage_manager_of(cls)
    try:
        plugin = cls()
    except Exception as exc:
        raise PluginError(f"{label} could not be created: {type(exc).__name__}: {exc}",
                          plugin=name_or_path, cause="constructor failed") from None
    # the plugin's declared SECRET_KEYS become Secrets here, before the plugin sees them
    cfg = secret_config({str(k): v if isinstance(v, Secret) else str(v)
                         for k, v in (config or {}).items()}, secret_keys_of(cls))
    try:
        # the values of the declared SECRET_KEYS are Secrets (Plugin.configure says so)
        plugin.configure(cast("Mapping[str, str]", cfg))
    except ConfigError as exc:
        _close_quietly(plugin)
        raise ConfigError(Secret.hide(f"{label}: {exc}"), key=exc.key, value=exc.value,
                          expected=exc.expected) from None
    except KafkaTiersError:
        _close_quietly(plugin)
        raise
    except Exception as exc:
        _close_quietly(plugin)
        raise PluginError(Secret.hide(f"{label} failed to configure: "
                                       f"{type(exc).__name__}: {exc}"),
                          plugin=name_or_path, cause="configure failed") from None
    log.debug("loaded %s", label)
    return plugin


def _close_quietly(plugin: Plugin) -> None:
    try:
        plugin.close()
    except Exception:
        log.debug("close() after failed configure raised", exc_info=True)


def load_placer(name_or_path: str, config: Mapping[str, str] | None = None) -> ReplicaPlacer:
    """Create and configure a :class:`ReplicaPlacer` by entry-point name or import path.

    Args:
        name_or_path: ``rack-aware`` or ``my_pkg.placers:MyPlacer``.
        config: the placer's own keys (``{"seed": "7"}``), handed to ``configure``.

    Raises:
        PluginError, ConfigError: as :func:`create`.
    """
    # resolve_class has checked that the class subclasses the group's ReplicaPlacer
    return cast(ReplicaPlacer, create(PLACER_GROUP, name_or_path, config))


def load_remote_storage(name_or_path: str, config: Mapping[str, str | Secret] | None = None
                        ) -> Any:
    """Create and configure a ``RemoteStorageManager`` by entry-point name or import path:
    a storage manager plugin, or the core's manager around an object store plugin (see the
    module docstring for how a name is looked up).

    Args:
        name_or_path: ``local``, ``s3``, ``my_pkg.storage:MyStorage`` or
            ``my_pkg.store:MyObjectStore``.
        config: the plugin's own keys (those under ``rsm.config.`` with the prefix stripped).

    Raises:
        PluginError, ConfigError: as :func:`create`.
    """
    return create(STORAGE_GROUP, name_or_path, config)


def discover(groups: tuple[str, ...] = (PLACER_GROUP, STORAGE_GROUP, OBJECT_STORE_GROUP,
                                        HOOK_GROUP, AUTHORIZER_GROUP)) -> list[PluginInfo]:
    """Every installed plugin in ``groups``, with whether it loads (imports and passes the
    interface and SPI checks; nothing is created or configured)."""
    found: list[PluginInfo] = []
    for group in groups:
        for ep in _entry_points(group):
            dist, version = _dist_of_ep(ep)
            error = None
            try:
                if group == HOOK_GROUP:
                    from kafka_tiers.plugins.hooks import check_hook_plugin

                    check_hook_plugin(ep.name, ep.load())
                elif group == STORAGE_GROUP:
                    _resolve(group, ep.name)
                else:
                    resolve_class(group, ep.name)
            except PluginError as exc:
                error = str(exc)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            found.append(PluginInfo(group, ep.name, ep.value, dist, version, error is None,
                                    error))
    return found


__all__ = [
    "AUTHORIZER_GROUP",
    "HOOK_GROUP",
    "OBJECT_STORE_GROUP",
    "PLACER_GROUP",
    "STORAGE_GROUP",
    "PluginInfo",
    "check_spi",
    "create",
    "discover",
    "installed_names",
    "load_placer",
    "load_remote_storage",
    "resolve_class",
]
