"""An asyncio client for the admin API and broker calls that finds the active
controller by itself: it follows NOT_CONTROLLER hints (the active controller's
address in the rich status) and moves on from unreachable controllers, with no
fixed back-off beyond a short pause after a full round of failures.

It remembers the controller that last answered and, when that one fails, goes
on round the bootstrap list from where it stopped (not from the first address
every time, which a frozen first controller would stall forever). No single
attempt gets more than `attempt_timeout_s` (plus a fetch's own long poll), so a
frozen controller costs one attempt, not the caller's whole deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from quorum.common.channels import exchange, open_channel
from quorum.common.tls import TlsSettings
from quorum.gen import admin_pb2_grpc as api_grpc
from quorum.gen import broker_pb2 as bpb
from quorum.gen import broker_pb2_grpc as bpb_grpc
from quorum.rpc.wire_errors import WireError, wire_error

ROUND_PAUSE_S = 0.05
MAX_THROTTLE_WAIT_MS = 5_000
ATTEMPT_TIMEOUT_S = 10.0
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
        attempt_timeout_s: float = ATTEMPT_TIMEOUT_S,
        addresses: Mapping[int, str] | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        if not bootstrap:
            raise ValueError("at least one bootstrap address is needed")
        self.bootstrap = list(bootstrap)
        self.cluster_id = cluster_id
        self.attempt_timeout_s = attempt_timeout_s
        # controller id -> the address *this* client dials it at (Kafka's brokers
        # resolve a hinted leader id through their own controller.quorum.voters;
        # the hint's address is the one the answering controller dials)
        self.addresses = dict(addresses or {})
        self.tls = tls
        self._active: str | None = None
        self._next = 0  # where the next round of the bootstrap list starts
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[Any, str], Any] = {}
        self._fetch_stream: Any = None  # the open MetadataFetchStream call, if any
        self._fetch_stream_address = ""

    @property
    def active_address(self) -> str | None:
        """The controller that answered last (a CLI asks it how current its reads are)."""
        return self._active

    def _channel(self, address: str) -> grpc.aio.Channel:
        if address not in self._channels:
            self._channels[address] = open_channel(address, tls=self.tls)
        return self._channels[address]

    def _stub(self, stub_type: Any, address: str) -> Any:
        """One stub per service and channel: a stub makes a callable per method of
        its service when built (19 for Admin, ~0.1-0.3 ms), which a forwarding
        broker paid on every forwarded request."""
        stub = self._stubs.get((stub_type, address))
        if stub is None:
            stub = self._stubs[(stub_type, address)] = stub_type(self._channel(address))
        return stub

    async def admin(
        self,
        method: str,
        request: Any,
        deadline_s: float = 30.0,
        metadata: Sequence[tuple[str, str | bytes]] = (),
    ) -> Any:
        """One admin call; `metadata` goes with every attempt (a broker forwarding
        a Kafka client's request names that client there)."""
        return await self._call(api_grpc.AdminStub, method, request, deadline_s, metadata)

    async def broker(self, method: str, request: Any, deadline_s: float = 30.0) -> Any:
        return await self._call(bpb_grpc.BrokerLifecycleStub, method, request, deadline_s)

    async def _call(
        self,
        stub_type: Any,
        method: str,
        request: Any,
        deadline_s: float,
        metadata: Sequence[tuple[str, str | bytes]] = (),
    ) -> Any:
        if hasattr(request, "cluster_id") and not request.cluster_id:
            request.cluster_id = self.cluster_id
        give_up = time.monotonic() + deadline_s
        tried: list[str] = []
        while time.monotonic() < give_up:
            address = await self._pick()
            stub = self._stub(stub_type, address)
            try:
                timeout = max(0.05, min(self.attempt_timeout_s, give_up - time.monotonic()))
                reply = await getattr(stub, method)(
                    request, timeout=timeout, metadata=tuple(metadata) or None
                )
            except grpc.aio.AioRpcError as err:
                await self._route(err, address, tried)
                continue
            self._active = address
            return reply
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
        if name == "THROTTLING_QUOTA_EXCEEDED":  # as Kafka's clients: wait, then retry
            wait_ms = int(error.metadata.get("throttle_time_ms") or 100)
            await asyncio.sleep(min(wait_ms, MAX_THROTTLE_WAIT_MS) / 1000)
            return
        if error.error is None and err.code() in _MOVE_ON:
            self._active = None
            return
        raise AdminError(error) from err

    async def _pick(self) -> str:
        """The active controller when known, else the next bootstrap address (with a
        short pause after each full round)."""
        if self._active is not None:
            return self._active
        address = self.bootstrap[self._next % len(self.bootstrap)]
        self._next += 1
        if self._next % len(self.bootstrap) == 0:
            await asyncio.sleep(ROUND_PAUSE_S)
        return address

    async def metadata_fetch(
        self, request: bpb.MetadataFetchRequest, deadline_s: float = 30.0
    ) -> bpb.MetadataFetchResponse:
        """One MetadataFetch exchange over a MetadataFetchStream call kept open across
        fetches. A failure or cancellation drops the call (see `exchange`); the
        next fetch opens a new one, routed like any other call."""
        if not request.cluster_id:
            request.cluster_id = self.cluster_id
        give_up = time.monotonic() + deadline_s
        attempt_s = self.attempt_timeout_s + max(0, request.max_wait_ms) / 1000
        tried: list[str] = []
        while time.monotonic() < give_up:
            if self._fetch_stream is None:
                address = await self._pick()
                stub = bpb_grpc.BrokerLifecycleStub(self._channel(address))
                self._fetch_stream, self._fetch_stream_address = stub.MetadataFetchStream(), address
            call, address = self._fetch_stream, self._fetch_stream_address
            self._fetch_stream = None  # back only after a clean answer
            try:
                timeout = max(0.05, min(attempt_s, give_up - time.monotonic()))
                response = await exchange(call, request, timeout)
            except grpc.aio.AioRpcError as err:
                await self._route(err, address, tried)
                continue
            except TimeoutError as err:  # no answer in time, or the call had ended
                self._active = None
                tried.append(f"{address}: {err or 'no answer in time'}")
                continue
            self._fetch_stream = call
            self._active = address
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
        self._stubs.clear()
