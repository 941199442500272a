"""``example-spread``: a rack-aware replica placer built only on :mod:`kafka_tiers.api`.

Two strategies, chosen per call from the usable (unfenced, allowed) brokers:

* **Stripe** when every rack has the same number of usable brokers (brokers without a rack form
  one rack) and RF <= usable brokers. The brokers are listed rack by rack in turn (r0, r1, r2,
  r0, ...), the list rotated by the seed; partition ``p`` takes the ``RF`` consecutive list
  positions starting at ``p * RF``, so the replicas of a topic stream through the list (every
  broker within one replica of every other) and any RF consecutive positions cover
  ``min(#racks, RF)`` racks evenly. Its leader is the block's ``(p // (n / g)) % g``-th member
  (``g = gcd(RF, n)``), so every ``n`` partitions each broker leads once. The position depends
  only on the absolute partition number, so partitions added later (``start_partition``)
  continue the stripe exactly.
* **Least-loaded greedy** otherwise (unequal racks, or fenced brokers needed): the leader is the
  usable broker leading the fewest partitions of the topic so far (then fewest replicas, then
  seeded order); each further replica goes to the rack with the fewest replicas of this
  partition (so racks differ by at most one), among those the rack with the fewest replicas per
  broker, and inside it to the broker with the fewest replicas. Counts start from the topic's
  existing partitions (``spec.topic`` in the ``ClusterView``). Fenced brokers are used only when
  fewer than RF unfenced brokers are allowed, and never lead.

The same ``seed`` always gives the same placement.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import ClassVar

from kafka_tiers.api import (
    BrokerInfo,
    ClusterView,
    ConfigError,
    InvalidReplicationFactorError,
    PlacementSpec,
    ReplicaPlacer,
)


class ExampleSpreadPlacer(ReplicaPlacer):
    """Least-loaded rack-aware greedy placer (entry point ``example-spread``).

    Config:
        ``seed`` (int, default 0): rotates the tie-breaking order of brokers. The same seed,
        spec and cluster always give the same placement.
    """

    RACK_AWARE: ClassVar[bool] = True
    SUPPORTED_SPI: ClassVar[str | None] = ">=1.0,<3"

    def __init__(self) -> None:
        self._seed = 0

    def configure(self, config: Mapping[str, str]) -> None:
        """Read ``seed``.

        Raises:
            ConfigError: ``seed`` is not an integer.
        """
        raw = config.get("seed", "0")
        try:
            self._seed = int(raw)
        except ValueError:
            raise ConfigError(f"seed must be an integer, got {raw!r}", key="seed", value=raw,
                              expected="an integer") from None

    def place(
        self,
        spec: PlacementSpec,
        cluster: ClusterView,
        broker_ids: Sequence[int] | None = None,
    ) -> list[list[int]]:
        """Place ``spec.num_partitions`` partitions (see the module docstring).

        Raises:
            InvalidReplicationFactorError: RF <= 0, RF larger than the allowed registered
                brokers (fenced included), or no unfenced allowed broker.
        """
        wanted = None if broker_ids is None else set(broker_ids)
        allowed = [b for b in cluster.brokers if wanted is None or b.broker_id in wanted]
        usable = [b for b in allowed if not b.fenced]
        rf = spec.replication_factor
        if rf <= 0:
            raise InvalidReplicationFactorError(
                f"replication factor must be positive, got {rf}",
                replication_factor=rf, available_brokers=len(allowed))
        if rf > len(allowed):
            raise InvalidReplicationFactorError(
                f"replication factor {rf} is larger than the {len(allowed)} allowed brokers",
                replication_factor=rf, available_brokers=len(allowed))
        if not usable:
            raise InvalidReplicationFactorError(
                "no unfenced broker is available to lead", replication_factor=rf,
                available_brokers=len(allowed))

        ids = [b.broker_id for b in allowed]
        offset = random.Random(self._seed).randrange(len(ids))
        order = {bid: (i - offset) % len(ids) for i, bid in enumerate(ids)}
        leaders: Counter[int] = Counter()
        replicas: Counter[int] = Counter()
        if spec.topic is not None:
            for reps in cluster.topic_assignment(spec.topic).values():
                kept = [b for b in reps if b in order]
                if reps and reps[0] in order:
                    leaders[reps[0]] += 1
                replicas.update(kept)

        stripe = self._stripe_list(usable, order) if rf <= len(usable) else None
        if stripe is not None:
            n = len(stripe)
            g = math.gcd(rf, n)
            out_stripe: list[list[int]] = []
            for p in range(spec.start_partition, spec.start_partition + spec.num_partitions):
                block = [stripe[(p * rf + j) % n] for j in range(rf)]
                lead = (p // (n // g)) % g
                out_stripe.append([block[lead], *block[:lead], *block[lead + 1:]])
            return out_stripe

        out: list[list[int]] = []
        for _ in range(spec.num_partitions):
            chosen = self._one_partition(rf, usable, allowed, leaders, replicas, order)
            leaders[chosen[0]] += 1
            replicas.update(chosen)
            out.append(chosen)
        return out

    @staticmethod
    def _stripe_list(usable: list[BrokerInfo], order: dict[int, int]) -> list[int] | None:
        """The usable brokers rack by rack in turn, or None when racks differ in size."""
        racks: dict[str, list[int]] = {}
        for b in sorted(usable, key=lambda b: order[b.broker_id]):
            racks.setdefault(b.rack or "", []).append(b.broker_id)
        sizes = {len(members) for members in racks.values()}
        if len(sizes) != 1:
            return None
        names = sorted(racks)
        return [racks[r][i] for i in range(sizes.pop()) for r in names]

    @staticmethod
    def _one_partition(rf: int, usable: list[BrokerInfo], allowed: list[BrokerInfo],
                       leaders: Counter[int], replicas: Counter[int],
                       order: dict[int, int]) -> list[int]:
        leader = min(usable, key=lambda b: (leaders[b.broker_id], replicas[b.broker_id],
                                            order[b.broker_id]))
        chosen = [leader.broker_id]
        pool = usable if rf <= len(usable) else allowed
        if rf > len(usable):  # every unfenced broker, then the least-loaded fenced ones
            rest = [b for b in usable if b is not leader]
            fenced = sorted((b for b in allowed if b.fenced),
                            key=lambda b: (replicas[b.broker_id], order[b.broker_id]))
            return chosen + [b.broker_id for b in rest] + [
                b.broker_id for b in fenced[:rf - len(usable)]]
        racks: dict[str, list[BrokerInfo]] = {}
        for b in pool:
            racks.setdefault(b.rack or "", []).append(b)
        in_partition: Counter[str] = Counter({leader.rack or "": 1})
        while len(chosen) < rf:
            def rack_key(rack: str) -> tuple:
                members = racks[rack]
                load = sum(replicas[b.broker_id] for b in members) / len(members)
                return (in_partition[rack], load, min(order[b.broker_id] for b in members))

            open_racks = [r for r, members in racks.items()
                          if any(b.broker_id not in chosen for b in members)]
            rack = min(open_racks, key=rack_key)
            broker = min((b for b in racks[rack] if b.broker_id not in chosen),
                         key=lambda b: (replicas[b.broker_id], -leaders[b.broker_id],
                                        order[b.broker_id]))
            chosen.append(broker.broker_id)
            in_partition[rack] += 1
        return chosen


__all__ = ["ExampleSpreadPlacer"]
