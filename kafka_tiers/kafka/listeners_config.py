"""``listeners`` and ``advertised.listeners`` in Kafka's syntax.

``listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://:9093`` names listeners and where they bind;
a listener name is mapped to a security protocol by ``listener.security.protocol.map``
(Kafka's default maps the four protocol names to themselves). ``advertised.listeners`` is what
Metadata tells clients, per listener name; by default the bound address (an empty or
``0.0.0.0`` host advertises ``127.0.0.1``, port 0 advertises the port actually bound).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_tiers.api.errors import ConfigError

#: Kafka's default ``listener.security.protocol.map``.
DEFAULT_PROTOCOL_MAP = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL",
                        "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
#: the security protocols this broker serves today (SSL: kafka_tiers.kafka.security.tls)
SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_ENTRY = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_]*)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]]*)"
                    r":(?P<port>\d{1,5})$")


@dataclass(frozen=True)
class ListenerSpec:
    """One listener: its name, security protocol and where it binds (host may be '')."""

    name: str
    security_protocol: str
    host: str
    port: int


def _parse(key: str, value: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            continue
        m = _ENTRY.match(item)
        if m is None:
            raise ConfigError(f"{key}: {item!r} is not NAME://HOST:PORT (e.g. "
                              "PLAINTEXT://127.0.0.1:9092)", key=key)
        port = int(m["port"])
        if port > 65535:
            raise ConfigError(f"{key}: port {port} of {item!r} is above 65535", key=key)
        out.append((m["name"].upper(), m["host"].strip("[]"), port))
    names = [n for n, _, _ in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{key}: listener name(s) {dup} given more than once", key=key)
    return out


def protocol_map(value: str | None) -> dict[str, str]:
    """``listener.security.protocol.map`` (``NAME:PROTOCOL,...``) with Kafka's default."""
    if not value:
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or not name.strip() or proto not in DEFAULT_PROTOCOL_MAP:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                              f"with a protocol among {sorted(DEFAULT_PROTOCOL_MAP)}",
                              key="listener.security.protocol.map")
        out[name.strip().upper()] = proto
    return out


def listener_specs(config: Mapping[str, Any]) -> list[ListenerSpec]:
    """The Kafka listeners of a broker config (empty when ``listeners`` is not set).

    Raises:
        ConfigError: a malformed entry, a duplicate name, a name without a security protocol,
            or a protocol this broker does not serve yet (one line naming the key).
    """
    value = config.get("listeners")
    if not value:
        return []
    pmap = protocol_map(config.get("listener.security.protocol.map"))
    out = []
    for name, host, port in _parse("listeners", str(value)):
        proto = pmap.get(name)
        if proto is None:
            raise ConfigError(f"listeners: listener {name} has no security protocol in "
                              f"listener.security.protocol.map ({sorted(pmap)})",
                              key="listener.security.protocol.map")
        if proto not in SUPPORTED_PROTOCOLS:
            raise ConfigError(f"listeners: listener {name} uses {proto}, which this broker "
                              f"does not serve (supported: {sorted(SUPPORTED_PROTOCOLS)})",
                              key="listeners")
        out.append(ListenerSpec(name, proto, host, port))
    return out


def advertised(config: Mapping[str, Any], bound: Mapping[str, tuple[str, int]]
               ) -> dict[str, tuple[str, int]]:
    """What Metadata advertises per listener name: ``advertised.listeners`` where it names the
    listener, else the bound address (``bound``: name -> actual host and port).

    Raises:
        ConfigError: ``advertised.listeners`` names a listener that is not in ``listeners``,
            or advertises port 0 or an empty host.
    """
    out = {name: ("127.0.0.1" if host in ("", "0.0.0.0", "::") else host, port)
           for name, (host, port) in bound.items()}
    value = config.get("advertised.listeners")
    if value:
        for name, host, port in _parse("advertised.listeners", str(value)):
            if name not in bound:
                raise ConfigError(f"advertised.listeners: {name} is not a listener in "
                                  f"listeners ({sorted(bound)})", key="advertised.listeners")
            if not host or port == 0:
                raise ConfigError(f"advertised.listeners: {name} must name a host and a "
                                  "port clients can reach", key="advertised.listeners")
            out[name] = (host, port)
    return out


__all__ = ["DEFAULT_PROTOCOL_MAP", "SUPPORTED_PROTOCOLS", "ListenerSpec", "advertised",
           "listener_specs", "protocol_map"]
