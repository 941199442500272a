"""Balance figures of a placement, for a CLI table, a JSON report and the benchmark.

Figures are computed over the placement alone (not the rest of the cluster): replicas and
leaders per broker, per rack, and per level of a rack tree, each with its minimum, maximum,
spread (max - min) and largest distance from the fair share (the total split by the number of
brokers in each domain); and, per level, the rack spread of each partition (how many distinct
domains it spans) against the goal ``min(#domains, RF)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_tiers.api import ClusterView, InvalidReplicaAssignmentError
from kafka_tiers.placement.rack_tree import RackTree
from kafka_tiers.placement.validation import allowed_brokers

NO_RACK = "<no rack>"
"""The domain name given to brokers without a rack when others have one."""


@dataclass(frozen=True)
class Balance:
    """How evenly a count is spread over brokers or domains.

    Attributes:
        counts: key (broker id or domain path) -> count; every considered key appears.
        minimum, maximum: the smallest and largest count (0 when there are no keys).
        spread: ``maximum - minimum``.
        max_fair_share_deviation: the largest ``|count - fair|`` where ``fair`` is the total
            split in proportion to each key's brokers (one per broker for broker counts).
    """

    counts: Mapping[Any, int] = field(repr=False)
    minimum: int
    maximum: int
    spread: int
    max_fair_share_deviation: float

    @classmethod
    def of(cls, counts: Mapping[Any, int], weights: Mapping[Any, int] | None = None) -> Balance:
        """Figures of ``counts``; ``weights`` (brokers per key, default 1) set the fair share."""
        if not counts:
            return cls({}, 0, 0, 0, 0.0)
        values = list(counts.values())
        total = sum(values)
        w = weights or {}
        total_weight = sum(w.get(k, 1) for k in counts)
        dev = max(abs(c - total * w.get(k, 1) / total_weight) for k, c in counts.items())
        return cls(dict(counts), min(values), max(values), max(values) - min(values),
                   round(dev, 6))

    def to_dict(self, *, with_counts: bool = False) -> dict[str, Any]:
        """Plain JSON-ready dict; ``counts`` (string keys) only when ``with_counts``."""
        out: dict[str, Any] = {
            "min": self.minimum,
            "max": self.maximum,
            "spread": self.spread,
            "max_fair_share_deviation": self.max_fair_share_deviation,
        }
        if with_counts:
            out["counts"] = {str(k): v for k, v in self.counts.items()}
        return out


@dataclass(frozen=True)
class LevelQuality:
    """Figures for one level of failure domains (a flat rack set is one level).

    Attributes:
        level: 1 for the top level.
        name: ``"rack"`` for flat racks, ``"level N"`` for rack trees.
        domains: how many domains the level has among the considered brokers.
        replicas, leaders: per-domain balance.
        expected_spread: ``min(domains, RF)``.
        min_spread, max_spread: fewest and most distinct domains one partition spans.
        partitions_below_spread: partitions spanning fewer than ``expected_spread`` domains.
        partitions_uneven: partitions whose per-domain replica counts differ by more than one
            (counting a domain with none when the partition should span every domain).
    """

    level: int
    name: str
    domains: int
    replicas: Balance
    leaders: Balance
    expected_spread: int
    min_spread: int
    max_spread: int
    partitions_below_spread: int
    partitions_uneven: int

    def to_dict(self, *, with_counts: bool = False) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        out = {k: v for k, v in asdict(self).items() if k not in ("replicas", "leaders")}
        out["replicas"] = self.replicas.to_dict(with_counts=with_counts)
        out["leaders"] = self.leaders.to_dict(with_counts=with_counts)
        return out


@dataclass(frozen=True)
class PlacementQuality:
    """Balance figures of one placement.

    Attributes:
        partitions, replication_factor: the placement's shape (RF of the first partition).
        brokers: how many brokers were considered.
        broker_replicas, broker_leaders: per-broker balance.
        levels: one entry per level of the rack tree (or one for flat racks; none when no
            broker has a rack).
    """

    partitions: int
    replication_factor: int
    brokers: int
    broker_replicas: Balance
    broker_leaders: Balance
    levels: tuple[LevelQuality, ...]

    def to_dict(self, *, with_counts: bool = False) -> dict[str, Any]:
        """Plain JSON-ready dict (for ``--format json`` and reports)."""
        return {
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "brokers": self.brokers,
            "broker_replicas": self.broker_replicas.to_dict(with_counts=with_counts),
            "broker_leaders": self.broker_leaders.to_dict(with_counts=with_counts),
            "levels": [lv.to_dict(with_counts=with_counts) for lv in self.levels],
        }

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        """Table rows ``(scope, what, min, max, spread)`` for a CLI table."""
        out = [
            ("broker", "replicas", *self._mms(self.broker_replicas)),
            ("broker", "leaders", *self._mms(self.broker_leaders)),
        ]
        for lv in self.levels:
            out.append((lv.name, "replicas", *self._mms(lv.replicas)))
            out.append((lv.name, "leaders", *self._mms(lv.leaders)))
            out.append(
                (lv.name, "spread", str(lv.min_spread), str(lv.max_spread),
                 f"goal {lv.expected_spread}")
            )
        return out

    @staticmethod
    def _mms(b: Balance) -> tuple[str, str, str]:
        return str(b.minimum), str(b.maximum), str(b.spread)


def domain_levels(
    brokers: Sequence[int], cluster: ClusterView
) -> list[tuple[str, dict[int, str]]]:
    """The failure-domain levels of ``brokers``: ``[(name, broker -> domain)]``.

    Rack paths of equal depth give one level per depth (``/dc1``, ``/dc1/r1``); other racks are
    one flat level (brokers without a rack in domain :data:`NO_RACK`); no racks at all give no
    level.
    """
    infos = [cluster.broker(b) for b in brokers if b in cluster]
    if not infos or all(b.rack is None for b in infos):
        return []
    try:
        tree = RackTree.from_brokers(infos)
    except InvalidReplicaAssignmentError:
        return [("rack", {b.broker_id: b.rack or NO_RACK for b in infos})]
    if tree.depth == 1:
        return [("rack", {b.broker_id: tree.domain(b.broker_id, 1) for b in infos})]
    return [
        (f"level {lv}", {b.broker_id: tree.domain(b.broker_id, lv) for b in infos})
        for lv in range(1, tree.depth + 1)
    ]


def placement_quality(
    placement: Sequence[Sequence[int]],
    cluster: ClusterView,
    broker_ids: Sequence[int] | None = None,
) -> PlacementQuality:
    """Compute the balance figures of ``placement`` on ``cluster``.

    The brokers considered are the unfenced brokers available (registered, within
    ``broker_ids``) plus any broker the placement uses; each appears in the counts, with 0 when
    unused. Levels come from :func:`domain_levels`.
    """
    considered = {b.broker_id for b in allowed_brokers(cluster, broker_ids) if not b.fenced}
    replicas = {b: 0 for b in considered}
    leaders = {b: 0 for b in considered}
    for reps in placement:
        for r in reps:
            replicas[r] = replicas.get(r, 0) + 1
        if reps:
            leaders[reps[0]] = leaders.get(reps[0], 0) + 1
            replicas.setdefault(reps[0], 0)
    for b in replicas:
        leaders.setdefault(b, 0)
    rf = len(placement[0]) if placement else 0
    levels: list[LevelQuality] = []
    for i, (name, dom) in enumerate(domain_levels(sorted(replicas), cluster), start=1):
        levels.append(_level(i, name, dom, placement, replicas, leaders, rf))
    return PlacementQuality(
        partitions=len(placement),
        replication_factor=rf,
        brokers=len(replicas),
        broker_replicas=Balance.of(replicas),
        broker_leaders=Balance.of(leaders),
        levels=tuple(levels),
    )


def _level(
    level: int,
    name: str,
    dom: Mapping[int, str],
    placement: Sequence[Sequence[int]],
    replicas: Mapping[int, int],
    leaders: Mapping[int, int],
    rf: int,
) -> LevelQuality:
    sizes: dict[str, int] = {}
    rep_counts: dict[str, int] = {}
    lead_counts: dict[str, int] = {}
    for b, d in dom.items():
        sizes[d] = sizes.get(d, 0) + 1
        rep_counts[d] = rep_counts.get(d, 0) + replicas.get(b, 0)
        lead_counts[d] = lead_counts.get(d, 0) + leaders.get(b, 0)
    n_domains = len(sizes)
    expected = min(n_domains, rf)
    lo, hi, below, uneven = (n_domains, 0, 0, 0) if placement else (0, 0, 0, 0)
    for reps in placement:
        per: dict[str, int] = {}
        for r in reps:
            d = dom.get(r, NO_RACK)
            per[d] = per.get(d, 0) + 1
        spread = len(per)
        lo = min(lo, spread)
        hi = max(hi, spread)
        if spread < min(n_domains, len(reps)):
            below += 1
        values = list(per.values())
        if len(reps) >= n_domains and spread < n_domains:
            values.append(0)
        if max(values) - min(values) > 1:
            uneven += 1
    return LevelQuality(
        level=level,
        name=name,
        domains=n_domains,
        replicas=Balance.of(rep_counts, sizes),
        leaders=Balance.of(lead_counts, sizes),
        expected_spread=expected,
        min_spread=lo,
        max_spread=hi,
        partitions_below_spread=below,
        partitions_uneven=uneven,
    )


__all__ = [
    "NO_RACK",
    "Balance",
    "LevelQuality",
    "PlacementQuality",
    "domain_levels",
    "placement_quality",
]
