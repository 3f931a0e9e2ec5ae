"""A voter keeps its entry in the voter set true (KIP-853's UpdateRaftVoter, the
sending side).

A controller restarted with a new listener (another address or port) is still
the voter its id and directory id name, but the other voters would go on
calling the old endpoint the VotersRecord holds. So, with kraft.version 1, a
voter that follows a leader and finds its entry differs from what it runs with
(its advertised CONTROLLER address, its entry in controller.quorum.voters or
else its listener; the kraft.version range it supports) asks the leader
to write the new entry; a leader whose own entry is stale writes it directly.
It asks again every election timeout until the entry matches, and logs each
refusal once (a change pending elsewhere is REQUEST_TIMED_OUT and passes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc

from quorum.common.channels import open_channel
from quorum.common.tls import TlsSettings
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.raft.effects import Role
from quorum.raft.voters import KRAFT_VERSION_DYNAMIC, Endpoint, Voter, VoterChangeRefused
from quorum.rpc.wire_errors import wire_error
from quorum.server.driver import RaftDriver
from quorum.server.transport import GrpcTransport

log = logging.getLogger(__name__)

LISTENER_NAME = "CONTROLLER"
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


class VoterUpdates:
    def __init__(
        self,
        driver: RaftDriver,
        transport: GrpcTransport,
        advertised: str,
        cluster_id: str,
        tls: TlsSettings | None = None,
    ) -> None:
        self._driver = driver
        self._transport = transport
        self._cluster_id = cluster_id
        self._tls = tls
        host, _, port = advertised.rpartition(":")
        self._endpoint = Endpoint(LISTENER_NAME, host.strip("[]"), int(port))
        self._task: asyncio.Task[None] | None = None
        self._last_problem = ""

    def start(self) -> None:
        if self._endpoint.host in WILDCARD_HOSTS:
            # Peers cannot dial a wildcard: only an address named for this node
            # (its entry in controller.quorum.voters) may replace its entry.
            return
        # Run at kraft.version 0 too: `quorumctl features upgrade` raises it at
        # runtime, and the entries must follow without a restart (`_once`).
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def wanted(self) -> Voter | None:
        """The entry this voter should have, when the voter set in force holds
        another one for it (None when it is no voter or its entry is right)."""
        core = self._driver.core
        config = self._driver.config
        if not core.is_voter:
            return None
        current = core.current_voter_set().voter(config.node_id)
        if current is None or not current.directory_id:
            return None  # the static voters: nothing to update
        wanted = Voter(
            config.node_id, current.directory_id, (self._endpoint,), 0, KRAFT_VERSION_DYNAMIC
        )
        return None if wanted == current else wanted

    async def _run(self) -> None:
        interval_s = max(self._driver.config.election_timeout_ms / 1000, 0.2)
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self._once()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a refusal or an unreachable leader: ask again
                self._note(f"{type(err).__name__}: {err}")

    async def _once(self) -> None:
        driver = self._driver
        if driver.core.kraft_version < KRAFT_VERSION_DYNAMIC:
            return
        wanted = self.wanted()
        if wanted is None or driver.core.voter_change_pending():
            return
        if driver.role is Role.LEADER:
            try:
                await driver.change_voters(lambda now: driver.core.update_voter(wanted, now))
            except VoterChangeRefused as err:
                self._note(str(err))
                return
            log.info("updated this voter's entry in the voter set: %s", _shown(wanted))
            return
        leader = driver.leader_id
        if driver.role is not Role.FOLLOWER or leader is None:
            return
        address = self._transport.peer_address(leader)
        if not address:
            return
        request = api.UpdateRaftVoterRequest(
            cluster_id=self._cluster_id,
            current_leader_epoch=driver.epoch,
            voter_id=wanted.voter_id,
            voter_directory_id=wanted.directory_id,
            listeners=[
                api.RaftVoterEndpoint(name=e.name, host=e.host, port=e.port)
                for e in wanted.endpoints
            ],
            min_kraft_version=wanted.min_kraft_version,
            max_kraft_version=wanted.max_kraft_version,
        )
        channel = open_channel(address, 1000, self._tls)
        try:
            reply = await api_grpc.AdminStub(channel).UpdateRaftVoter(request, timeout=10)
        except grpc.aio.AioRpcError as err:
            error = wire_error(err)
            name = error.error.name if error.error is not None else error.status.name
            self._note(f"leader {leader} at {address}: {name}: {error.message}")
            return
        finally:
            await channel.close()
        log.info(
            "asked leader %d to update this voter's entry: %s (VotersRecord at offset %d)",
            leader,
            _shown(wanted),
            reply.offset,
        )
        self._last_problem = ""

    def _note(self, problem: str) -> None:
        if problem != self._last_problem:
            log.warning("cannot update this voter's entry in the voter set yet: %s", problem)
            self._last_problem = problem


def _shown(voter: Voter) -> str:
    endpoints = ",".join(f"{e.name}://{e.host}:{e.port}" for e in voter.endpoints)
    return (
        f"voter {voter.voter_id} ({voter.directory_id}) at {endpoints}, kraft.version "
        f"{voter.min_kraft_version}-{voter.max_kraft_version}"
    )
