"""The simulator over many seeds and every fault mix. SIM_SEEDS sets how many
(CI runs 1,000; `make test SIM_SEEDS=20000` runs more)."""

import os

import pytest

from quorum.sim.cluster import Simulation
from quorum.sim.faults import MIXES, mix_for_seed

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


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_five_voters_and_an_observer(mix: str) -> None:
    for seed in range(5):
        result = Simulation(seed, MIXES[mix], voters=5, observers=1).run()
        assert result.acked > 0


def test_a_seed_replays_exactly() -> None:
    a = Simulation(42, MIXES["chaos"]).run()
    b = Simulation(42, MIXES["chaos"]).run()
    assert a == b
