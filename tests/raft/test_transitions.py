"""The transition table is what the core obeys: the simulator stays inside it,
and anything outside it raises."""

from __future__ import annotations

import pytest

from quorum.raft.effects import Role
from quorum.raft.messages import MAX_EPOCH
from quorum.raft.node import RaftNode
from quorum.raft.states import EpochState
from quorum.raft.transitions import (
    TRANSITIONS,
    IllegalTransition,
    Transition,
    Trigger,
    check_transition,
)
from quorum.sim.cluster import Simulation
from quorum.sim.faults import MIXES, mix_for_seed

SEEDS = 100

Taken = tuple[Role, Trigger, Role, bool]


def simulator_transitions() -> set[Taken]:
    """Every (from, trigger, to, voter) the simulator takes over many seeds."""
    taken: set[Taken] = set()

    class Recording(RaftNode):
        def _transition(self, trigger: Trigger, new: EpochState, now: int) -> None:
            taken.add((self.role, trigger, new.role, self.config.is_voter))
            super()._transition(trigger, new, now)

    for seed in range(SEEDS):
        Simulation(seed, mix_for_seed(seed), node_factory=Recording).run()
    for mix in sorted(MIXES):
        for seed in range(3):
            Simulation(seed, MIXES[mix], voters=5, observers=1, node_factory=Recording).run()
    return taken


def test_every_transition_the_simulator_takes_is_in_the_table() -> None:
    taken = simulator_transitions()
    outside = [t for t in taken if t[2] not in TRANSITIONS.get((t[0], t[1]), frozenset())]
    assert outside == []
    # The runs exercise every trigger, so the table is tested, not just obeyed.
    assert {trigger for _, trigger, _, _ in taken} == set(Trigger)
    assert any(not voter for *_, voter in taken), "no observer transition was seen"


def move(
    source: Role, trigger: Trigger, target: Role, old: int = 3, new: int = 3, voter: bool = True
) -> None:
    check_transition(Transition(source, trigger, target, old, new, voter))


def test_the_table_allows_the_protocol() -> None:
    move(Role.FOLLOWER, Trigger.ELECTION_TIMEOUT, Role.PROSPECTIVE)
    move(Role.PROSPECTIVE, Trigger.PRE_VOTE_WON, Role.CANDIDATE, new=4)
    move(Role.PROSPECTIVE, Trigger.PRE_VOTE_LOST, Role.FOLLOWER)
    move(Role.CANDIDATE, Trigger.VOTE_WON, Role.LEADER)
    move(Role.LEADER, Trigger.RESIGN, Role.RESIGNED)
    move(Role.LEADER, Trigger.HIGHER_EPOCH, Role.UNATTACHED, new=9)
    move(Role.UNATTACHED, Trigger.HIGHER_EPOCH, Role.FOLLOWER, new=4, voter=False)


@pytest.mark.parametrize(
    ("source", "trigger", "target", "old", "new", "voter", "message"),
    [
        # Only a candidate that won its election leads.
        (Role.FOLLOWER, Trigger.VOTE_WON, Role.LEADER, 3, 3, True, "illegal transition"),
        (Role.PROSPECTIVE, Trigger.PRE_VOTE_WON, Role.LEADER, 3, 4, True, "illegal"),
        # An election starts with a pre-vote, never straight from a timer.
        (Role.UNATTACHED, Trigger.ELECTION_TIMEOUT, Role.CANDIDATE, 3, 4, True, "illegal"),
        # A candidate that timed out pre-votes again instead of bumping the epoch.
        (Role.CANDIDATE, Trigger.ELECTION_TIMEOUT, Role.PROSPECTIVE, 3, 4, True, "may not move"),
        (Role.PROSPECTIVE, Trigger.PRE_VOTE_WON, Role.CANDIDATE, 3, 5, True, "may not move"),
        (Role.FOLLOWER, Trigger.HIGHER_EPOCH, Role.FOLLOWER, 3, 3, True, "may not move"),
        (Role.FOLLOWER, Trigger.BEGIN_QUORUM_EPOCH, Role.FOLLOWER, 3, 2, True, "go back"),
        (Role.UNATTACHED, Trigger.HIGHER_EPOCH, Role.UNATTACHED, 3, MAX_EPOCH + 1, True, "MAX"),
        # Observers neither run for election nor lead.
        (Role.UNATTACHED, Trigger.ELECTION_TIMEOUT, Role.PROSPECTIVE, 3, 3, False, "observer"),
    ],
)
def test_anything_else_raises(
    source: Role, trigger: Trigger, target: Role, old: int, new: int, voter: bool, message: str
) -> None:
    with pytest.raises(IllegalTransition, match=message):
        move(source, trigger, target, old, new, voter)


def test_an_illegal_transition_is_an_assertion_error() -> None:
    """The simulator and the driver treat it as the programming error it is."""
    assert issubclass(IllegalTransition, AssertionError)
