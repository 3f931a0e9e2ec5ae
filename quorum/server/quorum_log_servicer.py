"""The QuorumLog service: raw writes to the replicated log (benchmarks, tools).

A write is proposed as one batch and answered once committed; a follower
refuses with NOT_LEADER_OR_FOLLOWER naming the leader, so a client moves at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, TypeVar

import grpc

from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.raft.client_api import ProposalFailed, ProposalOutcomeUnknown
from quorum.raft.messages import (
    ErrorCode,
)
from quorum.raft.node import NotLeaderError
from quorum.rpc.wire_errors import foreign_cluster_status, rich_status
from quorum.server.access import AccessControl, open_access
from quorum.server.driver import RaftDriver
from quorum.server.leader_hint import leader_hint

T = TypeVar("T")


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
        self._addresses = addresses  # live: voters added later are in it
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

    async def _proposed(self, context: Any, proposal: Coroutine[Any, Any, T]) -> T:
        """A proposal's outcome, or the call aborted with Kafka's error for why it
        has none (shutting down, not the leader, outcome unknown)."""
        if self._driver.closed:
            proposal.close()
            await context.abort_with_status(
                rich_status(ErrorCode.BROKER_NOT_AVAILABLE, "node is shutting down")
            )
        try:
            return await proposal
        except NotLeaderError as err:
            await context.abort_with_status(self._not_leader(err.leader_id))
        except ProposalOutcomeUnknown as err:
            await context.abort_with_status(rich_status(ErrorCode.REQUEST_TIMED_OUT, str(err)))
        except ProposalFailed:
            await context.abort_with_status(self._not_leader(self._driver.leader_id))
        raise AssertionError("abort_with_status returns only by raising")

    async def Write(self, request: pb.WriteRequest, context: Any) -> pb.WriteResponse:
        return await self._write(request, context)

    async def WriteStream(self, requests: AsyncIterator[pb.WriteRequest], context: Any) -> None:
        """Answers are written to the call, not yielded: a servicer that yields is
        wrapped in a generator per layer (the server's interceptors add one
        each), every answer passing through all of them. Requests still come
        through the interceptors' checks (`guarded_handlers`)."""
        async for request in requests:
            await context.write(await self._write(request, context))

    async def _write(self, request: pb.WriteRequest, context: Any) -> pb.WriteResponse:
        if request.cluster_id != self._cluster_id:
            await context.abort_with_status(
                foreign_cluster_status(request.cluster_id, self._cluster_id)
            )
        await self._access.check(context, request)
        if request.record_counts:
            return await self._write_each(request, context)
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
        result = await self._proposed(context, self._driver.propose(list(request.records)))
        return pb.WriteResponse(
            epoch=result.epoch,
            base_offset=result.first_offset,
            last_offset=result.last_offset,
            leader_id=self._driver.config.node_id,
        )

    async def _write_each(self, request: pb.WriteRequest, context: Any) -> pb.WriteResponse:
        """Several writes in one request (`record_counts`): each proposed as its
        own unit, in order, all answered together once the last is committed. A
        write that fails validation is refused alone (`refused`), the others go
        on; a request whose counts do not add up changes nothing."""
        counts = request.record_counts
        records = request.records
        if len(counts) > len(records) or sum(counts) != len(records) or 0 in counts:
            await context.abort_with_status(
                rich_status(
                    ErrorCode.INVALID_REQUEST,
                    f"record_counts ({len(counts)} writes, {sum(counts)} records) must split "
                    f"the {len(records)} records into writes of at least one record each",
                )
            )
        proposals: list[list[bytes]] = []
        refused: list[pb.RefusedWrite] = []
        start = 0
        validate = self._validate_record
        for index, count in enumerate(counts):
            write = records[start : start + count]
            start += count
            problem = None
            if validate is not None:
                for i, record in enumerate(write):
                    if (problem := validate(record)) is not None:
                        problem = f"record {i}: {problem}"
                        break
            if problem is None:
                proposals.append(write)
            else:
                refused.append(
                    pb.RefusedWrite(
                        index=index, error_code=ErrorCode.INVALID_RECORD.value, message=problem
                    )
                )
        node_id = self._driver.config.node_id
        if not proposals:
            epoch = self._driver.epoch
            return pb.WriteResponse(
                epoch=epoch, base_offset=-1, last_offset=-1, leader_id=node_id, refused=refused
            )
        results = await self._proposed(context, self._driver.propose_each(proposals))
        return pb.WriteResponse(
            epoch=results[0].epoch,
            base_offset=results[0].first_offset,
            last_offset=results[-1].last_offset,
            leader_id=node_id,
            refused=refused,
        )
