"""Broken variants of the core: the simulator must catch each one.

If one of these stops failing, a checker has gone blind.
"""

from __future__ import annotations

import pytest

from quorum.raft.effects import Effect, HighWatermarkChanged, PersistQuorumState
from quorum.raft.messages import VoteRequest
from quorum.raft.node import RaftNode
from quorum.sim.cluster import Simulation
from quorum.sim.faults import MIXES
from quorum.sim.invariants import InvariantViolation


class DoubleVoter(RaftNode):
    """Grants every real vote in an epoch, even after voting for someone else."""

    def _decide_vote(self, req: VoteRequest, now: int) -> bool:
        if not req.pre_vote and req.candidate_epoch == self.epoch and self.voted_for is not None:
            return True
        return super()._decide_vote(req, now)


class Forgetful(RaftNode):
    """Never writes its quorum state: a restart forgets the epoch it reached."""

    def poll(self, now: int) -> list[Effect]:
        return [e for e in super().poll(now) if not isinstance(e, PersistQuorumState)]


class HastyCommitter(RaftNode):
    """Commits what it has itself flushed, without waiting for a majority."""

    def _maybe_advance_high_watermark(self, now: int) -> None:
        if self.flushed_end > self.high_watermark:
            self._set_high_watermark(self.flushed_end)
            self._answer_parked(now, only_with_news=True)


class CredulousFollower(RaftNode):
    """Takes whatever high watermark the leader reports, even a lower one."""

    def _set_high_watermark(self, high_watermark: int) -> None:
        if high_watermark != self.high_watermark and high_watermark > 0:
            self.high_watermark = high_watermark
            self._effects.append(HighWatermarkChanged(high_watermark))


def first_violation(factory: type[RaftNode], mix: str, seeds: int = 300) -> str:
    for seed in range(seeds):
        try:
            Simulation(seed, MIXES[mix], node_factory=factory).run()
        except InvariantViolation as exc:
            assert "replay: python -m quorum.sim --seed" in str(exc)
            return str(exc)
    pytest.fail(f"{factory.__name__} survived {seeds} seeds of {mix}")


def test_double_voting_is_caught_as_two_leaders_in_one_epoch() -> None:
    assert "two leaders in epoch" in first_violation(DoubleVoter, "lossy")


def test_forgotten_epoch_is_caught_as_an_epoch_going_back() -> None:
    assert "epoch went back" in first_violation(Forgetful, "crashes")


def test_committing_without_a_majority_is_caught() -> None:
    message = first_violation(HastyCommitter, "chaos")
    assert any(
        phrase in message
        for phrase in ("committed", "acknowledged", "below its high watermark", "lost")
    ), message


def test_high_watermark_regression_is_caught() -> None:
    assert "high watermark went back" in first_violation(CredulousFollower, "crashes")
