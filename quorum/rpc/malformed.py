"""Bytes that do not parse as the request message: INVALID_REQUEST, not UNKNOWN.

gRPC parses a request before any servicer runs, and by default a parse failure
reaches the caller as status UNKNOWN ("Unexpected <class DecodeError>") with a
traceback in the server's log per request, so a fuzzing client could fill the
log. This interceptor swaps every method's request parser for one that turns a
failure into a marker; the call is then refused with INVALID_ARGUMENT and
Kafka's INVALID_REQUEST in the rich details, and logged at most once per
`LOG_EVERY_S` with a count. Nothing reaches a servicer, so nothing changes.
A streaming servicer may yield its answers or write them (`context.write`, as
grpcio's health Watch does); the wrapper takes the same form, since gRPC
iterates the one and awaits the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from quorum.common.guarded_handlers import guarded_handler
from quorum.raft.messages import ErrorCode
from quorum.rpc.wire_errors import rich_status

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0


class _Malformed:
    """Stands in for a request whose bytes did not parse."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _RateLimitedLog:
    """One WARN line per period, counting the refusals in between."""

    def __init__(self, period_s: float) -> None:
        self._period_s = period_s
        self._last = -period_s
        self._suppressed = 0

    def note(self, method: str, reason: str) -> None:
        now = time.monotonic()
        if now - self._last < self._period_s:
            self._suppressed += 1
            return
        extra = f" ({self._suppressed} more since the last report)" if self._suppressed else ""
        log.warning("refused a malformed %s request: %s%s", method, reason, extra)
        self._last, self._suppressed = now, 0


_log = _RateLimitedLog(LOG_EVERY_S)


def _tolerant(parse: Callable[[bytes], Any] | None) -> Callable[[bytes], Any]:
    def parse_or_mark(data: bytes) -> Any:
        if parse is None:
            return data
        try:
            return parse(data)
        except Exception as err:
            return _Malformed(f"{type(err).__name__}: {err}")

    return parse_or_mark


async def _refuse(context: Any, method: str, bad: _Malformed) -> None:
    _log.note(method, bad.reason)
    await context.abort_with_status(
        rich_status(ErrorCode.INVALID_REQUEST, f"malformed {method} request: {bad.reason}")
    )


def _guard(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    async def refuse_malformed(request: Any, context: Any) -> None:
        if isinstance(request, _Malformed):
            await _refuse(context, method, request)

    return guarded_handler(handler, refuse_malformed, _tolerant(handler.request_deserializer))


class RejectMalformedRequests(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Installed on every server (`channels.new_server`)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return None
        return _guard(handler, details.method.rsplit("/", 1)[-1])
