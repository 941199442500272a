"""A ``local`` object store whose ``close()`` never returns: a stuck plugin call that keeps a
broker's shutdown from finishing (``remote.storage.manager.class=
tests.broker.stuck_store:CloseHangsStore``)."""

from __future__ import annotations

import threading

from kafka_tiers.remote.local import LocalObjectStore


class CloseHangsStore(LocalObjectStore):
    """:class:`LocalObjectStore`, but closing it hangs forever."""

    def close(self) -> None:
        threading.Event().wait()


__all__ = ["CloseHangsStore"]
