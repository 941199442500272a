"""A process-wide LRU of open file handles and memory maps for inactive segments.

A broker holds thousands of segments; keeping a descriptor (and an mmap, which holds its own
descriptor) open for each would exhaust the process limit. Inactive segments open their files
lazily and register them here; the least recently used are closed when the cap is reached and
reopen transparently on next use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol


class Releasable(Protocol):
    """Something holding an OS handle it can close while idle and reopen on demand."""

    def release(self) -> bool:
        """Close the handle if it is idle; True when closed (it reopens lazily)."""


class HandleCache:
    """Least-recently-used tracking of releasable handles, capped at ``capacity``."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._items: OrderedDict[int, Releasable] = OrderedDict()

    def touch(self, owner: Releasable) -> None:
        """Record a use of ``owner``; may release the least recently used others."""
        victims: list[Releasable] = []
        with self._lock:
            key = id(owner)
            if key in self._items:
                self._items.move_to_end(key)
                return
            self._items[key] = owner
            while len(self._items) > self.capacity:
                _, victim = self._items.popitem(last=False)
                victims.append(victim)
        for victim in victims:
            # A busy victim stays open; its next use registers it again.
            victim.release()

    def forget(self, owner: Releasable) -> None:
        """Stop tracking ``owner`` (it was closed by its owner)."""
        with self._lock:
            self._items.pop(id(owner), None)

    def __len__(self) -> int:
        return len(self._items)


#: the shared cache of inactive segment handles.
HANDLES = HandleCache()

__all__ = ["HANDLES", "HandleCache", "Releasable"]
