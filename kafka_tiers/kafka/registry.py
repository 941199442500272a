"""Which Kafka APIs this broker serves, at which versions, and by which handler.

A handler module in :mod:`kafka_tiers.kafka.apis` registers each API it serves with
:func:`handles`; :func:`apis` imports every such module once and returns the table. The
``ApiVersions`` answer is built from this table alone, so the version ranges advertised are
exactly the ones that have a handler (and, by the rule of the test suite, a test).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_tiers.kafka.codec import REQUESTS, RESPONSES

#: a handler: (context, decoded request) -> a reply (see :mod:`kafka_tiers.kafka.context`)
Handler = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Api:
    """One served API: its key and name, the versions served (inclusive) and the handler."""

    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


_APIS: dict[int, Api] = {}
_loaded = False
_lock = threading.Lock()


def handles(key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of API ``key`` at
    ``min_version..max_version``.

    Raises:
        ValueError: the key is registered twice, or the message library cannot decode or
            encode one of those versions (the range would advertise what we cannot serve).
    """
    def register(fn: Handler) -> Handler:
        req, resp = REQUESTS.get(key), RESPONSES.get(key)
        if req is None or resp is None:
            raise ValueError(f"API key {key}: no message class in the protocol library")
        if not 0 <= min_version <= max_version <= min(req.max_version, resp.max_version):
            raise ValueError(f"{req.name} v{min_version}-{max_version}: the protocol library "
                             f"has v0-{min(req.max_version, resp.max_version)}")
        if key in _APIS:
            raise ValueError(f"{req.name} is registered twice")
        _APIS[key] = Api(key, str(req.name).removesuffix("Request"), min_version, max_version,
                         fn)
        return fn
    return register


def apis() -> Mapping[int, Api]:
    """Every served API by key (importing the handler modules on first use)."""
    global _loaded
    with _lock:
        if not _loaded:
            import kafka_tiers.kafka.apis as pkg
            for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
                importlib.import_module(info.name)
            _loaded = True
    return dict(_APIS)


__all__ = ["Api", "Handler", "apis", "handles"]
