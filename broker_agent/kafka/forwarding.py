"""Kafka admin requests forwarded to the active controller (KIP-590), and their errors.

A broker validates nothing of an admin request itself: it translates the
request into the controllers' gRPC admin call and sends it with the client's
principal and address in the call's metadata (`quorum.common.tls.FORWARDED_*`),
so the active controller's authorizer decides for that client. The controllers
honour those keys only from a caller allowed CLUSTER_ACTION (a broker), see
`quorum/server/access.py`.

The admin client follows NOT_CONTROLLER hints and moves on from an unreachable
controller by itself, inside the request's `timeout_ms`; a client never sees
NOT_CONTROLLER: what is left when time runs out is REQUEST_TIMED_OUT.

Errors: the controller's `ApiError` values *are* Kafka's error codes (one
table, `quorum/controller/api_errors.py`, whose every member the tests check
against kio's `ErrorCode`), so a per-item `ApiError{error_code, message}` and a
call-level refusal (the gRPC status's `ErrorInfo` reason) map to Kafka's code
by value or name, with the controller's message.

Read-your-writes: every write's answer carries the metadata offset that shows
it. The write answers as soon as the controller committed it, and that offset
becomes this broker's *read fence*: a request that answers from this broker's
image (Metadata, DescribeCluster, the image reads of CreatePartitions and
AlterConfigs, see `admin_handlers.FENCED`) first waits until the image has
applied up to the fence, bounded by the write's own timeout. So a Metadata
request to the same broker right after a CreateTopics sees the topic, on any of
its connections, while the write itself does not wait for this broker's apply
(which it did before: 2-3x its latency at batch 100, docs/benchmarks.md). ACL
writes still wait before answering (`write(..., settle=True)`): the ACLs in the
image authorize every request on this broker, the data plane included, which
the fence does not hold back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from quorum.admin_client import AdminClient, AdminError, NoControllerError
from quorum.common.tls import FORWARDED_HOST, FORWARDED_PRINCIPAL
from quorum.controller.api_errors import ApiError

log = logging.getLogger("broker_agent.kafka")

DEFAULT_TIMEOUT_MS = 30_000
MIN_TIMEOUT_MS = 1_000
APPLY_POLL_S = 0.05  # a safety net: `wake` ends each wait as soon as records are applied
# How long a fetched batch waits for a forwarded write's reply before it is applied.
REPLY_FIRST_S = 0.002


class ForwardError(Exception):
    """The whole forwarded call failed: Kafka's error and the controller's message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error
        self.message = message


def kafka_error(code: int) -> ErrorCode:
    """Kafka's error for a controller `ApiError` code (the same numbers)."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.unknown_server_error


def kafka_error_named(name: str) -> ErrorCode:
    """Kafka's error for a controller error name (a call-level refusal's reason)."""
    api = ApiError.__members__.get(name)
    if api is not None:
        return kafka_error(api.value)
    try:
        return ErrorCode[name.lower()]
    except KeyError:
        return ErrorCode.unknown_server_error


def item_error(error: Any) -> tuple[int, str | None]:
    """A per-item `ApiError` proto as Kafka's (error_code, error_message)."""
    code = int(kafka_error(error.error_code)) if error.error_code else 0
    return code, (error.message or None) if code else None


@dataclass(frozen=True, slots=True)
class Caller:
    """The client a request is forwarded for."""

    principal: str
    host: str


def deadline_ms(timeout_ms: int) -> int:
    """How long a forwarded request may take: its `timeout_ms`, or Kafka's
    default request timeout when the client sent none (0 or negative)."""
    return max(timeout_ms, MIN_TIMEOUT_MS) if timeout_ms > 0 else DEFAULT_TIMEOUT_MS


class ControllerForwarder:
    """Sends admin requests to the active controller for a client, and keeps the
    read fence: what this broker's image must show before it answers a read."""

    def __init__(self, client: AdminClient | None, applied_offset: Callable[[], int]) -> None:
        self.client = client
        self.applied_offset = applied_offset
        self.forwarded: dict[str, int] = {}
        self.fence = 0  # the highest metadata offset a write was answered with
        self.fence_until = 0.0  # monotonic: readers wait for the fence until then at most
        self.fenced_reads = 0  # reads that found the image behind the fence and waited
        self._applied = asyncio.Event()
        self._writes_in_flight = 0
        self._write_answered = asyncio.Event()

    def wake(self) -> None:
        """This broker applied committed metadata: waiters look at their offset again."""
        self._applied.set()
        self._applied = asyncio.Event()

    async def call(self, method: str, request: Any, caller: Caller, timeout_ms: int) -> Any:
        """The controller's reply, or ForwardError with Kafka's error."""
        self.forwarded[method] = self.forwarded.get(method, 0) + 1
        if self.client is None:
            raise ForwardError(ErrorCode.request_timed_out, "no controller to forward to")
        metadata = (
            (FORWARDED_PRINCIPAL, caller.principal.encode()),
            (FORWARDED_HOST, caller.host or "unknown"),
        )
        try:
            return await self.client.admin(
                method, request, deadline_s=deadline_ms(timeout_ms) / 1000, metadata=metadata
            )
        except AdminError as err:
            raise ForwardError(kafka_error_named(err.name), err.error.message) from None
        except NoControllerError as err:
            log.info("forwarding %s: %s", method, err)
            raise ForwardError(ErrorCode.request_timed_out, str(err)) from None

    async def wait_for_offset(self, offset: int, give_up: float) -> bool:
        """Whether this broker's image reached `offset` by the monotonic `give_up`."""
        while self.applied_offset() < offset:
            left = give_up - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._applied.wait(), min(APPLY_POLL_S, left))
        return True

    async def write(
        self, method: str, request: Any, caller: Caller, timeout_ms: int, settle: bool = False
    ) -> Any:
        """`call`, with its metadata offset raised into the read fence; with `settle`,
        also wait (within the timeout) until this broker's image shows the write."""
        give_up = time.monotonic() + deadline_ms(timeout_ms) / 1000
        self._writes_in_flight += 1
        try:
            reply = await self.call(method, request, caller, timeout_ms)
        finally:
            self._writes_in_flight -= 1
            self._write_answered.set()
            self._write_answered = asyncio.Event()
        offset = int(getattr(reply, "metadata_offset", 0))
        if offset > self.applied_offset():
            self.fence = max(self.fence, offset)
            self.fence_until = max(self.fence_until, give_up)
            if settle and not await self.wait_for_offset(offset, give_up):
                log.info("%s: metadata offset %d not applied in time here", method, offset)
        return reply

    async def replies_first(self) -> None:
        """Before this broker applies a fetched batch: while a forwarded write waits
        for its reply, let that reply in first (at most `REPLY_FIRST_S`). The
        controller sends a write's reply before the fetch answers of its commit, but
        on another connection, so the batch often arrives first, and its apply
        (~1.3 ms of the loop for 100 new topics) would hold the client's answer."""
        if self._writes_in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._write_answered.wait(), REPLY_FIRST_S)

    async def caught_up(self, timeout_ms: int = 0) -> bool:
        """Wait until this broker's image shows every write it answered (the read
        fence), at most until the fence's write timed out and, with `timeout_ms`,
        that long; whether it did."""
        if self.applied_offset() >= self.fence:
            return True
        now = time.monotonic()
        if now >= self.fence_until:
            return False  # that write's answer is past its timeout: no one waits for it now
        self.fenced_reads += 1
        give_up = self.fence_until
        if timeout_ms > 0:
            give_up = min(give_up, now + deadline_ms(timeout_ms) / 1000)
        if await self.wait_for_offset(self.fence, give_up):
            return True
        log.info("metadata offset %d (read fence) not applied in time here", self.fence)
        return False
