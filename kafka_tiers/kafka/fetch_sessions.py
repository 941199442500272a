"""Incremental fetch sessions (KIP-227, Fetch v7+): a consumer that fetches many partitions
sends only what changed, and the broker answers only the partitions with something new.

Kafka's rules (``FetchSession`` / ``FetchManager``), by the request's ``session_id`` and
``session_epoch``:

- epoch -1: a fetch without a session (a session named is closed first); every requested
  partition is answered; the response's ``session_id`` is 0.
- epoch 0: a full fetch that opens a new session of the requested partitions (a session named
  is closed first); the response carries the new ``session_id``, or 0 when the cache is full
  (then it was a fetch without a session, and the client keeps sending full fetches).
- epoch > 0: an incremental fetch of an open session: ``FETCH_SESSION_ID_NOT_FOUND`` when the
  session is unknown (evicted, or another broker's), ``INVALID_FETCH_SESSION_EPOCH`` when the
  epoch is not the session's next one. The partitions it names are added or updated (fetch
  offset, max bytes, leader epoch), ``forgotten_topics_data`` ones removed; every partition of
  the session is read, and the response lists only those with records, an error, or a high
  watermark, last stable offset or log start offset that changed since they were last
  answered.

A session belongs to whoever opened it: the principal and the listener of the request that
created it (:data:`Owner`). A request of another principal, or on another listener, naming
its id finds no session (``FETCH_SESSION_ID_NOT_FOUND``, as for an unknown id) and cannot
close it with epoch -1 or 0. Ids are drawn from :mod:`secrets` (not guessable from earlier
ids), though knowing one gives nothing to another principal.

The cache (a server component) holds at most ``max.incremental.fetch.session.cache.slots``
sessions (Kafka's key and default, 1000). A new session takes a free slot, or the slot of the
least recently used session idle for more than 120 s (Kafka's
``min.incremental.fetch.session.eviction.ms`` default); else none is opened.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: a session idle this long may give its slot to a new one (Kafka's default of
#: min.incremental.fetch.session.eviction.ms)
EVICTION_IDLE_S = 120.0
SESSIONLESS_EPOCH = -1
INITIAL_EPOCH = 0
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71

#: a session partition: (topic id or None before v13, topic name or None, partition)
Key = tuple[uuid.UUID | None, str | None, int]
#: who a session belongs to: (the principal as ``TYPE:NAME``, the listener name)
Owner = tuple[str, str]


@dataclass
class SessionPartition:
    """What a session remembers of one partition: the client's fetch parameters and what
    was last answered (to answer only changes)."""

    offset: int
    max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1
    error: int = -1


class FetchSession:
    """One session: its id, its owner, the epoch the next request must carry, and its
    partitions in the order they were added."""

    def __init__(self, session_id: int, owner: Owner) -> None:
        self.id = session_id
        self.owner = owner
        self.epoch = 1
        self.partitions: OrderedDict[Key, SessionPartition] = OrderedDict()
        self.last_used = time.monotonic()
        self.lock = threading.Lock()

    def update(self, wanted: Iterable[tuple[Key, int, int, int]],
               forgotten: Iterable[Key]) -> None:
        """Add or update ``(key, offset, max bytes, leader epoch)`` entries, then drop the
        forgotten keys."""
        for key, offset, max_bytes, epoch in wanted:
            cur = self.partitions.get(key)
            if cur is None:
                self.partitions[key] = SessionPartition(offset, max_bytes, epoch)
            else:
                cur.offset, cur.max_bytes, cur.current_leader_epoch = offset, max_bytes, epoch
        for key in forgotten:
            self.partitions.pop(key, None)

    def include(self, key: Key, error: int, high_watermark: int, log_start_offset: int,
                size: int) -> bool:
        """Whether an incremental response lists ``key``; remembers what it answers."""
        p = self.partitions[key]
        changed = (size > 0 or error != 0 or high_watermark != p.high_watermark
                   or log_start_offset != p.log_start_offset or error != p.error)
        if changed:
            p.high_watermark, p.log_start_offset, p.error = (high_watermark,
                                                             log_start_offset, error)
        return changed


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (wrapping to 1, never 0 or -1)."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class FetchSessionCache:
    """The broker's open sessions (see the module docstring). Thread-safe."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # LRU first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def create(self, owner: Owner) -> FetchSession | None:
        """A new empty session of ``owner`` with an id from :mod:`secrets`, or None when
        every slot is taken by a session used within the last 120 s."""
        now = time.monotonic()
        with self._lock:
            if len(self._sessions) >= self.slots:
                if not self._sessions:  # no slot at all (slots is 0)
                    return None
                oldest = next(iter(self._sessions.values()))
                if now - oldest.last_used <= EVICTION_IDLE_S:
                    return None
                del self._sessions[oldest.id]
            while True:
                sid = 1 + secrets.randbelow(2**31 - 1)  # 1 .. 2**31 - 1
                if sid not in self._sessions:
                    break
            session = FetchSession(sid, owner)
            self._sessions[sid] = session
            return session

    def get(self, session_id: int, owner: Owner) -> FetchSession | None:
        """``owner``'s session of that id (marked used now), or None: no such session, or
        another owner's (left untouched)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.owner != owner:
                return None
            session.last_used = time.monotonic()
            self._sessions.move_to_end(session_id)
            return session

    def remove(self, session_id: int, owner: Owner) -> None:
        """Close ``owner``'s session of that id; another owner's stays open (idempotent)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.owner == owner:
                del self._sessions[session_id]

    def close(self) -> None:
        with self._lock:
            self._sessions.clear()


def cache_of(server: Any) -> FetchSessionCache:
    """The server's session cache (made on first use, sized by the broker config)."""
    return server.component(
        "fetch-sessions",
        lambda s: FetchSessionCache(int(s.broker.config[
            "max.incremental.fetch.session.cache.slots"])))


__all__ = ["FETCH_SESSION_ID_NOT_FOUND", "INITIAL_EPOCH", "INVALID_FETCH_SESSION_EPOCH",
           "SESSIONLESS_EPOCH", "FetchSession", "FetchSessionCache", "Key", "Owner",
           "SessionPartition", "cache_of", "next_epoch"]
