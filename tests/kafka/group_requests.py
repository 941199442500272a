"""Raw group requests for the consumer-group tests (part 4): a member of a group driven
request by request over its own connection with kafka-python's message classes, so a test
decides exactly when each member joins, syncs, heartbeats and commits."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from tests.kafka.raw_requests import RawConnection, request_class

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
DESCRIBE, LIST, DELETE, COMMIT, FETCH, OFFSET_DELETE = 15, 16, 42, 8, 9, 47


def subscription(*topics: str) -> bytes:
    """A consumer-protocol subscription v0 (``int16 version, [string topic], bytes user
    data``)."""
    out = bytearray(b"\x00\x00") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return bytes(out + b"\xff\xff\xff\xff")


class RawMember:
    """One member: its own connection to the coordinator (JoinGroup and SyncGroup park the
    connection until the phase completes)."""

    def __init__(self, bootstrap: str, group: str, *, session_ms: int = 6000,
                 rebalance_ms: int = 10000, instance_id: str | None = None,
                 protocols: Sequence[tuple[str, bytes]] = (("range", subscription("t")),),
                 protocol_type: str = "consumer") -> None:
        self.conn = RawConnection(bootstrap, timeout=30)
        self.group = group
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.instance_id = instance_id
        self.protocols = list(protocols)
        self.protocol_type = protocol_type
        self.member_id = ""
        self.generation = -1
        self.join_response: Any = None

    def close(self) -> None:
        self.conn.close()

    def join_once(self, version: int = 9) -> Any:
        """One JoinGroup; remembers the member id and generation it gives."""
        resp = self.conn.call(JOIN, version, group_id=self.group,
                              session_timeout_ms=self.session_ms,
                              rebalance_timeout_ms=self.rebalance_ms,
                              member_id=self.member_id, group_instance_id=self.instance_id,
                              protocol_type=self.protocol_type, protocols=self.protocols,
                              reason=None)
        if resp.member_id:
            self.member_id = resp.member_id
        if resp.error_code == 0:
            self.generation = resp.generation_id
        self.join_response = resp
        return resp

    def join(self, version: int = 9) -> Any:
        """JoinGroup, repeated once after MEMBER_ID_REQUIRED (KIP-394)."""
        resp = self.join_once(version)
        if resp.error_code == 79:
            resp = self.join_once(version)
        return resp

    def join_async(self, version: int = 9) -> threading.Thread:
        """Join on a thread; its outcome (the response, or the exception: a stopping broker
        closes the connection) is kept in :attr:`async_outcome`."""
        self.async_outcome: Any = None

        def run() -> None:
            try:
                self.async_outcome = self.join(version)
            except Exception as exc:  # kept for the test to check, not lost in a thread
                self.async_outcome = exc
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def sync(self, assignments: Sequence[tuple[str, bytes]] = (), version: int = 5) -> Any:
        return self.conn.call(SYNC, version, group_id=self.group,
                              generation_id=self.generation, member_id=self.member_id,
                              group_instance_id=self.instance_id,
                              protocol_type=self.protocol_type if version >= 5 else None,
                              protocol_name=(self.join_response.protocol_name
                                             if version >= 5 else None),
                              assignments=list(assignments))

    def heartbeat(self, version: int = 4) -> int:
        resp = self.conn.call(HEARTBEAT, version, group_id=self.group,
                              generation_id=self.generation, member_id=self.member_id,
                              group_instance_id=self.instance_id)
        return int(resp.error_code)

    def leave(self, version: int = 5) -> Any:
        if version < 3:
            return self.conn.call(LEAVE, version, group_id=self.group,
                                  member_id=self.member_id)
        mcls = request_class(LEAVE, version).MemberIdentity
        return self.conn.call(LEAVE, version, group_id=self.group, members=[
            mcls(member_id=self.member_id, group_instance_id=self.instance_id, reason=None)])

    def commit(self, offsets: dict[tuple[str, int], int], version: int = 9,
               metadata: str = "", generation: int | None = None) -> dict[tuple[str, int], int]:
        return commit(self.conn, self.group, offsets, version=version, metadata=metadata,
                      generation=self.generation if generation is None else generation,
                      member_id=self.member_id, instance_id=self.instance_id)


def commit(conn: RawConnection, group: str, offsets: dict[tuple[str, int], int], *,
           version: int = 9, metadata: str = "", generation: int = -1, member_id: str = "",
           instance_id: str | None = None) -> dict[tuple[str, int], int]:
    """An OffsetCommit; each partition's error code."""
    tcls = request_class(COMMIT, version).OffsetCommitRequestTopic
    pcls = tcls.OffsetCommitRequestPartition
    topics: dict[str, list[Any]] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(pcls(partition_index=p, committed_offset=off,
                                             committed_leader_epoch=-1, commit_timestamp=-1,
                                             committed_metadata=metadata))
    resp = conn.call(COMMIT, version, group_id=group, generation_id_or_member_epoch=generation,
                     member_id=member_id, group_instance_id=instance_id, retention_time_ms=-1,
                     topics=[tcls(name=t, partitions=parts) for t, parts in topics.items()])
    return {(t.name, p.partition_index): p.error_code for t in resp.topics
            for p in t.partitions}


def fetch(conn: RawConnection, group: str, partitions: dict[str, list[int]] | None, *,
          version: int = 7) -> tuple[int, dict[tuple[str, int], tuple[int, str, int]]]:
    """An OffsetFetch: (group error, {(topic, partition): (offset, metadata, error)})."""
    topics = None if partitions is None else [(t, ps) for t, ps in partitions.items()]
    if version >= 8:
        resp = conn.call(FETCH, version, groups=[(group, None, -1, topics)] if version >= 9
                         else [(group, topics)], require_stable=False)
        g = resp.groups[0]
        return g.error_code, {(t.name, p.partition_index): (p.committed_offset, p.metadata,
                                                            p.error_code)
                              for t in g.topics for p in t.partitions}
    resp = conn.call(FETCH, version, group_id=group, topics=topics, require_stable=False)
    error = resp.error_code if version >= 2 else 0
    return error, {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
                   for t in resp.topics for p in t.partitions}


def find_coordinator(conn: RawConnection, group: str, version: int = 3) -> Any:
    if version >= 4:
        return conn.call(FIND_COORDINATOR, version, key_type=0, coordinator_keys=[group])
    return conn.call(FIND_COORDINATOR, version, key=group, key_type=0)


__all__ = ["RawMember", "commit", "fetch", "find_coordinator", "subscription"]
