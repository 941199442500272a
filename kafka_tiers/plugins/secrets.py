"""The core's side of the one secret type (:class:`kafka_tiers.api.Secret`).

What is secret is declared once, where it is defined: ``ConfigKey(..., secret=True)`` for the
core's keys (:class:`~kafka_tiers.config.BrokerConfig` holds their values as
:class:`~kafka_tiers.api.Secret`), the class attribute ``SECRET_KEYS`` for a plugin's. This
module makes the declarations take effect:

- :func:`secret_config` wraps the values of a plugin's declared keys before the plugin sees its
  configuration (the loader, the storage guard and the conformance suite call it);
- while a :class:`~kafka_tiers.api.Secret` lives, no log record of the process carries its
  value or parts: the log record factory is wrapped (once, when this module is imported) so
  every record is created with them replaced by ``<hidden>`` in its message, arguments,
  formatted traceback and stack. This is what keeps an SDK's DEBUG lines (request headers with
  a session token, request URLs with a SAS) clean once a plugin has revealed a credential to it;
- :func:`holds_secret` finds a live secret in text even when ``pprint`` split it over lines
  (the pytest plugin's report hiding, :mod:`kafka_tiers.conformance.report_secrets`).

Foreign text (an SDK's exception message) goes through :meth:`Secret.hide
<kafka_tiers.api.Secret.hide>`: the storage guard does this for every error it raises.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka_tiers.api.secret import Secret

# where pprint splits a long str or bytes repr over lines: 'abc'\n 'def', b'abc'\n b'def'
_LITERAL_JOIN = re.compile(r"""['"]\s*[bBrRuU]{0,2}['"]""")


def secret_keys_of(plugin: object) -> frozenset[str]:
    """The keys a plugin class (or instance) declares secret: its ``SECRET_KEYS``."""
    return frozenset(str(k) for k in getattr(plugin, "SECRET_KEYS", ()) or ())


def storage_secret_keys(name_or_path: str) -> frozenset[str]:
    """The secret keys a remote storage plugin (or object store) declares, by the name or
    import path it is configured with; none when it cannot be resolved (loading it reports
    why)."""
    from kafka_tiers.api.errors import PluginError
    from kafka_tiers.plugins.loader import STORAGE_GROUP, resolve_class

    try:
        return secret_keys_of(resolve_class(STORAGE_GROUP, name_or_path)[0])
    except PluginError:
        return frozenset()


def secret_config(config: Mapping[str, str | Secret], keys: Iterable[str]
                  ) -> dict[str, str | Secret]:
    """A copy of ``config`` with the values of ``keys`` held as :class:`Secret` (values that
    already are one stay as they are; the caller's mapping is left alone)."""
    declared = frozenset(keys)
    return {k: Secret(str(v)) if k in declared and not isinstance(v, Secret) else v
            for k, v in config.items()}


def holds_secret(text: str) -> bool:
    """Whether ``text`` holds the value or a part of a live :class:`Secret`, also when a
    pretty-printed ``repr`` split it into quoted pieces on several lines."""
    return Secret.hide(text) != text or Secret.hide(_LITERAL_JOIN.sub("", text)) != (
        _LITERAL_JOIN.sub("", text))


# --------------------------------------------------------------------------------------------
# Log records


_format_exception = logging.Formatter().formatException


def _hide_in_record(record: logging.LogRecord) -> None:
    if not Secret.any_live():
        return  # nothing to hide: no formatting of messages or tracebacks ahead of logging
    try:
        message = record.getMessage()
    except Exception:  # a broken format string is logging's to report; keep its parts
        message = f"{record.msg} {record.args!r}"
    hidden = Secret.hide(message)
    if hidden != message:
        record.msg, record.args = hidden, None
    if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
        # formatted now (formatters print exc_text rather than format exc_info again)
        record.exc_text = Secret.hide(_format_exception(record.exc_info))
    elif record.exc_text:
        record.exc_text = Secret.hide(record.exc_text)
    if record.stack_info:
        record.stack_info = Secret.hide(record.stack_info)


def install_log_hiding() -> None:
    """Wrap the process's log record factory (once) so that every record is created with the
    live secrets hidden. Done when this module is imported; a factory set later that does not
    wrap the one it replaces undoes it."""
    previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()
    if getattr(previous, "hides_secrets", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _hide_in_record(record)
        return record

    factory.hides_secrets = True  # type: ignore[attr-defined]  # a marker on a function
    logging.setLogRecordFactory(factory)


install_log_hiding()

__all__ = [
    "holds_secret",
    "install_log_hiding",
    "secret_config",
    "secret_keys_of",
    "storage_secret_keys",
]
