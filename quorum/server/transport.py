"""The gRPC side of the quorum protocol: outgoing calls to peers and the servicer.

The core speaks in messages; gRPC speaks in calls. Outgoing requests become
unary calls whose answers are fed back to the driver; incoming calls wait for the
core's answer addressed to the caller (see `RaftDriver.handle_request`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import grpc

from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from quorum.server.codec import from_proto, to_proto
from quorum.server.driver import RaftDriver

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 2.0


class GrpcTransport:
    """One channel per peer; every request is a unary call with a deadline."""

    def __init__(self, peers: Mapping[int, str], cluster_id: str, fetch_max_wait_ms: int) -> None:
        self._cluster_id = cluster_id
        self._channels = {peer: grpc.aio.insecure_channel(addr) for peer, addr in peers.items()}
        self._stubs = {peer: pb_grpc.RaftQuorumStub(ch) for peer, ch in self._channels.items()}
        self._fetch_timeout_s = fetch_max_wait_ms / 1000 + CALL_TIMEOUT_S
        self._tasks: set[asyncio.Task[None]] = set()
        self.driver: RaftDriver | None = None

    def send_request(self, destination: int, message: Message) -> None:
        if destination not in self._stubs:
            log.warning("no address for node %d; dropping %s", destination, type(message).__name__)
            return
        task = asyncio.get_running_loop().create_task(self._call(destination, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, destination: int, message: Message) -> None:
        stub = self._stubs[destination]
        wire = to_proto(message, self._cluster_id)
        try:
            match message:
                case FetchRequest():
                    reply = await stub.Fetch(wire, timeout=self._fetch_timeout_s)
                case VoteRequest():
                    reply = await stub.Vote(wire, timeout=CALL_TIMEOUT_S)
                case BeginQuorumEpochRequest():
                    reply = await stub.BeginQuorumEpoch(wire, timeout=CALL_TIMEOUT_S)
                case EndQuorumEpochRequest():
                    reply = await stub.EndQuorumEpoch(wire, timeout=CALL_TIMEOUT_S)
                case _:
                    raise TypeError(f"not a request: {message!r}")
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNAVAILABLE and self.driver is not None:
                self.driver.peer_unreachable(destination)
            return
        if self.driver is not None:
            self.driver.receive(destination, from_proto(reply))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for channel in self._channels.values():
            await channel.close()


class RaftQuorumServicer(pb_grpc.RaftQuorumServicer):
    """Checks the cluster id, then lets the core answer."""

    def __init__(self, driver: RaftDriver, cluster_id: str, fetch_max_wait_ms: int) -> None:
        self._driver = driver
        self._cluster_id = cluster_id
        self._fetch_wait_s = fetch_max_wait_ms / 1000 + 1.0

    def _foreign(self, cluster_id: str) -> bool:
        return cluster_id != self._cluster_id

    def _epoch(self) -> int:
        return self._driver.core.epoch

    async def _answer(self, source: int, request: Message, wait_s: float) -> object:
        answer = await self._driver.handle_request(source, request, wait_s)
        return to_proto(answer, self._cluster_id)

    async def Vote(self, request: pb.VoteRequest, context: object) -> pb.VoteResponse:
        if self._foreign(request.cluster_id):
            rejected = VoteResponse(
                self._epoch(), False, None, request.pre_vote, ErrorCode.INCONSISTENT_CLUSTER_ID
            )
            return to_proto(rejected, self._cluster_id)  # type: ignore[return-value]
        msg = from_proto(request)
        return await self._answer(request.candidate_id, msg, CALL_TIMEOUT_S)  # type: ignore[return-value]

    async def BeginQuorumEpoch(
        self, request: pb.BeginQuorumEpochRequest, context: object
    ) -> pb.BeginQuorumEpochResponse:
        if self._foreign(request.cluster_id):
            rejected = BeginQuorumEpochResponse(
                self._epoch(), None, ErrorCode.INCONSISTENT_CLUSTER_ID
            )
            return to_proto(rejected, self._cluster_id)  # type: ignore[return-value]
        msg = from_proto(request)
        return await self._answer(request.leader_id, msg, CALL_TIMEOUT_S)  # type: ignore[return-value]

    async def EndQuorumEpoch(
        self, request: pb.EndQuorumEpochRequest, context: object
    ) -> pb.EndQuorumEpochResponse:
        if self._foreign(request.cluster_id):
            rejected = EndQuorumEpochResponse(
                self._epoch(), None, ErrorCode.INCONSISTENT_CLUSTER_ID
            )
            return to_proto(rejected, self._cluster_id)  # type: ignore[return-value]
        msg = from_proto(request)
        return await self._answer(request.leader_id, msg, CALL_TIMEOUT_S)  # type: ignore[return-value]

    async def Fetch(self, request: pb.FetchRequest, context: object) -> pb.FetchResponse:
        if self._foreign(request.cluster_id):
            core = self._driver.core
            rejected = FetchResponse(
                core.epoch, None, 0, 0, error=ErrorCode.INCONSISTENT_CLUSTER_ID
            )
            return to_proto(rejected, self._cluster_id)  # type: ignore[return-value]
        msg = from_proto(request)
        return await self._answer(request.replica_id, msg, self._fetch_wait_s)  # type: ignore[return-value]
