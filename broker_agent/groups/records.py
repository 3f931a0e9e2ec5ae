"""`__consumer_offsets` records, keyed and valued as Kafka writes them, so a dump of
a partition reads like Kafka's (`kafka-dump-log --offsets-decoder`).

Keys start with an int16 version naming the record kind (Kafka's
`OffsetCommitKey` versions 0-1, `GroupMetadataKey` version 2); values start with
their own schema version. We write `OffsetCommitValue` v3 and
`GroupMetadataValue` v3 (the non-flexible versions Kafka 2.3-3.x writes) and
read v0-v3 of both. A null value is a tombstone: the offset was deleted or
expired, or the group deleted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


class MalformedRecord(ValueError):
    """A record of `__consumer_offsets` that does not parse (skipped when loading)."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only in v1


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


# ------------------------------------------------------------------ writing


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">q", v))
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.int16(-1)
        data = v.encode()
        self.int16(len(data))
        self.parts.append(data)
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.int32(-1)
        self.int32(len(v))
        self.parts.append(v)
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _Writer().int16(OFFSET_KEY_VERSION).string(group).string(topic).int32(partition).done()


def group_key(group: str) -> bytes:
    return _Writer().int16(GROUP_KEY_VERSION).string(group).done()


def offset_value(value: OffsetValue) -> bytes:
    return (
        _Writer()
        .int16(OFFSET_VALUE_VERSION)
        .int64(value.offset)
        .int32(value.leader_epoch)
        .string(value.metadata)
        .int64(value.commit_timestamp)
        .done()
    )


def group_value(value: GroupValue) -> bytes:
    w = _Writer().int16(GROUP_VALUE_VERSION)
    w.string(value.protocol_type).int32(value.generation).string(value.protocol)
    w.string(value.leader).int64(value.current_state_timestamp).int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return w.done()


# ------------------------------------------------------------------ reading


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise MalformedRecord("record ends early")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(v)

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def int64(self) -> int:
        return self._take(">q")

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise MalformedRecord("string runs past the record")
        v = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return v

    def text(self) -> str:
        v = self.string()
        if v is None:
            raise MalformedRecord("null where a string is required")
        return v

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            return b""
        if self.pos + n > len(self.data):
            raise MalformedRecord("bytes run past the record")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(v)


def parse_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.text(), r.text(), r.int32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.text())
    raise MalformedRecord(f"unknown __consumer_offsets key version {version}")


def parse_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise MalformedRecord(f"unknown OffsetCommitValue version {version}")
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    metadata = r.text()
    timestamp = r.int64()
    expire = r.int64() if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, timestamp, expire)


def parse_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise MalformedRecord(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.text()
    generation = r.int32()
    protocol = r.string()
    leader = r.string()
    timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.text()
        instance = r.string() if version >= 3 else None
        client_id = r.text()
        host = r.text()
        rebalance = r.int32() if version >= 1 else -1
        session = r.int32()
        members.append(
            MemberValue(
                member_id, instance, client_id, host, rebalance, session, r.bytes_(), r.bytes_()
            )
        )
    if rebalance_defaults := [m for m in members if m.rebalance_timeout_ms < 0]:
        members = [
            m if m not in rebalance_defaults else _with_rebalance(m, m.session_timeout_ms)
            for m in members
        ]
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def _with_rebalance(m: MemberValue, rebalance: int) -> MemberValue:
    """v0 had no rebalance timeout: Kafka took the session timeout for it."""
    return MemberValue(
        m.member_id,
        m.group_instance_id,
        m.client_id,
        m.client_host,
        rebalance,
        m.session_timeout_ms,
        m.subscription,
        m.assignment,
    )
