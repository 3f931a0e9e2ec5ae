"""The voter set in the log (KIP-853): the VotersRecord and the history of voter sets.

With `kraft.version` 1 the voters are not a static setting but data: a leader
changes them by appending a VotersRecord control record, and every replica uses
the newest voter set in its log, committed or not (Kafka's `VoterSet` and
`VoterSetHistory`). The rules that make this safe:

- one change at a time: a leader appends a VotersRecord only once every earlier
  one is committed, and only after its own epoch has committed an entry (so a
  change left behind by an earlier leader cannot meet a new one);
- a change adds or removes exactly one voter, so any majority of the old set
  and any majority of the new set share a voter;
- the new set counts from the moment it is in the log, so a change is committed
  by a majority of the new set;
- truncating an uncommitted VotersRecord reverts to the set before it, and a
  snapshot carries the voter set of the offsets it covers.

With `kraft.version` 0 none of this runs: the static `controller.quorum.voters`
stays the voter set, and the log never holds a VotersRecord.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass

from quorum.raft.messages import ErrorCode
from quorum.raft.records import Batch

VOTERS_MAGIC = b"VR1"
"""Payload prefix of a VotersRecord (inside a control batch only)."""

KRAFT_VERSION_DYNAMIC = 1
"""The `kraft.version` from which the voter set lives in the log."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener a voter is reached at (Kafka's `Endpoints` entry)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    """One voter: its id, the directory id that tells a replaced disk from the
    original, where to reach it, and the `kraft.version` range it supports."""

    voter_id: int
    directory_id: str
    endpoints: tuple[Endpoint, ...] = ()
    min_kraft_version: int = 0
    max_kraft_version: int = KRAFT_VERSION_DYNAMIC


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The voters in force, sorted by id."""

    voters: tuple[Voter, ...]

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.voter_id for v in self.voters)

    def voter(self, voter_id: int) -> Voter | None:
        return next((v for v in self.voters if v.voter_id == voter_id), None)

    def with_voter(self, voter: Voter) -> VoterSet:
        if voter.voter_id in self.ids:
            raise ValueError(f"voter {voter.voter_id} is already in the set")
        return VoterSet(tuple(sorted((*self.voters, voter), key=lambda v: v.voter_id)))

    def without_voter(self, voter_id: int) -> VoterSet:
        if voter_id not in self.ids:
            raise ValueError(f"voter {voter_id} is not in the set")
        return VoterSet(tuple(v for v in self.voters if v.voter_id != voter_id))

    @classmethod
    def of_static(cls, ids: frozenset[int]) -> VoterSet:
        """The static `controller.quorum.voters` as a voter set (directory ids unknown)."""
        return cls(tuple(Voter(i, "") for i in sorted(ids)))


def is_voters_record(payload: bytes) -> bool:
    return payload.startswith(VOTERS_MAGIC)


def encode_voters(voter_set: VoterSet) -> bytes:
    """The VotersRecord payload: canonical JSON, so equal sets encode equally."""
    body = [
        {
            "id": v.voter_id,
            "directory_id": v.directory_id,
            "endpoints": [[e.name, e.host, e.port] for e in v.endpoints],
            "kraft_version": [v.min_kraft_version, v.max_kraft_version],
        }
        for v in voter_set.voters
    ]
    return VOTERS_MAGIC + json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def decode_voters(payload: bytes) -> VoterSet:
    """Raises ValueError on anything that is not a well-formed VotersRecord."""
    if not is_voters_record(payload):
        raise ValueError("not a VotersRecord")
    try:
        body = json.loads(payload[len(VOTERS_MAGIC) :])
        voters = tuple(
            Voter(
                int(item["id"]),
                str(item["directory_id"]),
                tuple(Endpoint(str(n), str(h), int(p)) for n, h, p in item["endpoints"]),
                int(item["kraft_version"][0]),
                int(item["kraft_version"][1]),
            )
            for item in body
        )
    except (KeyError, TypeError, IndexError, ValueError, RecursionError) as exc:
        raise ValueError(f"malformed VotersRecord: {exc}") from exc
    if not voters or len({v.voter_id for v in voters}) != len(voters):
        raise ValueError("a VotersRecord needs distinct voters, at least one")
    return VoterSet(tuple(sorted(voters, key=lambda v: v.voter_id)))


KRAFT_VERSION_MAGIC = b"KV1"
"""Payload prefix of a KRaftVersionRecord (inside a control batch only)."""


def is_kraft_version_record(payload: bytes) -> bool:
    return payload.startswith(KRAFT_VERSION_MAGIC)


def encode_kraft_version(version: int) -> bytes:
    """The KRaftVersionRecord payload (Kafka's control record of the same name):
    the `kraft.version` finalized from this offset on."""
    return KRAFT_VERSION_MAGIC + str(version).encode()


def decode_kraft_version(payload: bytes) -> int:
    """Raises ValueError on anything that is not a KRaftVersionRecord this code supports."""
    if not is_kraft_version_record(payload):
        raise ValueError("not a KRaftVersionRecord")
    text = payload[len(KRAFT_VERSION_MAGIC) :]
    if text not in (b"0", b"1"):
        raise ValueError(f"unsupported kraft.version {text[:20]!r}")
    return int(text)


def malformed_voters_record(batches: tuple[Batch, ...]) -> str | None:
    """Why a fetch answer's VotersRecords do not decode (None when they all do).

    Checked before any of the answer is appended: a record the core cannot read
    must not reach the log, where every restart would trip over it again."""
    for batch in batches:
        if not batch.control:
            continue
        for i, record in enumerate(batch.records):
            decode = (
                decode_voters
                if is_voters_record(record)
                else decode_kraft_version
                if is_kraft_version_record(record)
                else None
            )
            if decode is not None:
                try:
                    decode(record)
                except ValueError as err:
                    kind = "VotersRecord" if decode is decode_voters else "KRaftVersionRecord"
                    return f"{kind} at offset {batch.base_offset + i}: {err}"
    return None


class VoterSetHistory:
    """The voter sets this replica's log holds, by the offset of their record.

    Only the newest entry below the log start is kept (it is the set the
    snapshot carries); everything above follows the log: appended with it,
    truncated with it.
    """

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []

    def add(self, offset: int, voter_set: VoterSet) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"voter set at {offset} is not after {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voter_set)

    def latest(self) -> tuple[int, VoterSet] | None:
        return (self._offsets[-1], self._sets[-1]) if self._offsets else None

    def before(self, end_offset: int) -> tuple[int, VoterSet] | None:
        """The newest entry whose record lies below `end_offset`."""
        i = bisect_left(self._offsets, end_offset) - 1
        return (self._offsets[i], self._sets[i]) if i >= 0 else None

    def truncate(self, end_offset: int) -> None:
        """The log lost every entry at or above `end_offset`: so do we."""
        i = bisect_left(self._offsets, end_offset)
        del self._offsets[i:]
        del self._sets[i:]

    def prune_below(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: keep only the newest set below it."""
        i = bisect_left(self._offsets, start_offset) - 1
        if i > 0:
            del self._offsets[:i]
            del self._sets[:i]

    def reset(self, entry: tuple[int, VoterSet] | None) -> None:
        self._offsets = [entry[0]] if entry else []
        self._sets = [entry[1]] if entry else []

    def __len__(self) -> int:
        return len(self._offsets)


class VoterChangeRefused(Exception):
    """A voter change the leader will not make; `error` is Kafka's name for why
    (REQUEST_TIMED_OUT while a change is pending, DUPLICATE_VOTER, VOTER_NOT_FOUND,
    UNSUPPORTED_VERSION with kraft.version 0, INVALID_REQUEST)."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error
        self.message = message
