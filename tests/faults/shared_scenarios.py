"""Scenario bodies that run on any fault layer: through the TCP proxies
(`test_scenarios.py`) and on packets between network namespaces
(`netns/test_netns_scenarios.py`). Only the way a fault is put on the links
differs; the workload, the timeline, the checkers and the assertions are these.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from checkers import OK, check_linearizable
from fault_cluster import FaultCluster, describe, name, to_thread
from workload import REGISTER_INITIAL, Workload, running

NOT_LEADING = {"resigned", "follower", "prospective", "candidate", "unattached"}


async def role_of(fc: FaultCluster[Any], node: int) -> str:
    proc = fc.cluster.procs[node]
    try:
        return str((await describe(proc.address, fc.cluster.cluster_id)).role)
    except Exception:
        return "unreachable"


async def wait_role(fc: FaultCluster[Any], node: int, roles: set[str], timeout_s: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if await role_of(fc, node) in roles:
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"node {node} not {roles} within {timeout_s}s")


def leader_isolation(fc: FaultCluster[Any], label: str) -> None:
    """Scenario 1. The leader loses both followers (no process killed, nothing
    refused): a new leader is elected, the old one resigns by check-quorum and
    acknowledges no write issued after the cut; healed, it follows and drops its
    uncommitted tail. Reads served by the old leader's image (the planted bug)
    are caught."""
    old = fc.leader()
    others = [n for n in fc.ids if n != old]

    async def scenario() -> tuple[Workload, Workload, float, float, float, float]:
        workload, stale = fc.workload(), fc.workload(appenders=0, stale_reads_from=old)
        async with running(workload):
            await asyncio.sleep(2)
            cut = time.monotonic()
            await to_thread(fc.net.isolate, name(old))
            cut_done = time.monotonic()
            async with running(stale):
                resigned = await wait_role(fc, old, NOT_LEADING, 10)
                new = await to_thread(fc.leader, others)
                await asyncio.sleep(2)  # writes commit under the new leader meanwhile
            tail = await describe(fc.cluster.procs[old].address, fc.cluster.cluster_id)
            heal = time.monotonic()
            await to_thread(fc.net.heal)
            await asyncio.sleep(3)
        print(f"old leader {old} resigned {resigned:.2f}s after the cut; new leader {new}; "
              f"old leader's log end {tail.log_end_offset}, its high watermark "
              f"{tail.high_watermark}")  # fmt: skip
        return workload, stale, cut, cut_done, heal, resigned

    workload, stale, cut, cut_done, heal, resigned = asyncio.run(scenario())
    late = [
        op for op in workload.appends if op.node == old and op.outcome == OK and op.call > cut_done
    ]
    assert not late, f"the isolated leader acknowledged writes issued after the cut: {late[:3]}"
    assert resigned < 6.0  # check-quorum: within about the fetch timeout (2 s)
    figures = fc.check(workload, label, (cut, heal))
    views = fc.wait_converged()
    assert views[old].role == "follower" and views[old].leader_id != old
    assert figures["writes_lost"] == 0
    planted = check_linearizable(workload.register + stale.register, REGISTER_INITIAL)
    assert not planted.ok, "stale reads from the partitioned old leader went unnoticed"
    print(f"planted stale reads caught: {planted.message}")


def impaired_follower(
    fc: FaultCluster[Any],
    impair: Callable[[str], None],
    label: str,
    dropped: Callable[[int], int] = lambda follower: 0,
) -> dict[str, float]:
    """Scenario 4. One follower's links impaired (`impair(its name)`) for 6 s
    under one appender: every write must still commit, through the other
    follower. Returns commit latency before and during the fault, and what
    `dropped(follower)` counted meanwhile (frames a packet-level fault dropped)."""
    leader = fc.leader()
    follower = next(n for n in fc.ids if n != leader)

    async def scenario() -> tuple[Workload, float, float, int]:
        workload = fc.workload(appenders=1, registers=0)
        async with running(workload):
            await asyncio.sleep(3)
            start = time.monotonic()
            before = await to_thread(dropped, follower)
            await to_thread(impair, name(follower))
            await asyncio.sleep(6)
            lost = await to_thread(dropped, follower) - before
            heal = time.monotonic()
            await to_thread(fc.net.heal)
            await asyncio.sleep(2)
        return workload, start, heal, lost

    workload, start, heal, lost = asyncio.run(scenario())

    def latencies(begin: float, end: float) -> list[float]:
        return sorted(
            op.ret - op.call
            for op in workload.appends
            if op.outcome == OK and op.ret and begin + 0.5 < op.call < end
        )

    fast, slowed = latencies(0, start), latencies(start, heal)
    figures = {
        "p50_fast_ms": statistics.median(fast) * 1000,
        "p50_ms": statistics.median(slowed) * 1000,
        "p99_ms": slowed[int(0.99 * (len(slowed) - 1))] * 1000,
        "frames_dropped": lost,
    }
    print(f"{label} on follower {follower}'s links: commit latency p50 "
          f"{figures['p50_fast_ms']:.1f} ms before, {figures['p50_ms']:.1f} ms during "
          f"(p99 {figures['p99_ms']:.1f} ms); {lost} frames dropped")  # fmt: skip
    checked = fc.check(workload, label, (start, heal))
    assert checked["writes_lost"] == 0
    # nowhere near the impaired link: the other follower carries the majority
    assert figures["p50_ms"] < max(3 * figures["p50_fast_ms"], figures["p50_fast_ms"] + 30)
    assert figures["p99_ms"] < 150
    return figures
