"""The rules of the placer suite, checked by the suite's own code.

Each rule has a stable id (used in reports, the summary and ``docs/conformance.md``) and a check
function returning :class:`Violation` objects. Nothing here uses kafka-tiers' own placers or
their validation: a suite that reused the code under test would prove nothing.

Terms: for a case, the *allowed* brokers are the registered brokers of the allowed subset (all
registered brokers when no subset is given; unknown ids in the subset are ignored); the *usable*
brokers are the unfenced allowed ones; ``n`` is their number, ``P`` the partition count and
``RF`` the replication factor. Rack rules and balance rules look only at usable brokers and only
at cases where ``RF <= n`` (no fenced broker is needed).

Balance bounds (``max - min`` of a per-broker count over a group of brokers):

* leaders: ``<= 1`` when the rack layout is equal-sized and ``P % n == 0``; otherwise ``<= 2``;
* replicas: ``<= 1`` when the rack layout is equal-sized and ``P * RF % n == 0``; otherwise
  ``<= max(2, RF)`` (a stripe that does not divide evenly may stack one extra replica per
  replica slot on the same broker);
* the group is every usable broker when the layout is equal-sized (all racks with the same
  number of usable brokers, or no racks; for multi-level racks: at every level, all domains
  with the same number of usable brokers), otherwise each rack on its own (brokers of one rack
  are interchangeable, brokers of unequal racks are not).

Multi-level domain balance: at each level ``l`` such that levels ``1..l`` are equal-sized, with
``m`` domains at level ``l``, every domain holds ``|replicas - P*RF/m| <= 1`` and
``|leaders - P/m| <= 1``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafka_tiers.api import BrokerInfo, PlacementSpec
from kafka_tiers.conformance.placer.shapes import Shape

#: rule id -> the rule in one sentence.
RULES: dict[str, str] = {
    "accepts-possible-request": "a possible request (1 <= RF <= allowed brokers, at least one "
                                "unfenced allowed broker) returns a placement (or None); it "
                                "does not raise",
    "terminates": "every call returns within the time limit, also for one broker and many "
                  "partitions",
    "partition-count": "the result is a list of exactly spec.num_partitions replica lists",
    "replication-factor": "every replica list holds exactly spec.replication_factor broker ids",
    "distinct-replicas": "no broker appears twice in one partition",
    "allowed-brokers": "only registered brokers from the allowed subset (broker_ids) are used; "
                       "unknown ids in the subset are ignored",
    "unfenced-leader": "the leader (replicas[0]) is an unfenced broker",
    "fenced-only-when-needed": "fenced brokers are used only when fewer than RF unfenced "
                               "brokers are allowed, and then only RF - n of them",
    "refuses-non-positive-rf": "RF <= 0 raises InvalidReplicationFactorError",
    "refuses-rf-above-allowed": "RF larger than the allowed registered brokers (fenced "
                                "included) raises InvalidReplicationFactorError",
    "refuses-without-unfenced": "no unfenced allowed broker raises "
                                "InvalidReplicationFactorError",
    "fenced-count-as-registered": "RF up to the allowed brokers, fenced included, is accepted "
                                  "when at least one allowed broker is unfenced",
    "deterministic-seed": "placers configured with the same seed return the same placement",
    "no-hidden-state": "one placer asked the same thing twice returns the same placement",
    "deterministic-across-processes": "the same seed gives the same placement in another "
                                      "interpreter (another PYTHONHASHSEED)",
    "continuation-count": "with start_partition = k the result has spec.num_partitions lists "
                          "and obeys every validity rule",
    "continuation-balance": "placing a topic in two calls (the second with start_partition and "
                            "the first call's result in the ClusterView) meets the balance "
                            "bounds of placing it in one call",
    "no-deferral": "a rack-aware placer places racked clusters itself (never returns None)",
    "rack-span": "every partition spans min(#racks, RF) racks",
    "rack-even": "within a partition, replicas per rack differ by at most one, unless the rack "
                 "with fewer replicas has all its usable brokers in the partition",
    "leader-balance": "leaders per broker: max - min <= 1 when the layout is equal-sized and P "
                      "divides by n, else <= 2 (per rack when racks are unequal)",
    "replica-balance": "replicas per broker: max - min <= 1 when the layout is equal-sized and "
                       "P*RF divides by n, else <= max(2, RF) (per rack when racks are unequal)",
    "level-span": "at every node of the rack tree, a partition's replicas under it span "
                  "min(#children, replicas under it) children",
    "level-even": "at every node of the rack tree, a partition's replicas per child differ by "
                  "at most one, unless the child with fewer is full",
    "level-replica-balance": "at every equal-sized level, each domain holds P*RF/m replicas, "
                             "within one",
    "level-leader-balance": "at every equal-sized level, each domain leads P/m partitions, "
                            "within one",
}


@dataclass(frozen=True)
class Violation:
    """One broken rule in one placement.

    Attributes:
        rule: the rule id (a key of :data:`RULES`).
        detail: what is wrong, with the numbers.
        partition: the partition number at fault (``start_partition`` based), when one is.
        replicas: that partition's replicas as returned.
    """

    rule: str
    detail: str
    partition: int | None = None
    replicas: tuple | None = None


def _is_id(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_size(spec: PlacementSpec, result: object) -> list[Violation]:
    """``partition-count`` and ``replication-factor`` for a returned (non-None) result."""
    if not isinstance(result, (list, tuple)):
        return [Violation("partition-count", f"returned {type(result).__name__}, not a list")]
    out: list[Violation] = []
    if len(result) != spec.num_partitions:
        out.append(Violation("partition-count", f"returned {len(result)} replica lists for "
                                                f"num_partitions={spec.num_partitions}"))
    for i, reps in enumerate(result):
        p = spec.start_partition + i
        if not isinstance(reps, (list, tuple)) or not all(_is_id(b) for b in reps):
            out.append(Violation("replication-factor", f"entry is {reps!r}, not a list of "
                                                       "broker ids", p, None))
            continue
        if len(reps) != spec.replication_factor:
            out.append(Violation("replication-factor", f"{len(reps)} replicas, expected "
                                 f"{spec.replication_factor}", p, tuple(reps)))
    return out


def well_formed(spec: PlacementSpec, result: object) -> bool:
    """True when ``result`` passes :func:`check_size`."""
    return not check_size(spec, result)


def check_validity(shape: Shape, spec: PlacementSpec, result: Sequence[Sequence[int]]
                   ) -> list[Violation]:
    """``distinct-replicas``, ``allowed-brokers``, ``unfenced-leader``,
    ``fenced-only-when-needed`` for a well-formed result."""
    registered = {b.broker_id: b for b in shape.brokers}
    allowed = {b.broker_id: b for b in shape.allowed}
    usable = [b for b in allowed.values() if not b.fenced]
    fenced_needed = max(0, spec.replication_factor - len(usable))
    out: list[Violation] = []
    for i, reps in enumerate(result):
        p, reps_t = spec.start_partition + i, tuple(reps)
        twice = sorted(b for b, c in Counter(reps_t).items() if c > 1)
        if twice:
            out.append(Violation("distinct-replicas", f"broker(s) {twice} appear more than "
                                                      "once", p, reps_t))
        unknown = [b for b in reps_t if b not in registered]
        outside = [b for b in reps_t if b in registered and b not in allowed]
        if unknown:
            out.append(Violation("allowed-brokers", f"broker(s) {unknown} are not registered",
                                 p, reps_t))
        if outside:
            out.append(Violation("allowed-brokers", f"broker(s) {outside} are not in the "
                                                    "allowed subset", p, reps_t))
        if reps_t and reps_t[0] in registered and registered[reps_t[0]].fenced:
            out.append(Violation("unfenced-leader", f"leader {reps_t[0]} is fenced", p, reps_t))
        fenced_used = sorted({b for b in reps_t if b in allowed and allowed[b].fenced})
        if len(fenced_used) > fenced_needed:
            out.append(Violation(
                "fenced-only-when-needed",
                f"fenced broker(s) {fenced_used} used while {len(usable)} unfenced brokers are "
                f"allowed for RF={spec.replication_factor} (fenced needed: {fenced_needed})",
                p, reps_t))
    return out


# --------------------------------------------------------------------------- rack topology


class Topology:
    """The rack layout of a set of brokers, as the suite understands it.

    Args:
        brokers: the brokers (usually the usable ones of a case).
        tree: read racks as paths ``/a/b/c`` (multi-level) rather than opaque names.

    Attributes:
        paths: broker id -> its path (a tuple of components; ``()`` when it has no rack).
        depth: the number of levels (0 when no broker has a rack).
    """

    def __init__(self, brokers: Iterable[BrokerInfo], *, tree: bool) -> None:
        self.paths: dict[int, tuple[str, ...]] = {}
        for b in brokers:
            if b.rack is None:
                path: tuple[str, ...] = ()
            elif tree:
                path = tuple(c for c in b.rack.strip().split("/") if c)
            else:
                path = (b.rack,)
            self.paths[b.broker_id] = path
        depths = {len(p) for p in self.paths.values()}
        self.depth = max(depths) if depths else 0
        self.consistent = len(depths) <= 1

    def domains(self, level: int) -> dict[tuple[str, ...], list[int]]:
        """Level ``level`` (1 = top) domain -> its broker ids. Level ``depth`` = racks."""
        out: dict[tuple[str, ...], list[int]] = {}
        for bid, path in sorted(self.paths.items()):
            out.setdefault(path[:level], []).append(bid)
        return out

    def equal_levels(self) -> int:
        """How many levels from the top are equal-sized (every domain of the level has the same
        number of brokers, and so has every level above)."""
        for level in range(1, self.depth + 1):
            sizes = {len(ids) for ids in self.domains(level).values()}
            if len(sizes) > 1:
                return level - 1
        return self.depth

    def equal_sized(self) -> bool:
        """True when every level is equal-sized (trivially so without racks)."""
        return self.consistent and self.equal_levels() == self.depth


def _name(prefix: tuple[str, ...], tree: bool) -> str:
    if not prefix:
        return "/" if tree else "(cluster)"
    return "/" + "/".join(prefix) if tree else prefix[0]


def check_spread(shape: Shape, spec: PlacementSpec, result: Sequence[Sequence[int]], *,
                 tree: bool) -> list[Violation]:
    """Per-partition rack rules: ``rack-span``/``rack-even`` (``tree=False``, racks are opaque
    names) or ``level-span``/``level-even`` at every node of the rack tree (``tree=True``).

    Only partitions whose replicas are all usable brokers are looked at, and only when
    ``RF <= n`` and every usable broker has a rack.
    """
    usable = shape.usable
    if spec.replication_factor > len(usable) or any(b.rack is None for b in usable):
        return []
    topo = Topology(usable, tree=tree)
    span_rule, even_rule = ("level-span", "level-even") if tree else ("rack-span", "rack-even")
    out: list[Violation] = []
    for i, reps in enumerate(result):
        p, reps_t = spec.start_partition + i, tuple(reps)
        if not all(b in topo.paths for b in reps_t):
            continue
        for level in range(topo.depth):
            parents = topo.domains(level)
            children = topo.domains(level + 1)
            for parent in parents:
                kids = {k: ids for k, ids in children.items() if k[:level] == parent}
                counts = {k: sum(1 for b in reps_t if topo.paths[b][:level + 1] == k)
                          for k in kids}
                total = sum(counts.values())
                if total == 0:
                    continue
                used = sum(1 for c in counts.values() if c)
                want = min(len(kids), total)
                where = f"under {_name(parent, tree)}: " if tree else ""
                spread = ", ".join(f"{_name(k, tree)}={c}" for k, c in sorted(counts.items()))
                if used != want:
                    out.append(Violation(span_rule, f"{where}spans {used} of {len(kids)} "
                                         f"{'children' if tree else 'racks'} with {total} "
                                         f"replicas, expected {want} ({spread})", p, reps_t))
                for k, c in counts.items():
                    low = [k2 for k2, c2 in counts.items()
                           if c >= c2 + 2 and c2 < len(kids[k2])]
                    if low:
                        out.append(Violation(
                            even_rule, f"{where}{_name(k, tree)} holds {c} replicas but "
                            f"{_name(low[0], tree)} only {counts[low[0]]} although it has "
                            f"{len(kids[low[0]])} usable brokers ({spread})", p, reps_t))
                        break
    return out


def balance_bounds(shape: Shape, num_partitions: int, rf: int, *, tree: bool
                   ) -> tuple[bool, int, int]:
    """``(equal_sized, leader_bound, replica_bound)`` for a topic of ``num_partitions``
    partitions: the ``max - min`` the suite accepts (see the module docstring)."""
    usable = shape.usable
    n = len(usable)
    equal = Topology(usable, tree=tree).equal_sized()
    lead = 1 if equal and num_partitions % n == 0 else 2
    rep = 1 if equal and (num_partitions * rf) % n == 0 else max(2, rf)
    return equal, lead, rep


def check_broker_balance(shape: Shape, rf: int, topic: Sequence[Sequence[int]], *, tree: bool,
                         rule_prefix: str = "") -> list[Violation]:
    """``leader-balance`` and ``replica-balance`` over a whole topic's assignment ``topic``
    (partition 0 first). Looks only at usable brokers; nothing is checked when ``RF > n``."""
    usable = shape.usable
    n = len(usable)
    num = len(topic)
    if num == 0 or rf > n:
        return []
    topo = Topology(usable, tree=tree)
    equal, lead_bound, rep_bound = balance_bounds(shape, num, rf, tree=tree)
    if equal:
        groups = {"all usable brokers": [b.broker_id for b in usable]}
    else:
        groups = {f"rack {_name(k, tree)}": ids
                  for k, ids in topo.domains(topo.depth).items()}
    leaders = Counter(r[0] for r in topic if r)
    replicas = Counter(b for r in topic for b in r)
    why = ("equal-sized layout" if equal else "unequal racks: per rack")
    out: list[Violation] = []
    for what, counts, bound, total in (("leader", leaders, lead_bound, num),
                                       ("replica", replicas, rep_bound, num * rf)):
        for group, ids in groups.items():
            if len(ids) < 2:
                continue
            per = {b: counts.get(b, 0) for b in ids}
            hi, lo = max(per, key=lambda b: (per[b], -b)), min(per, key=lambda b: (per[b], b))
            if per[hi] - per[lo] > bound:
                out.append(Violation(
                    f"{rule_prefix}{what}-balance",
                    f"{what}s per broker over {group}: broker {hi} has {per[hi]}, broker {lo} "
                    f"has {per[lo]} (max - min = {per[hi] - per[lo]} > {bound}; {why}; "
                    f"P={num}, RF={rf}, n={n}, {total} {what}s) counts={_fmt(per)}"))
    return out


def check_level_balance(shape: Shape, rf: int, topic: Sequence[Sequence[int]]
                        ) -> list[Violation]:
    """``level-replica-balance`` and ``level-leader-balance`` over a whole topic, at every
    equal-sized level of the rack tree (see the module docstring)."""
    usable = shape.usable
    num = len(topic)
    if num == 0 or rf > len(usable) or any(b.rack is None for b in usable):
        return []
    topo = Topology(usable, tree=True)
    if not topo.consistent:
        return []
    out: list[Violation] = []
    for level in range(1, topo.equal_levels() + 1):
        doms = topo.domains(level)
        m = len(doms)
        if m < 2:
            continue
        owner = {b: k for k, ids in doms.items() for b in ids}
        reps = Counter(owner[b] for r in topic for b in r if b in owner)
        leads = Counter(owner[r[0]] for r in topic if r and r[0] in owner)
        for rule, counts, total in (("level-replica-balance", reps, num * rf),
                                    ("level-leader-balance", leads, num)):
            fair = total / m
            bad = [k for k in doms if abs(counts.get(k, 0) - fair) > 1]
            if bad:
                k = max(bad, key=lambda d: abs(counts.get(d, 0) - fair))
                per = {_name(d, True): counts.get(d, 0) for d in sorted(doms)}
                out.append(Violation(
                    rule, f"level {level} ({m} domains): {_name(k, True)} has "
                    f"{counts.get(k, 0)}, fair share {fair:g} (allowed: within 1); "
                    f"per domain: {per}"))
    return out


def _fmt(per: Mapping[int, int]) -> str:
    return "{" + ", ".join(f"{b}: {c}" for b, c in sorted(per.items())) + "}"


__all__ = [
    "RULES",
    "Topology",
    "Violation",
    "balance_bounds",
    "check_broker_balance",
    "check_level_balance",
    "check_size",
    "check_spread",
    "check_validity",
    "well_formed",
]
