"""What every part of the node shares: its state, its effects and the one place
where the state changes.

`RaftNode` is put together from `Elections`, `Leading` and `Following`, each a
module of one idea; they all build on `NodeBase`, which holds the current role
state (`quorum/raft/states.py`) and `_transition`, the only method that replaces
it. `_transition` consults the transition table (`quorum/raft/transitions.py`),
persists the quorum state when it changed, and reports the new role.
"""

from __future__ import annotations

from quorum.raft.config import RaftConfig, RandomSource
from quorum.raft.effects import (
    Effect,
    FlushLog,
    HighWatermarkChanged,
    PersistQuorumState,
    Role,
    RoleChanged,
)
from quorum.raft.log import RaftLog
from quorum.raft.messages import MAX_EPOCH
from quorum.raft.records import Batch, SnapshotId
from quorum.raft.states import NEVER, EpochState, FollowerState, LeaderState, UnattachedState
from quorum.raft.transitions import Transition, Trigger, check_transition
from quorum.raft.voters import (
    KRAFT_VERSION_DYNAMIC,
    VoterSet,
    VoterSetHistory,
    decode_kraft_version,
    decode_voters,
    is_kraft_version_record,
    is_voters_record,
)


class NodeBase:
    """Shared state and primitives of the Raft core; see `RaftNode` for the API."""

    config: RaftConfig
    log: RaftLog
    state: EpochState
    high_watermark: int
    flushed_end: int

    def __init__(
        self,
        config: RaftConfig,
        rng: RandomSource,
        log: RaftLog,
        snapshot_voters: VoterSet | None = None,
    ) -> None:
        self.config = config
        self._rng = rng
        self._me = config.node_id
        self.log = log
        # The voter set in force: the static one, or with kraft.version 1 the
        # newest VotersRecord in the log (`_refresh_voters`).
        self._voters = config.voters
        self._voter_directories: dict[int, str] = {}  # id -> directory (kraft.version 1)
        self._kraft_version = config.kraft_version
        self._dynamic_voters = config.kraft_version >= KRAFT_VERSION_DYNAMIC
        # The offset of the KRaftVersionRecord that raised kraft.version to 1 in
        # this log (`quorumctl features upgrade`), while it may still be truncated.
        self._kraft_upgrade_offset: int | None = None
        self._voter_history = VoterSetHistory()
        snapshot_id = log.snapshot_id
        if snapshot_voters is not None and snapshot_id is not None:
            self._become_dynamic(None)  # only a kraft.version 1 snapshot carries voters
            self._voter_history.add(snapshot_id.end_offset - 1, snapshot_voters)
        self._note_control_records(log.read(log.start_offset, 2**62))
        self._refresh_voters()
        snapshot = log.snapshot_id
        self.high_watermark = snapshot.end_offset if snapshot else 0
        # The newest snapshot of committed state stored here, which a follower
        # below the log start is sent to (KIP-630: the latest, not the one the
        # log starts after; the log may keep an interval below it).
        self.latest_snapshot: SnapshotId | None = snapshot
        self.flushed_end = log.end_offset
        # Bumped whenever the log loses entries, so a flush that completes
        # afterwards cannot vouch for entries written after it (FlushLog).
        self._log_generation = 0
        self._last_prevote_at = NEVER
        # A snapshot download outlives role changes: the driver reports back.
        self._awaiting_snapshot = False
        self._effects: list[Effect] = []

    # ------------------------------------------------------------ role views

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.state.leader_id

    @property
    def voted_for(self) -> int | None:
        return self.state.voted_for

    @property
    def voters(self) -> frozenset[int]:
        """The voter set this node uses now (with kraft.version 1: the newest in its log)."""
        return self._voters

    @property
    def is_voter(self) -> bool:
        return self.is_voter_key(self._me, self.config.directory_id)

    def is_voter_key(self, replica_id: int, directory_id: str) -> bool:
        """Whether replica `replica_id` on directory `directory_id` is a voter of
        the set in force (KIP-853's ReplicaKey): with kraft.version 1 the directory
        must be the one the voter set names, when both are known; a replaced disk
        is not the voter its id once was."""
        if replica_id not in self._voters:
            return False
        named = self._voter_directories.get(replica_id, "")
        return not named or not directory_id or named == directory_id

    @property
    def may_campaign(self) -> bool:
        """Whether this node runs for election: a voter does, and so does a node
        whose own removal is the newest change in its log and not yet committed
        there. It may be the only one holding that change (the removing leader),
        so the quorum may need it to lead until the change commits; it counts
        only the votes of its newest set, itself not included."""
        if self.is_voter:
            return True
        if not self._dynamic_voters or self._me in self._voters:
            return False
        latest = self._voter_history.latest()
        if latest is None or latest[0] < self.high_watermark:
            return False
        previous = self._voter_history.before(latest[0])
        if previous is None:
            return self._me in self.config.voters
        me = previous[1].voter(self._me)
        mine = self.config.directory_id
        return me is not None and (not me.directory_id or not mine or me.directory_id == mine)

    # ------------------------------------------------------------ voter set

    @property
    def kraft_version(self) -> int:
        """The `kraft.version` in force: the formatted one, or 1 from the
        KRaftVersionRecord (or a voter-carrying snapshot) in this node's log."""
        return self._kraft_version

    def _become_dynamic(self, offset: int | None) -> None:
        if not self._dynamic_voters:
            self._dynamic_voters = True
            self._kraft_version = KRAFT_VERSION_DYNAMIC
            self._kraft_upgrade_offset = offset

    def _note_control_records(self, batches: tuple[Batch, ...]) -> None:
        """Take the voter sets of VotersRecords just added to the log, and the
        kraft.version of a KRaftVersionRecord (the upgrade from static voters)."""
        changed = False
        latest = self._voter_history.latest()
        after = latest[0] if latest is not None else -1
        for batch in batches:
            if not batch.control:
                continue
            for i, record in enumerate(batch.records):
                offset = batch.base_offset + i
                if is_kraft_version_record(record):
                    if decode_kraft_version(record) >= KRAFT_VERSION_DYNAMIC:
                        self._become_dynamic(offset)
                elif self._dynamic_voters and offset > after and is_voters_record(record):
                    self._voter_history.add(offset, decode_voters(record))
                    changed = True
        if changed:
            self._refresh_voters()

    def _voters_truncated(self, end_offset: int) -> None:
        """The log lost its entries from `end_offset`: an uncommitted change goes with them."""
        upgrade = self._kraft_upgrade_offset
        if upgrade is not None and end_offset <= upgrade:
            # The uncommitted upgrade is gone: back to the static voters.
            self._kraft_upgrade_offset = None
            self._kraft_version = self.config.kraft_version
            self._dynamic_voters = self._kraft_version >= KRAFT_VERSION_DYNAMIC
            self._voter_history.truncate(end_offset)
            self._refresh_voters()
            return
        if self._dynamic_voters and len(self._voter_history):
            self._voter_history.truncate(end_offset)
            self._refresh_voters()

    def _voters_reset_to_snapshot(self, end_offset: int, voters: VoterSet | None) -> None:
        """The log was replaced by a snapshot ending at `end_offset`: its voter set
        is the snapshot's (or, if it carries none, what we had committed below it)."""
        upgrade = self._kraft_upgrade_offset
        if voters is not None:
            self._become_dynamic(None)
            self._kraft_upgrade_offset = None
        elif upgrade is not None and upgrade >= end_offset:
            self._voters_truncated(end_offset)  # our uncommitted upgrade went with the log
            return
        if not self._dynamic_voters:
            return
        if voters is not None:
            self._voter_history.reset((end_offset - 1, voters))
        else:
            self._voter_history.truncate(min(end_offset, self.high_watermark))
        self._refresh_voters()

    def _refresh_voters(self) -> None:
        latest = self._voter_history.latest()
        self._voters = latest[1].ids if latest is not None else self.config.voters
        self._voter_directories = (
            {v.voter_id: v.directory_id for v in latest[1].voters} if latest is not None else {}
        )

    def voter_set_at(self, end_offset: int) -> VoterSet | None:
        """The voter set of the records below `end_offset` (what a snapshot ending
        there carries), or None while the static voters are in force."""
        entry = self._voter_history.before(end_offset)
        return entry[1] if entry is not None else None

    def latest_voter_change(self) -> tuple[int, VoterSet] | None:
        """The newest VotersRecord in the log (committed or not) and its offset."""
        return self._voter_history.latest()

    # ------------------------------------------------------------ transitions

    def _transition(self, trigger: Trigger, new: EpochState, now: int) -> None:
        """The one place the role changes. The table must allow it; the quorum
        state is persisted (before any message of the new epoch) if it changed."""
        old = self.state
        check_transition(
            Transition(old.role, trigger, new.role, old.epoch, new.epoch, self.may_campaign)
        )
        if (new.epoch, new.voted_for, new.leader_id) != (old.epoch, old.voted_for, old.leader_id):
            self._effects.append(PersistQuorumState(new.epoch, new.voted_for, new.leader_id))
        self.state = new
        self._effects.append(RoleChanged(new.role, new.epoch, new.leader_id))
        if isinstance(new, FollowerState):
            self._send_fetch(now)

    def _unattached(self, epoch: int, voted_for: int | None, now: int) -> UnattachedState:
        return UnattachedState(epoch, voted_for, None, now + self._election_timeout())

    def _follower(
        self, epoch: int, leader_id: int, voted_for: int | None, now: int
    ) -> FollowerState:
        deadline = now + self.config.fetch_timeout_ms
        return FollowerState(epoch, voted_for, leader_id, deadline, last_leader_contact=now)

    def _adopt_epoch(self, epoch: int, leader_id: int | None, now: int) -> None:
        """Another node proved a higher epoch exists (or named our epoch's leader): join it."""
        trigger = Trigger.HIGHER_EPOCH if epoch > self.epoch else Trigger.LEADER_DISCOVERED
        # A vote cast in this same epoch stands: dropping it would let this node
        # vote again in the epoch it already voted in.
        voted = self.voted_for if epoch == self.epoch else None
        if leader_id is not None and leader_id != self._me:
            self._transition(trigger, self._follower(epoch, leader_id, voted, now), now)
        else:
            self._transition(trigger, self._unattached(epoch, voted, now), now)

    def _follow(self, epoch: int, leader_id: int, now: int) -> None:
        """A leader announced itself (BeginQuorumEpoch): a vote in its epoch stands."""
        voted = self.voted_for if epoch == self.epoch else None
        self._transition(
            Trigger.BEGIN_QUORUM_EPOCH, self._follower(epoch, leader_id, voted, now), now
        )

    # ------------------------------------------------------------------ timers

    def _election_timeout(self) -> int:
        base = self.config.election_timeout_ms
        return base + self._rng.randrange(0, base + 1)

    def _backoff(self) -> int:
        return self._rng.randrange(0, self.config.election_backoff_max_ms + 1)

    def _epochs_exhausted(self, now: int) -> bool:
        """At `MAX_EPOCH` no election can name a successor epoch that fits the
        wire; the node waits for a leader instead of overflowing."""
        if self.epoch < MAX_EPOCH:
            return False
        self.state.deadline = now + self.config.election_timeout_ms
        return True

    # -------------------------------------------------------------- the log

    def _flush_effect(self) -> FlushLog:
        return FlushLog(self.log.end_offset, self._log_generation)

    def _set_high_watermark(self, high_watermark: int) -> None:
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
            self._effects.append(HighWatermarkChanged(high_watermark))

    def _leader_state(self) -> LeaderState:
        state = self.state
        if not isinstance(state, LeaderState):
            raise AssertionError(f"leader-only step taken as {state.role.value}")
        return state

    # ------------------------------------------- provided by the other parts

    def _send_fetch(self, now: int) -> None:
        raise NotImplementedError  # Following

    def _become_leader(self, now: int) -> None:
        raise NotImplementedError  # Leading
