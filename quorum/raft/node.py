"""The sans-I/O Raft core: KIP-595 with pre-vote (KIP-996) and check-quorum.

Events go in (`on_message`, `on_tick`, `propose`, `on_flushed`, ...); effects come
out of `poll`. The node never reads a clock (every event carries `now`, in ms of
the node's own clock), never draws randomness of its own, and never touches a
file or socket.

The node is in exactly one role at a time, held as a state object of that role
(`quorum/raft/states.py`, Kafka's `EpochState`s). Every change of role goes
through `NodeBase._transition`, which consults the transition table in
`quorum/raft/transitions.py` and raises on anything it does not list. The work
of each role lives in a module of its own: `elections.py` (pre-vote, vote,
Begin/EndQuorumEpoch), `leading.py` (group commit, answering fetches, the high
watermark, check-quorum), `membership.py` (voter changes, KIP-853, on top of
leading) and `following.py` (the fetch loop, truncation, observers). The golden
transcripts in `tests/raft/testdata/` show the protocol event by event.
"""

from __future__ import annotations

from quorum.raft.client_api import NotLeaderError
from quorum.raft.config import ProposeResult, QuorumStateData, RaftConfig, RandomSource
from quorum.raft.effects import AdvanceLogStart, Effect, ResetLog, Role, RoleChanged
from quorum.raft.elections import Elections
from quorum.raft.following import Following
from quorum.raft.log import RaftLog
from quorum.raft.membership import Membership
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.progress import ReplicaProgress
from quorum.raft.records import SnapshotId
from quorum.raft.states import (
    NEVER,
    EpochState,
    FollowerState,
    LeaderState,
    ResignedState,
    UnattachedState,
)
from quorum.raft.transitions import Trigger
from quorum.raft.voters import VoterSet

__all__ = ["NEVER", "NotLeaderError", "RaftNode"]


class RaftNode(Elections, Membership, Following):
    def __init__(
        self,
        config: RaftConfig,
        rng: RandomSource,
        now: int,
        state: QuorumStateData | None = None,
        log: RaftLog | None = None,
        snapshot_voters: VoterSet | None = None,
    ) -> None:
        """`snapshot_voters`: the voter set stored with the log's snapshot
        (kraft.version 1; see `voter_set_at`)."""
        super().__init__(config, rng, log if log is not None else RaftLog(), snapshot_voters)
        self.state = self._resume(state or QuorumStateData(), now)
        if isinstance(self.state, FollowerState):
            self._send_fetch(now)
        self._effects.append(RoleChanged(self.role, self.epoch, self.leader_id))

    def _resume(self, persisted: QuorumStateData, now: int) -> EpochState:
        """Resume from persisted state: a restarted leader cannot lead again in its epoch."""
        epoch, voted_for, leader_id = persisted.epoch, persisted.voted_for, persisted.leader_id
        if leader_id == self._me:
            return ResignedState(epoch, voted_for, leader_id, now + self._election_timeout())
        if leader_id is not None:
            deadline = now + self.config.fetch_timeout_ms
            return FollowerState(epoch, voted_for, leader_id, deadline, last_leader_contact=now)
        return UnattachedState(epoch, voted_for, None, now + self._election_timeout())

    # ------------------------------------------------------------ public events

    def poll(self, now: int) -> list[Effect]:
        """Seal pending proposals into one batch, if it is time, and hand over
        the effects so far."""
        state = self.state
        if isinstance(state, LeaderState) and state.pending and self._may_seal(state):
            self._seal_pending(state, now)
        effects, self._effects = self._effects, []
        return effects

    def next_deadline(self) -> int:
        """The local time at which `on_tick` next has something to do."""
        state = self.state
        deadline = state.deadline
        if isinstance(state, LeaderState):
            for parked in state.parked.values():
                deadline = min(deadline, parked.deadline)
            deadline = min(deadline, state.begin_retry_at)
        elif isinstance(state, FollowerState | UnattachedState) and state.fetch_sent_at is not None:
            deadline = min(deadline, state.fetch_sent_at + self.config.request_timeout_ms)
        return deadline

    def propose(self, records: list[bytes] | tuple[bytes, ...], now: int) -> ProposeResult:
        """Queue records for the next batch (group commit). Raises NotLeaderError."""
        state = self.state
        if not isinstance(state, LeaderState):
            # A resigned node still records itself as its epoch's leader; naming
            # itself would send the client straight back here.
            hint = self.leader_id if self.leader_id != self._me else None
            raise NotLeaderError(self.epoch, hint)
        if not records:
            raise ValueError("empty proposal")
        if not state.pending:
            state.pending_since = now
        first = self.log.end_offset + len(state.pending)
        state.pending.extend(records)
        state.pending_sizes.append(len(records))
        return ProposeResult(state.epoch, first, first + len(records) - 1)

    def on_tick(self, now: int) -> None:
        state = self.state
        if isinstance(state, LeaderState):
            self._leader_tick(state, now)
            return
        if (
            isinstance(state, FollowerState | UnattachedState)
            and state.fetch_sent_at is not None
            and now >= state.fetch_sent_at + self.config.request_timeout_ms
        ):
            state.fetch_sent_at = None
            if isinstance(state, FollowerState) and self.may_campaign:
                self._suspect_leader(state, now)
            self._send_fetch(now)
        if now < state.deadline:
            return
        role = state.role
        if not self.may_campaign:
            self._observer_timeout(now)
        elif role in (Role.UNATTACHED, Role.FOLLOWER, Role.RESIGNED, Role.CANDIDATE):
            self._become_prospective(now)
        elif role is Role.PROSPECTIVE:
            self._prospective_failed(now)

    def on_flushed(self, end_offset: int, generation: int, now: int) -> None:
        """The driver made the log durable up to `end_offset` (see FlushLog)."""
        if generation != self._log_generation or end_offset <= self.flushed_end:
            return
        self.flushed_end = min(end_offset, self.log.end_offset)
        state = self.state
        if isinstance(state, LeaderState):
            self._maybe_advance_high_watermark(now)
        elif (
            isinstance(state, FollowerState)
            and state.awaiting_flush
            and self.flushed_end >= self.log.end_offset
        ):
            state.awaiting_flush = False
            self._send_fetch(now)

    def on_leader_unreachable(self, now: int) -> None:
        """The transport could not connect to our leader (refused or reset).

        A voter starts a pre-vote at once instead of waiting out the fetch timeout;
        pre-vote keeps this safe, since voters that still hear the leader refuse.
        """
        state = self.state
        if not isinstance(state, FollowerState):
            return
        if self.may_campaign:
            self._suspect_leader(state, now)
        else:
            new = self._unattached(state.epoch, state.voted_for, now)
            self._transition(Trigger.LEADER_LOST, new, now)

    def on_snapshot_taken(self, snapshot_id: SnapshotId) -> None:
        """The driver stored a snapshot of committed state; the log may start after it."""
        if snapshot_id.end_offset > self.high_watermark:
            raise ValueError("snapshot beyond the high watermark")
        self.log.advance_start(snapshot_id)
        self._effects.append(AdvanceLogStart(snapshot_id))
        self._voter_history.prune_below(snapshot_id.end_offset)
        self.note_latest_snapshot(snapshot_id)

    def note_latest_snapshot(self, snapshot_id: SnapshotId) -> None:
        """The driver stored (or found at a restart) a snapshot of committed state
        that this log holds; a follower below the log start is sent to the newest."""
        if snapshot_id.end_offset > self.log.end_offset:
            raise ValueError("snapshot beyond the log end")
        latest = self.latest_snapshot
        if latest is None or snapshot_id.end_offset > latest.end_offset:
            self.latest_snapshot = snapshot_id

    def on_snapshot_installed(
        self, snapshot_id: SnapshotId, now: int, voters: VoterSet | None = None
    ) -> None:
        """The driver downloaded the leader's snapshot and loaded it into its state
        machine; the log is reset to start after it (an effect) unless ours agrees.
        `voters` is the voter set the snapshot carries (kraft.version 1)."""
        self._awaiting_snapshot = False
        end = snapshot_id.end_offset
        agrees = end <= self.high_watermark or self.log.epoch_at(end - 1) == snapshot_id.epoch
        if end <= self.log.end_offset and agrees:
            # Our log already agrees up to the snapshot: keep what follows it.
            self.log.advance_start(snapshot_id)
            self._effects.append(AdvanceLogStart(snapshot_id))
            self._voter_history.prune_below(end)
        else:
            self.log.reset_to_snapshot(snapshot_id)
            self._log_generation += 1
            self._effects.append(ResetLog(snapshot_id))
            self._voters_reset_to_snapshot(end, voters)
        self.flushed_end = max(min(self.flushed_end, self.log.end_offset), snapshot_id.end_offset)
        self._set_high_watermark(max(self.high_watermark, snapshot_id.end_offset))
        self.note_latest_snapshot(snapshot_id)
        self._send_fetch(now)

    def on_snapshot_failed(self, now: int) -> None:
        self._awaiting_snapshot = False
        self._send_fetch(now)

    def resign(self, now: int) -> None:
        """Graceful shutdown: hand leadership to the most caught-up voter."""
        state = self.state
        if isinstance(state, LeaderState):
            self._resign(state, now)

    def on_message(self, source: int, message: Message, now: int) -> None:
        match message:
            case FetchRequest():
                self._on_fetch_request(source, message, now)
            case FetchResponse():
                self._on_fetch_response(source, message, now)
            case VoteRequest():
                self._on_vote_request(source, message, now)
            case VoteResponse():
                self._on_vote_response(source, message, now)
            case BeginQuorumEpochRequest():
                self._on_begin_quorum_epoch(source, message, now)
            case EndQuorumEpochRequest():
                self._on_end_quorum_epoch(source, message, now)
            case BeginQuorumEpochResponse() | EndQuorumEpochResponse():
                if message.epoch > self.epoch:
                    self._adopt_epoch(message.epoch, message.leader_id, now)

    # ------------------------------------------------------------ inspection

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        """The leader's per-replica progress (empty unless leading)."""
        state = self.state
        return dict(state.progress) if isinstance(state, LeaderState) else {}

    @property
    def node_id(self) -> int:
        return self._me

    @property
    def leader_committed_epoch(self) -> bool:
        """This node leads and its own epoch's first record has committed, so every
        entry of earlier epochs it kept is committed too: only now is the
        committed state complete enough to validate new writes against."""
        state = self.state
        return isinstance(state, LeaderState) and self.high_watermark > state.epoch_start_offset
