"""Following a leader: the fetch loop, truncation, snapshots and losing the leader.

A follower keeps one fetch outstanding. Its fetch offset is its durable log
end, so records it receives are flushed before it fetches again; that is what
lets the leader count the fetch offset towards the high watermark. Observers
follow the same loop and, with no leader, ask a voter who leads.
"""

from __future__ import annotations

from quorum.raft.effects import (
    AppendBatches,
    FetchSnapshot,
    RequestRefused,
    SendMessage,
    TruncateLog,
)
from quorum.raft.fetching import truncation_offset
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse
from quorum.raft.nodebase import NodeBase
from quorum.raft.records import Batch, OffsetAndEpoch
from quorum.raft.states import (
    NEVER,
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from quorum.raft.transitions import Trigger
from quorum.raft.voters import malformed_voters_record

MALFORMED_RECORD = "malformed_record"


class Following(NodeBase):
    def _send_fetch(self, now: int) -> None:
        state = self.state
        if not isinstance(state, FollowerState):
            return  # nobody to fetch from
        if state.awaiting_flush or self._awaiting_snapshot or state.leader_id is None:
            return
        end = self.log.end_offset_and_epoch()
        known_hw = min(self.high_watermark, end.offset)
        request = FetchRequest(self._me, state.epoch, end.offset, end.epoch, known_hw)
        state.fetch_sent_at = now
        self._effects.append(SendMessage(state.leader_id, request))

    def _on_fetch_response(self, source: int, resp: FetchResponse, now: int) -> None:
        if resp.epoch > self.epoch or (
            resp.epoch == self.epoch
            and self.leader_id is None
            and resp.leader_id is not None
            and isinstance(self.state, UnattachedState)
        ):
            self._adopt_epoch(resp.epoch, resp.leader_id, now)
            return
        state = self.state
        if not isinstance(state, FollowerState):
            return
        if source != state.leader_id or resp.epoch != state.epoch:
            return
        if state.fetch_sent_at is None or state.awaiting_flush or self._awaiting_snapshot:
            return  # a duplicate or late answer: we are not waiting for one
        if resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
            self._leader_resigned(state, now)
            return
        if resp.error is not ErrorCode.NONE:
            return
        malformed = malformed_voters_record(resp.batches)
        if malformed is not None:
            # Refused whole and logged; the fetch stays "out", so it is asked
            # again after the request timeout rather than at once in a loop.
            self._effects.append(RequestRefused(source, "Fetch", malformed, kind=MALFORMED_RECORD))
            return
        state.fetch_sent_at = None
        state.last_leader_contact = now
        state.deadline = now + self.config.fetch_timeout_ms
        if resp.snapshot_id is not None:
            self._awaiting_snapshot = True
            self._effects.append(FetchSnapshot(source, resp.snapshot_id))
            return
        if resp.diverging_epoch is not None:
            self._truncate_diverging(resp.diverging_epoch)
            self._send_fetch(now)
            return
        appended = self._append_as_follower(resp.batches)
        self._set_high_watermark(min(resp.high_watermark, self.log.end_offset))
        if appended:
            state.awaiting_flush = True
            self._effects.append(self._flush_effect())
        else:
            self._send_fetch(now)

    def _truncate_diverging(self, diverging: OffsetAndEpoch) -> None:
        end = truncation_offset(self.log, diverging, self.high_watermark)
        if end < self.log.end_offset:
            self.log.truncate_to(end)
            self._voters_truncated(end)
            self._log_generation += 1
            self.flushed_end = min(self.flushed_end, end)
            self._effects.append(TruncateLog(end))

    def _append_as_follower(self, batches: tuple[Batch, ...]) -> bool:
        appended: list[Batch] = []
        for batch in batches:
            if batch.base_offset != self.log.end_offset:
                break
            self.log.append(batch)
            appended.append(batch)
        if appended:
            self._effects.append(AppendBatches(tuple(appended)))
            self._note_control_records(tuple(appended))
        return bool(appended)

    # --------------------------------------------------------- losing the leader

    def _leader_resigned(self, state: FollowerState, now: int) -> None:
        """Our leader told us it no longer leads this epoch: elect soon."""
        state.last_leader_contact = NEVER
        state.deadline = min(state.deadline, now + self._backoff())

    def _suspect_leader(self, state: FollowerState, now: int) -> None:
        """The leader cannot be reached, or left a fetch unanswered for longer than
        it may hold one (`request_timeout_ms`): pre-vote soon instead of waiting out
        the whole fetch timeout.

        Safe because it is only a pre-vote: a voter that still hears the leader
        refuses it, and nothing changes until a majority agrees the leader is gone.
        The leader no longer counts as live here, so we grant the pre-vote of a peer
        that saw the same silence. The voters start their pre-votes staggered by
        rank (plus a little jitter): all starting at once would split the vote.
        """
        if now - self._last_prevote_at >= self.config.election_timeout_ms // 2:
            state.last_leader_contact = NEVER
            state.deadline = min(state.deadline, now + self._unreachable_delay())

    def _unreachable_delay(self) -> int:
        """Rank among the other voters (by id) times a stagger, plus jitter."""
        others = sorted(v for v in self._voters if v != self.leader_id)
        rank = others.index(self._me) if self._me in others else 0
        stagger = max(1, self.config.election_timeout_ms // 20)
        return rank * stagger + self._rng.randrange(0, stagger // 5 + 1)

    def _observer_timeout(self, now: int) -> None:
        """An observer that lost its leader asks a random voter (or bootstrap
        server, `RaftConfig.bootstrap_ids`) who leads now.

        A former voter keeps the vote it cast in this epoch (a voter change may
        make it a voter again in the same epoch); a leader that a voter change
        removed, resigned, becomes an observer here, as does a node that learnt
        from a snapshot installed while it was running that it is no voter.
        """
        if isinstance(
            self.state, FollowerState | ResignedState | ProspectiveState | CandidateState
        ):
            new = self._unattached(self.epoch, self.voted_for, now)
            self._transition(Trigger.LEADER_LOST, new, now)
        state = self.state
        if not isinstance(state, UnattachedState):
            raise AssertionError(f"an observer cannot be {state.role.value}")
        targets = sorted(v for v in self._voters if v != self._me)
        targets += sorted(self.config.bootstrap_ids)
        if not targets:  # no voter known yet and no bootstrap server to ask
            state.deadline = now + self.config.election_timeout_ms
            return
        target = targets[self._rng.randrange(0, len(targets))]
        end = self.log.end_offset_and_epoch()
        request = FetchRequest(self._me, state.epoch, end.offset, end.epoch, self.high_watermark)
        state.fetch_sent_at = now
        self._effects.append(SendMessage(target, request))
        state.deadline = now + self.config.election_timeout_ms
