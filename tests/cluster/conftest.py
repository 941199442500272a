"""Fixtures of the cluster tests: an in-process 3-broker cluster on the embedded store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.hooks import Hooks, make_plugin_manager
from tests.cluster.helpers import HookRecorder


@pytest.fixture
def recorder() -> HookRecorder:
    return HookRecorder()


@pytest.fixture
def make_cluster(tmp_path: Path, recorder: HookRecorder) -> Iterator[Callable[..., LocalCluster]]:
    """Start clusters (closed at the end of the test)."""
    made: list[LocalCluster] = []

    def make(brokers: int = 3, name: str = "c", **kwargs: object) -> LocalCluster:
        kwargs.setdefault("hooks", Hooks(make_plugin_manager(load_entrypoints=False,
                                                             extra=[recorder])))
        c = LocalCluster(tmp_path / name, brokers, **kwargs)  # type: ignore[arg-type]
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.close()
