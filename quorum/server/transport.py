"""The gRPC side of the quorum protocol, outgoing: calls to peers.

The core speaks in messages; gRPC speaks in calls. Outgoing requests become
unary calls whose answers are fed back to the driver; incoming calls wait for the
core's answer addressed to the caller (`raft_servicer.py`, see
`RaftDriver.handle_request`).

Every rejection is a non-OK gRPC status with the Kafka error code in its rich
details (see `errors.py`): requests from another cluster, malformed requests,
and protocol answers carrying an error (a fenced epoch, say), whose full answer
rides along so the calling core still learns the new epoch and leader.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message as ProtoMessage

from quorum.common.channels import exchange, open_channel
from quorum.common.config import ConfigError, host_port
from quorum.common.tls import TlsSettings
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    Message,
    VoteRequest,
)
from quorum.raft.records import SnapshotId
from quorum.rpc.wire_errors import wire_error
from quorum.server.driver import RaftDriver
from quorum.server.raft_proto import from_proto, to_proto
from quorum.server.voter_addresses import endpoint_address
from quorum.server.wire_checks import MAX_EPOCH
from snapshots.api import SnapshotChunk

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 2.0
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


MAX_ADDRESS_CHARS = 300  # a host name (255) and a port, with room for brackets


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
        self._tls = tls
        self._reconnect_backoff_max_ms = reconnect_backoff_max_ms
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
        self._follow_voter_set(destination)
        if destination not in self._stubs and not self._learn_address(destination):
            log.warning("no address for node %d; dropping %s", destination, type(message).__name__)
            return
        task = asyncio.get_running_loop().create_task(self._call(destination, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, destination: int, message: Message) -> None:
        stub = self._stubs[destination]
        wire = to_proto(message, self._cluster_id)
        self._stamp_directory_ids(destination, wire)
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
        if isinstance(reply, pb.FetchResponse):
            self._learn_leader_address(reply)
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
        if driver is None or (driver.leader_id is None and not driver.core.is_voter):
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

    def _stamp_directory_ids(self, destination: int, wire: Any) -> None:
        """KIP-853's replica keys: a fetch says which directory it comes from, a
        vote request which directory the voter set names for its receiver."""
        driver = self.driver
        if driver is None or not driver.core.kraft_version:
            return
        if isinstance(wire, pb.FetchRequest):
            wire.replica_directory_id = driver.core.config.directory_id
        elif isinstance(wire, pb.VoteRequest):
            voter = driver.core.current_voter_set().voter(destination)
            wire.voter_directory_id = voter.directory_id if voter is not None else ""

    def _follow_voter_set(self, peer: int) -> None:
        """kraft.version 1: a voter whose endpoint in the voter set in force moved
        (UpdateRaftVoter) is reached at the new one from now on."""
        driver = self.driver
        if driver is None or not driver.core.kraft_version or peer not in self._addresses:
            return
        voter = driver.core.current_voter_set().voter(peer)
        if voter is None or not voter.endpoints:
            return
        if endpoint_address(voter.endpoints[0]) == self._addresses[peer]:
            return
        call = self._fetch_calls.pop(peer, None)
        if call is not None:
            call.cancel()
        self._fetching.discard(peer)
        old = self._channels.pop(peer, None)
        self._stubs.pop(peer, None)
        self._learn_address(peer)
        if old is not None:
            task = asyncio.get_running_loop().create_task(old.close())
            self._tasks.add(task)  # type: ignore[arg-type]
            task.add_done_callback(self._tasks.discard)  # type: ignore[arg-type]

    def _learn_address(self, peer: int) -> bool:
        """kraft.version 1: a voter not in controller.quorum.voters is reached at
        the endpoint the voter set in force gives it (its VotersRecord)."""
        driver = self.driver
        if driver is None or not driver.core.kraft_version:
            return False
        voter = driver.core.current_voter_set().voter(peer)
        if voter is None or not voter.endpoints:
            return False
        address = endpoint_address(voter.endpoints[0])
        channel = open_channel(address, self._reconnect_backoff_max_ms, self._tls)
        self._channels[peer] = channel
        self._stubs[peer] = pb_grpc.RaftQuorumStub(channel)
        self._addresses[peer] = address
        log.info("reaching voter %d at %s (from the voter set in the log)", peer, address)
        return True

    def _learn_leader_address(self, reply: pb.FetchResponse) -> None:
        """KIP-853: a node that found the quorum through its bootstrap servers
        knows no voter's address; a fetch answer names where its leader listens."""
        leader, address = reply.leader_id, reply.leader_address
        me = self.driver.config.node_id if self.driver is not None else None
        if leader < 0 or leader == me or not address or leader in self._stubs:
            return
        try:
            if len(address) > MAX_ADDRESS_CHARS:
                raise ConfigError("leader_address", "too long")
            host_port("leader_address", address)
        except ConfigError:
            log.warning("node answered with a leader address that is no host:port; ignored")
            return
        channel = open_channel(address, self._reconnect_backoff_max_ms, self._tls)
        self._channels[leader] = channel
        self._stubs[leader] = pb_grpc.RaftQuorumStub(channel)
        self._addresses[leader] = address
        log.info("reaching leader %d at %s (named by a fetch answer)", leader, address)

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
