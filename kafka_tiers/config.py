"""Broker configuration: Kafka-style ``server.properties`` read into typed, validated values.

Keys are declared as :class:`ConfigKey` entries grouped in sections; each subsystem owns the
section with its keys, and :data:`SECTIONS` lists them. A bad value raises one
:class:`~kafka_tiers.api.ConfigError` naming the key, the value (never a secret's) and what was
expected. Aliases (a design document's name beside Kafka's shipped name) are accepted; giving
both with different values is an error. Unknown keys are kept (plugins read prefixed keys such
as ``placer.*`` and ``rsm.config.*``) but never validated.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.api.secret import Secret

_REQUIRED = object()


class ValueType:
    """How a raw string becomes a typed value. ``parse`` raises ``ValueError`` on bad input."""

    expected: str = "a value"

    def parse(self, raw: str) -> Any:
        return raw


class String(ValueType):
    def __init__(self, *, allow_empty: bool = False, pattern: str | None = None,
                 expected: str | None = None) -> None:
        self.allow_empty = allow_empty
        self.pattern = re.compile(pattern) if pattern else None
        self.expected = expected or ("a string" if allow_empty else "a non-empty string")

    def parse(self, raw: str) -> str:
        value = raw.strip()
        if not value and not self.allow_empty:
            raise ValueError(self.expected)
        if self.pattern and not self.pattern.fullmatch(value):
            raise ValueError(self.expected)
        return value


class Int(ValueType):
    def __init__(self, min: int | None = None, max: int | None = None) -> None:
        self.min, self.max = min, max
        if min is not None and max is not None:
            self.expected = f"an integer from {min} to {max}"
        elif min is not None:
            self.expected = f"an integer >= {min}"
        elif max is not None:
            self.expected = f"an integer <= {max}"
        else:
            self.expected = "an integer"

    def parse(self, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(self.expected) from None
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            raise ValueError(self.expected)
        return value


class Bool(ValueType):
    expected = "true or false"

    def parse(self, raw: str) -> bool:
        value = raw.strip().lower()
        if value == "true":
            return True
        if value == "false":
            return False
        raise ValueError(self.expected)


class Choice(ValueType):
    def __init__(self, *choices: str) -> None:
        self.choices = choices
        self.expected = "one of " + ", ".join(choices)

    def parse(self, raw: str) -> str:
        value = raw.strip()
        if value not in self.choices:
            raise ValueError(self.expected)
        return value


class List(ValueType):
    """A comma-separated list; empty items are dropped."""

    def __init__(self, item: ValueType | None = None, *, min_items: int = 0) -> None:
        self.item = item or String()
        self.min_items = min_items
        self.expected = f"a comma-separated list of {self.item.expected}" + (
            f" (at least {min_items})" if min_items else ""
        )

    def parse(self, raw: str) -> list[Any]:
        items = [p for p in (s.strip() for s in raw.split(",")) if p]
        if len(items) < self.min_items:
            raise ValueError(self.expected)
        try:
            return [self.item.parse(p) for p in items]
        except ValueError:
            raise ValueError(self.expected) from None


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key.

    Attributes:
        name: the canonical key.
        type: how its value is parsed and checked.
        default: the value when absent (already typed); ``None`` allowed; omit for required.
        doc: one sentence for people.
        aliases: other names accepted for the same key.
        secret: its value is a credential: the config holds it (and its raw text) as a
            :class:`~kafka_tiers.api.Secret` of the stripped text, never repeated in errors or
            output.
        check: an extra check on the typed value returning a problem in words, or None.
    """

    name: str
    type: ValueType
    default: Any = _REQUIRED
    doc: str = ""
    aliases: tuple[str, ...] = ()
    secret: bool = False
    check: Callable[[Any], str | None] | None = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def _placer_name(value: str) -> str | None:
    if re.fullmatch(r"[A-Za-z0-9_.-]+(:[A-Za-z_][A-Za-z0-9_.]*)?", value):
        return None
    return "an entry-point name (rack-aware) or an import path (pkg.module:Class)"


CORE_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("broker.id", Int(min=0), 0, "This broker's id."),
    ConfigKey("broker.rack", String(), None,
              "This broker's rack: a name, or a path such as /dc1/rack2 for multi-level racks."),
    ConfigKey("broker.replica.placer", String(), "rack-aware",
              "The ReplicaPlacer: an entry-point name or pkg.module:Class.",
              aliases=("replica.placer.class.name",), check=_placer_name),
    ConfigKey("hook.plugins.blocked", List(), [],
              "Hook plugins (entry-point names in group kafka_tiers) not to load; "
              "KAFKA_TIERS_BLOCK_HOOK_PLUGINS adds more."),
)

#: Where the key sections live, as ``module:attribute``; each subsystem adds its own.
SECTIONS: tuple[str, ...] = ("kafka_tiers.config:CORE_KEYS", "kafka_tiers.log.config:LOG_KEYS",
                             "kafka_tiers.remote.config:REMOTE_KEYS",
                             "kafka_tiers.cluster.config:CLUSTER_KEYS",
                             "kafka_tiers.limits:LIMIT_KEYS")


def all_keys() -> dict[str, ConfigKey]:
    """Every declared key by canonical name."""
    keys: dict[str, ConfigKey] = {}
    for ref in SECTIONS:
        module, _, attr = ref.partition(":")
        for key in getattr(importlib.import_module(module), attr):
            if key.name in keys:
                raise RuntimeError(f"config key {key.name} declared twice")
            keys[key.name] = key
    return keys


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java ``.properties`` file (comments, continuations, escapes as Java reads them).

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    from jproperties import Properties

    props = Properties()
    try:
        with open(path, "rb") as fh:
            props.load(fh, "utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # jproperties raises its own parse errors
        raise ConfigError(f"cannot parse config file {path}: {exc}") from None
    return {str(k): str(v.data) for k, v in props.items()}


class BrokerConfig(Mapping[str, Any]):
    """A validated broker configuration.

    Indexing by a declared key gives its typed value (the default when absent); the raw
    strings of every key, declared or not, stay available through :attr:`originals` and
    :meth:`prefixed`. The value of a secret key (``ConfigKey.secret``) is held as a
    :class:`~kafka_tiers.api.Secret`, typed value and raw text alike (its type still checks
    it); ``repr`` shows the given declared keys with secrets as ``<hidden>`` and no plugin key.
    Values given may be ``str`` or :class:`~kafka_tiers.api.Secret`.

    Raises:
        ConfigError: on construction, for the first bad, missing or conflicting value.
    """

    def __init__(self, values: Mapping[str, str | Secret] | None = None) -> None:
        raw = {str(k).strip(): v if isinstance(v, Secret) else str(v)
               for k, v in (values or {}).items()}
        keys = all_keys()
        resolved: dict[str, Any] = {}
        originals = dict(raw)
        for key in keys.values():
            given = [(n, _text(raw[n])) for n in (key.name, *key.aliases) if n in raw]
            if key.secret:
                for n, _ in given:
                    v = raw[n]
                    originals[n] = v if isinstance(v, Secret) else Secret(v)
            if len({v.strip() for _, v in given}) > 1:
                names = " and ".join(n for n, _ in given)
                raise ConfigError(f"{names} are the same setting and disagree; give one",
                                  key=key.name)
            if not given:
                if key.required:
                    raise ConfigError(f"{key.name} is required", key=key.name)
                resolved[key.name] = key.default
                continue
            name, text = given[0]
            originals[key.name] = Secret(text) if key.secret else text
            try:
                value = key.type.parse(text)
                problem = key.check(value) if key.check else None
            except ValueError as exc:
                problem = str(exc) or key.type.expected
            if problem:
                shown = "<hidden>" if key.secret else repr(text)
                raise ConfigError(
                    f"invalid value {shown} for {name}: expected {problem}",
                    key=name, value=None if key.secret else text, expected=problem,
                )
            resolved[key.name] = Secret(text.strip()) if key.secret else value
        self._values = resolved
        self._originals = originals
        self._keys = keys

    def __repr__(self) -> str:
        given = ", ".join(f"{name}={shown}" for name, shown, default in self.describe()
                          if not default)
        return f"BrokerConfig({given})"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str],
                  overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """Read ``server.properties`` (plus overrides) into a validated config."""
        values = read_properties(path)
        values.update(overrides or {})
        return cls(values)

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        for key in self._keys.values():
            if name in key.aliases:
                return self._values[key.name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def originals(self) -> Mapping[str, str | Secret]:
        """Every raw value as given, declared keys under their canonical name (the values of
        secret keys as :class:`~kafka_tiers.api.Secret`)."""
        return dict(self._originals)

    def prefixed(self, prefix: str) -> dict[str, str | Secret]:
        """Raw values of keys starting with ``prefix``, the prefix stripped
        (``placer.seed=7`` -> ``{"seed": "7"}`` for ``prefix="placer."``)."""
        return {k[len(prefix):]: v for k, v in self._originals.items()
                if k.startswith(prefix) and len(k) > len(prefix)}

    def with_overrides(self, overrides: Mapping[str, str | Secret]) -> BrokerConfig:
        """A new config with these raw values replacing the given ones."""
        values = dict(self._originals)
        values.update(overrides)
        return BrokerConfig(values)

    def describe(self) -> Iterable[tuple[str, str, bool]]:
        """(key, shown value, is default) for every declared key; secrets shown as <hidden>."""
        for name, key in sorted(self._keys.items()):
            is_default = name not in self._originals
            value = self._values[name]
            shown = "<hidden>" if key.secret and value is not None else _show(value)
            yield name, shown, is_default


def _text(value: str | Secret) -> str:
    return value.reveal() if isinstance(value, Secret) else value


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_show(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


__all__ = [
    "CORE_KEYS",
    "SECTIONS",
    "Bool",
    "BrokerConfig",
    "Choice",
    "ConfigKey",
    "Int",
    "List",
    "String",
    "ValueType",
    "all_keys",
    "read_properties",
]
