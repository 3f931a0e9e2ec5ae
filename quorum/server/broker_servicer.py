"""The broker-facing calls: registration, heartbeats, and MetadataFetch (KIP-631).

MetadataFetch is both a broker's heartbeat and how it pulls committed metadata;
MetadataFetchStream is the same exchange, request by request, over one call.
Only the active controller answers (others say NOT_CONTROLLER with its address,
as for admin writes). A heartbeat that changes nothing about the broker is
answered without the write queue; one that must fence, unfence or move the
broker into controlled shutdown goes through it like any write. Then:

- a broker below the log start, or more than `SNAPSHOT_LAG_RECORDS` behind with a
  snapshot to offer, is told to load that snapshot first (FetchMetadataSnapshot);
- otherwise it gets the committed batches after its offset, never past the high
  watermark, each with its append and commit times;
- a caught-up broker's fetch is parked until the next commit or `max_wait_ms`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from quorum.common.wire_errors import rich_status
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.quorum_controller import NotController
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import broker_pb2 as bpb
from quorum.gen import broker_pb2_grpc as bpb_grpc
from quorum.log.file_log import wall_clock_ms
from quorum.raft.records import SnapshotId
from quorum.server.admin_servicer import AdminServicer, MetadataController
from snapshots.errors import SnapshotNotFoundError

DEFAULT_MAX_RECORDS = 20_000
MAX_WAIT_CAP_MS = 10_000
SNAPSHOT_LAG_RECORDS = 500_000
MAX_SNAPSHOT_CHUNK = 4 << 20


class BrokerLifecycleServicer(bpb_grpc.BrokerLifecycleServicer):
    def __init__(self, controller: MetadataController) -> None:
        self.c = controller

    async def RegisterBroker(self, request: bpb.RegisterBrokerRequest, context: Any) -> Any:
        c = self.c
        await c.admit(context, request)
        return await c.write(
            context,
            request.cluster_id,
            lambda: c.registry.build_register(request, c.offset_hint()),
        )

    async def BrokerHeartbeat(self, request: bpb.BrokerHeartbeatRequest, context: Any) -> Any:
        return await self._heartbeat(context, request)

    async def _heartbeat(
        self, context: Any, request: bpb.BrokerHeartbeatRequest
    ) -> bpb.BrokerHeartbeatResponse:
        c = self.c
        hw = c.driver.core.high_watermark
        if c.registry.heartbeat_needs_write(request):
            reply: bpb.BrokerHeartbeatResponse = await c.write(
                context,
                request.cluster_id,
                lambda: c.registry.build_heartbeat(request, c.driver.core.high_watermark),
            )
            return reply
        await c.check(context, request.cluster_id)
        await self._require_active(context)
        try:
            _, reply = c.registry.build_heartbeat(request, hw)
        except ControllerError as err:
            await context.abort_with_status(rich_status(err.error, err.message))
        return reply

    async def _require_active(self, context: Any) -> None:
        try:
            await self.c.queue.wait_active()
        except NotController as err:
            await context.abort_with_status(self.c.not_controller(err.leader_id))

    async def MetadataFetch(self, request: bpb.MetadataFetchRequest, context: Any) -> Any:
        return await self._fetch(request, context)

    async def MetadataFetchStream(
        self, requests: AsyncIterator[bpb.MetadataFetchRequest], context: Any
    ) -> AsyncIterator[bpb.MetadataFetchResponse]:
        async for request in requests:
            yield await self._fetch(request, context)

    async def _fetch(
        self, request: bpb.MetadataFetchRequest, context: Any
    ) -> bpb.MetadataFetchResponse:
        received_ms = wall_clock_ms()
        c = self.c
        problems = _fetch_problems(request)
        if problems:
            await context.abort_with_status(
                rich_status(ApiError.INVALID_REQUEST, "; ".join(problems))
            )
        log = c.driver.core.log
        if request.fetch_offset > log.end_offset:
            await context.abort_with_status(
                rich_status(
                    ApiError.OFFSET_OUT_OF_RANGE,
                    f"fetch offset {request.fetch_offset} is past the log end "
                    f"{log.end_offset}: the broker's cache is not from this log",
                )
            )
        beat = await self._heartbeat(
            context,
            bpb.BrokerHeartbeatRequest(
                cluster_id=request.cluster_id,
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                current_metadata_offset=request.fetch_offset,
                want_fence=request.want_fence,
                want_shutdown=request.want_shutdown,
            ),
        )
        state = bpb.BrokerState.Name(request.current_state)
        session = c.registry.sessions.get(request.broker_id)
        if session is not None:
            session.reported_state = state
        response = bpb.MetadataFetchResponse(
            is_fenced=beat.is_fenced,
            is_caught_up=beat.is_caught_up,
            should_shut_down=beat.should_shut_down,
            controller_receive_time_ms=received_ms,
            controller_id=c.driver.config.node_id,
        )
        snapshot = self._snapshot_to_load(request.fetch_offset)
        if snapshot is not None:
            response.load_snapshot.CopyFrom(snapshot)
        else:
            if request.fetch_offset >= c.driver.core.high_watermark and not beat.should_shut_down:
                wait_ms = min(request.max_wait_ms, MAX_WAIT_CAP_MS)
                await c.commits.wait(wait_ms / 1000)
            self._fill_batches(response, request.fetch_offset, request.max_records)
        response.high_watermark = c.driver.core.high_watermark
        response.controller_send_time_ms = wall_clock_ms()
        return response

    def _snapshot_to_load(self, fetch_offset: int) -> bpb.SnapshotRef | None:
        c = self.c
        log = c.driver.core.log
        replicated = c.driver.replicated
        if replicated is None:
            return None
        behind = c.driver.core.high_watermark - fetch_offset
        if fetch_offset >= log.start_offset and behind <= SNAPSHOT_LAG_RECORDS:
            return None
        latest = replicated.store.latest()
        if latest is None or latest.end_offset <= fetch_offset:
            return None
        return bpb.SnapshotRef(end_offset=latest.end_offset, epoch=latest.epoch)

    def _fill_batches(
        self, response: bpb.MetadataFetchResponse, fetch_offset: int, max_records: int
    ) -> None:
        core = self.c.driver.core
        high_watermark = core.high_watermark
        budget = max_records or DEFAULT_MAX_RECORDS
        offset = fetch_offset
        while offset < high_watermark and budget > 0:
            batches = core.log.read(offset, budget)
            if not batches:
                break
            for batch in batches:
                if batch.base_offset >= high_watermark or budget <= 0:
                    return
                skip = max(0, offset - batch.base_offset)
                records = batch.records[skip:]
                last = batch.base_offset + len(batch.records) - 1
                if last >= high_watermark:  # never past the high watermark
                    records = records[: high_watermark - offset]
                response.batches.add(
                    base_offset=batch.base_offset + skip,
                    epoch=batch.epoch,
                    append_time_ms=batch.append_time_ms,
                    commit_time_ms=self.c.commits.commit_time_ms(last),
                    control=batch.control,
                    records=records,
                )
                budget -= len(records)
                offset = batch.base_offset + skip + len(records)

    async def FetchMetadataSnapshot(
        self, request: bpb.FetchMetadataSnapshotRequest, context: Any
    ) -> Any:
        c = self.c
        await c.check(context, request.cluster_id)
        if request.position < 0 or request.max_bytes <= 0:
            await context.abort_with_status(
                rich_status(
                    ApiError.INVALID_REQUEST,
                    "position must not be negative and max_bytes must be positive",
                )
            )
        broker = c.image.brokers.get(request.broker_id)
        if broker is None or broker.broker_epoch != request.broker_epoch:
            error = (
                ApiError.BROKER_ID_NOT_REGISTERED if broker is None else ApiError.STALE_BROKER_EPOCH
            )
            await context.abort_with_status(
                rich_status(error, f"broker {request.broker_id} epoch {request.broker_epoch}")
            )
        replicated = c.driver.replicated
        wanted = SnapshotId(request.snapshot.end_offset, request.snapshot.epoch)
        if replicated is None:
            await context.abort_with_status(
                rich_status(ApiError.SNAPSHOT_NOT_FOUND, "this controller keeps no snapshots")
            )
        assert replicated is not None
        loop = asyncio.get_running_loop()
        max_bytes = min(request.max_bytes, MAX_SNAPSHOT_CHUNK)
        try:
            chunk = await loop.run_in_executor(
                None, replicated.store.read_chunk, wanted, request.position, max_bytes
            )
        except SnapshotNotFoundError:
            await context.abort_with_status(
                rich_status(ApiError.SNAPSHOT_NOT_FOUND, f"no snapshot {wanted}")
            )
        except ValueError as err:
            await context.abort_with_status(rich_status(ApiError.POSITION_OUT_OF_RANGE, str(err)))
        return bpb.FetchMetadataSnapshotResponse(
            size=chunk.total_size, position=chunk.position, data=chunk.data
        )


_BROKER_STATES = frozenset(bpb.BrokerState.values())


def _fetch_problems(request: bpb.MetadataFetchRequest) -> list[str]:
    """Everything wrong with a MetadataFetch, found before its heartbeat is applied."""
    problems = [
        f"{name} must not be negative, got {value}"
        for name, value in (
            ("broker_id", request.broker_id),
            ("fetch_offset", request.fetch_offset),
            ("max_wait_ms", request.max_wait_ms),
            ("max_records", request.max_records),
        )
        if value < 0
    ]
    if request.current_state not in _BROKER_STATES:
        problems.append(f"current_state {request.current_state} is not a broker state")
    return problems


def add_servicers(server: grpc.aio.Server, controller: MetadataController) -> list[str]:
    """Register the admin and broker services; returns their full names for reflection."""
    api_grpc.add_AdminServicer_to_server(AdminServicer(controller), server)
    bpb_grpc.add_BrokerLifecycleServicer_to_server(BrokerLifecycleServicer(controller), server)
    return [
        api.DESCRIPTOR.services_by_name["Admin"].full_name,
        bpb.DESCRIPTOR.services_by_name["BrokerLifecycle"].full_name,
    ]
