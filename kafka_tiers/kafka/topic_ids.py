"""Topic ids (Kafka's KIP-516): every topic has a random UUID, given at creation and stable for
the topic's life, on every broker and across restarts. Metadata v10+ reports it, Fetch v13+
and other requests name topics by it.

Where the id lives
    a cluster: in the topic's node of the metadata store (``TopicAssignment.topic_id``),
    written by the controller when it creates the topic; a topic created before topic ids
    existed is given one by the next controller at its election. A standalone broker: in its
    topics file (``TopicInfo.topic_id``); a topic of an earlier release is given one the
    first time a client needs it (:meth:`Broker.assign_topic_id`, written back crash-safely).

Lookups are cached per broker: by name and by id. A cluster member's cache is dropped when
the set of topics in the store changes (a children watch on ``/brokers/topics``) or its
store session expires or reconnects; a standalone broker's when ``broker.topics_version``
moves. A topic that exists but has no id yet, or does not exist, is never cached (read again
next time), so the cache can only miss, never answer a stale id longer than the watch takes
to fire.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from kafka_tiers.cluster.metadata_store import TOPICS, SessionEvent

if TYPE_CHECKING:
    from kafka_tiers.broker.broker import Broker

#: Kafka's "no topic id" (``Uuid.ZERO_UUID``): what a response carries for a topic without one
ZERO_UUID = uuid.UUID(int=0)


class _Cache:
    """One broker's topic ids both ways, with the generation a lookup started at."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_name: dict[str, uuid.UUID] = {}
        self.by_id: dict[uuid.UUID, str] = {}
        self.generation = 0
        #: every topic's id is in the maps (a miss by id is then final until invalidated)
        self.complete = False
        #: the store session the watch is registered on (cluster), or the topics_version
        #: the maps belong to (standalone)
        self.source: Any = None

    def invalidate(self, *_args: Any) -> None:
        with self.lock:
            self.generation += 1
            self.by_name.clear()
            self.by_id.clear()
            self.complete = False

    def remember(self, generation: int, name: str, tid: uuid.UUID) -> None:
        with self.lock:
            if generation != self.generation:  # the topic set changed while it was read
                return
            old = self.by_name.get(name)
            if old is not None:
                self.by_id.pop(old, None)
            self.by_name[name] = tid
            self.by_id[tid] = name


_caches: weakref.WeakKeyDictionary[Any, _Cache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _cache(broker: Broker) -> _Cache:
    with _caches_lock:
        cache = _caches.get(broker)
        if cache is None:
            cache = _caches[broker] = _Cache()
    member = broker.member
    store = member.store if member is not None else None
    if store is not None:
        if cache.source is not store:  # first use on this session: watch the topic set
            with _caches_lock:
                if cache.source is not store:
                    cache.invalidate()
                    cache.source = store
                    store.watch_children(TOPICS, cache.invalidate)
                    store.on_session_event(
                        lambda ev: cache.invalidate() if ev in (SessionEvent.EXPIRED,
                                                                SessionEvent.RECONNECTED)
                        else None)
    elif cache.source != ("standalone", broker.topics_version):
        cache.invalidate()
        cache.source = ("standalone", broker.topics_version)
    return cache


def _read_id(broker: Broker, name: str) -> str | None:
    """The stored id of ``name`` (None: no such topic, or no id yet)."""
    member = broker.member
    if member is not None:
        md = member.metadata
        if md is None:
            return None
        asg = md.topic(name)
        return None if asg is None else asg.topic_id
    from kafka_tiers.broker.broker import UnknownTopicError
    try:
        info = broker.topic(name)
    except UnknownTopicError:
        return None
    return info.topic_id if info.topic_id is not None else broker.assign_topic_id(name)


def topic_id(broker: Broker, name: str) -> uuid.UUID | None:
    """The topic id of topic ``name``, or None when the topic does not exist (or, in a
    cluster, has no id yet: the controller gives one at its next election).

    A standalone topic of an earlier release is given its id here, once (the topics file is
    written back). Cached (see the module docstring).

    Raises:
        OSError: (standalone) the topics file could not be written for a first id.
        MetadataStoreError: (cluster) the store could not be read.
    """
    cache = _cache(broker)
    with cache.lock:
        known = cache.by_name.get(name)
        generation = cache.generation
    if known is not None:
        return known
    raw = _read_id(broker, name)
    if raw is None:
        return None
    tid = uuid.UUID(raw)
    cache.remember(generation, name, tid)
    return tid


def topic_name(broker: Broker, tid: uuid.UUID) -> str | None:
    """The name of the topic whose id is ``tid``, or None when no topic has it (a deleted
    topic, a zero id). Cached (see the module docstring); a miss reads every topic's id once
    and fills the cache.

    Raises:
        MetadataStoreError: (cluster) the store could not be read.
    """
    if tid.int == 0:
        return None
    cache = _cache(broker)
    with cache.lock:
        known = cache.by_id.get(tid)
        generation, complete = cache.generation, cache.complete
    if known is not None or complete:
        return known
    found = None
    ids, every = _all_ids(broker)
    for name, raw in ids.items():
        got = uuid.UUID(raw)
        cache.remember(generation, name, got)
        if got == tid:
            found = name
    if every:
        with cache.lock:
            if cache.generation == generation:
                cache.complete = True
    return found


def _all_ids(broker: Broker) -> tuple[dict[str, str], bool]:
    """Every topic's stored id by name (topics without one left out), and whether every
    topic had one."""
    member = broker.member
    if member is not None:
        md = member.metadata
        if md is None:
            return {}, False
        from kafka_tiers.cluster.metadata_store import TopicAssignment, topic_path
        names = md.topics()
        out = {}
        for name, got in zip(names, md.store.get_many([topic_path(n) for n in names]),
                             strict=True):
            if got is not None and got[0] is not None:
                asg = TopicAssignment.from_json(name, got[0], got[1])
                if asg.topic_id is not None:
                    out[name] = asg.topic_id
        return out, len(out) == len(names)
    topics = broker.topics()
    for name, info in topics.items():
        if info.topic_id is None:  # an earlier release's topic: given its id now, once
            broker.assign_topic_id(name)
    topics = broker.topics()
    return ({name: info.topic_id for name, info in topics.items() if info.topic_id},
            all(info.topic_id for info in topics.values()))


__all__ = ["ZERO_UUID", "topic_id", "topic_name"]
