"""Shared fixtures of the log engine tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log import Log


@pytest.fixture
def small_config() -> LogConfig:
    """Small segments and a dense index so a few hundred records span several segments."""
    return LogConfig(segment_bytes=4096, index_interval_bytes=256, max_index_size=4096)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.fixture
def open_log(log_dir: Path, small_config: LogConfig) -> Iterator[Callable[..., Log]]:
    """Open logs in ``log_dir`` and close them at teardown."""
    opened: list[Log] = []

    def make(**kwargs: object) -> Log:
        config = kwargs.pop("config", small_config)
        log = Log.open(log_dir, config, **kwargs)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()
