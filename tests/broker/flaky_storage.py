"""A ``local`` plugin that cannot be configured while :data:`DOWN` is set, as a remote tier
that is unreachable at broker start (loaded by import path)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from kafka_tiers.api import RetriableRemoteStorageError
from kafka_tiers.remote.local import LocalRemoteStorageManager

#: set: configure() fails as if the remote tier were unreachable.
DOWN = threading.Event()

PATH = "tests.broker.flaky_storage:FlakyLocalStorage"


class FlakyLocalStorage(LocalRemoteStorageManager):
    """The local backend, unreachable while :data:`DOWN` is set; ``password`` is a declared
    secret key (it reaches configure as a Secret)."""

    SECRET_KEYS = frozenset({"password"})

    def configure(self, config: Mapping[str, str]) -> None:
        if DOWN.is_set():
            raise RetriableRemoteStorageError(
                f"cannot reach the remote tier with password {config.get('password')}")
        super().configure(config)


__all__ = ["DOWN", "PATH", "FlakyLocalStorage"]
