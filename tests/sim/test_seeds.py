"""The simulator over many seeds and every fault mix. SIM_SEEDS sets how many
(CI runs 1,000; `make test SIM_SEEDS=20000` runs more)."""

import contextlib
import dataclasses
import os

import pytest

from quorum.raft.config import RaftConfig
from quorum.raft.messages import MAX_EPOCH
from quorum.raft.node import RaftNode
from quorum.sim.cluster import Simulation
from quorum.sim.faults import MIXES, mix_for_seed
from quorum.sim.invariants import InvariantViolation

SEEDS = int(os.environ.get("SIM_SEEDS", "1000"))
CHUNK = 50
CHUNKS = [(start, min(start + CHUNK, SEEDS)) for start in range(0, SEEDS, CHUNK)]

# Stated liveness bound: once every node runs and the network is whole, a write is
# acknowledged within this much simulated time (fetch timeout 2 s + election
# timeout up to 2 s + backoff up to 1 s, twice over, for a failed first round).
LIVENESS_BOUND_MS = 10_000


@pytest.mark.parametrize(("first", "last"), CHUNKS, ids=[f"seeds{a}-{b}" for a, b in CHUNKS])
def test_invariants_hold_for_every_seed(first: int, last: int) -> None:
    for seed in range(first, last):
        result = Simulation(seed, mix_for_seed(seed), liveness_bound_ms=LIVENESS_BOUND_MS).run()
        assert result.acked > 0
        assert result.recovery_ms <= LIVENESS_BOUND_MS
        # Stickiness and the epoch bound never refuse real traffic: the largest
        # jump a real request asks for stays far below the bound.
        assert result.refused == 0, f"seed {seed}: a real request was refused"
        assert result.max_epoch_gap <= RaftConfig(1, frozenset({1})).max_epoch_jump // 100


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_five_voters_and_an_observer(mix: str) -> None:
    for seed in range(5):
        result = Simulation(seed, MIXES[mix], voters=5, observers=1).run()
        assert result.acked > 0


def test_a_seed_replays_exactly() -> None:
    a = Simulation(42, MIXES["chaos"]).run()
    b = Simulation(42, MIXES["chaos"]).run()
    assert a == b


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_a_planted_forger_is_refused_and_cannot_exhaust_the_epoch(mix: str) -> None:
    """Forged Vote, BeginQuorumEpoch and EndQuorumEpoch claiming voters, half at
    MAX_EPOCH-1 or MAX_EPOCH, half five epochs ahead, during the faults: the far
    ones are refused, the invariants hold, and a write commits after the heal."""
    bound = RaftConfig(1, frozenset({1})).max_epoch_jump
    for seed in range(10):
        result = Simulation(
            seed, MIXES[mix], forger=True, liveness_bound_ms=LIVENESS_BOUND_MS
        ).run()
        assert result.forged > 0 and result.refused > 0
        assert result.max_epoch < 2 * bound
        assert result.acked > 0 and result.recovery_ms <= LIVENESS_BOUND_MS


def test_the_forger_check_catches_a_node_without_the_bound() -> None:
    """The planted bug: nodes that take any epoch a request names. The same
    forger then carries the quorum to the int32 edge, which the test above
    would catch."""

    def unbounded(config: RaftConfig, *args: object) -> RaftNode:
        return RaftNode(dataclasses.replace(config, max_epoch_jump=MAX_EPOCH), *args)  # type: ignore[arg-type]

    for seed in range(3):
        sim = Simulation(seed, MIXES["chaos"], forger=True, node_factory=unbounded)
        with contextlib.suppress(InvariantViolation):  # often wedged for good: liveness
            sim.run()
        assert sim.max_epoch >= MAX_EPOCH - 1
