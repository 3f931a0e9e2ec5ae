"""`features upgrade --feature kraft.version=1` asks every static voter what it
supports: a voter running older code (its DescribeQuorum carries no
max_kraft_version, read as 0) makes the upgrade INVALID_UPDATE_VERSION, and
nothing is proposed. The older voter is a real gRPC server on a real socket;
the leader's side is `KraftVersionChanges` over a leader's core state."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_nodes import free_port

from quorum.common.config import Endpoint
from quorum.gen import admin_pb2 as api
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role
from quorum.server.kraft_upgrade import KraftVersionChanges

DIRECTORY = "MvDxzVmcRsaTz33bUuRU6A"


class OlderController(pb_grpc.RaftQuorumServicer):
    """Answers DescribeQuorum as code before kraft.version 1 did: no max_kraft_version."""

    async def DescribeQuorum(self, request: Any, context: Any) -> pb.DescribeQuorumResponse:
        return pb.DescribeQuorumResponse(node_id=2, role="follower", directory_id=DIRECTORY)


@dataclass
class LeaderCore:
    """The leader's core as KraftVersionChanges reads it (role, voters, version)."""

    config: RaftConfig
    role: Role = Role.LEADER
    kraft_version: int = 0
    leader_id: int = 1
    node_id: int = 1
    upgrades: list[object] = field(default_factory=list)

    def upgrade_kraft_version(self, voters: object, now: int) -> None:
        self.upgrades.append(voters)


@dataclass
class Driver:
    core: LeaderCore


async def upgrade_with_an_older_voter(dry_run: bool) -> tuple[api.UpdateFeaturesResponse, list]:
    server = grpc.aio.server()
    pb_grpc.add_RaftQuorumServicer_to_server(OlderController(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        core = LeaderCore(RaftConfig(1, frozenset({1, 2})))
        changes = KraftVersionChanges(
            Driver(core),  # type: ignore[arg-type]
            5.0,
            {1: Endpoint("127.0.0.1", free_port()), 2: Endpoint("127.0.0.1", port)},
            DIRECTORY,
            "cluster",
        )
        request = api.UpdateFeaturesRequest(
            updates=[api.FeatureUpdate(feature="kraft.version", max_version_level=1)],
            validate_only=dry_run,
        )
        return await changes.update_features(request), core.upgrades
    finally:
        await server.stop(0)


def test_a_voter_without_kraft_version_1_support_refuses_the_upgrade() -> None:
    for dry_run in (False, True):
        reply, proposed = asyncio.run(upgrade_with_an_older_voter(dry_run))
        error = reply.results[0].error
        assert error.error_name == "INVALID_UPDATE_VERSION", error
        assert "voter 2 supports kraft.version 0 only" in error.message
        assert proposed == []
