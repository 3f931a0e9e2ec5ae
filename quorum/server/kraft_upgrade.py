"""`kraft.version` 0 -> 1 on a running static quorum (`quorumctl features upgrade
--feature kraft.version=1`, kafka-features.sh's spelling).

The feature belongs to the Raft layer, not to the metadata image: the active
controller asks every static voter (DescribeQuorum) for its directory id and
the highest kraft.version its code supports, refuses with
INVALID_UPDATE_VERSION while any voter does not answer or does not support 1,
and otherwise has the core append a KRaftVersionRecord with the static voters
as the first VotersRecord; the answer comes once that batch is committed.
From then on voters are added and removed with add-controller and
remove-controller. A downgrade is refused, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc

from quorum.common.channels import open_channel
from quorum.common.config import Endpoint as ConfigEndpoint
from quorum.common.tls import TlsSettings
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.topic_ops import api_error
from quorum.controller.write_queue import NotController
from quorum.gen import admin_pb2 as api
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.effects import Role
from quorum.raft.voters import KRAFT_VERSION_DYNAMIC, Endpoint, Voter, VoterSet
from quorum.server.driver import RaftDriver
from quorum.server.voter_changes import VoterChanges
from quorum.server.voter_identity import VoterIdentity

KRAFT_VERSION = "kraft.version"
ASK_TIMEOUT_S = 3.0
LISTENER = "CONTROLLER"


class KraftVersionChanges(VoterChanges):
    """VoterChanges, plus the kraft.version feature (which only the Raft layer
    can finalize: its records are control records)."""

    def __init__(
        self,
        driver: RaftDriver,
        timeout_s: float,
        static_voters: Mapping[int, ConfigEndpoint],
        directory_id: str,
        cluster_id: str,
        tls: TlsSettings | None = None,
        identity: VoterIdentity | None = None,
    ) -> None:
        super().__init__(driver, timeout_s, identity)
        self._static = dict(static_voters)
        self._directory_id = directory_id
        self._cluster_id = cluster_id
        self._tls = tls

    @property
    def kraft_version(self) -> int:
        return self._driver.core.kraft_version

    async def update_features(
        self, request: api.UpdateFeaturesRequest
    ) -> api.UpdateFeaturesResponse:
        """An UpdateFeatures naming kraft.version (alone: its records are not
        metadata records, so it cannot share a batch with other features)."""
        if len(request.updates) != 1:
            raise ControllerError(
                ApiError.INVALID_REQUEST, f"{KRAFT_VERSION} is updated alone, not with others"
            )
        update = request.updates[0]
        response = api.UpdateFeaturesResponse()
        result = response.results.add(feature=update.feature)
        problem = await self._upgrade(update.max_version_level, request.validate_only)
        result.error.CopyFrom(
            api_error(ApiError.INVALID_UPDATE_VERSION, problem)
            if problem
            else api_error(ApiError.NONE)
        )
        return response

    async def _upgrade(self, level: int, validate_only: bool) -> str | None:
        current = self.kraft_version
        if level == current:
            return None
        if level < current:
            return f"{KRAFT_VERSION} is {current}: it cannot be downgraded"
        if level > KRAFT_VERSION_DYNAMIC:
            return f"{KRAFT_VERSION} supports levels 0..{KRAFT_VERSION_DYNAMIC}, not {level}"
        core = self._driver.core
        if core.role is not Role.LEADER:
            raise NotController(core.leader_id if core.leader_id != core.node_id else None)
        voters, lacking = await self._gather(sorted(core.config.voters))
        if lacking:
            return (
                f"Cannot upgrade {KRAFT_VERSION} to {level}: not every voter supports it "
                f"({'; '.join(lacking)})"
            )
        if validate_only:
            return None
        await self._change(lambda now: core.upgrade_kraft_version(voters, now))
        return None

    async def _gather(self, voter_ids: list[int]) -> tuple[VoterSet, list[str]]:
        """Each static voter's directory id and supported kraft.version, asked of it."""
        found: list[Voter] = []
        lacking: list[str] = []
        me = self._driver.core.node_id
        for voter_id in voter_ids:
            endpoint = self._static.get(voter_id)
            if endpoint is None:
                lacking.append(f"voter {voter_id}: no address in controller.quorum.voters")
                continue
            if voter_id == me:
                directory_id, supported = self._directory_id, KRAFT_VERSION_DYNAMIC
            else:
                try:
                    reply = await self._ask(endpoint.address())
                except grpc.aio.AioRpcError as err:
                    lacking.append(f"voter {voter_id} did not answer: {err.code().name}")
                    continue
                directory_id, supported = reply.directory_id, reply.max_kraft_version
            if supported < KRAFT_VERSION_DYNAMIC:
                lacking.append(f"voter {voter_id} supports kraft.version 0 only")
            elif not directory_id:
                lacking.append(f"voter {voter_id} has no directory id")
            else:
                where = (Endpoint(LISTENER, endpoint.host, endpoint.port),)
                found.append(Voter(voter_id, directory_id, where, 0, supported))
        return VoterSet(tuple(found)), lacking

    async def _ask(self, address: str) -> pb.DescribeQuorumResponse:
        channel = open_channel(address, 1000, self._tls)
        try:
            stub = pb_grpc.RaftQuorumStub(channel)
            request = pb.DescribeQuorumRequest(cluster_id=self._cluster_id)
            reply: pb.DescribeQuorumResponse = await stub.DescribeQuorum(
                request, timeout=ASK_TIMEOUT_S
            )
            return reply
        finally:
            await channel.close()
