"""One classic consumer group: its state machine, members and protocol selection (Kafka's
``ClassicGroup`` / ``ClassicGroupMember``). No I/O and no clock of its own: the coordinator
drives it under :attr:`Group.lock` and passes the time in.

States and their valid previous states (Kafka's)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- every state

A parked JoinGroup or SyncGroup request is a :class:`Waiter`: the connection's thread waits
on it (the server answers one request at a time per connection, as Kafka mutes a channel
while a request is in flight) and whoever completes the phase fills it.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: a member's supported protocols, in its order of preference: (name, metadata)
Protocols = tuple[tuple[str, bytes], ...]


class GroupState(enum.Enum):
    """Kafka's classic group states (the value is Kafka's name, as DescribeGroups says it)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE,
                                               GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class Waiter:
    """A parked response: completed once (later completions are ignored)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.result: Any = None

    def complete(self, result: Any) -> bool:
        """Fill the response; False when it was filled already."""
        if self._event.is_set():
            return False
        self.result = result
        self._event.set()
        return True

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> Any:
        """The response, or None when ``timeout`` seconds passed first."""
        self._event.wait(timeout)
        return self.result


@dataclass
class JoinResult:
    """What a JoinGroup is answered (``members``: for the leader only)."""

    error: int
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    """What a SyncGroup is answered."""

    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Member:
    """One member of a group.

    ``heartbeat_deadline`` (monotonic seconds) is when its session expires unless it is
    awaiting a join or a sync (a new member: its join deadline instead).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    is_new: bool = False
    heartbeat_deadline: float = 0.0

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def matches(self, protocols: Protocols) -> bool:
        """Whether ``protocols`` are exactly this member's (names, metadata and order)."""
        return tuple(protocols) == tuple(self.protocols)

    def metadata(self, protocol: str | None) -> bytes:
        """This member's metadata for ``protocol`` (empty when it has none)."""
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: a member awaiting a join or sync need not heartbeat, unless new."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def complete_join(self, result: JoinResult) -> None:
        waiter, self.join_waiter = self.join_waiter, None
        if waiter is not None:
            waiter.complete(result)

    def complete_sync(self, result: SyncResult) -> bool:
        waiter, self.sync_waiter = self.sync_waiter, None
        return waiter.complete(result) if waiter is not None else False


class Group:
    """One classic group (see the module docstring). Read and change it under :attr:`lock`.

    Args:
        group_id: the group.
        now_ms: the wall-clock time (ms) of its creation (its state timestamp).
    """

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.lock = threading.RLock()
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        #: member ids handed out with MEMBER_ID_REQUIRED -> their deadline (monotonic)
        self.pending_members: dict[str, float] = {}
        self.pending_sync: set[str] = set()
        self.static_members: dict[str, str] = {}
        self.new_member_added = False
        #: when the join phase ends (monotonic), and for an initial rebalance the
        #: (delay, remaining) of Kafka's InitialDelayedJoin
        self.join_deadline: float | None = None
        self.initial_join: tuple[int, int] | None = None
        #: when members that have not sent SyncGroup are removed (monotonic)
        self.sync_deadline: float | None = None
        #: committed offsets: (topic, partition) -> OffsetValue
        self.offsets: dict[tuple[str, int], Any] = {}

    # ------------------------------------------------------------------ state
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, target: GroupState, now_ms: int) -> None:
        """Move to ``target``.

        Raises:
            RuntimeError: not a valid transition from the current state (a coordinator bug).
        """
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(f"group {self.group_id}: {self.state.value} -> "
                               f"{target.value} is not a valid transition")
        self.previous_state, self.state = self.state, target
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------------ members
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, waiter: Waiter | None) -> None:
        """Add ``member`` (its join parked on ``waiter``); the first member sets the group's
        protocol type and the first without a leader leads."""
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_waiter = waiter
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        """Remove a member (or a pending one); a new leader is the first member left."""
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member came back with a new member id: the old one is fenced (its
        parked join or sync gets FENCED_INSTANCE_ID)."""
        from kafka_tiers.kafka.groups.errors import FENCED_INSTANCE_ID
        old = self.members.pop(old_id)
        old.complete_join(JoinResult(FENCED_INSTANCE_ID, old_id))
        old.complete_sync(SyncResult(FENCED_INSTANCE_ID))
        old.member_id = new_id
        self.members[new_id] = old
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.pending_sync.discard(old_id)
        return old

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return (len(self.members) == self.num_awaiting_join()
                and not self.pending_members)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        """The largest rebalance timeout of the members."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else take the first member that did; False when
        nobody rejoined (or there is no leader)."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # ------------------------------------------------------------------ protocols
    def _candidates(self) -> set[str]:
        counts: dict[str, int] = {}
        for m in self.members.values():
            for name in {n for n, _ in m.protocols}:
                counts[name] = counts.get(name, 0) + 1
        return {n for n, c in counts.items() if c == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a member with these protocols may join: any type and protocol when the
        group is empty; else the group's type and a protocol every member supports."""
        wanted = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(wanted)
        return self.protocol_type == protocol_type and bool(wanted & self._candidates())

    def select_protocol(self) -> str:
        """The protocol most members vote for among those all support (each member votes
        for its first supported candidate; ties go to the protocol seen first)."""
        candidates = self._candidates()
        votes: dict[str, int] = {}
        for m in self.members.values():
            name = m.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=lambda n: votes[n])

    def init_next_generation(self, now_ms: int) -> None:
        """The join phase is over: the next generation, CompletingRebalance (or Empty)."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def join_members(self) -> list[tuple[str, str | None, bytes]]:
        """The members as the leader's JoinGroup response lists them."""
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to (consumer protocol), or None when unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            got = subscription_topics(m.metadata(self.protocol_name))
            if got is None:
                return None
            topics |= got
        return topics


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a consumer-protocol subscription (its v0 prefix: ``int16 version,
    [string topic]``, which every version starts with), or None when it does not parse."""
    try:
        if len(metadata) < 6:
            return None
        count = int.from_bytes(metadata[2:6], "big", signed=True)
        pos, topics = 6, set()
        for _ in range(max(count, 0)):
            n = int.from_bytes(metadata[pos:pos + 2], "big", signed=True)
            if n < 0 or pos + 2 + n > len(metadata):
                return None
            topics.add(metadata[pos + 2:pos + 2 + n].decode("utf-8"))
            pos += 2 + n
        return topics
    except (UnicodeDecodeError, ValueError):
        return None


def protocols_of(items: Sequence[Any] | None) -> Protocols:
    """A JoinGroup request's protocols as ``((name, metadata), ...)``."""
    return tuple((p.name if p.name is not None else "", bytes(p.metadata or b""))
                 for p in items or ())


__all__ = ["Group", "GroupState", "JoinResult", "Member", "Protocols", "SyncResult",
           "Waiter", "protocols_of", "subscription_topics"]
