"""The simulator with voter changes (KIP-853, kraft.version 1): an operator adds
observers as voters and removes voters (the leader too) while partitions, crashes,
drops and elections go on, and the invariants hold; two planted bugs are caught.

MEMBERSHIP_SEEDS sets how many seeds (CI runs 1,000). The faults last 4 s of
simulated time here, not the 8 s of the plain sweep, so the sweep costs about
what the plain one does: a run with voter changes has more to simulate per second.
"""

from __future__ import annotations

import os

import pytest

from quorum.raft.majority import majority_offset
from quorum.raft.node import RaftNode
from quorum.sim.cluster import Simulation
from quorum.sim.faults import MIXES, mix_for_seed
from quorum.sim.invariants import InvariantViolation

SEEDS = int(os.environ.get("MEMBERSHIP_SEEDS", "1000"))
CHUNK = 50
CHUNKS = [(start, min(start + CHUNK, SEEDS)) for start in range(0, SEEDS, CHUNK)]
FAULT_MS = 4000
LIVENESS_BOUND_MS = 10_000


def membership_run(seed: int, mix: str | None = None, **kwargs: object) -> Simulation:
    return Simulation(
        seed,
        MIXES[mix] if mix else mix_for_seed(seed),
        observers=2,
        membership=True,
        fault_ms=FAULT_MS,
        liveness_bound_ms=LIVENESS_BOUND_MS,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("first", "last"), CHUNKS, ids=[f"seeds{a}-{b}" for a, b in CHUNKS])
def test_invariants_hold_across_voter_changes(first: int, last: int) -> None:
    changes = committed = 0
    for seed in range(first, last):
        result = membership_run(seed).run()
        assert result.acked > 0
        assert result.recovery_ms <= LIVENESS_BOUND_MS
        changes += result.voter_changes
        committed += result.voter_changes_committed
    # The sweep really changes voters, and most changes commit.
    assert changes >= 2 * (last - first)
    assert committed >= changes // 2


def test_the_voter_set_grows_and_shrinks_and_the_leader_removes_itself() -> None:
    """Across a few seeds: sets of every size from 1 to 5 are reached, and a
    leader that removed itself resigned once the change committed."""
    sizes: set[int] = set()
    self_removals = 0
    for seed in range(40):
        sim = membership_run(seed)
        lines: list[str] = []
        sim.trace = lines.append
        result = sim.run()
        sizes.add(len(result.final_voters))
        for line in lines:
            if "appends remove voter" in line:
                words = line.split()
                if words[words.index("node") + 1] == words[words.index("voter") + 1]:
                    self_removals += 1
    assert sizes >= {1, 2, 3}
    assert self_removals > 0


def test_a_membership_seed_replays_exactly() -> None:
    assert membership_run(42, "chaos").run() == membership_run(42, "chaos").run()


# -------------------------------------------------------------- planted bugs


class TwoChangesAtOnce(RaftNode):
    """Starts a voter change while the previous one is still uncommitted."""

    def voter_change_pending(self) -> bool:
        return False


class OldMajorityCommitter(RaftNode):
    """Commits with the voter set already committed, so a change's own record is
    committed by a majority of the old set (the new one counts only after)."""

    def _maybe_advance_high_watermark(self, now: int) -> None:
        state = self._leader_state()
        committed = self.voter_set_at(self.high_watermark)
        voters = committed.ids if committed is not None else self.config.voters
        offsets = [self.flushed_end] if self.node_id in voters else []
        offsets.extend(p.end_offset for v, p in state.progress.items() if v in voters)
        candidate = majority_offset(offsets, len(voters))
        if candidate > state.epoch_start_offset and candidate > self.high_watermark:
            self._set_high_watermark(candidate)
            self._answer_parked(now, only_with_news=True)
            self._maybe_resign_removed(state, now)


def first_violation(factory: type[RaftNode], seeds: int = 200) -> str:
    """The first safety violation a broken core causes (a broken core may also
    wedge the quorum, which the liveness check reports; those seeds are skipped
    here, since the point is that the safety checker sees the bug)."""
    for seed in range(seeds):
        try:
            membership_run(seed, node_factory=factory).run()
        except InvariantViolation as exc:
            assert "--membership" in str(exc), "the replay command must name the mode"
            if not str(exc).startswith("liveness"):
                return str(exc)
    pytest.fail(f"{factory.__name__} survived {seeds} seeds")


def test_two_changes_at_once_are_caught() -> None:
    assert "while the one at" in first_violation(TwoChangesAtOnce)


def test_a_change_committed_by_the_old_majority_is_caught() -> None:
    assert "of the new set stored it" in first_violation(OldMajorityCommitter)
