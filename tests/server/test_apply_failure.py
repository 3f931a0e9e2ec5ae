"""A committed record a replica cannot understand stops it instead of being skipped.

Three drivers in one process over real gRPC, each with a QuorumController as its
Raft listener applying committed batches to a MetadataImage. A
record from a newer software version (envelope version 2) is committed through
the raw proposal path, as a newer active controller would write it: every replica
that learns it is committed (a majority at least) must refuse to apply it, report
why, and stop serving; no replica may apply past it.
"""

from __future__ import annotations

import asyncio

from grpc_nodes import FAST, free_port

from quorum.controller.controller import QuorumController
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode, noop
from quorum.gen import metadata_pb2 as md
from quorum.log.memory import MemoryLogStore, MemoryQuorumStateStore
from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role
from quorum.server.node_runtime import QuorumNode
from snapshots.memory import MemorySnapshotStore
from snapshots.policy import SnapshotPolicy


def test_every_replica_stops_at_a_record_version_it_does_not_know() -> None:
    async def scenario() -> None:
        peers = {i: f"127.0.0.1:{free_port()}" for i in (1, 2, 3)}
        images = {i: MetadataImage() for i in peers}
        failures: dict[int, str] = {}
        nodes = []
        for i in peers:
            node = QuorumNode(
                RaftConfig(i, frozenset(peers), **FAST), peers[i], peers, "cluster-a",
                MemoryLogStore(), MemoryQuorumStateStore(), MemorySnapshotStore(),
            )  # fmt: skip
            QuorumController(
                node.driver, images[i], "cluster-a", peers, snapshot_policy=SnapshotPolicy()
            )
            node.driver.on_apply_failed.append(lambda reason, i=i: failures.__setitem__(i, reason))
            nodes.append(node)
        for node in nodes:
            await node.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while not any(n.driver.core.leader_committed_epoch for n in nodes):
                assert loop.time() < deadline, "no leader"
                await asyncio.sleep(0.02)
            leader = next(n for n in nodes if n.driver.core.role is Role.LEADER)
            ok = await leader.driver.propose([noop(b"fine")])
            newer = encode(md.MetadataRecord(version=2, no_op=md.NoOpRecord()))
            proposal = asyncio.ensure_future(leader.driver.propose([newer, noop(b"after")]))
            while len(failures) < 2:
                assert loop.time() < deadline + 10, f"only {sorted(failures)} stopped"
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.5)  # give the third every chance to apply past it
            proposal.cancel()
            for i, reason in failures.items():
                assert "version 2" in reason and "upgrade" in reason, reason
                assert next(n for n in nodes if n.driver.config.node_id == i).driver.closed
            bad_offset = ok.last_offset + 1
            assert all(image.applied_offset <= bad_offset for image in images.values())
        finally:
            for node in nodes:
                await node.stop()

    asyncio.run(scenario())
