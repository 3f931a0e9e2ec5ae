"""The role states' own small decisions, each testable without a node."""

from quorum.raft.effects import Role
from quorum.raft.progress import ReplicaProgress
from quorum.raft.states import (
    NEVER,
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
    Votes,
)

VOTERS = frozenset({1, 2, 3, 4, 5})


def test_a_majority_of_grants_wins_and_a_blocking_minority_of_refusals_loses() -> None:
    votes = Votes(granted={1})
    votes.record(2, granted=True)
    assert not votes.won(5) and not votes.lost(5)
    votes.record(3, granted=False)
    votes.record(4, granted=False)
    assert not votes.lost(5)  # 1, 2 and 5 could still make three
    votes.record(5, granted=False)
    assert votes.lost(5) and not votes.won(5)
    assert Votes(granted={1, 2, 3}).won(5)


def test_check_quorum_counts_the_leader_and_voters_that_fetched_recently() -> None:
    leader = LeaderState(7, 1, 1, 0)
    leader.progress = {
        2: ReplicaProgress(last_fetch_ms=100),
        3: ReplicaProgress(last_fetch_ms=50),
        4: ReplicaProgress(),
        9: ReplicaProgress(last_fetch_ms=100),  # an observer never counts
    }
    assert leader.live_voters(VOTERS, horizon=60) == 2
    assert leader.live_voters(VOTERS, horizon=50) == 3


def test_successors_are_the_voters_most_caught_up_first() -> None:
    leader = LeaderState(7, 1, 1, 0)
    leader.progress = {
        2: ReplicaProgress(end_offset=5),
        3: ReplicaProgress(end_offset=9),
        4: ReplicaProgress(end_offset=5),
        9: ReplicaProgress(end_offset=99),
    }
    assert leader.successors(VOTERS) == (3, 2, 4)


def test_a_follower_hears_its_leader_for_one_fetch_timeout() -> None:
    follower = FollowerState(3, None, 1, 2000, last_leader_contact=1000)
    assert follower.leader_is_live(2999, fetch_timeout_ms=2000)
    assert not follower.leader_is_live(3000, fetch_timeout_ms=2000)
    assert not FollowerState(3, None, 1, 0).leader_is_live(0, 2000)  # NEVER heard
    assert FollowerState(3, None, 1, 0).last_leader_contact == NEVER


def test_each_role_has_its_own_class_and_fresh_bookkeeping() -> None:
    classes: list[type[EpochState]] = [
        UnattachedState,
        ProspectiveState,
        CandidateState,
        LeaderState,
        FollowerState,
        ResignedState,
    ]
    assert sorted(c.role.value for c in classes) == sorted(r.value for r in Role)
    a, b = CandidateState(1, 1, None, 0), CandidateState(1, 1, None, 0)
    a.votes.record(2, granted=True)
    assert b.votes.granted == set()
