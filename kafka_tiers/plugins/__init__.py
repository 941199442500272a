"""The core's plugin machinery: finding and loading plugins (:mod:`.loader`), the lifecycle
hook specifications (:mod:`.hookspecs`), the hook manager and its typed facade (:mod:`.hooks`)
and the core's own hook implementations (:mod:`.default_hooks`).

The loading functions are re-exported here, so ``from kafka_tiers.plugins import load_placer``
works as before.
"""

from kafka_tiers.plugins.loader import (
    HOOK_GROUP,
    OBJECT_STORE_GROUP,
    PLACER_GROUP,
    STORAGE_GROUP,
    PluginInfo,
    check_spi,
    create,
    discover,
    installed_names,
    load_placer,
    load_remote_storage,
    resolve_class,
)

__all__ = [
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
