"""Wires one quorum node together: stores, driver, gRPC server, health, reflection.

The gRPC server carries the Raft protocol, the QuorumLog write service, the
standard health service (SERVING only while this node knows a leader, so a load
balancer or Kubernetes probe sends nothing to a node that cannot make progress)
and server reflection (so `grpcurl` works without the .proto files); with an
authorizer, reflection needs DESCRIBE on the cluster
(`standard_services_access`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from quorum.common.channels import MAX_MESSAGE_BYTES
from quorum.common.channels import listen as listen_on
from quorum.common.tls import TlsSettings
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.log.api import LogStore, QuorumStateStore
from quorum.raft.config import RaftConfig
from quorum.raft.effects import RoleChanged
from quorum.rpc.servers import new_server, stop_server
from quorum.server.access import AccessControl
from quorum.server.driver import AppliedState, RaftDriver
from quorum.server.health_service import QuorumHealth
from quorum.server.quorum_log_servicer import QuorumLogServicer
from quorum.server.raft_servicer import RaftQuorumServicer
from quorum.server.standard_services_access import AuthorizeStandardServices
from quorum.server.transport import GrpcTransport
from quorum.server.voter_addresses import VoterAddresses
from quorum.server.voter_identity import VoterIdentity
from quorum.server.voter_updates import VoterUpdates
from snapshots.api import SnapshotStore

SERVICES = tuple(
    pb.DESCRIPTOR.services_by_name[name].full_name for name in ("RaftQuorum", "QuorumLog")
)


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
        snapshot_store: SnapshotStore | None = None,
        request_timeout_ms: int = 2000,
        validate_record: Callable[[bytes], str | None] | None = None,
        add_services: Callable[[grpc.aio.Server, RaftDriver], list[str]] | None = None,
        max_request_bytes: int = MAX_MESSAGE_BYTES,
        directory_id: str = "",
        tls: TlsSettings | None = None,
        access: AccessControl | None = None,
        identity: VoterIdentity | None = None,
        snapshot_retain_count: int = 2,
        applied_state: AppliedState | None = None,
        advertised: str | None = None,
    ) -> None:
        others = {peer: addr for peer, addr in peers.items() if peer != config.node_id}
        majority = max(len(config.voters), len(config.bootstrap_ids)) // 2 + 1
        self.transport = GrpcTransport(
            others,
            cluster_id,
            config.fetch_max_wait_ms,
            request_timeout_ms,
            majority,
            reconnect_backoff_max_ms=config.election_timeout_ms,
            tls=tls,
        )
        self.driver = RaftDriver(
            config,
            log_store,
            state_store,
            self.transport,
            snapshot_store,
            snapshot_retain_count=snapshot_retain_count,
            applied_state=applied_state,
        )
        guards = [AuthorizeStandardServices(access)] if access is not None else []
        self.server = new_server(max_request_bytes, guards)
        addresses = VoterAddresses(peers, lambda: self.driver.core.current_voter_set())
        pb_grpc.add_RaftQuorumServicer_to_server(
            RaftQuorumServicer(
                self.driver,
                cluster_id,
                config.fetch_max_wait_ms,
                addresses,
                listen,
                access,
                directory_id,
                identity,
            ),
            self.server,
        )
        pb_grpc.add_QuorumLogServicer_to_server(
            QuorumLogServicer(self.driver, cluster_id, addresses, validate_record, access),
            self.server,
        )
        extra = add_services(self.server, self.driver) if add_services else []
        self.health = QuorumHealth()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (*SERVICES, *extra, health.SERVICE_NAME, reflection.SERVICE_NAME), self.server
        )
        self.driver.on_role_change.append(self._update_health)
        self.port = listen_on(self.server, listen, tls)
        self._health_tasks: set[asyncio.Task[None]] = set()
        self.voter_updates = VoterUpdates(
            self.driver, self.transport, advertised or listen, cluster_id, tls
        )

    async def start(self) -> None:
        await self._set_health(False)
        await self.server.start()
        self.driver.start()
        self.voter_updates.start()

    async def stop(self, resign: bool = True) -> None:
        await self.voter_updates.stop()
        await self.driver.stop(resign=resign)
        await stop_server(self.server, 0.2)
        await self.transport.close()

    def _update_health(self, change: RoleChanged) -> None:
        task = asyncio.get_running_loop().create_task(
            self._set_health(change.leader_id is not None)
        )
        self._health_tasks.add(task)
        task.add_done_callback(self._health_tasks.discard)

    async def _set_health(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for service in ("", *SERVICES):
            await self.health.set(service, status)
