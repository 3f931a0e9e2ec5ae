"""The broker-facing calls over gRPC (KIP-631): thin adapters to the controller.

MetadataFetch is both a broker's heartbeat and how it pulls committed metadata;
MetadataFetchStream is the same exchange, request by request, over one call. The
decisions (heartbeat, snapshot or batches, long poll) are the controller's
(`QuorumController.metadata_fetch`); this module stamps the exchange's wire
times and serves snapshot chunks from the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import grpc

from quorum.common.clocks import wall_clock_ms
from quorum.controller.api_errors import ApiError
from quorum.controller.fetch_answers import FetchAnswer
from quorum.gen import admin_pb2 as api
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import broker_pb2 as bpb
from quorum.gen import broker_pb2_grpc as bpb_grpc
from quorum.gen import raft_pb2 as pb
from quorum.raft.records import SnapshotId
from quorum.rpc.wire_errors import rich_status
from quorum.server.admin_servicer import AdminServicer, ControllerCalls
from quorum.server.voter_changes import VoterChanges
from snapshots.api import SnapshotChunk
from snapshots.errors import SnapshotNotFoundError

MAX_SNAPSHOT_CHUNK = 4 << 20

ReadChunk = Callable[[SnapshotId, int, int], Coroutine[Any, Any, SnapshotChunk]]


class BrokerLifecycleServicer(bpb_grpc.BrokerLifecycleServicer):
    def __init__(self, calls: ControllerCalls, read_snapshot_chunk: ReadChunk | None) -> None:
        self._calls = calls
        self._c = calls.controller
        self._read_chunk = read_snapshot_chunk

    async def RegisterBroker(self, request: bpb.RegisterBrokerRequest, context: Any) -> Any:
        return await self._calls.serve(context, request, lambda: self._c.register_broker(request))

    async def BrokerHeartbeat(self, request: bpb.BrokerHeartbeatRequest, context: Any) -> Any:
        return await self._calls.serve(context, request, lambda: self._c.heartbeat(request))

    async def MetadataFetch(self, request: bpb.MetadataFetchRequest, context: Any) -> bytes:
        return await self._fetch(request, context)

    async def MetadataFetchStream(
        self, requests: AsyncIterator[bpb.MetadataFetchRequest], context: Any
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            yield await self._fetch(request, context)

    async def _fetch(self, request: bpb.MetadataFetchRequest, context: Any) -> bytes:
        """The answer already encoded: its shared part is the same bytes for every
        broker that asked the same (`quorum.controller.fetch_answers`)."""
        received_ms = wall_clock_ms()
        answer: FetchAnswer = await self._calls.serve(
            context, request, lambda: self._c.metadata_fetch_answer(request, received_ms)
        )
        answer.own.controller_send_time_ms = wall_clock_ms()
        return answer.encode()

    async def FetchMetadataSnapshot(
        self, request: bpb.FetchMetadataSnapshotRequest, context: Any
    ) -> Any:
        await self._calls.check(context, request.cluster_id)
        if request.position < 0 or request.max_bytes <= 0:
            await context.abort_with_status(
                rich_status(
                    ApiError.INVALID_REQUEST,
                    "position must not be negative and max_bytes must be positive",
                )
            )
        await self._calls.serve(
            context,
            request,
            lambda: self._c.check_snapshot_fetcher(request.broker_id, request.broker_epoch),
        )
        if self._read_chunk is None:
            await context.abort_with_status(
                rich_status(ApiError.SNAPSHOT_NOT_FOUND, "this controller keeps no snapshots")
            )
        assert self._read_chunk is not None
        wanted = SnapshotId(request.snapshot.end_offset, request.snapshot.epoch)
        try:
            chunk = await self._read_chunk(
                wanted, request.position, min(request.max_bytes, MAX_SNAPSHOT_CHUNK)
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


def add_servicers(
    server: grpc.aio.Server,
    calls: ControllerCalls,
    describe_quorum: Callable[[bool], pb.DescribeQuorumResponse],
    read_snapshot_chunk: ReadChunk | None,
    voter_changes: VoterChanges | None = None,
) -> list[str]:
    """Register the admin and broker services; returns their full names for reflection."""
    api_grpc.add_AdminServicer_to_server(
        AdminServicer(calls, describe_quorum, voter_changes), server
    )
    add_broker_lifecycle(BrokerLifecycleServicer(calls, read_snapshot_chunk), server)
    return [
        api.DESCRIPTOR.services_by_name["Admin"].full_name,
        bpb.DESCRIPTOR.services_by_name["BrokerLifecycle"].full_name,
    ]


def add_broker_lifecycle(servicer: BrokerLifecycleServicer, server: grpc.aio.Server) -> None:
    """The generated registration, but MetadataFetch's answers go out as the
    servicer encoded them (the generated one would serialize a message)."""
    service = "quorum.broker.v1.BrokerLifecycle"
    handlers = {
        "RegisterBroker": grpc.unary_unary_rpc_method_handler(
            servicer.RegisterBroker,
            request_deserializer=bpb.RegisterBrokerRequest.FromString,
            response_serializer=bpb.RegisterBrokerResponse.SerializeToString,
        ),
        "BrokerHeartbeat": grpc.unary_unary_rpc_method_handler(
            servicer.BrokerHeartbeat,
            request_deserializer=bpb.BrokerHeartbeatRequest.FromString,
            response_serializer=bpb.BrokerHeartbeatResponse.SerializeToString,
        ),
        "MetadataFetch": grpc.unary_unary_rpc_method_handler(
            servicer.MetadataFetch,
            request_deserializer=bpb.MetadataFetchRequest.FromString,
            response_serializer=_encoded,
        ),
        "MetadataFetchStream": grpc.stream_stream_rpc_method_handler(
            servicer.MetadataFetchStream,
            request_deserializer=bpb.MetadataFetchRequest.FromString,
            response_serializer=_encoded,
        ),
        "FetchMetadataSnapshot": grpc.unary_unary_rpc_method_handler(
            servicer.FetchMetadataSnapshot,
            request_deserializer=bpb.FetchMetadataSnapshotRequest.FromString,
            response_serializer=bpb.FetchMetadataSnapshotResponse.SerializeToString,
        ),
    }
    assert set(handlers) == set(bpb.DESCRIPTOR.services_by_name["BrokerLifecycle"].methods_by_name)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    server.add_registered_method_handlers(service, handlers)


def _encoded(answer: bytes) -> bytes:
    return answer


__all__ = ["BrokerLifecycleServicer", "add_broker_lifecycle", "add_servicers"]
