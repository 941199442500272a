"""The storage suite as the ``--kt-storage`` options select it: the plugin under test comes
from the options (see :func:`kafka_tiers.conformance.storage.base.target_from_options`)."""

from __future__ import annotations

from kafka_tiers.conformance.storage import StorageSuite


class TestStorage(StorageSuite):
    """Every storage conformance test against the ``--kt-storage`` plugin."""


__all__ = ["TestStorage"]
