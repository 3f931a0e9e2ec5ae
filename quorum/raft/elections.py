"""Elections: pre-vote (KIP-996), vote, BeginQuorumEpoch and EndQuorumEpoch.

A voter whose timer fires first asks for pre-votes at epoch+1 without leaving
its epoch, so a node cut off from a live leader cannot disrupt it; only with a
majority of pre-votes does it become a candidate, persisting epoch+1 and its own
vote before asking for real votes. A voter grants one real vote per epoch, and
persists it before answering.

Two rules keep a forged request (any process that reaches the port can claim to
be a voter) from carrying the quorum away:
- stickiness (KIP-996, etcd's check-quorum lease): a voter that still hears its
  leader, or is the leader, neither grants a vote nor takes the epoch of a Vote
  request. Its own suspicion of the leader (`Following._suspect_leader`) ends the
  lease, so a real failover is not slowed;
- the epoch bound: a Vote, BeginQuorumEpoch or EndQuorumEpoch moves this node at
  most `max_epoch_jump` above the epoch of its last log entry (INVALID_REQUEST and
  a `RequestRefused` effect otherwise). Epochs learnt from responses, which
  answer requests this node sent to the voters' own addresses, are not bounded,
  so a node with an old log still catches up with the quorum's epoch.
"""

from __future__ import annotations

from quorum.raft.effects import RequestRefused, Role, SendMessage
from quorum.raft.messages import (
    MAX_EPOCH,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.nodebase import NodeBase
from quorum.raft.states import (
    NEVER,
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    UnattachedState,
    Votes,
)
from quorum.raft.transitions import Trigger


class Elections(NodeBase):
    # ----------------------------------------------------------- running

    def _become_prospective(self, now: int) -> None:
        if not self.may_campaign or self._epochs_exhausted(now):
            return
        old = self.state
        deadline = now + self._election_timeout()
        votes = Votes(granted={self._me})
        new = ProspectiveState(old.epoch, old.voted_for, old.leader_id, deadline, votes)
        self._transition(Trigger.ELECTION_TIMEOUT, new, now)
        self._last_prevote_at = now
        self._request_votes(pre_vote=True)
        self._check_election(now)

    def _prospective_failed(self, now: int) -> None:
        """Go back to the leader we knew, if any: the voters that refused still hear it."""
        old = self.state
        if old.leader_id is not None and old.leader_id != self._me:
            deadline = now + self._backoff() + self.config.election_timeout_ms // 2
            new: FollowerState | UnattachedState = FollowerState(
                old.epoch, old.voted_for, old.leader_id, deadline, last_leader_contact=NEVER
            )
        else:
            # Drawn and not used, as before the roles were split into classes
            # (issue 18), so that a simulator seed still replays the same run.
            self._election_timeout()
            deadline = now + self._backoff() + self.config.election_timeout_ms // 2
            new = UnattachedState(old.epoch, old.voted_for, None, deadline)
        self._transition(Trigger.PRE_VOTE_LOST, new, now)

    def _become_candidate(self, now: int, trigger: Trigger) -> None:
        if self._epochs_exhausted(now):
            return
        deadline = now + self._election_timeout()
        votes = Votes(granted={self._me})
        new = CandidateState(self.epoch + 1, self._me, None, deadline, votes)
        self._transition(trigger, new, now)
        self._request_votes(pre_vote=False)
        self._check_election(now)

    def _request_votes(self, pre_vote: bool) -> None:
        last = self.log.end_offset_and_epoch()
        candidate_epoch = self.epoch + 1 if pre_vote else self.epoch
        request = VoteRequest(candidate_epoch, self._me, last.epoch, last.offset, pre_vote)
        for voter in sorted(self._voters):
            if voter != self._me:
                self._effects.append(SendMessage(voter, request))

    def _check_election(self, now: int) -> None:
        state = self.state
        if not isinstance(state, ProspectiveState | CandidateState):
            raise AssertionError(f"counting votes as {state.role.value}")
        if not self.may_campaign:
            # A snapshot installed while running showed that this node is no
            # longer a voter: it wins nothing, and gives up when the round ends.
            return
        voters = len(self._voters)
        # With the voter set in the log only its members' votes count (a node
        # running while its own removal is uncommitted does not count itself).
        counted = self._voters if self._dynamic_voters else None
        if state.votes.won(voters, counted):
            if isinstance(state, ProspectiveState):
                self._become_candidate(now, Trigger.PRE_VOTE_WON)
            else:
                self._become_leader(now)
        elif state.votes.lost(voters, counted):
            if isinstance(state, ProspectiveState):
                self._prospective_failed(now)
            else:
                state.deadline = min(state.deadline, now + self._backoff())

    def _on_vote_response(self, source: int, resp: VoteResponse, now: int) -> None:
        if resp.epoch > self.epoch:
            self._adopt_epoch(resp.epoch, resp.leader_id, now)
            return
        state = self.state
        if not isinstance(state, ProspectiveState | CandidateState):
            return
        if resp.error != ErrorCode.NONE:
            return
        expecting_pre = isinstance(state, ProspectiveState)
        if resp.pre_vote != expecting_pre:
            return
        # A voter behind us may grant a pre-vote; a real vote is granted in our epoch.
        if resp.epoch != state.epoch and not (expecting_pre and resp.epoch < state.epoch):
            return
        state.votes.record(source, resp.vote_granted)
        self._check_election(now)

    # ----------------------------------------------------------- voting

    def _log_is_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        mine = self.log.end_offset_and_epoch()
        return (last_epoch, last_offset) >= (mine.epoch, mine.offset)

    def _leader_is_live(self, now: int) -> bool:
        """Whether this node still hears its leader (or leads): it then refuses
        votes. A follower that has not heard it for its request timeout less one
        park does not: it would suspect the leader itself before a live leader
        could answer, so it grants the voter that suspected a moment sooner (its
        own fetch may have gone out later, after a slow flush) instead of
        sending it back to wait for the next pre-vote round."""
        state = self.state
        if isinstance(state, LeaderState):
            return True
        if not isinstance(state, FollowerState):
            return False
        config = self.config
        heard_within = config.request_timeout_ms - config.voter_fetch_wait_ms
        return state.leader_is_live(now, min(config.fetch_timeout_ms, heard_within))

    def _epoch_out_of_reach(self, source: int, request: str, epoch: int) -> bool:
        """True, with a `RequestRefused` effect, when a request's `epoch` lies more
        than `max_epoch_jump` above the epoch of this node's last log entry."""
        if epoch <= self.epoch:
            return False
        if epoch > MAX_EPOCH:
            raise AssertionError(f"epoch {epoch} is above MAX_EPOCH: the edge must refuse it")
        base = self.log.last_epoch
        if epoch - base <= self.config.max_epoch_jump:
            return False
        reason = (
            f"epoch {epoch} is more than controller.quorum.max.epoch.jump "
            f"({self.config.max_epoch_jump}) above the epoch of this node's last log "
            f"entry ({base})"
        )
        self._effects.append(RequestRefused(source, request, reason))
        return True

    def _on_vote_request(self, source: int, req: VoteRequest, now: int) -> None:
        if self._epoch_out_of_reach(source, "Vote", req.candidate_epoch):
            response = VoteResponse(
                self.epoch, False, self.leader_id, req.pre_vote, ErrorCode.INVALID_REQUEST
            )
        else:
            granted = self._decide_vote(req, now)
            response = VoteResponse(self.epoch, granted, self.leader_id, req.pre_vote)
        self._effects.append(SendMessage(source, response))

    def _decide_vote(self, req: VoteRequest, now: int) -> bool:
        # With the voter set in the log (kraft.version 1) the candidate may hold a
        # newer set than ours, one that names this node or the candidate: judge
        # it by its log alone. A vote counts only in the candidate's own set, and
        # this node still votes once per epoch, so any two majorities that could
        # elect a leader in one epoch share a voter that chose only one of them.
        static = not self._dynamic_voters
        if static and (not self.is_voter or req.candidate_id not in self._voters):
            return False
        up_to_date = self._log_is_up_to_date(req.last_offset_epoch, req.last_offset)
        if req.pre_vote:
            # A pre-vote changes nothing here, whatever its epoch.
            live = self._leader_is_live(now)
            if req.candidate_epoch > self.epoch and not up_to_date and not live:
                self._run_first(now)
            if self._yields_to(req):
                return False  # two at once: only the lower id gets the other's pre-vote
            return req.candidate_epoch > self.epoch and up_to_date and not live
        if req.candidate_epoch < self.epoch:
            return False
        if req.candidate_epoch > self.epoch:
            if self._leader_is_live(now):
                return False  # sticky: our leader still answers us
            new = self._unattached(req.candidate_epoch, None, now)
            self._transition(Trigger.HIGHER_EPOCH, new, now)
        if self.voted_for is not None:
            # The same candidate again, but only with a log as good as ours: the
            # vote may have been cast on a forged request that claimed its name
            # and a log it does not have.
            return self.voted_for == req.candidate_id and up_to_date
        unattached = self.role in (Role.UNATTACHED, Role.PROSPECTIVE)
        if self.leader_id is not None or not unattached or not up_to_date:
            return False
        vote = self._unattached(self.epoch, req.candidate_id, now)
        self._transition(Trigger.VOTE_GRANTED, vote, now)
        return True

    def _yields_to(self, req: VoteRequest) -> bool:
        """Two voters that lost the leader at the same moment pre-vote at once; if
        each granted the other, both would become candidates and split the vote
        (costing a whole election timeout). Between equal logs the lower id wins,
        unless the other already refused us: then only it can still win."""
        state = self.state
        if not isinstance(state, ProspectiveState) or req.candidate_id in state.votes.rejected:
            return False
        mine = self.log.end_offset_and_epoch()
        same_log = (req.last_offset_epoch, req.last_offset) == (mine.epoch, mine.offset)
        return same_log and req.candidate_id > self._me

    def _run_first(self, now: int) -> None:
        """A voter whose log is behind ours asked for a pre-vote while we too have
        stopped hearing the leader: it cannot have our vote, and we can have its,
        so we pre-vote now rather than after our stagger (the more caught-up
        follower under writes would otherwise wait for it)."""
        state = self.state
        if isinstance(state, FollowerState) and self.may_campaign:
            state.last_leader_contact = NEVER
            state.deadline = min(state.deadline, now)

    # ------------------------------------------------------- begin/end epoch

    def _on_begin_quorum_epoch(self, source: int, req: BeginQuorumEpochRequest, now: int) -> None:
        if self._epoch_out_of_reach(source, "BeginQuorumEpoch", req.leader_epoch):
            error = ErrorCode.INVALID_REQUEST
        elif req.leader_epoch < self.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif req.leader_epoch == self.epoch and self.leader_id not in (None, req.leader_id):
            error = ErrorCode.INVALID_REQUEST
        else:
            error = ErrorCode.NONE
            if self.role is not Role.FOLLOWER or self.leader_id != req.leader_id:
                self._follow(req.leader_epoch, req.leader_id, now)
        response = BeginQuorumEpochResponse(self.epoch, self.leader_id, error)
        self._effects.append(SendMessage(source, response))

    def _on_end_quorum_epoch(self, source: int, req: EndQuorumEpochRequest, now: int) -> None:
        refused = None
        if self._epoch_out_of_reach(source, "EndQuorumEpoch", req.leader_epoch):
            refused = ErrorCode.INVALID_REQUEST
        elif req.leader_epoch < self.epoch:
            refused = ErrorCode.FENCED_LEADER_EPOCH
        if refused is not None:
            response = EndQuorumEpochResponse(self.epoch, self.leader_id, refused)
            self._effects.append(SendMessage(source, response))
            return
        if req.leader_epoch > self.epoch:
            new = self._unattached(req.leader_epoch, None, now)
            self._transition(Trigger.HIGHER_EPOCH, new, now)
        self._effects.append(SendMessage(source, EndQuorumEpochResponse(self.epoch, None)))
        if not self.may_campaign or self.role in (Role.LEADER, Role.CANDIDATE):
            return
        state = self.state
        if isinstance(state, FollowerState):
            state.last_leader_contact = NEVER
        successors = [s for s in req.preferred_successors if s != req.leader_id]
        if successors and successors[0] == self._me:
            self._become_candidate(now, Trigger.PREFERRED_SUCCESSOR)
        else:
            position = successors.index(self._me) if self._me in successors else len(successors)
            step = self.config.election_backoff_max_ms // max(len(self._voters), 1)
            state.deadline = min(state.deadline, now + position * step + self._backoff() // 4)
