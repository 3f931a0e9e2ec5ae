"""Settings and injected dependencies of the Raft core."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class RandomSource(Protocol):
    """Injected randomness (a seeded `random.Random` satisfies it)."""

    def randrange(self, start: int, stop: int) -> int: ...


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timeouts follow Kafka's `controller.quorum.*` properties and defaults."""

    node_id: int
    voters: frozenset[int]
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    fetch_max_wait_ms: int = 500
    # How long the leader holds a parked fetch whose only news is a higher high
    # watermark, so that the next records travel with it: without this, every
    # commit costs the follower an extra fetch round trip before it can receive
    # the next write. Followers learn an idle high watermark this much later.
    high_watermark_linger_ms: int = 5
    max_fetch_records: int = 8192
    # `controller.quorum.max.epoch.jump`: a request may move this node to an epoch
    # at most this far above the epoch of its own last log entry. Real elections
    # stay within a few epochs of the last leader's LeaderChange record; a forged
    # Vote or BeginQuorumEpoch could otherwise carry the quorum to MAX_EPOCH,
    # where no election can start again.
    max_epoch_jump: int = 10_000
    max_batch_records: int = 8192
    # `kraft.version`: 0 keeps `voters` (controller.quorum.voters) as the voter
    # set for good; 1 takes the voter set from the newest VotersRecord in the
    # log (KIP-853, `quorum/raft/voters.py`), `voters` only until there is one.
    kraft_version: int = 0
    # This node's meta.properties `directory.id` (KIP-858): with kraft.version 1
    # it is a voter only if the voter set names this id with this directory (a
    # replaced disk has a new one, and counts as an observer until added).
    directory_id: str = ""
    # `controller.quorum.bootstrap.servers` (KIP-853): the ids (-2, -3, ...) the
    # driver's transport maps to those addresses. An observer that knows no
    # leader asks them (and any voter it knows) who leads; they never vote.
    bootstrap_ids: frozenset[int] = frozenset()

    @property
    def is_voter(self) -> bool:
        """In the static voter set; the node's current answer is `RaftNode.is_voter`."""
        return self.node_id in self.voters

    @property
    def voter_fetch_wait_ms(self) -> int:
        """How long the leader parks a voter's fetch that has nothing new for it:
        the longest a live leader stays silent to a follower.

        A follower cannot tell a paused leader (a long GC-like stop, SIGSTOP)
        from a lost one until the pause ends, and it cannot know when in its
        fetch's wait the leader stopped: a pause looks up to this much longer
        than it is. Kept short (1/40 of the election timeout, 25 ms), so a pause
        as long as the election timeout does not get the leader replaced; the
        price is an idle follower fetching 40 times a second instead of twice
        (observers still wait the whole `fetch_max_wait_ms`)."""
        return min(self.fetch_max_wait_ms, max(1, self.election_timeout_ms // 40))

    @property
    def request_timeout_ms(self) -> int:
        """How long a follower waits for a fetch answer before asking again (and,
        a voter, suspecting its leader): an election timeout past the longest a
        live leader parks a voter's fetch, plus one park of margin. A stall of
        the leader shorter than an election timeout is waited out; a lost leader
        is suspected about this long after the follower last heard it."""
        return max(
            self.fetch_max_wait_ms + self.election_timeout_ms // 2,
            self.election_timeout_ms + 2 * self.voter_fetch_wait_ms,
        )


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    """What must survive a restart: the quorum-state file's contents."""

    epoch: int = 0
    voted_for: int | None = None
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class ProposeResult:
    """Offsets assigned to a proposal. It is acknowledged once the high watermark
    passes `last_offset` while the log still holds `epoch` at that offset."""

    epoch: int
    first_offset: int
    last_offset: int
