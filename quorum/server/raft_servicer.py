"""The gRPC side of the quorum protocol, incoming: the RaftQuorum servicer.

Each call is checked (cluster id, the request's shape, the sender's identity
under mTLS) and fed to the core; the call waits for the core's answer addressed
to the caller (`RaftDriver.handle_request`). Every rejection is a non-OK gRPC
status with the Kafka error code in its rich details; a protocol answer that
carries an error (a fenced epoch, say) rides along whole, so the calling core
still learns the new epoch and leader.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar

import grpc

from quorum.common.meta_properties import directory_id_problem
from quorum.common.tls import peer_host, principal_of
from quorum.controller.api_errors import ApiError
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.effects import Role
from quorum.raft.messages import (
    ErrorCode,
    Message,
)
from quorum.raft.records import SnapshotId
from quorum.rpc.wire_errors import foreign_cluster_status, rich_status
from quorum.server.access import AccessControl, open_access
from quorum.server.describe_quorum import describe_quorum
from quorum.server.driver import RaftDriver
from quorum.server.leader_hint import leader_hint, wire_leader
from quorum.server.raft_proto import from_proto, to_proto
from quorum.server.refusals import IDENTITY
from quorum.server.transport import CALL_TIMEOUT_S
from quorum.server.voter_identity import VoterIdentity
from quorum.server.wire_checks import negative_problems, request_problems
from snapshots.errors import SnapshotNotFoundError

MAX_SNAPSHOT_CHUNK = 4 << 20


R = TypeVar("R")


class RaftQuorumServicer(pb_grpc.RaftQuorumServicer):
    """Checks the cluster id and the request's shape, then lets the core answer."""

    def __init__(
        self,
        driver: RaftDriver,
        cluster_id: str,
        fetch_max_wait_ms: int,
        addresses: Mapping[int, str],
        node_address: str,
        access: AccessControl | None = None,
        directory_id: str = "",
        identity: VoterIdentity | None = None,
    ) -> None:
        self._driver = driver
        self._identity = identity or VoterIdentity()
        self._access = access or open_access()
        self._cluster_id = cluster_id
        self._fetch_wait_s = fetch_max_wait_ms / 1000 + 1.0
        self._addresses = addresses  # live: voters added later are in it
        self._node_address = node_address
        self._directory_id = directory_id

    # ------------------------------------------------------------- rejections

    def _hint(self) -> dict[str, str]:
        return leader_hint(self._driver, self._addresses, self._driver.leader_id)

    async def _reject(
        self, context: Any, error: ErrorCode, message: str, answer: Any = None
    ) -> Any:
        await context.abort_with_status(rich_status(error, message, self._hint(), answer))

    async def _check(
        self,
        context: Any,
        cluster_id: str,
        problems: list[str],
        sender: int | None = None,
        request: Any = None,
    ) -> None:
        """Reject (changing nothing) a foreign, unauthorized, malformed or
        unknown-sender request."""
        if cluster_id != self._cluster_id:
            await context.abort_with_status(foreign_cluster_status(cluster_id, self._cluster_id))
        if request is not None:
            await self._access.check(context, request)
        if problems:
            await self._reject(context, ErrorCode.INVALID_REQUEST, "; ".join(problems))
        if sender is not None and sender == self._driver.node_id:
            # Only a forged or misrouted request names this node as its sender; the
            # core would otherwise follow (or vote for) itself.
            await self._reject(
                context, ErrorCode.INVALID_REQUEST, f"the request names this node ({sender})"
            )
        if sender is not None and sender not in self._driver.known_voters():
            await self._reject(
                context,
                ErrorCode.INCONSISTENT_VOTER_SET,
                f"node {sender} is not a voter of this quorum "
                f"(voters {sorted(self._driver.core.voters)})",
                self._vote_refusal(request, ErrorCode.INCONSISTENT_VOTER_SET),
            )
        if sender is not None:
            await self._check_identity(context, sender, request)
        if self._driver.closed:
            await self._reject(context, ErrorCode.BROKER_NOT_AVAILABLE, "node is shutting down")

    def _vote_refusal(self, request: Any, error: ErrorCode) -> pb.VoteResponse | None:
        """A refused Vote still tells its sender the epoch and leader (as every
        Kafka Raft response does): a controller whose disk was replaced, or that
        a voter change left out, thinks itself a voter until it has fetched the
        voter set, and learns here whom to fetch it from."""
        if not isinstance(request, pb.VoteRequest):
            return None
        return pb.VoteResponse(
            error_code=error.value,
            epoch=self._driver.epoch,
            vote_granted=False,
            leader_id=wire_leader(self._driver.leader_id),
            pre_vote=request.pre_vote,
        )

    async def _check_identity(self, context: Any, claimed: int, request: Any) -> None:
        """Under mTLS, refuse a request whose claimed voter is not its certificate."""
        principal = principal_of(context)
        problem = self._identity.problem(claimed, principal)
        if problem is None:
            return
        kind = type(request).__name__.removesuffix("Request")
        self._driver.refusals.refuse(kind, IDENTITY, f"{problem}, from {peer_host(context)}")
        await context.abort_with_status(
            rich_status(ApiError.CLUSTER_AUTHORIZATION_FAILED, problem, {"principal": principal})
        )

    async def _answer(self, context: Any, source: int, request: Message, wait_s: float) -> Any:
        try:
            answer = await self._driver.handle_request(source, request, wait_s)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this call itself was cancelled (the client went away)
            # The driver stopped (shutdown) with the request in flight: an answer,
            # not an exception escaping into gRPC's logs as an unhandled error.
            await context.abort(grpc.StatusCode.UNAVAILABLE, "this controller is shutting down")
        wire = to_proto(answer, self._cluster_id)
        leader = self._driver.leader_id
        if isinstance(wire, pb.FetchResponse) and leader is not None:
            wire.leader_address = self._addresses.get(leader, "")
        error = getattr(answer, "error", ErrorCode.NONE)
        if error is not ErrorCode.NONE:
            reason = self._driver.refusals.reason_for(source)
            message = reason or f"{error.name} in epoch {self._driver.epoch}"
            await context.abort_with_status(rich_status(error, message, self._hint(), wire))
        return wire

    # ------------------------------------------------------------------- RPCs

    async def Vote(self, request: pb.VoteRequest, context: Any) -> pb.VoteResponse:
        problems = request_problems(
            {
                "candidate_epoch": request.candidate_epoch,
                "last_offset_epoch": request.last_offset_epoch,
            },
            {"candidate_id": request.candidate_id, "last_offset": request.last_offset},
        )
        await self._check(context, request.cluster_id, problems, request.candidate_id, request)
        expected = request.voter_directory_id
        if expected and self._directory_id and expected != self._directory_id:
            # KIP-853: the candidate asks the voter on another disk; this one
            # (a replaced disk, its vote record lost with the old) must not vote.
            await self._reject(
                context,
                ErrorCode.INVALID_VOTER_KEY,
                f"the vote is for voter {self._driver.node_id} on directory {expected[:40]!r}; "
                f"this node's directory is {self._directory_id}",
                self._vote_refusal(request, ErrorCode.INVALID_VOTER_KEY),
            )
        msg = from_proto(request)
        return await self._answer(context, request.candidate_id, msg, CALL_TIMEOUT_S)  # type: ignore[no-any-return]

    async def BeginQuorumEpoch(
        self, request: pb.BeginQuorumEpochRequest, context: Any
    ) -> pb.BeginQuorumEpochResponse:
        problems = request_problems(
            {"leader_epoch": request.leader_epoch}, {"leader_id": request.leader_id}
        )
        await self._check(context, request.cluster_id, problems, request.leader_id, request)
        msg = from_proto(request)
        return await self._answer(context, request.leader_id, msg, CALL_TIMEOUT_S)  # type: ignore[no-any-return]

    async def EndQuorumEpoch(
        self, request: pb.EndQuorumEpochRequest, context: Any
    ) -> pb.EndQuorumEpochResponse:
        problems = request_problems(
            {"leader_epoch": request.leader_epoch}, {"leader_id": request.leader_id}
        )
        problems += negative_problems(
            **{f"preferred_successors[{i}]": s for i, s in enumerate(request.preferred_successors)}
        )
        await self._check(context, request.cluster_id, problems, request.leader_id, request)
        msg = from_proto(request)
        return await self._answer(context, request.leader_id, msg, CALL_TIMEOUT_S)  # type: ignore[no-any-return]

    async def Fetch(self, request: pb.FetchRequest, context: Any) -> pb.FetchResponse:
        return await self._fetch(request, context)

    async def FetchStream(self, requests: AsyncIterator[pb.FetchRequest], context: Any) -> None:
        """Answers are written to the call, not yielded: a servicer that yields is
        wrapped in a generator per layer (the server's interceptors add one
        each), every answer passing through all of them. Requests still come
        through the interceptors' checks (`guarded_handlers`)."""
        async for request in requests:
            await context.write(await self._fetch(request, context))

    async def _fetch(self, request: pb.FetchRequest, context: Any) -> pb.FetchResponse:
        problems = request_problems(
            {"epoch": request.epoch, "last_fetched_epoch": request.last_fetched_epoch},
            {
                "replica_id": request.replica_id,
                "fetch_offset": request.fetch_offset,
                "known_high_watermark": request.known_high_watermark,
            },
        )
        if request.replica_directory_id and (
            problem := directory_id_problem(request.replica_directory_id)
        ):
            problems.append(f"replica_directory_id: {problem}")
        await self._check(context, request.cluster_id, problems, request=request)
        if request.replica_id in self._driver.core.voters:
            await self._check_identity(context, request.replica_id, request)
        msg = from_proto(request)
        return await self._answer(context, request.replica_id, msg, self._fetch_wait_s)  # type: ignore[no-any-return]

    async def FetchSnapshot(
        self, request: pb.FetchSnapshotRequest, context: Any
    ) -> pb.FetchSnapshotResponse:
        problems = request_problems(
            {"epoch": request.epoch, "snapshot_id.epoch": request.snapshot_id.epoch},
            {
                "replica_id": request.replica_id,
                "position": request.position,
                "snapshot_id.end_offset": request.snapshot_id.end_offset,
            },
        )
        if request.max_bytes <= 0:
            problems.append(f"max_bytes must be positive, got {request.max_bytes}")
        await self._check(context, request.cluster_id, problems, request=request)
        if request.replica_id in self._driver.core.voters:
            await self._check_identity(context, request.replica_id, request)
        driver = self._driver
        if request.epoch < driver.epoch:
            await self._reject(context, ErrorCode.FENCED_LEADER_EPOCH, "stale epoch")
        if request.epoch > driver.epoch:
            await self._reject(context, ErrorCode.UNKNOWN_LEADER_EPOCH, "epoch not known yet")
        if driver.role is not Role.LEADER:
            await self._reject(context, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")
        wanted = SnapshotId(request.snapshot_id.end_offset, request.snapshot_id.epoch)
        max_bytes = min(request.max_bytes, MAX_SNAPSHOT_CHUNK)
        try:
            chunk = await driver.read_snapshot_chunk(wanted, request.position, max_bytes)
        except SnapshotNotFoundError:
            await self._reject(context, ErrorCode.SNAPSHOT_NOT_FOUND, f"no snapshot {wanted}")
        except ValueError as err:
            await self._reject(context, ErrorCode.POSITION_OUT_OF_RANGE, str(err))
        return pb.FetchSnapshotResponse(
            epoch=driver.epoch,
            leader_id=wire_leader(driver.leader_id),
            snapshot_id=request.snapshot_id,
            size=chunk.total_size,
            position=chunk.position,
            data=chunk.data,
        )

    async def DescribeQuorum(
        self, request: pb.DescribeQuorumRequest, context: Any
    ) -> pb.DescribeQuorumResponse:
        # Operators' tools, like Kafka's clients, need not know the cluster id: an
        # empty one is not checked, a wrong one is refused.
        await self._check(context, request.cluster_id or self._cluster_id, [], request=request)
        return describe_quorum(
            self._driver, self._addresses, request.include_image_digest, self._directory_id
        )
