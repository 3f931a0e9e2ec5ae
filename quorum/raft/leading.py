"""Leading an epoch: the LeaderChange record, group commit, answering (and
parking) fetches, the high watermark, check-quorum and resignation.

The high watermark is the largest offset durable on a majority of voters, the
leader's own flushed end included, and moves only once the leader's own
LeaderChange record is below it (KIP-595): entries of earlier epochs are
committed by that record, never by counting their replicas.
"""

from __future__ import annotations

from quorum.raft.effects import AppendBatches, SendMessage
from quorum.raft.fetching import batch_bounds, check_fetch_position, fetch_error
from quorum.raft.majority import majority_offset, majority_size
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
)
from quorum.raft.nodebase import NodeBase
from quorum.raft.progress import ParkedFetch, ReplicaProgress
from quorum.raft.records import Batch, encode_leader_change
from quorum.raft.states import LeaderState, ResignedState
from quorum.raft.transitions import Trigger


class Leading(NodeBase):
    def _become_leader(self, now: int) -> None:
        new = LeaderState(
            self.epoch,
            self._me,
            self._me,
            deadline=now + max(1, self.config.fetch_timeout_ms // 4),
            epoch_start_offset=self.log.end_offset,
            became_leader_at=now,
            begin_retry_at=now,
            progress={v: ReplicaProgress() for v in self._voters if v != self._me},
        )
        self._transition(Trigger.VOTE_WON, new, now)
        control = Batch(
            self.log.end_offset,
            self.epoch,
            (encode_leader_change(self._me, self._voters),),
            now,
            control=True,
        )
        self._append_as_leader(control)
        self._send_begin_quorum_epoch(new, now)

    def _send_begin_quorum_epoch(self, state: LeaderState, now: int) -> None:
        request = BeginQuorumEpochRequest(state.epoch, self._me)
        for voter, progress in sorted(state.progress.items()):
            if voter in self._voters and not progress.fetched_this_epoch:
                self._effects.append(SendMessage(voter, request))
        state.begin_retry_at = now + self.config.election_timeout_ms // 2

    def _append_as_leader(self, batch: Batch) -> None:
        self.log.append(batch)
        self._effects.append(AppendBatches((batch,)))
        self._effects.append(self._flush_effect())
        self._note_control_records((batch,))

    # ----------------------------------------------------------- group commit

    def _may_seal(self, state: LeaderState) -> bool:
        """Group commit across the replication round trip: while a batch is
        still uncommitted, new proposals wait and then leave together as the
        next batch, the moment the high watermark reaches the log end (or the
        batch is full). A follower takes what is new once per fetch round trip
        anyway, and the fetch that commits a batch is held (see
        `high_watermark_linger_ms`) until the next one joins it, so sealing
        sooner commits nothing sooner: it only adds appends and fsyncs per
        write. With nothing in flight (one writer) a proposal is sealed at once."""
        return (
            self.high_watermark >= self.log.end_offset
            or len(state.pending) >= self.config.max_batch_records
        )

    def _seal_pending(self, state: LeaderState, now: int) -> None:
        records, state.pending = state.pending, []
        sizes, state.pending_sizes = state.pending_sizes, []
        for start, end in batch_bounds(sizes, self.config.max_batch_records):
            chunk = tuple(records[start:end])
            batch = Batch(self.log.end_offset, state.epoch, chunk, state.pending_since)
            self.log.append(batch)
            self._effects.append(AppendBatches((batch,)))
        self._effects.append(self._flush_effect())
        self._answer_parked(now, only_with_news=True)

    # ------------------------------------------------------ timer, resigning

    def _leader_tick(self, state: LeaderState, now: int) -> None:
        state.deadline = now + max(1, self.config.fetch_timeout_ms // 4)
        for source, parked in list(state.parked.items()):
            if now >= parked.deadline:
                del state.parked[source]
                self._effects.append(SendMessage(source, self._fetch_answer(parked.request)))
        if now >= state.begin_retry_at:
            self._send_begin_quorum_epoch(state, now)
        if now - state.became_leader_at >= self.config.fetch_timeout_ms:
            horizon = now - self.config.fetch_timeout_ms
            live = state.live_voters(self._counted_voters(state), horizon, self.is_voter)
            if live < majority_size(len(self._voters)):
                self._resign(state, now)

    def _resign(self, state: LeaderState, now: int) -> None:
        """Step down and name successors, most caught-up first (EndQuorumEpoch)."""
        successors = state.successors(self._counted_voters(state))
        epoch = state.epoch
        resigned = ResignedState(epoch, self._me, self._me, now + self._election_timeout())
        self._transition(Trigger.RESIGN, resigned, now)
        request = EndQuorumEpochRequest(epoch, self._me, successors)
        for voter in successors:
            self._effects.append(SendMessage(voter, request))

    # ------------------------------------------------------- high watermark

    def _maybe_advance_high_watermark(self, now: int) -> None:
        """Count the voter set in force, the newest in the log: a voter change is
        committed by a majority of the new set, and a leader the change removed
        no longer counts itself."""
        state = self._leader_state()
        offsets = [self.flushed_end] if self.is_voter else []
        counted = self._counted_voters(state)
        offsets.extend(p.end_offset for v, p in state.progress.items() if v in counted)
        candidate = majority_offset(offsets, len(self._voters))
        # Only once our own LeaderChange record is committed (KIP-595).
        if candidate > state.epoch_start_offset and candidate > self.high_watermark:
            self._set_high_watermark(candidate)
            self._answer_parked(now, only_with_news=True)
            self._maybe_resign_removed(state, now)

    def _counted_voters(self, state: LeaderState) -> frozenset[int]:
        """The voters whose progress counts: a replica fetching under a voter's id
        from another directory (a replaced disk) is an observer (KIP-853)."""
        return frozenset(
            v
            for v in self._voters
            if (p := state.progress.get(v)) is None or self.is_voter_key(v, p.directory_id)
        )

    def _maybe_resign_removed(self, state: LeaderState, now: int) -> None:
        """A leader removed from the voters keeps leading until the change that
        removed it is committed, then hands over (KIP-853)."""
        if self.is_voter:
            return
        latest = self.latest_voter_change()
        if latest is not None and latest[0] < self.high_watermark:
            self._resign(state, now)

    def _answer_parked(self, now: int, only_with_news: bool) -> None:
        """Answer parked fetches that have new records; one whose only news is the
        high watermark is answered after `high_watermark_linger_ms` at the latest."""
        state = self._leader_state()
        for source, parked in list(state.parked.items()):
            req = parked.request
            if self.log.end_offset > req.fetch_offset or not only_with_news:
                del state.parked[source]
                self._effects.append(SendMessage(source, self._fetch_answer(req)))
            elif self.high_watermark > req.known_high_watermark:
                linger = now + self.config.high_watermark_linger_ms
                parked.deadline = min(parked.deadline, linger)

    # ------------------------------------------------------ answering Fetch

    def _on_fetch_request(self, source: int, req: FetchRequest, now: int) -> None:
        state = self.state
        if not isinstance(state, LeaderState) or req.epoch != state.epoch:
            self._reject_fetch(source, req)
            return
        progress = state.progress.get(source)
        directory = req.replica_directory_id
        if progress is None or (directory and progress.directory_id != directory):
            # An observer, or the replica's id on another disk: what the old
            # directory acknowledged says nothing about the new one.
            progress = state.progress[source] = ReplicaProgress(directory_id=directory)
        diverged = check_fetch_position(
            self.log, req, state.epoch, self._me, self.high_watermark, self.latest_snapshot
        )
        if diverged is not None:
            self._effects.append(SendMessage(source, diverged))
            return
        progress.last_fetch_ms = now
        progress.fetched_this_epoch = True
        progress.end_offset = max(progress.end_offset, req.fetch_offset)
        if req.fetch_offset >= self.log.end_offset:
            progress.last_caught_up_ms = now
        voter = self.is_voter_key(source, progress.directory_id)
        if voter:
            self._maybe_advance_high_watermark(now)
        wait = self.config.voter_fetch_wait_ms if voter else self.config.fetch_max_wait_ms
        if self.high_watermark > req.known_high_watermark:
            wait = min(wait, self.config.high_watermark_linger_ms)
        if self.log.end_offset > req.fetch_offset or wait <= 0:
            state.parked.pop(source, None)
            self._effects.append(SendMessage(source, self._fetch_answer(req)))
        else:
            state.parked[source] = ParkedFetch(source, req, now + wait)

    def _reject_fetch(self, source: int, req: FetchRequest) -> None:
        error = fetch_error(req.epoch, self.epoch)
        leader = None if isinstance(self.state, ResignedState) else self.leader_id
        response = FetchResponse(
            self.epoch, leader, self.high_watermark, self.log.start_offset, error=error
        )
        # Fetch is leader-only: a higher epoch in it proves nothing (any client can
        # send one), so, as in Kafka, it is answered and changes nothing. Only Vote
        # and BeginQuorumEpoch from a voter may move this node to a new epoch.
        self._effects.append(SendMessage(source, response))

    def _fetch_answer(self, req: FetchRequest) -> FetchResponse:
        batches = self.log.read(req.fetch_offset, self.config.max_fetch_records)
        return FetchResponse(
            self.epoch, self._me, self.high_watermark, self.log.start_offset, batches
        )
