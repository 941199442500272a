"""The replica placer conformance suite.

Run it against a placer with ``kafka-tiers conformance placer NAME_OR_PATH`` or
``pytest --kt-placer NAME_OR_PATH``, or from your own test module (fsspec style)::

    from kafka_tiers.conformance.placer import PlacerConformance

    class TestMyPlacer(PlacerConformance):
        placer = "my-placer"          # entry-point name or "my_pkg.placers:MyPlacer"

One module per behaviour area holds a mixin of tests: shape and size, validity, errors,
determinism, continuation, rack spread, balance, multi-level. :class:`PlacerConformance` combines
them all. The rules and their exact bounds are in :mod:`.rules` and ``docs/conformance.md``.
"""

from __future__ import annotations

from kafka_tiers.conformance.placer.base import PlacerSuiteBase, requires
from kafka_tiers.conformance.placer.requirements import Capability, Requirements
from kafka_tiers.conformance.placer.rules import RULES
from kafka_tiers.conformance.placer.test_balance import BalanceTests
from kafka_tiers.conformance.placer.test_continuation import ContinuationTests
from kafka_tiers.conformance.placer.test_determinism import DeterminismTests
from kafka_tiers.conformance.placer.test_errors import ErrorTests
from kafka_tiers.conformance.placer.test_multi_level import MultiLevelTests
from kafka_tiers.conformance.placer.test_rack_spread import RackSpreadTests
from kafka_tiers.conformance.placer.test_shape import ShapeSizeTests
from kafka_tiers.conformance.placer.test_validity import ValidityTests


class PlacerConformance(
    ShapeSizeTests,
    ValidityTests,
    ErrorTests,
    DeterminismTests,
    ContinuationTests,
    RackSpreadTests,
    BalanceTests,
    MultiLevelTests,
):
    """Every area of the placer suite in one class. Subclass it as ``Test...`` in your own test
    module and set :attr:`placer` (and optionally :attr:`placer_config`,
    :attr:`requirements_class`, :attr:`include_large`, :attr:`place_timeout`)."""


__all__ = [
    "RULES",
    "BalanceTests",
    "Capability",
    "ContinuationTests",
    "DeterminismTests",
    "ErrorTests",
    "MultiLevelTests",
    "PlacerConformance",
    "PlacerSuiteBase",
    "RackSpreadTests",
    "Requirements",
    "ShapeSizeTests",
    "ValidityTests",
    "requires",
]
