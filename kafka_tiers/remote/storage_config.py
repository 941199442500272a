"""Which storage plugin a command talks to, and with which settings: one function,
:func:`storage_settings`, for every command and reader that takes storage settings without a
broker (``kafka-tiers remote ...``, ``kafka-tiers spark ...``, ``kafka-tiers conformance
storage``, the storage conformance suite's ``--kt-storage-config`` and the Spark data source's
``rsm.config.file``).

The settings file may be written in either dialect:

- a broker's ``server.properties``: the plugin is ``remote.storage.manager.class`` (or its alias
  ``remote.log.storage.manager.class.name``) and its settings are the ``rsm.config.*`` keys with
  the prefix stripped, exactly as the broker reads them; every other broker key is ignored;
- a file of the plugin's own keys, as they appear after ``rsm.config.`` (``dir=/data/tier``).

A file is read as a broker's when one of its keys starts with ``rsm.config.`` or is a declared
broker key (:func:`kafka_tiers.config.all_keys`, aliases included), such as ``broker.id``,
``log.dirs`` or ``remote.storage.manager.class``; otherwise it holds the plugin's own keys.
Overrides (``--set k=v``) are the plugin's own keys; an ``rsm.config.`` prefix on one is
stripped, so both spellings work there too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api.errors import ConfigError

#: the prefix of a storage plugin's settings in ``server.properties``
RSM_PREFIX = "rsm.config."
#: the broker key naming the storage plugin (its aliases are declared with it)
CLASS_KEY = "remote.storage.manager.class"

#: the two dialects, as :attr:`StorageSettings.dialect` names them
BROKER_DIALECT = "server.properties"
PLUGIN_DIALECT = "plugin keys"


@dataclass(frozen=True)
class StorageSettings:
    """A storage plugin and its settings, as a command resolved them.

    Attributes:
        plugin: the plugin's entry-point name or ``pkg.module:Class``.
        config: the plugin's own keys (no ``rsm.config.`` prefix), overrides applied.
        dialect: :data:`BROKER_DIALECT` or :data:`PLUGIN_DIALECT` (the latter also when no
            file was given).
    """

    plugin: str
    config: Mapping[str, str] = field(repr=False)
    dialect: str


def _class_key_names() -> tuple[str, ...]:
    from kafka_tiers.remote.config import REMOTE_KEYS

    key = next(k for k in REMOTE_KEYS if k.name == CLASS_KEY)
    return (key.name, *key.aliases)


def is_broker_config(values: Mapping[str, str]) -> bool:
    """Whether ``values`` (a properties file's) are a broker's ``server.properties`` rather
    than a storage plugin's own keys (see the module docstring for the rule)."""
    from kafka_tiers.config import all_keys

    declared: set[str] = set()
    for key in all_keys().values():
        declared.update((key.name, *key.aliases))
    return any(k.startswith(RSM_PREFIX) or k in declared for k in values)


def storage_settings(storage: str | None, config_file: str | os.PathLike[str] | None = None,
                     overrides: Mapping[str, str] | None = None, *,
                     storage_option: str = "--storage") -> StorageSettings:
    """Resolve the storage plugin and its settings from a command's arguments.

    Args:
        storage: the plugin named on the command line (``--storage``), or None to take it from
            a ``server.properties`` file.
        config_file: a settings file in either dialect (module docstring), or None.
        overrides: plugin keys given one by one (``--set k=v``), applied over the file's.
        storage_option: how the command names ``storage``, for messages.

    Returns:
        The plugin and its own keys. Reading the same arguments again gives the same result.

    Raises:
        ConfigError: the file cannot be read or parsed; no plugin is named (neither
            ``storage`` nor the file's ``remote.storage.manager.class``); ``storage`` and the
            file name different plugins; the class key and its alias disagree. Messages name
            keys and plugins, never a setting's value.
    """
    from kafka_tiers.config import read_properties

    values = read_properties(config_file) if config_file is not None else {}
    named: str | None = None
    if values and is_broker_config(values):
        dialect = BROKER_DIALECT
        given = {k: values[k].strip() for k in _class_key_names() if k in values}
        if len(set(given.values())) > 1:
            raise ConfigError(f"{' and '.join(given)} in {config_file} name different storage "
                              f"plugins; give one", key=CLASS_KEY)
        named = next(iter(given.values()), None) or None
        config = {k[len(RSM_PREFIX):]: v for k, v in values.items()
                  if k.startswith(RSM_PREFIX) and len(k) > len(RSM_PREFIX)}
    else:
        dialect = PLUGIN_DIALECT
        config = dict(values)
    for key, value in (overrides or {}).items():
        config[key[len(RSM_PREFIX):] if key.startswith(RSM_PREFIX) else key] = value
    wanted = storage.strip() if storage else None
    if wanted and named and wanted != named:
        raise ConfigError(f"{storage_option} {wanted} and {CLASS_KEY}={named} in {config_file} "
                          f"name different storage plugins; give one (or make them agree)",
                          key=CLASS_KEY)
    plugin = wanted or named
    if not plugin:
        where = (f"set {CLASS_KEY} in {config_file}" if config_file is not None
                 else f"give a server.properties that sets {CLASS_KEY}")
        raise ConfigError(f"no storage plugin named: give {storage_option}, or {where}",
                          key=CLASS_KEY)
    return StorageSettings(plugin, config, dialect)


def reader_data_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` for a process that reads the remote tier and writes no segment (the
    ``remote`` commands, Spark): ``encryption.enabled`` is turned off unless
    ``encryption.key.pair.id`` is set too (a reader decrypts whatever a manifest says, with
    the private key of the pair it names, and needs no active pair; given a broker's complete
    settings it keeps ``encryption.enabled=true`` so it refuses segments that are not
    encrypted as that broker does, unless ``encryption.plaintext.segments.readable=true``),
    and a ``disk`` chunk cache becomes a ``memory`` one (a reader never writes into a
    broker's cache directory). Every other key is kept. Idempotent."""
    out = dict(config)
    if "encryption.enabled" in out and not str(out.get("encryption.key.pair.id", "")).strip():
        out["encryption.enabled"] = "false"
    if str(out.get("fetch.chunk.cache.class", "")).strip().lower() in (
            "disk", "io.aiven.kafka.tieredstorage.fetch.cache.diskchunkcache",
            "io.aiven.kafka.tieredstorage.fetch.cache.diskbasedchunkcache"):
        out["fetch.chunk.cache.class"] = "memory"
    return out


__all__ = ["BROKER_DIALECT", "CLASS_KEY", "PLUGIN_DIALECT", "RSM_PREFIX", "StorageSettings",
           "is_broker_config", "reader_data_config", "storage_settings"]
