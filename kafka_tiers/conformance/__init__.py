"""Conformance suites for kafka-tiers plugins."""
