"""Fixtures of the JBOD tests: a log manager over two (or more) log dirs with recording hooks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.plugins.hooks import Hooks, make_plugin_manager
from kafka_tiers.plugins.hookspecs import hookimpl
from tests.jbod.helpers import CONFIG


class Recorder:
    """A hook plugin that records the JBOD notifications."""

    def __init__(self) -> None:
        self.moved: list[tuple[Any, str, str]] = []
        self.failed: list[tuple[str, list[Any], BaseException]] = []

    @hookimpl
    def kafka_tiers_replica_moved(self, topic_partition, source_dir, destination_dir):  # type: ignore[no-untyped-def]
        self.moved.append((topic_partition, source_dir, destination_dir))

    @hookimpl
    def kafka_tiers_log_dir_failed(self, log_dir, partitions, error):  # type: ignore[no-untyped-def]
        self.failed.append((log_dir, list(partitions), error))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def manager_factory(tmp_path: Path, recorder: Recorder
                    ) -> Iterator[Callable[..., LogManager]]:
    """``make(n_dirs=2, **kwargs)``: a started manager over ``tmp_path/d0..``, shut at
    teardown."""
    made: list[LogManager] = []

    def make(n_dirs: int = 2, **kwargs: Any) -> LogManager:
        hooks = Hooks(make_plugin_manager(load_entrypoints=False, extra=[recorder]))
        kwargs.setdefault("hooks", hooks)
        m = LogManager([tmp_path / f"d{i}" for i in range(n_dirs)], kwargs.pop("config", CONFIG),
                       **kwargs)
        m.startup()
        made.append(m)
        return m

    yield make
    for m in made:
        with contextlib.suppress(Exception):  # a test may have failed every dir on purpose
            m.shutdown()
