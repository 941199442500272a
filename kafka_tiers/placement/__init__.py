"""The built-in replica placers, placement validation and quality figures.

The placers (``simple``, ``rack-aware``, ``multi-level-rack``) are registered as entry points
exactly like third-party plugins and depend only on :mod:`kafka_tiers.api` and the helpers of
this package.
"""

from kafka_tiers.placement.admin import create_replica_placement
from kafka_tiers.placement.multi_level_rack import MultiLevelRackPlacer
from kafka_tiers.placement.quality import PlacementQuality, placement_quality
from kafka_tiers.placement.rack_aware import RackAwarePlacer
from kafka_tiers.placement.rack_tree import RackTree, parse_rack_path
from kafka_tiers.placement.simple import SimplePlacer
from kafka_tiers.placement.validation import check_replication_factor, validate_placement

__all__ = [
    "MultiLevelRackPlacer",
    "PlacementQuality",
    "RackAwarePlacer",
    "RackTree",
    "SimplePlacer",
    "check_replication_factor",
    "create_replica_placement",
    "parse_rack_path",
    "placement_quality",
    "validate_placement",
]
