"""Wires one controller together: stores, driver, gRPC server and transport."""

from __future__ import annotations

from collections.abc import Mapping

import grpc

from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.log.api import LogStore, QuorumStateStore
from quorum.raft.config import RaftConfig
from quorum.server.driver import RaftDriver
from quorum.server.transport import GrpcTransport, RaftQuorumServicer


class QuorumNode:
    """A running Raft node: call `start()` inside an event loop, `stop()` to end."""

    def __init__(
        self,
        config: RaftConfig,
        listen: str,
        peers: Mapping[int, str],
        cluster_id: str,
        log_store: LogStore,
        state_store: QuorumStateStore,
    ) -> None:
        others = {peer: addr for peer, addr in peers.items() if peer != config.node_id}
        self.transport = GrpcTransport(others, cluster_id, config.fetch_max_wait_ms)
        self.driver = RaftDriver(config, log_store, state_store, self.transport)
        self.transport.driver = self.driver
        self.server = grpc.aio.server()
        servicer = RaftQuorumServicer(self.driver, cluster_id, config.fetch_max_wait_ms)
        pb_grpc.add_RaftQuorumServicer_to_server(servicer, self.server)
        self.port = self.server.add_insecure_port(listen)

    async def start(self) -> None:
        await self.server.start()
        self.driver.start()

    async def stop(self, resign: bool = True) -> None:
        await self.driver.stop(resign=resign)
        await self.server.stop(grace=0.2)
        await self.transport.close()
