"""Rack paths as a tree of failure domains, and the balancer that walks it.

A multi-level rack is a path such as ``/dc1/rack2``: it must start with ``/``, have one or more
non-empty components without whitespace, and no trailing ``/``. Every broker of a cluster must
sit at the same depth. :class:`RackTree` parses and validates the racks of a set of brokers and
answers "which domain holds this broker at level N" (level 1 is the top, ``/dc1``; the last level
is the rack itself).

:class:`TreeBalancer` is the placement engine shared by ``rack-aware`` (a one-level tree: root,
racks, brokers) and ``multi-level-rack`` (root, data centres, racks, ..., brokers). It follows
design document 001: every tree node keeps a ring over its children, and a replica walks from the
root to a broker taking the child the ring points at. The ring is kept as a priority order, so it
can also start from an existing assignment (a second call for added partitions continues the
balance of the first):

* the leader walks down taking, at each node, the child with the fewest leaders per broker, then
  the fewest replicas per broker, then the child's fixed tie-break rank (seeded);
* the other replicas are dealt out top-down: a node that receives ``k`` replicas of a partition
  gives them to its children as evenly as possible (``floor``/``ceil`` of ``k / #children``,
  never more than a child's brokers), the extra ones to the children with the fewest replicas
  per broker (then the most leaders per broker, then rank); the leader's child already holds one.

Because each node hands out each partition's replicas evenly and always to its least-loaded
children, at every level each partition spans ``min(#domains, RF)`` domains of an evenly shaped
tree, and sibling loads never differ by more than one replica. Counts are updated per partition;
the least-loaded children are found with lazy heaps, so a partition costs
``O(RF * depth * log(fan-out))``.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafka_tiers.api import BrokerInfo, ClusterView, InvalidReplicaAssignmentError, PlacementSpec

_MAX_LISTED = 10


def format_ids(ids: Sequence[int]) -> str:
    """``"1, 2, 3"``: the first ten ids, then ``"and N more"`` (for error messages)."""
    shown = ", ".join(str(i) for i in ids[:_MAX_LISTED])
    more = len(ids) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def parse_rack_path(rack: str) -> tuple[str, ...]:
    """Split a rack path (``/dc1/rack2``) into its components (``("dc1", "rack2")``).

    Raises:
        ValueError: the path does not start with ``/``, ends with ``/``, has an empty
            component (``//``) or a component containing whitespace, or is just ``/``.
    """
    if not isinstance(rack, str):
        raise ValueError(f"a rack path must be a string, got {type(rack).__name__}")
    if not rack.startswith("/"):
        raise ValueError(f"rack path {rack!r} must start with '/'")
    if rack == "/":
        raise ValueError("rack path '/' names the root, not a rack")
    if rack.endswith("/"):
        raise ValueError(f"rack path {rack!r} must not end with '/'")
    parts = tuple(rack[1:].split("/"))
    for part in parts:
        if not part:
            raise ValueError(f"rack path {rack!r} has an empty component")
        if any(ch.isspace() for ch in part):
            raise ValueError(f"rack path {rack!r} has whitespace in component {part!r}")
    return parts


@dataclass(frozen=True)
class RackTree:
    """The validated rack paths of a set of brokers.

    Attributes:
        depth: the number of levels (components of every path), >= 1.
        paths: broker id -> path components.
    """

    depth: int
    paths: Mapping[int, tuple[str, ...]] = field(repr=False)

    @classmethod
    def from_brokers(cls, brokers: Iterable[BrokerInfo], *, placer: str | None = None) -> RackTree:
        """Parse the racks of ``brokers`` as paths.

        Raises:
            InvalidReplicaAssignmentError: no brokers; brokers without a rack; malformed paths;
                or brokers at different depths. The message names the brokers at fault (and
                ``placer`` when given).
        """
        who = f"placer {placer}: " if placer else ""
        brokers = list(brokers)
        if not brokers:
            raise InvalidReplicaAssignmentError(f"{who}no brokers to build a rack tree from",
                                                placer=placer)
        missing = [b.broker_id for b in brokers if b.rack is None]
        if missing:
            raise InvalidReplicaAssignmentError(
                f"{who}multi-level rack placement needs a rack path (like /dc1/rack1) on every "
                f"broker; brokers without a rack: {format_ids(missing)}",
                placer=placer,
            )
        paths: dict[int, tuple[str, ...]] = {}
        bad: list[str] = []
        for b in brokers:
            try:
                paths[b.broker_id] = parse_rack_path(b.rack or "")
            except ValueError as exc:
                bad.append(f"broker {b.broker_id}: {exc}")
        if bad:
            shown = "; ".join(bad[:_MAX_LISTED])
            more = f"; and {len(bad) - _MAX_LISTED} more" if len(bad) > _MAX_LISTED else ""
            raise InvalidReplicaAssignmentError(
                f"{who}malformed rack paths: {shown}{more}", placer=placer
            )
        by_depth: dict[int, list[int]] = {}
        for bid, path in paths.items():
            by_depth.setdefault(len(path), []).append(bid)
        if len(by_depth) > 1:
            detail = "; ".join(
                f"depth {d}: brokers {format_ids(sorted(ids))}"
                for d, ids in sorted(by_depth.items())
            )
            raise InvalidReplicaAssignmentError(
                f"{who}every broker's rack path must have the same depth, got {detail}",
                placer=placer,
            )
        (depth,) = by_depth
        return cls(depth=depth, paths=paths)

    def domain(self, broker_id: int, level: int) -> str:
        """The domain holding ``broker_id`` at ``level`` (1 = top), as a path: ``/dc1``."""
        if not 1 <= level <= self.depth:
            raise ValueError(f"level must be in 1..{self.depth}, got {level}")
        return "/" + "/".join(self.paths[broker_id][:level])

    def domains(self, level: int) -> dict[str, tuple[int, ...]]:
        """Domain path -> ids of its brokers (sorted), at ``level`` (1 = top)."""
        out: dict[str, list[int]] = {}
        for bid in sorted(self.paths):
            out.setdefault(self.domain(bid, level), []).append(bid)
        return {d: tuple(ids) for d, ids in sorted(out.items())}


class TreeBalancer:
    """Deals partitions' replicas over a tree of brokers, balancing leaders and replicas.

    Args:
        members: ``(broker_id, path)`` pairs; every path has the same length (an empty path puts
            every broker directly under the root: a rack-unaware tree). Ids must be unique.
        rng: orders siblings for tie-breaks (a seeded generator makes placement deterministic).
        external: optional replica counts per broker from elsewhere (other topics); used only to
            break ties, so the least-loaded brokers of the cluster are preferred among equals.

    Counts start at zero; :meth:`preload` adds existing replica lists before placing.
    Not thread-safe; one instance serves one placement call.
    """

    def __init__(
        self,
        members: Sequence[tuple[int, tuple[str, ...]]],
        rng: random.Random,
        external: Mapping[int, int] | None = None,
    ) -> None:
        if not members:
            raise ValueError("a TreeBalancer needs at least one broker")
        depth = len(members[0][1])
        parent: list[int] = [-1]
        children: list[list[int]] = [[]]
        broker_of: list[int] = [-1]
        index: dict[tuple[str, ...], int] = {(): 0}
        node_of: dict[int, int] = {}
        for bid, path in sorted(members, key=lambda m: (m[1], m[0])):
            if len(path) != depth:
                raise ValueError("every member path must have the same length")
            if bid in node_of:
                raise ValueError(f"duplicate broker {bid}")
            node = 0
            for level in range(1, depth + 1):
                key = path[:level]
                nxt = index.get(key)
                if nxt is None:
                    nxt = len(parent)
                    index[key] = nxt
                    parent.append(node)
                    children.append([])
                    broker_of.append(-1)
                    children[node].append(nxt)
                node = nxt
            leaf = len(parent)
            parent.append(node)
            children.append([])
            broker_of.append(bid)
            children[node].append(leaf)
            node_of[bid] = leaf
        n = len(parent)
        cap = [0] * n
        ext = [0] * n
        external = external or {}
        for bid, leaf in node_of.items():
            x = leaf
            e = external.get(bid, 0)
            while x >= 0:
                cap[x] += 1
                ext[x] += e
                x = parent[x]
        # Tie-break rank among siblings: the least externally loaded first, then random.
        rank = [0] * n
        for kids in children:
            if kids:
                order = sorted(kids, key=lambda c: (ext[c] / cap[c], rng.random()))
                for r, c in enumerate(order):
                    rank[c] = r
        self._parent = parent
        self._children = children
        self._broker_of = broker_of
        self._node_of = node_of
        self._index = index
        self._cap = cap
        self._rank = rank
        self._load = [0] * n
        self._lead = [0] * n
        self._ver = [0] * n
        self._lheap: list[list[tuple[float, float, int, int, int]]] = [[] for _ in range(n)]
        self._fheap: list[list[tuple[float, float, int, int, int]]] = [[] for _ in range(n)]
        self._limit = [2 * len(k) + 16 for k in children]
        self._ready = False

    @property
    def brokers(self) -> tuple[int, ...]:
        """The brokers of the tree, sorted."""
        return tuple(sorted(self._node_of))

    def __contains__(self, broker_id: object) -> bool:
        return broker_id in self._node_of

    def preload(self, replicas: Sequence[int]) -> None:
        """Count an existing replica list: replicas on brokers of the tree add load, and its
        first replica a leader when it is in the tree. Must be called before :meth:`place`."""
        if self._ready:
            raise RuntimeError("preload must come before place")
        parent, load, lead = self._parent, self._load, self._lead
        for i, bid in enumerate(replicas):
            x = self._node_of.get(bid)
            if x is None:
                continue
            while x >= 0:
                load[x] += 1
                if i == 0:
                    lead[x] += 1
                x = parent[x]

    def _push(self, c: int) -> None:
        p = self._parent[c]
        cap = self._cap[c]
        ld = self._load[c] / cap
        le = self._lead[c] / cap
        r = self._rank[c]
        v = self._ver[c]
        lh = self._lheap[p]
        fh = self._fheap[p]
        heapq.heappush(lh, (le, ld, r, v, c))
        heapq.heappush(fh, (ld, -le, r, v, c))
        if len(lh) > self._limit[p]:
            self._compact(p)

    def _compact(self, p: int) -> None:
        ver = self._ver
        lh = [e for e in self._lheap[p] if e[3] == ver[e[4]]]
        fh = [e for e in self._fheap[p] if e[3] == ver[e[4]]]
        heapq.heapify(lh)
        heapq.heapify(fh)
        self._lheap[p] = lh
        self._fheap[p] = fh

    def _start(self) -> None:
        for c in range(1, len(self._parent)):
            self._push(c)
        self._ready = True

    def place(
        self,
        count: int,
        *,
        with_leader: bool = True,
        avoid: Sequence[tuple[str, ...]] = (),
    ) -> list[int]:
        """Choose ``count`` distinct brokers for one partition and count them.

        Args:
            count: replicas to place, ``1 <= count <= len(brokers)``.
            with_leader: when True the first broker returned is the leader (counted as one);
                when False no leader is counted (fenced followers).
            avoid: the paths of replicas the partition already has elsewhere (on brokers of
                another balancer); the domains holding them count as already holding a
                replica of this partition, so the spread covers them too.

        Returns:
            Broker ids, the leader first when ``with_leader``.
        """
        if not self._ready:
            self._start()
        if not 1 <= count <= self._cap[0]:
            raise ValueError(f"count must be in 1..{self._cap[0]}, got {count}")
        base: dict[int, int] = {}
        for other in avoid:
            for level in range(1, len(other) + 1):
                node = self._index.get(other[:level])
                if node is not None:
                    base[node] = base.get(node, 0) + 1
        ver = self._ver
        children = self._children
        broker_of = self._broker_of
        forced: dict[int, int] = {}
        path: list[int] = []
        if with_leader:
            x = 0
            while children[x]:
                h = self._lheap[x]
                while True:
                    e = h[0]
                    if e[3] == ver[e[4]]:
                        break
                    heapq.heappop(h)
                c = e[4]
                forced[x] = c
                path.append(c)
                x = c
        chosen: list[int] = [path[-1]] if path else []
        stack: list[tuple[int, int]] = [(0, count)]
        cap = self._cap
        while stack:
            node, k = stack.pop()
            kids = children[node]
            f = forced.get(node)
            if f is not None:
                got: dict[int, int] = {f: 1}
                need = k - 1
            else:
                got = {}
                need = k
            preset = bool(base) and any(c in base for c in kids)
            if need == 0:
                pass
            elif not preset and need <= len(kids) - len(got):
                h = self._fheap[node]
                keep = []
                while need:
                    e = heapq.heappop(h)
                    c = e[4]
                    if e[3] != ver[c]:
                        continue
                    if c in got:
                        keep.append(e)
                        continue
                    got[c] = 1
                    need -= 1
                for e in keep:
                    heapq.heappush(h, e)
            else:
                load, lead = self._load, self._lead
                rank = self._rank
                order = sorted(
                    kids, key=lambda c: (load[c] / cap[c], -lead[c] / cap[c], rank[c])
                )
                # Deal round by round: a child gets one more while its total for this
                # partition (here plus elsewhere) is the round's level and it has room.
                level = 0
                top = cap[node] + max((base.get(c, 0) for c in kids), default=0)
                while need:
                    if level > top:  # pragma: no cover - count <= cap[root] prevents it
                        raise RuntimeError("tree capacity exhausted")
                    for c in order:
                        mine = got.get(c, 0)
                        if mine + base.get(c, 0) == level and cap[c] > mine:
                            got[c] = mine + 1
                            need -= 1
                            if not need:
                                break
                    level += 1
            for c, v in got.items():
                if children[c]:
                    stack.append((c, v))
                elif c != f:
                    chosen.append(c)
        self._count(chosen, path)
        return [broker_of[c] for c in chosen]

    def _count(self, leaves: list[int], path: list[int]) -> None:
        parent, load, lead, ver = self._parent, self._load, self._lead, self._ver
        touched: set[int] = set()
        for leaf in leaves:
            x = leaf
            while x > 0:
                load[x] += 1
                touched.add(x)
                x = parent[x]
            load[0] += 1
        for x in path:
            lead[x] += 1
        if path:
            lead[0] += 1
        for x in touched:
            ver[x] += 1
            self._push(x)


def existing_load(
    spec: PlacementSpec, cluster: ClusterView
) -> tuple[list[tuple[int, ...]], dict[int, int]]:
    """What a placement call starts from.

    Returns:
        ``(topic_replicas, external)``: the replica lists of ``spec.topic``'s partitions below
        ``spec.start_partition`` (in partition order; empty when no topic is given), and the
        replicas per broker of every other partition (other topics; this topic's partitions from
        ``start_partition`` on are being replaced and count nowhere).
    """
    topic = spec.topic
    own: list[tuple[int, tuple[int, ...]]] = []
    external: dict[int, int] = {}
    for tp, replicas in cluster.assignments.items():
        if topic is not None and tp.topic == topic:
            if tp.partition < spec.start_partition:
                own.append((tp.partition, replicas))
            continue
        for r in replicas:
            external[r] = external.get(r, 0) + 1
    own.sort()
    return [r for _, r in own], external


def place_on_tree(
    spec: PlacementSpec,
    cluster: ClusterView,
    available: Sequence[BrokerInfo],
    paths: Mapping[int, tuple[str, ...]],
    rng: random.Random,
) -> list[list[int]]:
    """Place ``spec`` over the brokers ``available`` arranged by ``paths`` (same length each).

    When at least ``RF`` of the available brokers are unfenced, only unfenced brokers are used and
    one :class:`TreeBalancer` over them places every partition. Otherwise every partition holds
    all unfenced brokers (the leader rotating among them by leader count) plus ``RF - #unfenced``
    fenced followers dealt by a second balancer over the fenced brokers, preferring the domains
    the unfenced ones do not already cover. Both balancers start from
    the counts of the topic's existing partitions (see :func:`existing_load`).
    """
    rf = spec.replication_factor
    own, external = existing_load(spec, cluster)
    unfenced = [b.broker_id for b in available if not b.fenced]
    fenced = [b.broker_id for b in available if b.fenced]
    main = TreeBalancer([(b, paths[b]) for b in unfenced], rng, external)
    for reps in own:
        main.preload(reps)
    if len(unfenced) >= rf:
        return [main.place(rf) for _ in range(spec.num_partitions)]
    spare = TreeBalancer([(b, paths[b]) for b in fenced], rng, external)
    for reps in own:
        spare.preload(reps)
    width = len(unfenced)
    out: list[list[int]] = []
    for _ in range(spec.num_partitions):
        first = main.place(width)
        out.append(
            first + spare.place(rf - width, with_leader=False, avoid=[paths[b] for b in first])
        )
    return out


__all__ = [
    "RackTree",
    "TreeBalancer",
    "existing_load",
    "format_ids",
    "parse_rack_path",
    "place_on_tree",
]
