"""The marker a lifecycle hook plugin decorates its implementations with.

``from kafka_tiers.api import hookimpl`` is all a hook plugin imports from kafka-tiers. The
hooks themselves (names, arguments, what each means) are specified in the core's
``kafka_tiers.plugins.hookspecs`` and documented in ``docs/hooks.md``. The marker is pluggy's,
for the project name ``kafka_tiers``, so every pluggy option works: ``tryfirst``/``trylast``,
``wrapper=True`` (a generator that wraps the other implementations), ``hookwrapper=True``
(pluggy's older wrapper style), ``specname``.
"""

from __future__ import annotations

from typing import Final

import pluggy

#: pluggy's project name for kafka-tiers' hooks, and the entry-point group of hook plugins
HOOK_PROJECT: Final = "kafka_tiers"

#: decorates a hook implementation: ``@hookimpl`` or ``@hookimpl(wrapper=True)``
hookimpl: Final = pluggy.HookimplMarker(HOOK_PROJECT)

__all__ = ["HOOK_PROJECT", "hookimpl"]
