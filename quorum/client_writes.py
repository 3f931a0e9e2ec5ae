"""The client's writes to one address, coalesced: what its callers ask for while
a request is out leaves together as the next request.

Each gRPC message costs Python's gRPC about as much CPU as the whole Raft work
of a write (a WriteStream exchange: ~150-200 µs on each side here, see
docs/benchmarks.md), so a client that sends one message per write spends most
of its own and the leader's CPU on messages. Here writes made while
`MAX_REQUESTS_IN_FLIGHT` requests are out wait and then leave as one
WriteRequest (`record_counts` splits it into writes), much as the leader seals
the proposals that wait while a batch is uncommitted into the next batch (group
commit). Each write stays its own atomic unit, proposed in order and answered
only once committed, so nothing about when a write is acknowledged changes. A
lone write leaves at once, in its caller's own task, as before.

An exchange that fails fails every write it carried and every write still
waiting for that address (they would go to the same node): each caller's own
retry loop in `QuorumClient.write` then acts on the error, as for a write sent
alone. A waiting write is held at most as long as the requests ahead of it,
each bounded by its attempt deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc

from quorum.gen import raft_pb2 as pb
from quorum.raft.messages import ErrorCode
from quorum.rpc.wire_errors import WireError

# Requests out at once to one address. Two keep the leader busy: while one
# request's writes replicate, the next is already there to be sealed the moment
# they commit.
MAX_REQUESTS_IN_FLIGHT = 2
# At most this many writes in one request (the rest wait for the next).
MAX_WRITES_PER_REQUEST = 1024


@dataclass(frozen=True)
class WriteResult:
    epoch: int
    base_offset: int
    last_offset: int
    leader_id: int | None


class RefusedWriteError(Exception):
    """The leader refused this write alone (its records failed validation); the
    writes sent with it went on."""

    def __init__(self, error: WireError) -> None:
        super().__init__(error.message)
        self.error = error


# exchange(address, request, timeout_s) -> the answer, or raises AioRpcError /
# TimeoutError: one request over the caller's kept-open WriteStream calls.
Exchange = Callable[[str, pb.WriteRequest, float], Awaitable[pb.WriteResponse]]


@dataclass(slots=True)
class _Waiting:
    records: Sequence[bytes]
    future: asyncio.Future[WriteResult]
    deadline: float  # loop time


class WritePipe:
    """Writes bound for one address."""

    def __init__(self, address: str, cluster_id: str, exchange: Exchange) -> None:
        self.address = address
        self._cluster_id = cluster_id
        self._exchange = exchange
        self._waiting: list[_Waiting] = []
        self._senders = 0  # requests out (or about to be)
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(self, records: Sequence[bytes], timeout_s: float) -> WriteResult:
        """One write's attempt at this address: its result once committed, or
        what its request met (AioRpcError, TimeoutError, RefusedWriteError)."""
        if self._senders == 0 and not self._waiting:
            # Alone: sent at once from this task (no hand-off to pay for).
            self._senders += 1
            try:
                request = pb.WriteRequest(cluster_id=self._cluster_id, records=records)
                reply = await self._exchange(self.address, request, timeout_s)
            except (grpc.aio.AioRpcError, TimeoutError) as err:
                self._fail_waiting(err)  # bound for the same node
                raise
            finally:
                self._senders -= 1
                self._send_waiting()
            last = reply.base_offset + len(records) - 1
            return WriteResult(reply.epoch, reply.base_offset, last, reply.leader_id)
        loop = asyncio.get_running_loop()
        waiting = _Waiting(records, loop.create_future(), loop.time() + timeout_s)
        self._waiting.append(waiting)
        self._send_waiting()
        return await waiting.future

    def _send_waiting(self) -> None:
        if self._waiting and self._senders < MAX_REQUESTS_IN_FLIGHT:
            self._senders += 1
            task = asyncio.get_running_loop().create_task(self._send())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self) -> None:
        """Send what waits, request after request, until nothing does."""
        loop = asyncio.get_running_loop()
        try:
            while self._waiting:
                batch = self._waiting[:MAX_WRITES_PER_REQUEST]
                del self._waiting[:MAX_WRITES_PER_REQUEST]
                batch = [w for w in batch if not w.future.done()]  # callers gone
                if not batch:
                    continue
                try:
                    reply = await self._exchange(
                        self.address,
                        _request(self._cluster_id, batch),
                        max(0.001, min(w.deadline for w in batch) - loop.time()),
                    )
                except (grpc.aio.AioRpcError, TimeoutError) as err:
                    self._fail(batch, err)
                    self._fail_waiting(err)  # bound for the same node
                    return
                except BaseException:  # cancelled (the client closes), or a defect
                    gone = TimeoutError("the request carrying this write did not complete")
                    self._fail(batch, gone)
                    self._fail_waiting(gone)
                    raise
                _answer(batch, reply)
        finally:
            self._senders -= 1

    @staticmethod
    def _fail(writes: list[_Waiting], err: BaseException) -> None:
        for waiting in writes:
            if not waiting.future.done():
                waiting.future.set_exception(err)

    def _fail_waiting(self, err: BaseException) -> None:
        waiting, self._waiting = self._waiting, []
        self._fail(waiting, err)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._fail_waiting(TimeoutError("the client closed"))


_CODES = frozenset(code.value for code in ErrorCode)


def _request(cluster_id: str, batch: list[_Waiting]) -> pb.WriteRequest:
    if len(batch) == 1:
        return pb.WriteRequest(cluster_id=cluster_id, records=batch[0].records)
    return pb.WriteRequest(
        cluster_id=cluster_id,
        records=[record for waiting in batch for record in waiting.records],
        record_counts=[len(waiting.records) for waiting in batch],
    )


def _answer(batch: list[_Waiting], reply: pb.WriteResponse) -> None:
    """Each write's offsets: consecutive from the answer's base offset, in the
    request's order, skipping the writes the leader refused (a node that does
    not know `record_counts` committed them all as one write, consecutively too)."""
    refused = {r.index: r for r in reply.refused} if len(reply.refused) else None
    epoch, leader_id = reply.epoch, reply.leader_id
    offset = reply.base_offset
    for index, waiting in enumerate(batch):
        if refused is not None and index in refused:
            why = refused[index]
            code = ErrorCode(why.error_code) if why.error_code in _CODES else None
            error = WireError(code, grpc.StatusCode.INVALID_ARGUMENT, why.message)
            if not waiting.future.done():
                waiting.future.set_exception(RefusedWriteError(error))
            continue
        end = offset + len(waiting.records)
        if not waiting.future.done():
            waiting.future.set_result(WriteResult(epoch, offset, end - 1, leader_id))
        offset = end
