"""Loading the broker's authorizer (``authorizer.class.name``), in one place.

- empty (the default): no authorizer; every request is allowed, and CreateAcls,
  DescribeAcls and DeleteAcls answer ``SECURITY_DISABLED`` as Kafka does;
- an entry-point name of group ``kafka_tiers.authorizer`` (``acl``: the built-in
  :class:`~kafka_tiers.kafka.security.acl_authorizer.AclAuthorizer`), or ``pkg.module:Class``;
- Kafka's class names (``kafka.security.authorizer.AclAuthorizer``,
  ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``,
  ``kafka.security.auth.SimpleAclAuthorizer``) mean ``acl``, so a Kafka ``server.properties``
  works as it is.

:func:`start_authorizer` is what the broker calls when its Kafka server is made: the instance
is created, configured with the broker's configuration, started with the broker's ACL storage
(:class:`~kafka_tiers.kafka.security.acl_storage.StateStoreAclStorage`) and registered as a
component of the server, which closes it when it stops. Any failure there fails the broker's
start with one error naming the authorizer; a plugin's own exception never escapes unnamed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from kafka_tiers.api.authorizer import AUTHORIZER_GROUP, Authorizer
from kafka_tiers.api.errors import ConfigError, PluginError
from kafka_tiers.kafka.security.acl_authorizer import KAFKA_CLASS_NAMES

if TYPE_CHECKING:
    from kafka_tiers.kafka.server import KafkaServer

log = logging.getLogger(__name__)

#: the configuration key naming the authorizer
KEY = "authorizer.class.name"
#: the entry-point name of the built-in ACL authorizer
BUILT_IN = "acl"
#: the Kafka server component key of the started authorizer (closed with the server)
COMPONENT_KEY = "security.authorizer"


def authorizer_name(config: Mapping[str, Any]) -> str:
    """The configured authorizer's entry-point name or import path ("" for none), Kafka's
    class names translated to ``acl``."""
    try:
        name = str(config[KEY] or "").strip()
    except KeyError:
        name = ""
    return BUILT_IN if name in KAFKA_CLASS_NAMES else name


def load_authorizer(config: Mapping[str, Any]) -> Authorizer | None:
    """The configured authorizer, created and configured (not started), or None when
    ``authorizer.class.name`` is empty.

    Raises:
        ConfigError: an unknown name (the message lists the installed ones) or a value the
            authorizer refuses (the message names the authorizer).
        PluginError: it cannot be imported, is no ``kafka_tiers.api.Authorizer``, supports
            another SPI, or its constructor or ``configure`` failed otherwise.
    """
    from kafka_tiers.plugins.loader import installed_names, resolve_class

    name = authorizer_name(config)
    if not name:
        return None
    if ":" not in name and name not in installed_names(AUTHORIZER_GROUP):
        installed = ", ".join(installed_names(AUTHORIZER_GROUP)) or "none"
        raise ConfigError(
            f"unknown authorizer {name!r} for {KEY}; installed: {installed} (or give "
            f"pkg.module:Class, or Kafka's {KAFKA_CLASS_NAMES[0]})", key=KEY, value=name,
            expected="an installed authorizer")
    cls, label = resolve_class(AUTHORIZER_GROUP, name)
    try:
        authorizer = cls()
    except Exception as exc:
        raise PluginError(f"{label} could not be created: {type(exc).__name__}: {exc}",
                          plugin=name, cause="constructor failed") from None
    try:
        authorizer.configure(config)
    except ConfigError as exc:
        _close_quietly(authorizer)
        raise ConfigError(f"{label}: {exc}", key=exc.key, value=exc.value,
                          expected=exc.expected) from None
    except Exception as exc:
        _close_quietly(authorizer)
        raise PluginError(f"{label} failed to configure: {type(exc).__name__}: {exc}",
                          plugin=name, cause="configure failed") from None
    return cast(Authorizer, authorizer)  # resolve_class checked the interface


def start_authorizer(server: KafkaServer) -> Authorizer | None:
    """Load, configure and start the authorizer of ``server``'s broker with the broker's ACL
    storage; registered as the server's component :data:`COMPONENT_KEY` (closed when the
    server stops). None when none is configured.

    Raises:
        ConfigError, PluginError: as :func:`load_authorizer`; PluginError also when
            ``start`` failed (the store unreachable, the stored ACLs unreadable).
    """
    from kafka_tiers.kafka.security.acl_storage import StateStoreAclStorage
    from kafka_tiers.kafka.security.state_store import state_store_of

    authorizer = load_authorizer(server.broker.config)
    if authorizer is None:
        return None
    name = authorizer_name(server.broker.config)
    try:
        authorizer.start(StateStoreAclStorage(state_store_of(server)))
    except PluginError:
        _close_quietly(authorizer)
        raise
    except Exception as exc:
        _close_quietly(authorizer)
        raise PluginError(f"authorizer {name!r} failed to start: {type(exc).__name__}: "
                          f"{exc}", plugin=name, cause="start failed") from None
    server.component(COMPONENT_KEY, lambda _s: authorizer)
    log.info("authorizer %s started", name)
    return authorizer


def _close_quietly(authorizer: Any) -> None:
    try:
        authorizer.close()
    except Exception:
        log.debug("close() of a failed authorizer raised", exc_info=True)


__all__ = ["BUILT_IN", "COMPONENT_KEY", "KEY", "authorizer_name", "load_authorizer",
           "start_authorizer"]
