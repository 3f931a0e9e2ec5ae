"""Three Raft nodes in one process, talking real gRPC over loopback: the set-up
the server tests share (memory logs, fast timeouts, every node stopped however
the test ends)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable

from quorum.log.memory import MemoryLogStore, MemoryQuorumStateStore
from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role
from quorum.server.node_runtime import QuorumNode

FAST = {"election_timeout_ms": 300, "fetch_timeout_ms": 600, "election_backoff_max_ms": 200}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_nodes(
    cluster_ids: dict[int, str] | None = None,
    addresses: dict[int, str] | None = None,
    validate_record: Callable[[bytes], str | None] | None = None,
) -> list[QuorumNode]:
    ports = {i: free_port() for i in (1, 2, 3)}
    peers = {i: f"127.0.0.1:{p}" for i, p in ports.items()}
    if addresses is not None:
        addresses.update(peers)
    voters = frozenset(ports)
    return [
        QuorumNode(
            RaftConfig(i, voters, **FAST),
            peers[i],
            peers,
            (cluster_ids or {}).get(i, "cluster-a"),
            MemoryLogStore(),
            MemoryQuorumStateStore(),
            validate_record=validate_record,
        )
        for i in sorted(ports)
    ]


async def wait_for_leader(nodes: list[QuorumNode], timeout: float = 10.0) -> QuorumNode:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        leaders = [n for n in nodes if n.driver.core.role is Role.LEADER]
        if len(leaders) == 1 and leaders[0].driver.core.high_watermark > 0:
            return leaders[0]
        await asyncio.sleep(0.02)
    raise AssertionError("no leader")


@contextlib.asynccontextmanager
async def running(nodes: list[QuorumNode]) -> AsyncIterator[list[QuorumNode]]:
    """Start every node; stop every one (without handing over) however the test ends."""
    for n in nodes:
        await n.start()
    try:
        yield nodes
    finally:
        for n in nodes:
            await n.stop(resign=False)
