"""Two scenarios that pull a follower's suspicion of its leader both ways.

* A **stall**: the leader's process is paused for `pause_ms` (SIGSTOP, a swap
  storm, a long GC-like pause). It neither sends nor answers, but what its peers
  send it waits in its sockets, as TCP keeps it, and is handled when it resumes.
  Its peers cannot tell this from a cut until it ends; a stall shorter than
  `STALL_TOLERATED_MS` must change no leader.
* An **isolation**: every link to and from the leader blackholed (no reset, as
  behind a proxy that acknowledges what it drops). The other voters must elect
  a leader and commit its first record within `ISOLATION_BOUND_MS` of the cut.

A follower that suspects too soon fails the first; one that suspects too late
(or never) fails the second. Both run on the `calm` mix (TCP's view of the
network: nothing lost, a few ms of delay), idle or under writes, with the
simulator's invariants checked after every event as in every run.

    python -m quorum.sim.stalls --seeds 200 --pause-ms 600,900,1000
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from quorum.raft.effects import Role
from quorum.raft.node import RaftNode
from quorum.sim.cluster import NodeFactory, Simulation
from quorum.sim.faults import MIXES, FaultMix

STALL_TOLERATED_MS = 1000
ISOLATION_BOUND_MS = 1100
SETTLE_MS = 3000  # after the fault, as bench/partition_failover.py waits
WARM_UP_MS = 3000
# A loaded machine: fsyncs of up to 400 ms, so the followers' fetch clocks drift
# apart (one waits for its flush while the other fetches).
SLOW_DISKS = FaultMix("slow-disks", max_flush_ms=400.0)


@dataclass(frozen=True, slots=True)
class StallOutcome:
    seed: int
    pause_ms: int
    writes: bool
    leader: int
    leader_changes: int  # leaders elected from the pause to the end of the settle time


def _started(
    seed: int, writes: bool, factory: NodeFactory, slow_disks: bool = False
) -> tuple[Simulation, int]:
    """A calm cluster after its warm-up, and its leader (one with a committed epoch)."""
    sim = Simulation(seed, SLOW_DISKS if slow_disks else MIXES["calm"], node_factory=factory)
    for node in sim.nodes.values():
        sim._start_node(node)
    if writes:
        sim._schedule(1_000, "client")
    # A phase drawn per seed, so the fault lands anywhere in the fetch cycle.
    sim.advance_to((WARM_UP_MS + sim.rng.randrange(0, 1000)) * 1000)
    leader = _committed_leader(sim)
    if leader is None:
        raise AssertionError(f"seed {seed}: no leader after the warm-up")
    return sim, leader


def _committed_leader(sim: Simulation, besides: int | None = None) -> int | None:
    for node in sim.nodes.values():
        core = node.core
        if (
            core is not None
            and core.role is Role.LEADER
            and core.leader_committed_epoch
            and node.node_id != besides
            and sim.paused_until.get(node.node_id, 0) <= sim.now_us
        ):
            return node.node_id
    return None


def stall(
    seed: int,
    pause_ms: int,
    writes: bool,
    factory: NodeFactory = RaftNode,
    slow_disks: bool = False,
) -> StallOutcome:
    """Pause the leader for `pause_ms`, resume it, let the cluster settle."""
    sim, leader = _started(seed, writes, factory, slow_disks)
    elections = sim.elections
    resume = sim.now_us + pause_ms * 1000
    sim.paused_until[leader] = resume
    sim.advance_to(resume + SETTLE_MS * 1000)
    return StallOutcome(seed, pause_ms, writes, leader, sim.elections - elections)


def isolation_ms(
    seed: int, writes: bool, factory: NodeFactory = RaftNode, slow_disks: bool = False
) -> float | None:
    """Cut the leader off, silently: ms until another leader committed its epoch
    (None if none did within three times the bound)."""
    sim, leader = _started(seed, writes, factory, slow_disks)
    sim.silent_cuts = True
    for other in sim.nodes:
        if other != leader:
            sim.blocked |= {(leader, other), (other, leader)}
    cut_at = sim.now_us
    limit = cut_at + 3 * ISOLATION_BOUND_MS * 1000
    found: Callable[[], bool] = lambda: _committed_leader(sim, besides=leader) is not None  # noqa: E731
    if not sim.advance_to(limit, stop=found):
        return None
    return (sim.now_us - cut_at) / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quorum.sim.stalls", description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--pause-ms", default="600,900,1000,1200")
    parser.add_argument("--slow-disks", action="store_true", help="fsyncs of up to 400 ms")
    args = parser.parse_args(argv)
    slow = args.slow_disks
    seeds = range(args.seed, args.seed + args.seeds)
    for pause_ms in (int(ms) for ms in args.pause_ms.split(",")):
        for writes in (False, True):
            outcomes = [stall(s, pause_ms, writes, slow_disks=slow) for s in seeds]
            changed = sum(outcome.leader_changes > 0 for outcome in outcomes)
            print(
                f"stall {pause_ms} ms, {'writes' if writes else 'idle'}: "
                f"leader changed in {changed} of {len(seeds)} seeds"
            )
    for writes in (False, True):
        found = [isolation_ms(s, writes, slow_disks=slow) for s in seeds]
        took = sorted(ms for ms in found if ms is not None)
        missing = len(found) - len(took)
        summary = f"median {took[len(took) // 2]:.0f} ms, max {took[-1]:.0f} ms" if took else ""
        print(
            f"isolation, {'writes' if writes else 'idle'}: {summary}, "
            f"{sum(ms > ISOLATION_BOUND_MS for ms in took) + missing} of {len(found)} "
            f"beyond {ISOLATION_BOUND_MS} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
