"""The gRPC side of the quorum protocol: outgoing calls to peers and the servicers.

The core speaks in messages; gRPC speaks in calls. Outgoing requests become
unary calls whose answers are fed back to the driver; incoming calls wait for the
core's answer addressed to the caller (see `RaftDriver.handle_request`).

Every rejection is a non-OK gRPC status with the Kafka error code in its rich
details (see `errors.py`): requests from another cluster, malformed requests,
and protocol answers carrying an error (a fenced epoch, say), whose full answer
rides along so the calling core still learns the new epoch and leader.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message as ProtoMessage

from quorum.common.channels import exchange, open_channel
from quorum.common.tls import TlsSettings, peer_host, principal_of
from quorum.controller.api_errors import ApiError
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.client_api import ProposalFailed, ProposalOutcomeUnknown
from quorum.raft.effects import Role
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    Message,
    VoteRequest,
)
from quorum.raft.node import NotLeaderError
from quorum.raft.records import SnapshotId
from quorum.rpc.wire_errors import foreign_cluster_status, rich_status, wire_error
from quorum.server.access import AccessControl, open_access
from quorum.server.codec import from_proto, to_proto
from quorum.server.driver import RaftDriver
from quorum.server.refusals import IDENTITY
from quorum.server.voter_identity import VoterIdentity
from quorum.server.wire_checks import MAX_EPOCH, negative_problems, request_problems
from snapshots.api import SnapshotChunk
from snapshots.errors import SnapshotNotFoundError

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 2.0
MAX_SNAPSHOT_CHUNK = 4 << 20
# At most one WARN line naming the unreachable peers per this many seconds: a
# leaderless node retries its peers every election timeout, and one line per
# attempt would bury everything else in its log.
UNREACHABLE_WARN_INTERVAL_S = 10.0
# A failure older than this, with no call since, is forgotten: a follower calls
# only its leader, so a peer it failed to reach during an election would
# otherwise stay "unreachable" for as long as that leader lives.
UNREACHABLE_FORGET_S = 10.0

_REPLY_TYPE: dict[type, type[ProtoMessage]] = {
    VoteRequest: pb.VoteResponse,
    BeginQuorumEpochRequest: pb.BeginQuorumEpochResponse,
    EndQuorumEpochRequest: pb.EndQuorumEpochResponse,
    FetchRequest: pb.FetchResponse,
}


class RemoteError(Exception):
    """A peer rejected a call that has no protocol answer to feed the core."""


@dataclass(frozen=True, slots=True)
class Unreachable:
    """A peer whose last call failed: what it met, since when (wall ms), and when
    it last failed (monotonic s)."""

    error: str
    since_ms: int
    last_failure: float


def call_failure(err: grpc.aio.AioRpcError) -> str:
    """One line for a failed call to a peer (gRPC's own text carries a debug dump)."""
    details = (err.details() or "").lower()
    if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return "no answer in time"
    if "refused" in details:
        return "connection refused"
    if "reset" in details:
        return "connection reset"
    return err.code().name


class GrpcTransport:
    """One channel per peer; every request is a unary call with a deadline.

    A peer that answers INCONSISTENT_CLUSTER_ID is remembered: once a majority of
    the voters have said so, this node is the odd one out and `on_foreign_cluster`
    fires (the process exits). A lone dissenting peer is that peer's problem.
    """

    def __init__(
        self,
        peers: Mapping[int, str],
        cluster_id: str,
        fetch_max_wait_ms: int,
        request_timeout_ms: int = int(CALL_TIMEOUT_S * 1000),
        majority: int = 2,
        reconnect_backoff_max_ms: int = 1000,
        tls: TlsSettings | None = None,
    ) -> None:
        self._cluster_id = cluster_id
        # A peer that comes back is retried within an election timeout.
        self._channels = {
            peer: open_channel(addr, reconnect_backoff_max_ms, tls) for peer, addr in peers.items()
        }
        self._stubs = {peer: pb_grpc.RaftQuorumStub(ch) for peer, ch in self._channels.items()}
        self._call_timeout_s = request_timeout_ms / 1000
        self._fetch_timeout_s = fetch_max_wait_ms / 1000 + self._call_timeout_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._fetch_calls: dict[int, Any] = {}  # peer -> its open FetchStream call
        self._fetching: set[int] = set()  # peers with a fetch out on that call
        self._majority = majority
        self.rejected_by: set[int] = set()
        self._addresses = dict(peers)
        self._unreachable: dict[int, Unreachable] = {}
        self._last_unreachable_warning = float("-inf")
        self._warned_unreachable: set[int] = set()
        self.driver: RaftDriver | None = None
        self.on_foreign_cluster: Callable[[set[int]], None] | None = None

    def bind(self, driver: RaftDriver) -> None:
        self.driver = driver

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

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
                    reply = await self._fetch_over_stream(destination, wire)
                case VoteRequest():
                    reply = await stub.Vote(wire, timeout=self._call_timeout_s)
                case BeginQuorumEpochRequest():
                    reply = await stub.BeginQuorumEpoch(wire, timeout=self._call_timeout_s)
                case EndQuorumEpochRequest():
                    reply = await stub.EndQuorumEpoch(wire, timeout=self._call_timeout_s)
                case _:
                    raise TypeError(f"not a request: {message!r}")
        except grpc.aio.AioRpcError as err:
            reply = self._rejected(destination, message, err)
            if reply is None:
                return
        except TimeoutError:  # the core asks again on its own timer
            self._note_unreachable(destination, "no answer in time")
            return
        self._note_reachable(destination)
        answer = from_proto(reply)
        if getattr(answer, "epoch", 0) > MAX_EPOCH:
            log.warning("node %d answered with epoch %d; ignored", destination, answer.epoch)
            return
        if self.driver is not None:
            self.driver.receive(destination, answer)

    async def _fetch_over_stream(self, peer: int, wire: Any) -> Any:
        """One fetch over the FetchStream call kept open to `peer`. The core has at
        most one fetch out; if it asks again while one is still out (it gave up
        waiting), the old call is closed and a new one carries the new fetch, so
        an old answer can never be taken for the new request's. A failed or ended
        call is dropped, and the next fetch opens a new one."""
        call = self._fetch_calls.get(peer)
        if call is None or call.done() or peer in self._fetching:
            if call is not None:
                call.cancel()
            call = self._fetch_calls[peer] = self._stubs[peer].FetchStream()
        self._fetching.add(peer)
        try:
            reply = await exchange(call, wire, self._fetch_timeout_s)
        finally:
            if self._fetch_calls.get(peer) is call:
                self._fetching.discard(peer)
                if call.done():
                    del self._fetch_calls[peer]
        return reply

    def _rejected(self, destination: int, message: Message, err: grpc.aio.AioRpcError) -> Any:
        """The protocol answer inside a rejection, or None (and act on the error)."""
        error = wire_error(err)
        if error.error is ErrorCode.INCONSISTENT_CLUSTER_ID:
            self._note_foreign(destination, error.message)
            return None
        answer = _REPLY_TYPE[type(message)]()
        if error.unpack(answer):
            self._note_reachable(destination)
            if isinstance(message, FetchRequest):
                self._note_leader_moved(destination, error.error, answer)
            return answer
        if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            self._note_unreachable(destination, call_failure(err))
        if err.code() == grpc.StatusCode.UNAVAILABLE and self.driver is not None:
            self.driver.peer_unreachable(destination)
        elif err.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
            log.warning("node %d rejected %s: %s", destination, type(message).__name__, err)
        return None

    def _note_leader_moved(self, peer: int, error: Any, answer: pb.FetchResponse) -> None:
        """One INFO line when a node we fetched from answers that it does not lead
        (at once when it stopped leading while holding our fetch: `held_fetches`),
        so the operator sees why this node moves on. An observer still asking
        around for a leader says nothing: it hears this every election timeout."""
        driver = self.driver
        if driver is None or (driver.leader_id is None and not driver.config.is_voter):
            return
        if error not in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
            return
        log.info(
            "node %d answered our fetch with %s (epoch %d, leader %s)",
            peer,
            error.name,
            answer.epoch,
            answer.leader_id if answer.leader_id >= 0 else "unknown",
        )

    # ----------------------------------------------------- peer reachability

    def unreachable_peers(self) -> dict[int, Unreachable]:
        """Peers whose last call failed recently, with no answer from them since."""
        horizon = time.monotonic() - UNREACHABLE_FORGET_S
        return {p: u for p, u in self._unreachable.items() if u.last_failure >= horizon}

    def peer_address(self, peer: int) -> str:
        return self._addresses.get(peer, "")

    def _note_reachable(self, peer: int) -> None:
        self._warned_unreachable.discard(peer)
        if self._unreachable.pop(peer, None) is not None:
            log.info("node %d at %s is reachable again", peer, self.peer_address(peer))

    def _note_unreachable(self, peer: int, error: str) -> None:
        """Remember the failure and say in one WARN line every peer this node cannot
        reach: when that set changes, else at most once per interval. A leaderless
        node otherwise logs only role changes, and the operator needs to know which
        links are down."""
        known = self.unreachable_peers().get(peer)
        since = known.since_ms if known is not None else int(time.time() * 1000)
        now = time.monotonic()
        self._unreachable[peer] = Unreachable(error, since, now)
        down = self.unreachable_peers()
        if (
            set(down) == self._warned_unreachable
            and now - self._last_unreachable_warning < UNREACHABLE_WARN_INTERVAL_S
        ):
            return
        self._last_unreachable_warning = now
        self._warned_unreachable = set(down)
        wall_ms = int(time.time() * 1000)
        log.warning(
            "cannot reach %d of %d peers: %s",
            len(down),
            len(self._addresses),
            "; ".join(
                f"node {p} at {self.peer_address(p)} ({u.error}, for "
                f"{(wall_ms - u.since_ms) / 1000:.1f}s)"
                for p, u in sorted(down.items())
            ),
        )

    def _note_foreign(self, peer: int, message: str) -> None:
        if peer not in self.rejected_by:
            log.error("node %d rejects our cluster id %s: %s", peer, self._cluster_id, message)
        self.rejected_by.add(peer)
        if len(self.rejected_by) >= self._majority and self.on_foreign_cluster is not None:
            self.on_foreign_cluster(set(self.rejected_by))

    async def fetch_snapshot_chunk(
        self, leader: int, epoch: int, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> SnapshotChunk:
        request = pb.FetchSnapshotRequest(
            cluster_id=self._cluster_id,
            replica_id=self.driver.config.node_id if self.driver else -1,
            epoch=epoch,
            snapshot_id=pb.SnapshotId(end_offset=snapshot_id.end_offset, epoch=snapshot_id.epoch),
            position=position,
            max_bytes=max_bytes,
        )
        try:
            reply = await self._stubs[leader].FetchSnapshot(
                request, timeout=10 * self._call_timeout_s
            )
        except grpc.aio.AioRpcError as err:
            error = wire_error(err)
            raise RemoteError(f"{error.error or err.code()}: {error.message}") from err
        return SnapshotChunk(snapshot_id, reply.position, reply.data, reply.size)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for call in self._fetch_calls.values():
            call.cancel()
        self._fetch_calls.clear()
        for channel in self._channels.values():
            await channel.close()


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
        self._addresses = dict(addresses)
        self._node_address = node_address
        self._directory_id = directory_id

    # ------------------------------------------------------------- rejections

    def _hint(self) -> dict[str, str]:
        return leader_hint(self._driver, self._addresses, self._driver.leader_id)

    async def _reject(self, context: Any, error: ErrorCode, message: str) -> Any:
        await context.abort_with_status(rich_status(error, message, self._hint()))

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
        if sender is not None and sender not in self._driver.config.voters:
            await self._reject(
                context,
                ErrorCode.INCONSISTENT_VOTER_SET,
                f"node {sender} is not a voter of this quorum "
                f"(voters {sorted(self._driver.config.voters)})",
            )
        if sender is not None:
            await self._check_identity(context, sender, request)
        if self._driver.closed:
            await self._reject(context, ErrorCode.BROKER_NOT_AVAILABLE, "node is shutting down")

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
        answer = await self._driver.handle_request(source, request, wait_s)
        wire = to_proto(answer, self._cluster_id)
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

    async def FetchStream(
        self, requests: AsyncIterator[pb.FetchRequest], context: Any
    ) -> AsyncIterator[pb.FetchResponse]:
        async for request in requests:
            yield await self._fetch(request, context)

    async def _fetch(self, request: pb.FetchRequest, context: Any) -> pb.FetchResponse:
        problems = request_problems(
            {"epoch": request.epoch, "last_fetched_epoch": request.last_fetched_epoch},
            {
                "replica_id": request.replica_id,
                "fetch_offset": request.fetch_offset,
                "known_high_watermark": request.known_high_watermark,
            },
        )
        await self._check(context, request.cluster_id, problems, request=request)
        if request.replica_id in self._driver.config.voters:
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
        if request.replica_id in self._driver.config.voters:
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
            leader_id=_wire_leader(driver.leader_id),
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


def _wire_leader(leader_id: int | None) -> int:
    """No leader is -1 on the wire; node 0 is a valid leader (`x or -1` lost it)."""
    return -1 if leader_id is None else leader_id


def leader_hint(
    driver: RaftDriver, addresses: Mapping[int, str], leader_id: int | None
) -> dict[str, str]:
    """The rich-status metadata naming the epoch and the leader, if known."""
    hint = {"epoch": str(driver.epoch), "leader_id": str(_wire_leader(leader_id))}
    if leader_id is not None and leader_id in addresses:
        hint["leader_address"] = addresses[leader_id]
    return hint


def describe_quorum(
    driver: RaftDriver,
    addresses: Mapping[int, str],
    include_image_digest: bool = False,
    directory_id: str = "",
) -> pb.DescribeQuorumResponse:
    """This node's view; the replica lists only when it leads (as Kafka's tool shows)."""
    now_ms = driver.clock()
    wall_ms = int(time.time() * 1000)

    def wall(ts: int | None) -> int:
        return -1 if ts is None else wall_ms - (now_ms - ts)

    out = pb.DescribeQuorumResponse(
        node_id=driver.config.node_id,
        leader_id=_wire_leader(driver.leader_id),
        leader_epoch=driver.epoch,
        voted_for=_wire_leader(driver.voted_for),
        directory_id=directory_id,
        voter_addresses={v: addresses[v] for v in driver.config.voters if v in addresses},
        high_watermark=driver.high_watermark,
        role=driver.role.value,
        log_start_offset=driver.log_start_offset,
        log_end_offset=driver.log_end_offset,
        leader_address=addresses.get(driver.leader_id, "") if driver.leader_id is not None else "",
    )
    transport = driver.transport
    if isinstance(transport, GrpcTransport):
        out.cluster_id = transport.cluster_id
        for peer, down in sorted(transport.unreachable_peers().items()):
            out.unreachable_peers.append(
                pb.UnreachablePeer(
                    node_id=peer,
                    address=transport.peer_address(peer),
                    error=down.error,
                    since_timestamp_ms=down.since_ms,
                )
            )
    if driver.applied_state is not None:
        out.applied_offset = driver.applied_state.applied_offset
        if include_image_digest:
            out.image_digest = driver.applied_state.digest()
    if driver.role is Role.LEADER:
        me = pb.ReplicaState(
            replica_id=driver.config.node_id,
            log_end_offset=driver.flushed_end,
            last_fetch_timestamp_ms=wall_ms,
            last_caught_up_timestamp_ms=wall_ms,
            address=addresses.get(driver.config.node_id, ""),
        )
        out.current_voters.append(me)
        for replica, progress in sorted(driver.replica_progress().items()):
            state = pb.ReplicaState(
                replica_id=replica,
                log_end_offset=progress.end_offset,
                last_fetch_timestamp_ms=wall(progress.last_fetch_ms),
                last_caught_up_timestamp_ms=wall(progress.last_caught_up_ms),
                address=addresses.get(replica, ""),
            )
            voters = driver.config.voters
            (out.current_voters if replica in voters else out.observers).append(state)
    return out


class QuorumLogServicer(pb_grpc.QuorumLogServicer):
    """Durable replicated writes of raw records (benchmarks, probes and tests).

    Every record lands in the metadata log that every replica applies, so each is
    first checked by `validate_record` (the controller allows only NoOp records
    here): anything else must go through the admin API's validation.
    """

    def __init__(
        self,
        driver: RaftDriver,
        cluster_id: str,
        addresses: Mapping[int, str],
        validate_record: Callable[[bytes], str | None] | None = None,
        access: AccessControl | None = None,
    ) -> None:
        self._driver = driver
        self._cluster_id = cluster_id
        self._addresses = dict(addresses)
        self._validate_record = validate_record
        self._access = access or open_access()

    def _not_leader(self, leader_id: int | None) -> grpc.Status:
        if leader_id == self._driver.config.node_id:
            leader_id = None  # resigned: still its epoch's leader on record, cannot lead
        hint = leader_hint(self._driver, self._addresses, leader_id)
        where = (
            f"node {leader_id} at {hint.get('leader_address', '?')}"
            if leader_id is not None
            else "unknown"
        )
        return rich_status(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"node {self._driver.config.node_id} is not the leader; leader: {where}",
            hint,
        )

    async def Write(self, request: pb.WriteRequest, context: Any) -> pb.WriteResponse:
        return await self._write(request, context)

    async def WriteStream(
        self, requests: AsyncIterator[pb.WriteRequest], context: Any
    ) -> AsyncIterator[pb.WriteResponse]:
        async for request in requests:
            yield await self._write(request, context)

    async def _write(self, request: pb.WriteRequest, context: Any) -> pb.WriteResponse:
        if request.cluster_id != self._cluster_id:
            await context.abort_with_status(
                foreign_cluster_status(request.cluster_id, self._cluster_id)
            )
        await self._access.check(context, request)
        if not request.records:
            await context.abort_with_status(
                rich_status(ErrorCode.INVALID_REQUEST, "a write needs at least one record")
            )
        if self._validate_record is not None:
            for i, record in enumerate(request.records):
                problem = self._validate_record(record)
                if problem is not None:
                    await context.abort_with_status(
                        rich_status(ErrorCode.INVALID_RECORD, f"record {i}: {problem}")
                    )
        if self._driver.closed:
            await context.abort_with_status(
                rich_status(ErrorCode.BROKER_NOT_AVAILABLE, "node is shutting down")
            )
        try:
            result = await self._driver.propose(list(request.records))
        except NotLeaderError as err:
            await context.abort_with_status(self._not_leader(err.leader_id))
        except ProposalOutcomeUnknown as err:
            await context.abort_with_status(rich_status(ErrorCode.REQUEST_TIMED_OUT, str(err)))
        except ProposalFailed:
            await context.abort_with_status(self._not_leader(self._driver.leader_id))
        return pb.WriteResponse(
            epoch=result.epoch,
            base_offset=result.first_offset,
            last_offset=result.last_offset,
            leader_id=self._driver.config.node_id,
        )
