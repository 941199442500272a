"""Cluster shapes and placement cases the placer suite runs a placer on.

A :class:`Shape` is a set of registered brokers (with racks and fencing) and an optional allowed
subset (``broker_ids``); a :class:`Case` is a shape with a :class:`PlacementSpec`. The generators
below cover one rack, equal and unequal racks, multi-level rack trees of depth 2 and 3, fenced
brokers and fenced racks, broker subsets (with unknown ids, which placers must ignore), non
contiguous broker ids and large clusters. Cases sort smallest first, so the first failing case of
a rule is its minimal example.

Everything here is computed by the suite itself, from :mod:`kafka_tiers.api` types only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafka_tiers.api import BrokerInfo, ClusterView, PlacementSpec

#: Shape families. ``flat`` shapes have racks that are plain names (one level), ``tree`` shapes
#: have ``/a/b`` paths of depth >= 2, ``no-racks`` shapes have brokers without racks.
FAMILIES = ("no-racks", "flat", "tree")


@dataclass(frozen=True)
class Shape:
    """A cluster to place on.

    Attributes:
        name: a short unique name (``equal-racks-3x2``).
        family: ``"no-racks"``, ``"flat"`` or ``"tree"``.
        brokers: every registered broker, fenced included.
        subset: the ``broker_ids`` argument to pass (None: all brokers); may hold unknown ids.
    """

    name: str
    family: str
    brokers: tuple[BrokerInfo, ...]
    subset: tuple[int, ...] | None = None

    def cluster(self, assignments: Mapping | None = None) -> ClusterView:
        """A fresh :class:`ClusterView` of this shape (with ``assignments`` when given)."""
        return ClusterView(self.brokers, assignments or {})

    @property
    def allowed(self) -> tuple[BrokerInfo, ...]:
        """The registered brokers the placer may use (the subset's known ids), sorted by id."""
        if self.subset is None:
            return tuple(sorted(self.brokers, key=lambda b: b.broker_id))
        wanted = set(self.subset)
        return tuple(sorted((b for b in self.brokers if b.broker_id in wanted),
                            key=lambda b: b.broker_id))

    @property
    def usable(self) -> tuple[BrokerInfo, ...]:
        """The unfenced allowed brokers: the ones that may lead."""
        return tuple(b for b in self.allowed if not b.fenced)

    @property
    def fenced(self) -> tuple[int, ...]:
        """Ids of the fenced registered brokers."""
        return tuple(b.broker_id for b in self.brokers if b.fenced)

    def size_key(self) -> tuple[int, int]:
        """Orders shapes smallest first: allowed brokers, then registered brokers."""
        return (len(self.allowed), len(self.brokers))

    def describe(self) -> str:
        """The shape in words: brokers by rack (``*`` marks fenced), fenced, allowed subset."""
        by_rack: dict[str | None, list[str]] = {}
        for b in sorted(self.brokers, key=lambda b: b.broker_id):
            by_rack.setdefault(b.rack, []).append(f"{b.broker_id}{'*' if b.fenced else ''}")
        if list(by_rack) == [None]:
            layout = "no racks: [" + ", ".join(by_rack[None]) + "]"
        else:
            layout = "; ".join(f"{rack}=[{', '.join(ids)}]" for rack, ids in
                               sorted(by_rack.items(), key=lambda kv: str(kv[0])))
        fenced = ", ".join(map(str, self.fenced)) or "none"
        subset = "all brokers" if self.subset is None else f"broker_ids={list(self.subset)}"
        return (f"{self.name}: {len(self.brokers)} brokers ({layout}); fenced (*): {fenced}; "
                f"allowed: {subset}")


@dataclass(frozen=True)
class Case:
    """One placement request: a shape and a spec.

    Attributes:
        shape: the cluster.
        spec: what to place.
        assignments: the cluster's current assignments (for continuation cases).
    """

    shape: Shape
    spec: PlacementSpec
    assignments: Mapping = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple:
        """A hashable identity, for caching results."""
        s = self.spec
        return (self.shape.name, s.num_partitions, s.replication_factor, s.start_partition,
                s.topic, tuple(sorted((str(k), tuple(v)) for k, v in self.assignments.items())))

    def size_key(self) -> tuple[int, int, int, int]:
        """Orders cases smallest first (shape, then partitions, then replication factor)."""
        return (*self.shape.size_key(), self.spec.num_partitions, self.spec.replication_factor)

    def cluster(self) -> ClusterView:
        """A fresh :class:`ClusterView` for this case."""
        return self.shape.cluster(self.assignments)

    def describe(self) -> str:
        """The case in words (shape and spec)."""
        s = self.spec
        return (f"shape {self.shape.describe()}\n"
                f"    spec: num_partitions={s.num_partitions}, replication_factor="
                f"{s.replication_factor}, start_partition={s.start_partition}, topic={s.topic!r}"
                + (f"; existing assignment of the topic: {len(self.assignments)} partitions"
                   if self.assignments else ""))


def _flat_shape(name: str, sizes: Iterable[int], *, rack_prefix: str, first_id: int = 0,
                id_step: int = 1, fenced: Iterable[int] = (), subset: Iterable[int] | None = None,
                ) -> Shape:
    fenced_ids = set(fenced)
    brokers: list[BrokerInfo] = []
    next_id = first_id
    for r, size in enumerate(sizes):
        for _ in range(size):
            brokers.append(BrokerInfo(next_id, f"{rack_prefix}{r}", next_id in fenced_ids))
            next_id += id_step
    return Shape(name, "flat", tuple(brokers), None if subset is None else tuple(subset))


def _tree_shape(name: str, tree: Mapping[str, object], *, fenced: Iterable[int] = (),
                subset: Iterable[int] | None = None) -> Shape:
    """``tree`` maps names to subtrees or, at the leaves, to broker counts."""
    fenced_ids = set(fenced)
    brokers: list[BrokerInfo] = []

    def walk(prefix: str, node: Mapping[str, object]) -> None:
        for key, sub in node.items():
            path = f"{prefix}/{key}"
            if isinstance(sub, int):
                for _ in range(sub):
                    bid = len(brokers)
                    brokers.append(BrokerInfo(bid, path, bid in fenced_ids))
            elif isinstance(sub, Mapping):
                walk(path, sub)
            else:
                raise TypeError(f"tree node {path}: expected a broker count or a subtree")

    walk("", tree)
    return Shape(name, "tree", tuple(brokers), None if subset is None else tuple(subset))


def _regular(levels: list[int], brokers_per_leaf: int, names: tuple[str, ...]
             ) -> dict[str, object]:
    """A tree of ``levels`` fan-outs whose leaves hold ``brokers_per_leaf`` brokers each."""
    if len(levels) == 1:
        return {f"{names[0]}{i}": brokers_per_leaf for i in range(levels[0])}
    return {f"{names[0]}{i}": _regular(levels[1:], brokers_per_leaf, names[1:])
            for i in range(levels[0])}


def shapes(*, path_racks: bool, with_unracked: bool, large: bool = True) -> list[Shape]:
    """Every shape of the suite, smallest first.

    Args:
        path_racks: name flat racks ``/r0`` (for multi-level placers, whose racks are paths)
            rather than ``r0``.
        with_unracked: include shapes whose brokers have no rack.
        large: include the large clusters (64 and 48 brokers).
    """
    p = "/r" if path_racks else "r"
    out: list[Shape] = [
        _flat_shape("single-broker", [1], rack_prefix=p),
        _flat_shape("one-rack-4", [4], rack_prefix=p),
        _flat_shape("equal-racks-2x2", [2, 2], rack_prefix=p),
        _flat_shape("equal-racks-3x2-sparse-ids", [2, 2, 2], rack_prefix=p, first_id=101,
                    id_step=7),
        _flat_shape("equal-racks-3x3", [3, 3, 3], rack_prefix=p),
        _flat_shape("equal-racks-4x2", [2, 2, 2, 2], rack_prefix=p),
        _flat_shape("unequal-racks-1+3", [1, 3], rack_prefix=p),
        _flat_shape("unequal-racks-3+2+1", [3, 2, 1], rack_prefix=p),
        _flat_shape("unequal-racks-2+2+1", [2, 2, 1], rack_prefix=p),
        _flat_shape("fenced-brokers-3x2", [2, 2, 2], rack_prefix=p, fenced=[0, 3]),
        _flat_shape("fenced-rack-3x2", [2, 2, 2], rack_prefix=p, fenced=[4, 5]),
        _flat_shape("mostly-fenced-2x2", [2, 2], rack_prefix=p, fenced=[1, 2, 3]),
        _flat_shape("subset-3x3", [3, 3, 3], rack_prefix=p, subset=[0, 1, 3, 4, 6, 7, 99]),
        _flat_shape("subset-two-racks-3x2", [2, 2, 2], rack_prefix=p, subset=[3, 2, 1, 0]),
        _flat_shape("subset-fenced-3x2", [2, 2, 2], rack_prefix=p, fenced=[1],
                    subset=[0, 1, 2, 3, 4]),
        _tree_shape("tree-2x2x2", _regular([2, 2], 2, ("dc", "rack"))),
        _tree_shape("tree-3x2x1", _regular([3, 2], 1, ("dc", "rack"))),
        _tree_shape("tree-2x3x1", _regular([2, 3], 1, ("dc", "rack"))),
        _tree_shape("tree-depth3-2x2x2x1", _regular([2, 2, 2], 1, ("region", "dc", "rack"))),
        _tree_shape("tree-unequal", {"dc0": {"rack0": 2}, "dc1": {"rack0": 1, "rack1": 1,
                                                                  "rack2": 1}}),
        _tree_shape("tree-fenced-2x2x2", _regular([2, 2], 2, ("dc", "rack")), fenced=[0]),
        _tree_shape("tree-subset-3x2x2", _regular([3, 2], 2, ("dc", "rack")),
                    subset=[0, 2, 4, 6, 8, 10, 42]),
    ]
    if with_unracked:
        out.append(Shape("no-racks-5", "no-racks", tuple(BrokerInfo(i) for i in range(5))))
        out.append(Shape("no-racks-fenced-4", "no-racks",
                         tuple(BrokerInfo(i, None, i == 2) for i in range(4))))
    if large:
        out.append(_flat_shape("large-8x8", [8] * 8, rack_prefix=p))
        out.append(_tree_shape("large-tree-3x4x4", _regular([3, 4], 4, ("dc", "rack"))))
    return sorted(out, key=Shape.size_key)


def specs_for(shape: Shape) -> list[PlacementSpec]:
    """The specs each shape is placed with: replication factors 1, 2, 3 and all allowed brokers
    (those the shape allows), with 1, 2, 3, n-1, n, 2n+1 and 12 partitions (n = usable brokers);
    large shapes use fewer, bigger specs."""
    allowed = len(shape.allowed)
    n = max(1, len(shape.usable))
    if allowed >= 40:
        return [PlacementSpec(p, rf) for rf in (1, 3) for p in (1, n, 3 * n + 5)]
    rfs = sorted({rf for rf in (1, 2, 3, allowed) if 1 <= rf <= allowed})
    parts = sorted({p for p in (1, 2, 3, n - 1, n, 2 * n + 1, 12) if p >= 1})
    return [PlacementSpec(p, rf) for rf in rfs for p in parts]


def cases(shape_list: Iterable[Shape]) -> list[Case]:
    """Every (shape, spec) case of ``shape_list``, smallest first."""
    out = [Case(s, spec) for s in shape_list for spec in specs_for(s)]
    return sorted(out, key=Case.size_key)


__all__ = ["FAMILIES", "Case", "Shape", "cases", "shapes", "specs_for"]
