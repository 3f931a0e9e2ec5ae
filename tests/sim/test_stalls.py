"""Leader stalls and leader isolation in the simulator (quorum/sim/stalls.py):
a follower must not take a paused leader for a lost one, and must still find
a lost one quickly. SIM_STALL_SEEDS sets how many seeds each case runs."""

from __future__ import annotations

import dataclasses
import os

import pytest

from quorum.raft.config import RaftConfig, RandomSource
from quorum.raft.node import RaftNode
from quorum.raft.states import FollowerState
from quorum.sim.stalls import ISOLATION_BOUND_MS, STALL_TOLERATED_MS, isolation_ms, stall

SEEDS = int(os.environ.get("SIM_STALL_SEEDS", "40"))


@pytest.mark.parametrize("pause_ms", [600, 900, STALL_TOLERATED_MS])
@pytest.mark.parametrize("writes", [False, True], ids=["idle", "writes"])
def test_a_leader_stall_up_to_the_tolerance_changes_no_leader(pause_ms: int, writes: bool) -> None:
    changed = [s for s in range(SEEDS) if stall(s, pause_ms, writes).leader_changes]
    assert changed == [], f"a {pause_ms} ms stall changed the leader in seeds {changed}"


@pytest.mark.parametrize("writes", [False, True], ids=["idle", "writes"])
def test_an_isolated_leader_is_replaced_within_the_bound(writes: bool) -> None:
    late = {}
    for seed in range(SEEDS):
        took = isolation_ms(seed, writes)
        if took is None or took > ISOLATION_BOUND_MS:
            late[seed] = took
    assert late == {}, f"no leader within {ISOLATION_BOUND_MS} ms of the cut: {late}"


def test_a_stall_past_the_fetch_timeout_does_change_the_leader() -> None:
    """The stall scenario sees a change of leader when there is one: a leader
    paused longer than the fetch timeout is replaced in every seed."""
    for seed in range(5):
        assert stall(seed, 2500, writes=False).leader_changes > 0


# ---------------------------------------------------------------- planted bugs


class NeverSuspects(RaftNode):
    """Waits out the whole fetch timeout however long its fetch stays unanswered."""

    def _suspect_leader(self, state: FollowerState, now: int) -> None:
        pass


def hasty(config: RaftConfig, rng: RandomSource, *args: object) -> RaftNode:
    """Suspects its leader after half the election timeout of silence."""
    return RaftNode(dataclasses.replace(config, election_timeout_ms=500), rng, *args)  # type: ignore[arg-type]


def test_a_follower_that_never_suspects_is_caught_by_the_isolation_bound() -> None:
    took = [isolation_ms(seed, writes=True, factory=NeverSuspects) for seed in range(5)]
    assert all(ms is None or ms > ISOLATION_BOUND_MS for ms in took), took


def test_a_hasty_follower_is_caught_by_the_stall_check() -> None:
    changed = [s for s in range(10) if stall(s, 900, writes=False, factory=hasty).leader_changes]
    assert changed, "a follower suspecting after 500 ms survived ten 900 ms stalls"
