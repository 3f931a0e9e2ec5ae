"""Three drivers in one process, talking real gRPC over loopback."""

from __future__ import annotations

import asyncio
import socket

from quorum.log.memory import MemoryLogStore, MemoryQuorumStateStore
from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role
from quorum.server.node_runtime import QuorumNode

FAST = {"election_timeout_ms": 300, "fetch_timeout_ms": 600, "election_backoff_max_ms": 200}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_nodes(cluster_ids: dict[int, str] | None = None) -> list[QuorumNode]:
    ports = {i: free_port() for i in (1, 2, 3)}
    peers = {i: f"127.0.0.1:{p}" for i, p in ports.items()}
    voters = frozenset(ports)
    return [
        QuorumNode(
            RaftConfig(i, voters, **FAST),
            peers[i],
            peers,
            (cluster_ids or {}).get(i, "cluster-a"),
            MemoryLogStore(),
            MemoryQuorumStateStore(),
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


def test_elect_commit_and_fail_over_over_grpc() -> None:
    async def scenario() -> None:
        nodes = make_nodes()
        for n in nodes:
            await n.start()
        try:
            leader = await wait_for_leader(nodes)
            results = await asyncio.gather(
                *(leader.driver.propose([b"w%d" % i]) for i in range(20))
            )
            last = max(r.last_offset for r in results)
            await asyncio.sleep(0.3)
            for n in nodes:
                assert n.driver.core.high_watermark > last
                batch = n.driver.core.log.batch_at(results[0].first_offset)
                assert batch is not None and b"w0" in batch.records
            # Graceful resignation hands leadership over well inside the election timeout.
            epoch = leader.driver.core.epoch
            await leader.stop(resign=True)
            rest = [n for n in nodes if n is not leader]
            started = asyncio.get_running_loop().time()
            new = await wait_for_leader(rest)
            assert new.driver.core.epoch == epoch + 1
            assert asyncio.get_running_loop().time() - started < 1.0
            result = await new.driver.propose([b"after"])
            assert result.epoch == epoch + 1
        finally:
            for n in nodes:
                await n.stop(resign=False)

    asyncio.run(scenario())


def test_a_node_of_another_cluster_is_refused_and_changes_nothing() -> None:
    async def scenario() -> None:
        nodes = make_nodes({3: "cluster-b"})
        stranger = nodes[2]
        for n in nodes:
            await n.start()
        try:
            leader = await wait_for_leader(nodes[:2])
            await leader.driver.propose([b"x"])
            await asyncio.sleep(1.0)
            assert stranger.driver.core.log.end_offset == 0
            assert stranger.driver.core.role is not Role.LEADER
            assert all(n.driver.core.epoch == leader.driver.core.epoch for n in nodes[:2])
        finally:
            for n in nodes:
                await n.stop(resign=False)

    asyncio.run(scenario())


def test_single_voter_quorum_commits_alone() -> None:
    async def scenario() -> None:
        port = free_port()
        node = QuorumNode(
            RaftConfig(1, frozenset({1}), **FAST),
            f"127.0.0.1:{port}",
            {1: f"127.0.0.1:{port}"},
            "c",
            MemoryLogStore(),
            MemoryQuorumStateStore(),
        )
        await node.start()
        try:
            await wait_for_leader([node])
            result = await node.driver.propose([b"solo"])
            assert node.driver.core.high_watermark > result.last_offset
        finally:
            await node.stop()

    asyncio.run(scenario())
