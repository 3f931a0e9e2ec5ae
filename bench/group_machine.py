"""The group machine's own CPU for one rebalance of a large group, no I/O.

N members join within the initial rebalance delay (KIP-394: MEMBER_ID_REQUIRED,
then again with the id), the join phase completes, everyone syncs; then every
member rejoins with new metadata (a rebalance), the join completes at the last
rejoin and everyone syncs again. What is timed is
the pure `GroupMachine` (seed 002's rules): the coordinator's share of a
rebalance before any network or log cost.

    .venv/bin/python bench/group_machine.py [--members 100,500,1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit

from broker_agent.groups.effects import JoinAnswer
from broker_agent.groups.group import GroupConfig
from broker_agent.groups.machine import GroupMachine
from broker_agent.groups.state import GroupState

SUBSCRIPTION = b"\x00\x01\x00\x00\x00\x01\x00\x05topic\xff\xff\xff\xff"
PROTOCOLS = [("range", SUBSCRIPTION), ("roundrobin", SUBSCRIPTION)]


def join_all(m: GroupMachine, ids: list[str], protocols: list[tuple[str, bytes]], now: int) -> None:
    for mid in ids:
        m.join("g", mid, None, "c", "/h", 10_000, 30_000, "consumer", protocols, True, now)


def sync_all(m: GroupMachine, ids: list[str], now: int) -> None:
    group = m.groups["g"]
    leader = group.leader
    assert leader is not None and group.state is GroupState.COMPLETING_REBALANCE
    for mid in ids:
        if mid != leader:
            m.sync("g", mid, None, group.generation, None, None, {}, now)
    m.sync("g", leader, None, group.generation, None, None, {i: b"a" * 40 for i in ids}, now)
    assert group.state is GroupState.STABLE


def one(members: int) -> None:
    m = GroupMachine(GroupConfig())  # group.initial.rebalance.delay.ms 3 s: all join in it
    first = time.process_time()
    ids = []
    for _ in range(members):
        out = m.join("g", "", None, "c", "/h", 10_000, 30_000, "consumer", PROTOCOLS, True, 0)
        assert isinstance(out.answer, JoinAnswer)
        ids.append(out.answer.member_id)
    join_all(m, ids, PROTOCOLS, 0)
    m.tick(3_000)
    sync_all(m, ids, 3_000)
    formed = time.process_time() - first
    started = time.process_time()
    join_all(m, ids, [(name, data + b"!") for name, data in PROTOCOLS], 4_000)
    sync_all(m, ids, 4_000)
    rebalance = time.process_time() - started
    assert len(m.groups["g"].members) == members
    emit(
        measurement="group_machine_cpu_ms",
        members=members,
        group_formed_ms=round(formed * 1000, 1),
        rebalance_ms=round(rebalance * 1000, 1),
        load_average=round(os.getloadavg()[0], 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="100,500,1000")
    args = parser.parse_args()
    for n in (int(x) for x in args.members.split(",")):
        one(n)


if __name__ == "__main__":
    main()
