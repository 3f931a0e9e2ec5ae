"""An asyncio client for a quorum: finds the leader by itself and follows it.

Writes go to the last known leader over idle WriteStream calls (reused,
sparing a unary call's cost), answered once committed; the writes callers make
while requests are out leave together in the next one (`client_writes`). A
NOT_LEADER_OR_FOLLOWER answer names the new leader (id and address) and the
client goes straight there; a refused connection or an attempt that outlives
`attempt_timeout_s` moves on to the next bootstrap address at once. There is
no fixed back-off: the only pause is a few milliseconds after a whole round in
which nobody knew a leader (an election is under way), so a failover costs the
election and nothing more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import grpc

from quorum.client_writes import RefusedWriteError, WritePipe, WriteResult
from quorum.common.channels import exchange, open_channel
from quorum.common.tls import TlsSettings
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.messages import ErrorCode
from quorum.rpc.wire_errors import WireError, wire_error

ROUND_PAUSE_S = 0.005
# No attempt waits longer than this for one address, so a frozen leader costs one
# attempt rather than the caller's whole deadline (keepalive usually drops its
# connection sooner; see `channels.KEEPALIVE_MS`).
ATTEMPT_TIMEOUT_S = 10.0


class QuorumClientError(Exception):
    """A request the quorum refused for good (wrong cluster id, invalid request)."""

    def __init__(self, error: WireError) -> None:
        name = error.error.name if error.error else error.status.name
        super().__init__(f"{name}: {error.message}")
        self.error = error


class QuorumUnavailableError(Exception):
    """No leader accepted the request before the deadline."""


class QuorumClient:
    def __init__(
        self, bootstrap: Sequence[str], cluster_id: str, tls: TlsSettings | None = None
    ) -> None:
        if not bootstrap:
            raise ValueError("at least one bootstrap address is needed")
        self.bootstrap = list(bootstrap)
        self.cluster_id = cluster_id
        self.tls = tls
        self.leader_id: int | None = None
        self._leader_address: str | None = None
        self._next = 0
        self._channels: dict[str, grpc.aio.Channel] = {}
        # address -> WriteStream calls with no request in flight
        self._idle_streams: dict[str, list[Any]] = {}
        self._pipes: dict[str, WritePipe] = {}  # address -> its writes, coalesced

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = open_channel(address, tls=self.tls)
        return channel

    def _target(self) -> str:
        if self._leader_address is not None:
            return self._leader_address
        address = self.bootstrap[self._next % len(self.bootstrap)]
        self._next += 1
        return address

    def _forget_leader(self) -> None:
        self.leader_id = None
        self._leader_address = None

    async def write(
        self,
        records: Sequence[bytes],
        attempt_timeout_s: float = ATTEMPT_TIMEOUT_S,
        deadline_s: float = 10.0,
    ) -> WriteResult:
        """Append records durably on a majority; returns once they are committed.
        The records are one atomic write; writes made at the same time from other
        tasks may travel in the same request (`client_writes`)."""
        give_up = time.monotonic() + deadline_s
        tried_without_leader = 0
        last_error = "no attempt made"
        while time.monotonic() < give_up:
            address = self._target()
            timeout = max(0.001, min(attempt_timeout_s, give_up - time.monotonic()))
            pipe = self._pipes.get(address)
            if pipe is None:
                pipe = self._pipes[address] = WritePipe(
                    address, self.cluster_id, self._write_over_stream
                )
            try:
                result = await pipe.write(records, timeout)
            except RefusedWriteError as err:
                raise QuorumClientError(err.error) from err
            except TimeoutError:
                last_error = f"{address}: no answer within {timeout:.3f}s"
                self._forget_leader()
                continue
            except grpc.aio.AioRpcError as err:
                error = wire_error(err)
                last_error = f"{address}: {error.error.name if error.error else err.code().name}"
                if error.error in (ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.INVALID_REQUEST):
                    raise QuorumClientError(error) from err
                hint = error.leader_address
                if error.error is ErrorCode.NOT_LEADER_OR_FOLLOWER and hint and hint != address:
                    self.leader_id = error.leader_id
                    self._leader_address = hint
                    continue
                self._forget_leader()
                tried_without_leader += 1
                if tried_without_leader % len(self.bootstrap) == 0:
                    await asyncio.sleep(ROUND_PAUSE_S)
                continue
            self._leader_address = address
            self.leader_id = result.leader_id
            return result
        raise QuorumUnavailableError(
            f"no leader accepted the write in {deadline_s}s ({last_error})"
        )

    async def _write_over_stream(
        self, address: str, request: pb.WriteRequest, timeout: float
    ) -> pb.WriteResponse:
        """One write over an idle WriteStream call to `address` (a new one when
        none is idle); the call goes back to the idle pool only after a clean
        answer, so a late answer can never be taken for another write's."""
        idle = self._idle_streams.setdefault(address, [])
        call = idle.pop() if idle else pb_grpc.QuorumLogStub(self._channel(address)).WriteStream()
        reply = await exchange(call, request, timeout)
        idle.append(call)
        return reply  # type: ignore[no-any-return]

    async def describe_quorum(
        self, address: str | None = None, timeout_s: float = 2.0, include_digest: bool = False
    ) -> pb.DescribeQuorumResponse:
        """The quorum as the leader sees it, or as the node at `address` sees it."""
        if address is not None:
            return await self._describe(address, timeout_s, include_digest)
        targets = [self._leader_address] if self._leader_address else []
        targets += self.bootstrap
        last: Exception | None = None
        for target in targets:
            try:
                reply = await self._describe(target, timeout_s, include_digest)
                if reply.role != "leader" and reply.leader_address not in ("", target):
                    reply = await self._describe(reply.leader_address, timeout_s, include_digest)
            except grpc.aio.AioRpcError as err:
                last = err
                continue
            if reply.role == "leader":
                self._leader_address = reply.leader_address or target
                self.leader_id = reply.leader_id
                return reply
            last = QuorumUnavailableError(f"{target} knows no active leader")
        raise QuorumUnavailableError(f"no leader answered DescribeQuorum (tried {targets}): {last}")

    async def _describe(
        self, address: str, timeout_s: float, include_digest: bool
    ) -> pb.DescribeQuorumResponse:
        stub = pb_grpc.RaftQuorumStub(self._channel(address))
        request = pb.DescribeQuorumRequest(
            cluster_id=self.cluster_id, include_image_digest=include_digest
        )
        try:
            reply: pb.DescribeQuorumResponse = await stub.DescribeQuorum(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as err:
            error = wire_error(err)
            if error.error is ErrorCode.INCONSISTENT_CLUSTER_ID:
                raise QuorumClientError(error) from err
            raise
        return reply

    async def close(self) -> None:
        for pipe in self._pipes.values():
            pipe.close()
        self._pipes.clear()
        for calls in self._idle_streams.values():
            for call in calls:
                call.cancel()
        self._idle_streams.clear()
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
