"""The sans-I/O Raft core: KIP-595 with pre-vote (KIP-996) and check-quorum.

Events go in (`on_message`, `on_tick`, `propose`, `on_flushed`, ...); effects come
out of `poll`. The node never reads a clock (every event carries `now`, in ms of
the node's own clock), never draws randomness of its own, and never touches a
file or socket.

Transitions (all through `_transition`, which persists the quorum state first):

    UNATTACHED  --election timer-->            PROSPECTIVE
    FOLLOWER    --fetch timeout / unreachable-> PROSPECTIVE
    PROSPECTIVE --majority of pre-votes-->     CANDIDATE (epoch + 1, votes for itself)
    PROSPECTIVE --rejected / timer-->          UNATTACHED (or back to its FOLLOWER role)
    CANDIDATE   --majority of votes-->         LEADER (appends LeaderChange)
    CANDIDATE   --election timer-->            PROSPECTIVE
    LEADER      --check-quorum fails / resign-> RESIGNED (sends EndQuorumEpoch)
    RESIGNED    --election timer-->            PROSPECTIVE
    any         --higher epoch seen-->         FOLLOWER of its leader, else UNATTACHED

Observers (not in the voter set) are only ever UNATTACHED or FOLLOWER.
"""

from __future__ import annotations

from quorum.raft.config import ProposeResult, QuorumStateData, RaftConfig, RandomSource
from quorum.raft.effects import (
    AdvanceLogStart,
    AppendBatches,
    Effect,
    FetchSnapshot,
    FlushLog,
    HighWatermarkChanged,
    PersistQuorumState,
    ResetLog,
    Role,
    RoleChanged,
    SendMessage,
    TruncateLog,
)
from quorum.raft.log import RaftLog
from quorum.raft.majority import majority_offset, majority_size
from quorum.raft.messages import (
    MAX_EPOCH,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.progress import ParkedFetch, ReplicaProgress
from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId, encode_leader_change

NEVER = -(2**62)


class NotLeaderError(Exception):
    """A proposal reached a node that is not the leader."""

    def __init__(self, epoch: int, leader_id: int | None) -> None:
        super().__init__(f"not leader (epoch {epoch}, leader {leader_id})")
        self.epoch = epoch
        self.leader_id = leader_id


class RaftNode:
    def __init__(
        self,
        config: RaftConfig,
        rng: RandomSource,
        now: int,
        state: QuorumStateData | None = None,
        log: RaftLog | None = None,
    ) -> None:
        self.config = config
        self._rng = rng
        self._voters = config.voters
        self._me = config.node_id
        self.log = log if log is not None else RaftLog()
        state = state or QuorumStateData()
        self.epoch = state.epoch
        self.voted_for = state.voted_for
        self.leader_id = state.leader_id
        snapshot = self.log.snapshot_id
        self.high_watermark = snapshot.end_offset if snapshot else 0
        self.flushed_end = self.log.end_offset
        self._log_generation = 0
        self._last_prevote_at = NEVER
        self._effects: list[Effect] = []
        self._deadline = now
        # Candidate / prospective bookkeeping.
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        # Follower bookkeeping.
        self._last_leader_contact = NEVER
        self._fetch_sent_at: int | None = None
        self._awaiting_flush = False
        self._awaiting_snapshot = False
        # Leader bookkeeping.
        self._progress: dict[int, ReplicaProgress] = {}
        self._parked: dict[int, ParkedFetch] = {}
        self._pending: list[bytes] = []
        self._pending_sizes: list[int] = []  # records per proposal, in order
        self._pending_since = now
        self._epoch_start_offset = 0
        self._became_leader_at = now
        self._begin_retry_at = now
        self.role = Role.UNATTACHED
        self._start(now)

    # ----------------------------------------------------------------- start-up

    def _start(self, now: int) -> None:
        """Resume from persisted state: a restarted leader cannot lead again in its epoch."""
        if self.leader_id == self._me:
            self.role = Role.RESIGNED
            self._deadline = now + self._election_timeout()
        elif self.leader_id is not None:
            self.role = Role.FOLLOWER
            self._last_leader_contact = now
            self._deadline = now + self.config.fetch_timeout_ms
            self._send_fetch(now)
        else:
            self.role = Role.UNATTACHED
            self._deadline = now + self._election_timeout()
        self._effects.append(RoleChanged(self.role, self.epoch, self.leader_id))

    # ------------------------------------------------------------ public events

    def poll(self, now: int) -> list[Effect]:
        """Seal pending proposals into one batch, if it is time, and hand over
        the effects so far."""
        if self._pending and self.role is Role.LEADER and self._may_seal():
            self._seal_pending(now)
        effects, self._effects = self._effects, []
        return effects

    def _may_seal(self) -> bool:
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
            or len(self._pending) >= self.config.max_batch_records
        )

    def next_deadline(self) -> int:
        """The local time at which `on_tick` next has something to do."""
        deadline = self._deadline
        if self.role is Role.LEADER:
            for parked in self._parked.values():
                deadline = min(deadline, parked.deadline)
            deadline = min(deadline, self._begin_retry_at)
        elif self._fetch_sent_at is not None:
            deadline = min(deadline, self._fetch_sent_at + self.config.request_timeout_ms)
        return deadline

    def propose(self, records: list[bytes] | tuple[bytes, ...], now: int) -> ProposeResult:
        """Queue records for the next batch (group commit). Raises NotLeaderError."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.epoch, self.leader_id)
        if not records:
            raise ValueError("empty proposal")
        if not self._pending:
            self._pending_since = now
        first = self.log.end_offset + len(self._pending)
        self._pending.extend(records)
        self._pending_sizes.append(len(records))
        return ProposeResult(self.epoch, first, first + len(records) - 1)

    def on_tick(self, now: int) -> None:
        role = self.role
        if role is Role.LEADER:
            self._leader_tick(now)
            return
        if (
            self._fetch_sent_at is not None
            and now >= self._fetch_sent_at + self.config.request_timeout_ms
            and role in (Role.FOLLOWER, Role.UNATTACHED)
        ):
            self._fetch_sent_at = None
            self._send_fetch(now)
        if now < self._deadline:
            return
        if not self.config.is_voter:
            self._observer_timeout(now)
        elif role in (Role.UNATTACHED, Role.FOLLOWER, Role.RESIGNED):
            self._become_prospective(now)
        elif role is Role.PROSPECTIVE:
            self._prospective_failed(now)
        elif role is Role.CANDIDATE:
            self._become_prospective(now)

    def on_flushed(self, end_offset: int, generation: int, now: int) -> None:
        """The driver made the log durable up to `end_offset` (see FlushLog)."""
        if generation != self._log_generation or end_offset <= self.flushed_end:
            return
        self.flushed_end = min(end_offset, self.log.end_offset)
        if self.role is Role.LEADER:
            self._maybe_advance_high_watermark(now)
        elif self._awaiting_flush and self.flushed_end >= self.log.end_offset:
            self._awaiting_flush = False
            if self.role is Role.FOLLOWER:
                self._send_fetch(now)

    def on_leader_unreachable(self, now: int) -> None:
        """The transport could not connect to our leader (refused or reset).

        A voter starts a pre-vote at once instead of waiting out the fetch timeout;
        pre-vote keeps this safe, since voters that still hear the leader refuse.
        """
        if self.role is not Role.FOLLOWER:
            return
        if self.config.is_voter:
            if now - self._last_prevote_at >= self.config.election_timeout_ms // 2:
                # The leader no longer counts as live here, so we grant the pre-vote
                # of a peer that saw the same failure. The surviving voters start
                # their own pre-votes staggered by rank (plus a little jitter): all
                # starting at once would split the vote and cost an election timeout.
                self._last_leader_contact = NEVER
                self._deadline = min(self._deadline, now + self._unreachable_delay())
        else:
            self._transition(Role.UNATTACHED, self.epoch, None, self.voted_for, now)

    def on_snapshot_taken(self, snapshot_id: SnapshotId) -> None:
        """The driver stored a snapshot of committed state; the log may start after it."""
        if snapshot_id.end_offset > self.high_watermark:
            raise ValueError("snapshot beyond the high watermark")
        self.log.advance_start(snapshot_id)
        self._effects.append(AdvanceLogStart(snapshot_id))

    def on_snapshot_installed(self, snapshot_id: SnapshotId, now: int) -> None:
        """The driver downloaded the leader's snapshot and loaded it into its state
        machine; the log is reset to start after it (an effect) unless ours agrees."""
        self._awaiting_snapshot = False
        end = snapshot_id.end_offset
        agrees = end <= self.high_watermark or self.log.epoch_at(end - 1) == snapshot_id.epoch
        if end <= self.log.end_offset and agrees:
            # Our log already agrees up to the snapshot: keep what follows it.
            self.log.advance_start(snapshot_id)
            self._effects.append(AdvanceLogStart(snapshot_id))
        else:
            self.log.reset_to_snapshot(snapshot_id)
            self._log_generation += 1
            self._effects.append(ResetLog(snapshot_id))
        self.flushed_end = max(min(self.flushed_end, self.log.end_offset), snapshot_id.end_offset)
        self._set_high_watermark(max(self.high_watermark, snapshot_id.end_offset))
        if self.role is Role.FOLLOWER:
            self._send_fetch(now)

    def on_snapshot_failed(self, now: int) -> None:
        self._awaiting_snapshot = False
        if self.role is Role.FOLLOWER:
            self._send_fetch(now)

    def resign(self, now: int) -> None:
        """Graceful shutdown: hand leadership to the most caught-up voter."""
        if self.role is Role.LEADER:
            self._resign(now)

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

    # -------------------------------------------------------------- transitions

    def _transition(
        self, role: Role, epoch: int, leader_id: int | None, voted_for: int | None, now: int
    ) -> None:
        if epoch < self.epoch:
            raise AssertionError(f"epoch would go back from {self.epoch} to {epoch}")
        if epoch > MAX_EPOCH:
            raise AssertionError(f"epoch {epoch} is above MAX_EPOCH: the edge must refuse it")
        if role is Role.LEADER and self.role is not Role.CANDIDATE:
            raise AssertionError(f"illegal transition {self.role} -> LEADER")
        changed_state = (epoch, voted_for, leader_id) != (
            self.epoch,
            self.voted_for,
            self.leader_id,
        )
        if changed_state:
            self._effects.append(PersistQuorumState(epoch, voted_for, leader_id))
        was_leader = self.role is Role.LEADER
        self.epoch, self.voted_for, self.leader_id = epoch, voted_for, leader_id
        self.role = role
        self._granted.clear()
        self._rejected.clear()
        self._fetch_sent_at = None
        self._awaiting_flush = False
        if was_leader and role is not Role.LEADER:
            self._pending.clear()
            self._pending_sizes.clear()
            self._parked.clear()
            self._progress.clear()
        self._effects.append(RoleChanged(role, epoch, leader_id))
        if role is Role.FOLLOWER:
            self._last_leader_contact = now
            self._deadline = now + self.config.fetch_timeout_ms
            self._send_fetch(now)
        elif role is not Role.LEADER:
            self._deadline = now + self._election_timeout()

    def _adopt_epoch(self, epoch: int, leader_id: int | None, now: int) -> None:
        """Another node proved a higher epoch exists: join it."""
        if leader_id is not None and leader_id != self._me:
            self._transition(Role.FOLLOWER, epoch, leader_id, None, now)
        else:
            self._transition(Role.UNATTACHED, epoch, None, None, now)

    def _follow(self, epoch: int, leader_id: int, now: int) -> None:
        voted = self.voted_for if epoch == self.epoch else None
        self._transition(Role.FOLLOWER, epoch, leader_id, voted, now)

    def _election_timeout(self) -> int:
        base = self.config.election_timeout_ms
        return base + self._rng.randrange(0, base + 1)

    def _unreachable_delay(self) -> int:
        """Rank among the other voters (by id) times a stagger, plus jitter."""
        others = sorted(v for v in self._voters if v != self.leader_id)
        rank = others.index(self._me) if self._me in others else 0
        stagger = max(1, self.config.election_timeout_ms // 20)
        return rank * stagger + self._rng.randrange(0, stagger // 5 + 1)

    def _backoff(self) -> int:
        return self._rng.randrange(0, self.config.election_backoff_max_ms + 1)

    # ------------------------------------------------------------------ elections

    def _epochs_exhausted(self, now: int) -> bool:
        """At `MAX_EPOCH` no election can name a successor epoch that fits the
        wire; the node waits for a leader instead of overflowing."""
        if self.epoch < MAX_EPOCH:
            return False
        self._deadline = now + self.config.election_timeout_ms
        return True

    def _become_prospective(self, now: int) -> None:
        if not self.config.is_voter or self._epochs_exhausted(now):
            return
        self._transition(Role.PROSPECTIVE, self.epoch, self.leader_id, self.voted_for, now)
        self._last_prevote_at = now
        self._granted.add(self._me)
        self._request_votes(pre_vote=True)
        self._check_election(now)

    def _prospective_failed(self, now: int) -> None:
        """Go back to the leader we knew, if any: the voters that refused still hear it."""
        if self.leader_id is not None and self.leader_id != self._me:
            self._transition(Role.FOLLOWER, self.epoch, self.leader_id, self.voted_for, now)
            self._last_leader_contact = NEVER
        else:
            self._transition(Role.UNATTACHED, self.epoch, None, self.voted_for, now)
        self._deadline = now + self._backoff() + self.config.election_timeout_ms // 2

    def _become_candidate(self, now: int) -> None:
        if self._epochs_exhausted(now):
            return
        self._transition(Role.CANDIDATE, self.epoch + 1, None, self._me, now)
        self._granted.add(self._me)
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
        need = majority_size(len(self._voters))
        if len(self._granted) >= need:
            if self.role is Role.PROSPECTIVE:
                self._become_candidate(now)
            elif self.role is Role.CANDIDATE:
                self._become_leader(now)
        elif len(self._rejected) > len(self._voters) - need:
            if self.role is Role.PROSPECTIVE:
                self._prospective_failed(now)
            else:
                self._deadline = min(self._deadline, now + self._backoff())

    def _log_is_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        mine = self.log.end_offset_and_epoch()
        return (last_epoch, last_offset) >= (mine.epoch, mine.offset)

    def _leader_is_live(self, now: int) -> bool:
        if self.role is Role.LEADER:
            return True
        return (
            self.role is Role.FOLLOWER
            and now - self._last_leader_contact < self.config.fetch_timeout_ms
        )

    def _on_vote_request(self, source: int, req: VoteRequest, now: int) -> None:
        granted = self._decide_vote(req, now)
        response = VoteResponse(self.epoch, granted, self.leader_id, req.pre_vote)
        self._effects.append(SendMessage(source, response))

    def _decide_vote(self, req: VoteRequest, now: int) -> bool:
        if not self.config.is_voter or req.candidate_id not in self._voters:
            return False
        up_to_date = self._log_is_up_to_date(req.last_offset_epoch, req.last_offset)
        if req.pre_vote:
            # A pre-vote changes nothing here, whatever its epoch.
            return req.candidate_epoch > self.epoch and up_to_date and not self._leader_is_live(now)
        if req.candidate_epoch < self.epoch:
            return False
        if req.candidate_epoch > self.epoch:
            self._transition(Role.UNATTACHED, req.candidate_epoch, None, None, now)
        if self.voted_for is not None:
            return self.voted_for == req.candidate_id
        unattached = self.role in (Role.UNATTACHED, Role.PROSPECTIVE)
        if self.leader_id is not None or not unattached or not up_to_date:
            return False
        self._transition(Role.UNATTACHED, self.epoch, None, req.candidate_id, now)
        return True

    def _on_vote_response(self, source: int, resp: VoteResponse, now: int) -> None:
        if resp.epoch > self.epoch:
            self._adopt_epoch(resp.epoch, resp.leader_id, now)
            return
        expecting_pre = self.role is Role.PROSPECTIVE
        if self.role not in (Role.PROSPECTIVE, Role.CANDIDATE) or resp.error != ErrorCode.NONE:
            return
        if resp.pre_vote != expecting_pre:
            return
        # A voter behind us may grant a pre-vote; a real vote is granted in our epoch.
        if resp.epoch != self.epoch and not (expecting_pre and resp.epoch < self.epoch):
            return
        (self._granted if resp.vote_granted else self._rejected).add(source)
        self._check_election(now)

    # ------------------------------------------------------------------- leading

    def _become_leader(self, now: int) -> None:
        self._transition(Role.LEADER, self.epoch, self._me, self._me, now)
        self._epoch_start_offset = self.log.end_offset
        self._became_leader_at = now
        self._deadline = now + max(1, self.config.fetch_timeout_ms // 4)
        self._begin_retry_at = now
        self._progress = {v: ReplicaProgress() for v in self._voters if v != self._me}
        self._pending = []
        self._pending_sizes = []
        control = Batch(
            self.log.end_offset,
            self.epoch,
            (encode_leader_change(self._me, self._voters),),
            now,
            control=True,
        )
        self._append_as_leader(control)
        self._send_begin_quorum_epoch(now)

    def _send_begin_quorum_epoch(self, now: int) -> None:
        request = BeginQuorumEpochRequest(self.epoch, self._me)
        for voter, progress in sorted(self._progress.items()):
            if voter in self._voters and not progress.fetched_this_epoch:
                self._effects.append(SendMessage(voter, request))
        self._begin_retry_at = now + self.config.election_timeout_ms // 2

    def _append_as_leader(self, batch: Batch) -> None:
        self.log.append(batch)
        self._effects.append(AppendBatches((batch,)))
        self._effects.append(self._flush_effect())

    def _flush_effect(self) -> FlushLog:
        return FlushLog(self.log.end_offset, self._log_generation)

    def _seal_pending(self, now: int) -> None:
        records, self._pending = self._pending, []
        sizes, self._pending_sizes = self._pending_sizes, []
        for start, end in _batch_bounds(sizes, self.config.max_batch_records):
            chunk = tuple(records[start:end])
            batch = Batch(self.log.end_offset, self.epoch, chunk, self._pending_since)
            self.log.append(batch)
            self._effects.append(AppendBatches((batch,)))
        self._effects.append(self._flush_effect())
        self._answer_parked(now, only_with_news=True)

    def _leader_tick(self, now: int) -> None:
        self._deadline = now + max(1, self.config.fetch_timeout_ms // 4)
        for source, parked in list(self._parked.items()):
            if now >= parked.deadline:
                del self._parked[source]
                self._effects.append(SendMessage(source, self._fetch_answer(parked.request)))
        if now >= self._begin_retry_at:
            self._send_begin_quorum_epoch(now)
        if now - self._became_leader_at >= self.config.fetch_timeout_ms:
            horizon = now - self.config.fetch_timeout_ms
            live = 1 + sum(
                1
                for v, p in self._progress.items()
                if v in self._voters and p.last_fetch_ms is not None and p.last_fetch_ms >= horizon
            )
            if live < majority_size(len(self._voters)):
                self._resign(now)

    def _resign(self, now: int) -> None:
        """Step down and name successors, most caught-up first (EndQuorumEpoch)."""
        successors = tuple(
            v
            for v, _ in sorted(
                ((v, p) for v, p in self._progress.items() if v in self._voters),
                key=lambda item: (-item[1].end_offset, item[0]),
            )
        )
        epoch = self.epoch
        self._transition(Role.RESIGNED, epoch, self._me, self._me, now)
        request = EndQuorumEpochRequest(epoch, self._me, successors)
        for voter in successors:
            self._effects.append(SendMessage(voter, request))

    def _maybe_advance_high_watermark(self, now: int) -> None:
        offsets = [self.flushed_end]
        offsets.extend(p.end_offset for v, p in self._progress.items() if v in self._voters)
        candidate = majority_offset(offsets, len(self._voters))
        # Only once our own LeaderChange record is committed (KIP-595).
        if candidate > self._epoch_start_offset and candidate > self.high_watermark:
            self._set_high_watermark(candidate)
            self._answer_parked(now, only_with_news=True)

    def _set_high_watermark(self, high_watermark: int) -> None:
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
            self._effects.append(HighWatermarkChanged(high_watermark))

    def _answer_parked(self, now: int, only_with_news: bool) -> None:
        """Answer parked fetches that have new records; one whose only news is the
        high watermark is answered after `high_watermark_linger_ms` at the latest."""
        for source, parked in list(self._parked.items()):
            req = parked.request
            if self.log.end_offset > req.fetch_offset or not only_with_news:
                del self._parked[source]
                self._effects.append(SendMessage(source, self._fetch_answer(req)))
            elif self.high_watermark > req.known_high_watermark:
                linger = now + self.config.high_watermark_linger_ms
                parked.deadline = min(parked.deadline, linger)

    # ----------------------------------------------------------------- fetching

    def _on_fetch_request(self, source: int, req: FetchRequest, now: int) -> None:
        if self.role is not Role.LEADER or req.epoch != self.epoch:
            self._reject_fetch(source, req, now)
            return
        progress = self._progress.get(source)
        if progress is None:
            progress = self._progress[source] = ReplicaProgress()  # an observer
        diverged = self._validate_fetch_position(req)
        if diverged is not None:
            self._effects.append(SendMessage(source, diverged))
            return
        progress.last_fetch_ms = now
        progress.fetched_this_epoch = True
        progress.end_offset = max(progress.end_offset, req.fetch_offset)
        if req.fetch_offset >= self.log.end_offset:
            progress.last_caught_up_ms = now
        if source in self._voters:
            self._maybe_advance_high_watermark(now)
        wait = self.config.fetch_max_wait_ms
        if self.high_watermark > req.known_high_watermark:
            wait = min(wait, self.config.high_watermark_linger_ms)
        if self.log.end_offset > req.fetch_offset or wait <= 0:
            self._parked.pop(source, None)
            self._effects.append(SendMessage(source, self._fetch_answer(req)))
        else:
            self._parked[source] = ParkedFetch(source, req, now + wait)

    def _reject_fetch(self, source: int, req: FetchRequest, now: int) -> None:
        if req.epoch < self.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif req.epoch > self.epoch:
            error = ErrorCode.UNKNOWN_LEADER_EPOCH
        else:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        leader = self.leader_id if self.role is not Role.RESIGNED else None
        response = FetchResponse(
            self.epoch, leader, self.high_watermark, self.log.start_offset, error=error
        )
        # Fetch is leader-only: a higher epoch in it proves nothing (any client can
        # send one), so, as in Kafka, it is answered and changes nothing. Only Vote
        # and BeginQuorumEpoch from a voter may move this node to a new epoch.
        self._effects.append(SendMessage(source, response))

    def _validate_fetch_position(self, req: FetchRequest) -> FetchResponse | None:
        """Answer a snapshot id or a diverging epoch when the follower's log disagrees."""
        log = self.log
        snapshot = log.snapshot_id
        found = log.end_offset_for_epoch(req.last_fetched_epoch)
        # Below our log start, or an epoch older than any we kept: we cannot say
        # where the follower diverges, so it must start over from our snapshot.
        if (req.fetch_offset < log.start_offset or found.offset < 0) and snapshot is not None:
            return FetchResponse(
                self.epoch, self._me, self.high_watermark, log.start_offset, snapshot_id=snapshot
            )
        if found.epoch < req.last_fetched_epoch or req.fetch_offset > found.offset:
            diverging = OffsetAndEpoch(max(found.offset, 0), max(found.epoch, 0))
            return FetchResponse(
                self.epoch,
                self._me,
                self.high_watermark,
                log.start_offset,
                diverging_epoch=diverging,
            )
        return None

    def _fetch_answer(self, req: FetchRequest) -> FetchResponse:
        batches = self.log.read(req.fetch_offset, self.config.max_fetch_records)
        return FetchResponse(
            self.epoch, self._me, self.high_watermark, self.log.start_offset, batches
        )

    def _send_fetch(self, now: int) -> None:
        if self._awaiting_flush or self._awaiting_snapshot:
            return
        target = self.leader_id
        if target is None:
            return
        end = self.log.end_offset_and_epoch()
        known_hw = min(self.high_watermark, end.offset)
        request = FetchRequest(self._me, self.epoch, end.offset, end.epoch, known_hw)
        self._fetch_sent_at = now
        self._effects.append(SendMessage(target, request))

    def _on_fetch_response(self, source: int, resp: FetchResponse, now: int) -> None:
        if resp.epoch > self.epoch or (
            resp.epoch == self.epoch
            and self.leader_id is None
            and resp.leader_id is not None
            and self.role in (Role.UNATTACHED,)
        ):
            self._adopt_epoch(resp.epoch, resp.leader_id, now)
            return
        if self.role is not Role.FOLLOWER or source != self.leader_id or resp.epoch != self.epoch:
            return
        if self._fetch_sent_at is None or self._awaiting_flush or self._awaiting_snapshot:
            return  # a duplicate or late answer: we are not waiting for one
        if resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
            self._leader_resigned(now)
            return
        if resp.error is not ErrorCode.NONE:
            return
        self._fetch_sent_at = None
        self._last_leader_contact = now
        self._deadline = now + self.config.fetch_timeout_ms
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
            self._awaiting_flush = True
            self._effects.append(self._flush_effect())
        else:
            self._send_fetch(now)

    def _truncate_diverging(self, diverging: OffsetAndEpoch) -> None:
        mine = self.log.end_offset_for_epoch(diverging.epoch)
        end = min(diverging.offset, mine.offset) if mine.offset >= 0 else diverging.offset
        end = max(end, self.log.start_offset)
        if end < self.high_watermark:
            raise AssertionError(f"truncation to {end} below high watermark {self.high_watermark}")
        if end < self.log.end_offset:
            self.log.truncate_to(end)
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
        return bool(appended)

    def _leader_resigned(self, now: int) -> None:
        """Our leader told us it no longer leads this epoch: elect soon."""
        self._last_leader_contact = NEVER
        self._deadline = min(self._deadline, now + self._backoff())

    def _observer_timeout(self, now: int) -> None:
        """An observer that lost its leader asks a random voter who leads now."""
        if self.role is Role.FOLLOWER:
            self._transition(Role.UNATTACHED, self.epoch, None, None, now)
        voters = sorted(self._voters)
        target = voters[self._rng.randrange(0, len(voters))]
        end = self.log.end_offset_and_epoch()
        request = FetchRequest(self._me, self.epoch, end.offset, end.epoch, self.high_watermark)
        self._fetch_sent_at = now
        self._effects.append(SendMessage(target, request))
        self._deadline = now + self.config.election_timeout_ms

    # ------------------------------------------------------- begin/end epoch

    def _on_begin_quorum_epoch(self, source: int, req: BeginQuorumEpochRequest, now: int) -> None:
        if req.leader_epoch < self.epoch:
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
        if req.leader_epoch < self.epoch:
            response = EndQuorumEpochResponse(
                self.epoch, self.leader_id, ErrorCode.FENCED_LEADER_EPOCH
            )
            self._effects.append(SendMessage(source, response))
            return
        if req.leader_epoch > self.epoch:
            self._transition(Role.UNATTACHED, req.leader_epoch, None, None, now)
        self._effects.append(SendMessage(source, EndQuorumEpochResponse(self.epoch, None)))
        if not self.config.is_voter or self.role in (Role.LEADER, Role.CANDIDATE):
            return
        self._last_leader_contact = NEVER
        successors = [s for s in req.preferred_successors if s != req.leader_id]
        if successors and successors[0] == self._me:
            self._become_candidate(now)
        else:
            position = successors.index(self._me) if self._me in successors else len(successors)
            step = self.config.election_backoff_max_ms // max(len(self._voters), 1)
            self._deadline = min(self._deadline, now + position * step + self._backoff() // 4)

    # ------------------------------------------------------------ inspection

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        """The leader's per-replica progress (empty unless leading)."""
        return dict(self._progress)

    @property
    def node_id(self) -> int:
        return self._me

    @property
    def leader_committed_epoch(self) -> bool:
        """This node leads and its own epoch's first record has committed, so every
        entry of earlier epochs it kept is committed too: only now is the
        committed state complete enough to validate new writes against."""
        return self.role is Role.LEADER and self.high_watermark > self._epoch_start_offset


def _batch_bounds(sizes: list[int], limit: int) -> list[tuple[int, int]]:
    """Cut queued proposals into batches of at most `limit` records, never splitting
    one proposal: a batch is what a crash keeps or loses whole, so a proposal the
    controller meant as one atomic change must not straddle two. A proposal larger
    than `limit` gets a batch of its own."""
    bounds: list[tuple[int, int]] = []
    start = end = 0
    for size in sizes:
        if end > start and end - start + size > limit:
            bounds.append((start, end))
            start = end
        end += size
    if end > start:
        bounds.append((start, end))
    return bounds
