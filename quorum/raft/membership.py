"""Changing the voters (KIP-853's AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter,
the leader's side).

The leader checks a change against the rules in `quorum/raft/voters.py` and
appends it as a VotersRecord control batch of its own; from then on every part
of the core counts the new set (`NodeBase._voters`). The caller learns the
change is committed the way it learns of any proposal: the high watermark
passes the returned offset while the log still holds the returned epoch there.
A refusal raises `VoterChangeRefused` with Kafka's error name and changes nothing.
"""

from __future__ import annotations

from quorum.raft.client_api import NotLeaderError
from quorum.raft.config import ProposeResult
from quorum.raft.leading import Leading
from quorum.raft.messages import ErrorCode
from quorum.raft.records import Batch
from quorum.raft.states import LeaderState
from quorum.raft.voters import (
    KRAFT_VERSION_DYNAMIC,
    Voter,
    VoterChangeRefused,
    VoterSet,
    encode_kraft_version,
    encode_voters,
)


class Membership(Leading):
    def add_voter(self, voter: Voter, now: int) -> ProposeResult:
        """Add a caught-up observer as a voter. Raises NotLeaderError or VoterChangeRefused."""
        state = self._leader_for_voter_change()
        current = self.current_voter_set()
        if voter.voter_id in current.ids:
            raise VoterChangeRefused(
                ErrorCode.DUPLICATE_VOTER,
                f"voter {voter.voter_id} is already in the voter set {sorted(current.ids)}",
            )
        self._check_supports_finalized(voter)
        progress = state.progress.get(voter.voter_id)
        caught_up_at = progress.last_caught_up_ms if progress is not None else None
        if progress is not None and progress.directory_id not in ("", voter.directory_id):
            caught_up_at = None  # the fetches came from another directory of that id
        if caught_up_at is None or now - caught_up_at >= self.config.fetch_timeout_ms:
            raise VoterChangeRefused(
                ErrorCode.REQUEST_TIMED_OUT,
                f"replica {voter.voter_id} has not caught up with the leader's log end within "
                f"controller.quorum.fetch.timeout.ms ({self.config.fetch_timeout_ms})",
            )
        return self._append_voters_record(state, current.with_voter(voter), now)

    def remove_voter(self, voter_id: int, directory_id: str | None, now: int) -> ProposeResult:
        """Remove a voter (this leader included: it resigns once the change commits).
        A `directory_id` that does not match the voter's is VOTER_NOT_FOUND."""
        state = self._leader_for_voter_change()
        current = self.current_voter_set()
        voter = current.voter(voter_id)
        known_directory = voter is not None and voter.directory_id != ""
        if voter is None or (
            directory_id is not None and known_directory and voter.directory_id != directory_id
        ):
            raise VoterChangeRefused(
                ErrorCode.VOTER_NOT_FOUND,
                f"voter {voter_id} (directory {directory_id}) is not in the voter set "
                f"{sorted(current.ids)}",
            )
        if len(current.voters) == 1:
            raise VoterChangeRefused(
                ErrorCode.INVALID_REQUEST, f"voter {voter_id} is the last voter: nobody would lead"
            )
        return self._append_voters_record(state, current.without_voter(voter_id), now)

    def update_voter(self, voter: Voter, now: int) -> ProposeResult | None:
        """A voter's new endpoints or supported kraft.version range (KIP-853's
        UpdateRaftVoter, sent by the voter itself): the same voter id and
        directory, the rest replaced. None when nothing would change. Raises
        NotLeaderError or VoterChangeRefused."""
        state = self._leader_for_voter_change()
        current = self.current_voter_set()
        old = current.voter(voter.voter_id)
        if old is None or old.directory_id != voter.directory_id:
            raise VoterChangeRefused(
                ErrorCode.VOTER_NOT_FOUND,
                f"replica {voter.voter_id} (directory {voter.directory_id}) is not a voter "
                f"(voters {sorted(current.ids)}): only a voter may update itself",
            )
        self._check_supports_finalized(voter)
        if old == voter:
            return None
        updated = current.without_voter(voter.voter_id).with_voter(voter)
        return self._append_voters_record(state, updated, now)

    def upgrade_kraft_version(self, voters: VoterSet, now: int) -> ProposeResult:
        """kraft.version 0 -> 1: one control batch, a KRaftVersionRecord and the
        static voters as the first VotersRecord (`voters`: the same ids, with the
        directory ids and endpoints the caller gathered). From that batch on the
        voter set is in the log; it commits like a voter change (the set is the
        same), and a truncation before it commits undoes it."""
        state = self._leader_for_voter_change(upgrading=True)
        if self._dynamic_voters:
            raise VoterChangeRefused(ErrorCode.INVALID_REQUEST, "kraft.version is already 1")
        if voters.ids != self.config.voters:
            raise VoterChangeRefused(
                ErrorCode.INVALID_REQUEST,
                f"the voter set {sorted(voters.ids)} is not the static voters "
                f"{sorted(self.config.voters)}",
            )
        records = (encode_kraft_version(KRAFT_VERSION_DYNAMIC), encode_voters(voters))
        return self._append_control(state, records, now)

    def current_voter_set(self) -> VoterSet:
        """The newest voter set in the log, or the static voters while there is none."""
        latest = self.latest_voter_change()
        return latest[1] if latest is not None else VoterSet.of_static(self.config.voters)

    def voter_change_pending(self) -> bool:
        """A VotersRecord in the log is not committed yet: no other change may start."""
        latest = self.latest_voter_change()
        return latest is not None and latest[0] >= self.high_watermark

    # ------------------------------------------------------------------ parts

    def _check_supports_finalized(self, voter: Voter) -> None:
        """A voter must support the finalized kraft.version, or it could not read the log."""
        version = self.kraft_version
        if not voter.min_kraft_version <= version <= voter.max_kraft_version:
            raise VoterChangeRefused(
                ErrorCode.INVALID_REQUEST,
                f"voter {voter.voter_id} supports kraft.version {voter.min_kraft_version}-"
                f"{voter.max_kraft_version}, not the finalized {version}",
            )

    def _leader_for_voter_change(self, upgrading: bool = False) -> LeaderState:
        state = self.state
        if not isinstance(state, LeaderState):
            hint = self.leader_id if self.leader_id != self._me else None
            raise NotLeaderError(self.epoch, hint)
        if self.kraft_version < KRAFT_VERSION_DYNAMIC and not upgrading:
            raise VoterChangeRefused(
                ErrorCode.UNSUPPORTED_VERSION,
                f"kraft.version is {self.kraft_version}: the voters are static "
                "(controller.quorum.voters); upgrade it with `quorumctl features upgrade "
                "--feature kraft.version=1`",
            )
        if self.high_watermark <= state.epoch_start_offset:
            raise VoterChangeRefused(
                ErrorCode.REQUEST_TIMED_OUT,
                "the leader has not committed its epoch yet (earlier voter changes unfenced)",
            )
        if self.voter_change_pending():
            raise VoterChangeRefused(
                ErrorCode.REQUEST_TIMED_OUT,
                "a voter change is not committed yet: one change at a time",
            )
        return state

    def _append_voters_record(
        self, state: LeaderState, voters: VoterSet, now: int
    ) -> ProposeResult:
        """Seal what is queued first (its offsets are promised), then append the
        record alone in a control batch; the new set counts from here on."""
        return self._append_control(state, (encode_voters(voters),), now)

    def _append_control(
        self, state: LeaderState, records: tuple[bytes, ...], now: int
    ) -> ProposeResult:
        if state.pending:
            self._seal_pending(state, now)
        offset = self.log.end_offset
        self._append_as_leader(Batch(offset, state.epoch, records, now, control=True))
        self._answer_parked(now, only_with_news=True)
        self._maybe_advance_high_watermark(now)
        return ProposeResult(state.epoch, offset, offset + len(records) - 1)
