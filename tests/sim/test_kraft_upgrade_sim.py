"""The simulator from kraft.version 0: the operator's first change is the upgrade
to 1 (a KRaftVersionRecord and the static voters as the first VotersRecord),
then voters are added and removed, while partitions, crashes, drops and
elections go on. The invariants hold (one leader per epoch under any voter set,
no committed entry lost, at most one uncommitted change); an upgrade cut by a
new leader is undone and asked again.

KRAFT_UPGRADE_SEEDS sets how many seeds (default 100: the membership sweep
covers the voter changes themselves over 1,000).
"""

from __future__ import annotations

import os

import pytest

from quorum.sim.cluster import Simulation
from quorum.sim.faults import mix_for_seed

SEEDS = int(os.environ.get("KRAFT_UPGRADE_SEEDS", "100"))
CHUNK = 50
CHUNKS = [(start, min(start + CHUNK, SEEDS)) for start in range(0, SEEDS, CHUNK)]


def upgrade_run(seed: int) -> Simulation:
    return Simulation(
        seed,
        mix_for_seed(seed),
        observers=2,
        kraft_upgrade=True,
        fault_ms=4000,
        liveness_bound_ms=10_000,
    )


@pytest.mark.parametrize(("first", "last"), CHUNKS, ids=[f"seeds{a}-{b}" for a, b in CHUNKS])
def test_invariants_hold_across_the_upgrade_and_later_changes(first: int, last: int) -> None:
    upgraded = changed = 0
    for seed in range(first, last):
        sim = upgrade_run(seed)
        lines: list[str] = []
        sim.trace = lines.append
        result = sim.run()
        assert result.acked > 0
        # The most advanced replica's committed state holds the upgrade.
        cores = [n.core for n in sim.nodes.values() if n.core is not None]
        best = max(cores, key=lambda core: core.high_watermark)
        if any("upgrade kraft.version to 1" in line for line in lines) and best.kraft_version:
            upgraded += 1
        changed += sum("appends add voter" in x or "appends remove voter" in x for x in lines)
    # Nearly every run upgrades (a run may end its faults before a leader could),
    # and voters then change.
    assert upgraded >= (last - first) * 3 // 4, upgraded
    assert changed >= last - first


def test_an_upgrade_seed_replays_exactly_and_names_its_mode() -> None:
    assert upgrade_run(7).run() == upgrade_run(7).run()
    assert "--kraft-upgrade" in upgrade_run(7).replay_command()
