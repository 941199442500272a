"""The records of ``__consumer_offsets``: Kafka's own key and value schemas, byte for byte, so
the topic reads as Kafka's does (``kafka-console-consumer`` with Kafka's formatters works).

Keys (``int16 version`` first)
    ``OffsetCommitKey`` v1: ``group: string, topic: string, partition: int32`` (v0 is the same
    layout); ``GroupMetadataKey`` v2: ``group: string``.
Values (``int16 version`` first; a tombstone is a null value: the key is deleted)
    ``OffsetCommitValue`` v3 written (v0..v3 read): ``offset: int64, leader_epoch: int32 (v3),
    metadata: string, commit_timestamp: int64, expire_timestamp: int64 (v1 only)``;
    ``GroupMetadataValue`` v3 written (v0..v3 read): ``protocol_type: string, generation:
    int32, protocol: string?, leader: string?, current_state_timestamp: int64 (v2+), members:
    [member_id: string, group_instance_id: string? (v3+), client_id: string, client_host:
    string, rebalance_timeout: int32 (v1+), session_timeout: int32, subscription: bytes,
    assignment: bytes]``.

Strings are ``int16`` length + UTF-8 (``-1``: null), bytes ``int32`` length + data, arrays an
``int32`` count. The flexible versions (v4 of both values) are neither written nor read: a
record of a version this module does not know raises :class:`RecordFormatError` (the loader
skips it with a WARN line).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value of ``__consumer_offsets`` that is not one of the known schemas."""


@dataclass(frozen=True)
class OffsetKey:
    """The key of a committed offset."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    """The key of a group's metadata."""

    group: str


@dataclass(frozen=True)
class OffsetValue:
    """A committed offset (``leader_epoch`` -1: unknown; times in ms)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True)
class MemberValue:
    """One member as a group's metadata record holds it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    """A group's metadata: its generation, protocol, leader and members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> _Writer:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        if len(data) > 32767:
            raise RecordFormatError(f"a string of {len(data)} bytes does not fit an int16 "
                                    "length")
        self.i16(len(data))
        self.buf += data
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.buf += v
        return self


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"record truncated at byte {self.pos} (wanted {n} more of "
                                    f"{len(self.data)})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def nstring(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        return self._take(n).decode("utf-8", errors="replace")

    def string(self) -> str:
        v = self.nstring()
        if v is None:
            raise RecordFormatError("a null string where the schema has a string")
        return v

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n == -1 else bytes(self._take(n))


def encode_offset_key(key: OffsetKey) -> bytes:
    """``OffsetCommitKey`` v1."""
    w = _Writer().i16(OFFSET_COMMIT_KEY_VERSION).string(key.group).string(key.topic)
    return bytes(w.i32(key.partition).buf)


def encode_group_key(key: GroupKey) -> bytes:
    """``GroupMetadataKey`` v2."""
    return bytes(_Writer().i16(GROUP_METADATA_KEY_VERSION).string(key.group).buf)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """A key of either kind.

    Raises:
        RecordFormatError: an unknown version or a malformed key.
    """
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


def encode_offset_value(value: OffsetValue) -> bytes:
    """``OffsetCommitValue`` v3."""
    w = _Writer().i16(OFFSET_COMMIT_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch)
    return bytes(w.string(value.metadata).i64(value.commit_timestamp).buf)


def decode_offset_value(data: bytes) -> OffsetValue:
    """``OffsetCommitValue`` v0..v3.

    Raises:
        RecordFormatError: another version, or a malformed value.
    """
    r = _Reader(data)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    ts = r.i64()
    expire = r.i64() if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, ts, expire)


def encode_group_value(value: GroupValue) -> bytes:
    """``GroupMetadataValue`` v3."""
    w = _Writer().i16(GROUP_METADATA_VALUE_VERSION).string(value.protocol_type)
    w.i32(value.generation).string(value.protocol).string(value.leader)
    w.i64(value.current_state_timestamp).i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).i32(m.rebalance_timeout).i32(m.session_timeout)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def decode_group_value(data: bytes) -> GroupValue:
    """``GroupMetadataValue`` v0..v3.

    Raises:
        RecordFormatError: another version, or a malformed value.
    """
    r = _Reader(data)
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nstring()
    leader = r.nstring()
    ts = r.i64() if version >= 2 else -1
    count = r.i32()
    if count < 0 or count > len(data):
        raise RecordFormatError(f"GroupMetadataValue with {count} members")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance = r.nstring() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        members.append(MemberValue(member_id, instance, client_id, client_host, rebalance,
                                   session, r.bytes_(), r.bytes_()))
    return GroupValue(protocol_type, generation, protocol, leader, ts, tuple(members))


__all__ = ["GroupKey", "GroupValue", "MemberValue", "OffsetKey", "OffsetValue",
           "RecordFormatError", "decode_group_value", "decode_key", "decode_offset_value",
           "encode_group_key", "encode_group_value", "encode_offset_key",
           "encode_offset_value"]
