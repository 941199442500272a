"""Fixtures of the cluster tests: an in-process 3-broker cluster on the embedded store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
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


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Every thread a test started (brokers, stores, fetchers, clients) ends with it."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10
    while True:
        # the test servers (session fixtures) keep their own threads; stdout
        # watchers of killed broker processes end with their pipe
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()
                and not t.name.startswith(("zookeeper", "kt-server"))]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"threads left running: {[t.name for t in left]}"
