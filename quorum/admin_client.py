"""An asyncio client for the admin API and broker calls that finds the active
controller by itself: it follows NOT_CONTROLLER hints (the active controller's
address in the rich status) and moves on from unreachable controllers, with no
fixed back-off beyond a short pause after a full round of failures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import broker_pb2 as bpb
from quorum.gen import broker_pb2_grpc as bpb_grpc
from quorum.server.channels import exchange, open_channel
from quorum.server.errors import WireError, wire_error

ROUND_PAUSE_S = 0.05
_MOVE_ON = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


class AdminError(Exception):
    """The controller refused the call; `error.error.name` is Kafka's error name."""

    def __init__(self, error: WireError) -> None:
        name = error.error.name if error.error else error.status.name
        super().__init__(f"{name}: {error.message}")
        self.error = error

    @property
    def name(self) -> str:
        return self.error.error.name if self.error.error else self.error.status.name


class NoControllerError(Exception):
    """No controller answered before the deadline."""


class AdminClient:
    def __init__(
        self,
        bootstrap: Sequence[str],
        cluster_id: str = "",
        addresses: Mapping[int, str] | None = None,
    ) -> None:
        if not bootstrap:
            raise ValueError("at least one bootstrap address is needed")
        self.bootstrap = list(bootstrap)
        self.cluster_id = cluster_id
        # controller id -> the address *this* client dials it at (Kafka's brokers
        # resolve a hinted leader id through their own controller.quorum.voters;
        # the hint's address is the one the answering controller dials)
        self.addresses = dict(addresses or {})
        self._active: str | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._fetch_stream: Any = None  # the open MetadataFetchStream call, if any
        self._fetch_stream_address = ""

    def _channel(self, address: str) -> grpc.aio.Channel:
        if address not in self._channels:
            self._channels[address] = open_channel(address)
        return self._channels[address]

    async def admin(self, method: str, request: Any, deadline_s: float = 30.0) -> Any:
        return await self._call(api_grpc.AdminStub, method, request, deadline_s)

    async def broker(self, method: str, request: Any, deadline_s: float = 30.0) -> Any:
        return await self._call(bpb_grpc.BrokerLifecycleStub, method, request, deadline_s)

    async def _call(self, stub_type: Any, method: str, request: Any, deadline_s: float) -> Any:
        if hasattr(request, "cluster_id") and not request.cluster_id:
            request.cluster_id = self.cluster_id
        give_up = time.monotonic() + deadline_s
        tried: list[str] = []
        index = 0
        while time.monotonic() < give_up:
            address, index = await self._pick(index)
            stub = stub_type(self._channel(address))
            try:
                timeout = max(0.05, give_up - time.monotonic())
                return await getattr(stub, method)(request, timeout=timeout)
            except grpc.aio.AioRpcError as err:
                await self._route(err, address, tried)
        raise NoControllerError(
            f"no active controller answered {method} within {deadline_s}s; tried "
            + ", ".join(tried[-len(self.bootstrap) :] or self.bootstrap)
        )

    async def _route(self, err: grpc.aio.AioRpcError, address: str, tried: list[str]) -> None:
        """After a failed call: pick where to try next, or raise what retrying cannot cure."""
        error = wire_error(err)
        tried.append(f"{address}: {error.error.name if error.error else err.code().name}")
        name = error.error.name if error.error else ""
        if name == "NOT_CONTROLLER":
            leader = error.leader_id
            hinted = (
                self.addresses.get(leader, error.leader_address)
                if leader is not None
                else error.leader_address
            )
            self._active = hinted if hinted != address else None
            if self._active is None:
                await asyncio.sleep(ROUND_PAUSE_S)
            return
        if error.error is None and err.code() in _MOVE_ON:
            self._active = None
            return
        raise AdminError(error) from err

    async def _pick(self, index: int) -> tuple[str, int]:
        """The active controller when known, else the next bootstrap address (with a
        short pause after each full round)."""
        if self._active is not None:
            return self._active, index
        address = self.bootstrap[index % len(self.bootstrap)]
        index += 1
        if index % len(self.bootstrap) == 0:
            await asyncio.sleep(ROUND_PAUSE_S)
        return address, index

    async def metadata_fetch(
        self, request: bpb.MetadataFetchRequest, deadline_s: float = 30.0
    ) -> bpb.MetadataFetchResponse:
        """One MetadataFetch exchange over a MetadataFetchStream call kept open across
        fetches. A failure or cancellation drops the call (see `exchange`); the
        next fetch opens a new one, routed like any other call."""
        if not request.cluster_id:
            request.cluster_id = self.cluster_id
        give_up = time.monotonic() + deadline_s
        tried: list[str] = []
        index = 0
        while time.monotonic() < give_up:
            if self._fetch_stream is None:
                address, index = await self._pick(index)
                stub = bpb_grpc.BrokerLifecycleStub(self._channel(address))
                self._fetch_stream, self._fetch_stream_address = stub.MetadataFetchStream(), address
            call, address = self._fetch_stream, self._fetch_stream_address
            self._fetch_stream = None  # back only after a clean answer
            try:
                response = await exchange(call, request, max(0.05, give_up - time.monotonic()))
            except grpc.aio.AioRpcError as err:
                await self._route(err, address, tried)
                continue
            except TimeoutError as err:  # no answer in time, or the call had ended
                self._active = None
                tried.append(f"{address}: {err or 'no answer in time'}")
                continue
            self._fetch_stream = call
            return response  # type: ignore[no-any-return]
        raise NoControllerError(
            f"no active controller answered MetadataFetch within {deadline_s}s; tried "
            + ", ".join(tried[-len(self.bootstrap) :] or self.bootstrap)
        )

    def _drop_fetch_stream(self) -> None:
        if self._fetch_stream is not None:
            self._fetch_stream.cancel()
            self._fetch_stream = None

    async def close(self) -> None:
        self._drop_fetch_stream()
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
