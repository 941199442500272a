"""An example third-party replica placer for kafka-tiers: ``example-spread``."""

from kt_example_spread.placer import ExampleSpreadPlacer

__all__ = ["ExampleSpreadPlacer"]
