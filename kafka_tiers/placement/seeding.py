"""Seeds for the built-in placers: the ``seed`` config key and per-call random generators.

A placer configured with ``{"seed": "7"}`` is deterministic: the same seed, spec and cluster
always give the same placement. Without a seed every call draws fresh entropy from the system
(as Kafka does), so two clusters do not place the same way.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from kafka_tiers.api import ConfigError, ReplicaPlacer

SEED_KEY = "seed"
"""The config key holding the seed (``placer.seed`` in ``server.properties``)."""


def parse_seed(config: Mapping[str, str], *, known: frozenset[str] = frozenset()) -> int | None:
    """Read the optional integer ``seed`` from a placer's config.

    Args:
        config: the placer's settings (prefix already stripped).
        known: other keys the caller accepts besides ``seed``.

    Returns:
        The seed, or None when the key is absent.

    Raises:
        ConfigError: ``seed`` is not an integer (``key="seed"``), or the config holds a key the
            placer does not know (a misspelt key would otherwise be silently ignored).
    """
    allowed = known | {SEED_KEY}
    for key in config:
        if key not in allowed:
            raise ConfigError(
                f"unknown replica placer setting {key!r}; known settings: "
                f"{', '.join(sorted(allowed))}",
                key=key,
                value=config[key],
                expected="one of " + ", ".join(sorted(allowed)),
            )
    if SEED_KEY not in config:
        return None
    raw = config[SEED_KEY]
    try:
        if isinstance(raw, bool):
            raise ValueError(raw)
        return int(str(raw).strip())
    except (TypeError, ValueError):
        raise ConfigError(
            f"replica placer setting 'seed' must be an integer, got {raw!r}",
            key=SEED_KEY,
            value=raw,
            expected="an integer such as 7",
        ) from None


def make_rng(seed: int | None, *salt: object) -> random.Random:
    """A random generator for one placement call.

    With a seed, the generator depends only on the seed and ``salt`` (for example the topic
    name), so results are reproducible across processes; without one it is seeded from the
    system's entropy.
    """
    if seed is None:
        return random.Random()
    material = ":".join([str(seed), *(repr(s) for s in salt)])
    return random.Random(material)


class SeededPlacer(ReplicaPlacer):
    """Shared lifecycle of the built-in placers: an optional ``seed`` setting.

    Attributes:
        seed: the configured seed, or None (random placement on every call).
    """

    def __init__(self) -> None:
        self.seed: int | None = None

    def configure(self, config: Mapping[str, str]) -> None:
        """Accept ``{"seed": "<int>"}`` (optional). Raises ConfigError naming ``seed`` when the
        value is not an integer, or naming any unknown key."""
        self.seed = parse_seed(config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed!r})"


__all__ = ["SEED_KEY", "SeededPlacer", "make_rng", "parse_seed"]
