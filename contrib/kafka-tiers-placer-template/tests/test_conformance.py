"""Run the whole kafka-tiers placer conformance suite against example-spread.

The placer is selected by its entry-point name, exactly as a broker would select it, so this
also proves the distribution is installed with its entry point.
"""

from kafka_tiers.conformance.placer import PlacerConformance


class TestExampleSpreadConformance(PlacerConformance):
    """Every rule of the suite; the rack-aware ones too, since the placer declares RACK_AWARE."""

    placer = "example-spread"
    placer_config = {"seed": "11"}


__all__ = ["TestExampleSpreadConformance"]
