"""Log entries as the Raft core sees them: opaque record payloads grouped in batches.

The core never interprets a record's bytes, except for its own control records
(LeaderChange), which it writes when it becomes leader so that a new leader's
epoch is committed before the high watermark moves (KIP-595).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """A log position and the leader epoch of the entry just before it."""

    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """A snapshot covers every offset below `end_offset`; `epoch` is the epoch of the last one."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Batch:
    """Records appended together by one leader: one write, one checksum, one fsync.

    `append_time_ms` is the leader's clock when it sealed the batch; analytics
    measure commit-to-apply lag from it.
    """

    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    append_time_ms: int
    control: bool = False

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


LEADER_CHANGE_MAGIC = b"LC1"


def encode_leader_change(leader_id: int, voters: frozenset[int]) -> bytes:
    """The payload of the control record a new leader appends first in its epoch."""
    body = ",".join(str(v) for v in sorted(voters))
    return LEADER_CHANGE_MAGIC + f"{leader_id};{body}".encode()


def decode_leader_change(payload: bytes) -> tuple[int, frozenset[int]]:
    if not payload.startswith(LEADER_CHANGE_MAGIC):
        raise ValueError("not a LeaderChange control record")
    leader, _, voters = payload[len(LEADER_CHANGE_MAGIC) :].decode().partition(";")
    return int(leader), frozenset(int(v) for v in voters.split(",") if v)
