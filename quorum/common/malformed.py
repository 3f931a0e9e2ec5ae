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

import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from quorum.common.wire_errors import rich_status
from quorum.raft.messages import ErrorCode

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


def _checked(requests: AsyncIterator[Any], context: Any, method: str) -> AsyncIterator[Any]:
    async def each() -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Malformed):
                await _refuse(context, method, request)
            yield request

    return each()


def _guard(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    parse = _tolerant(handler.request_deserializer)
    serialize = handler.response_serializer
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: Any) -> Any:
            if isinstance(request, _Malformed):
                await _refuse(context, method, request)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, parse, serialize)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream
        if inspect.iscoroutinefunction(inner_us):
            # A servicer that answers with context.write (grpcio's health Watch).

            async def unary_writer(request: Any, context: Any) -> None:
                if isinstance(request, _Malformed):
                    await _refuse(context, method, request)
                await inner_us(request, context)

            return grpc.unary_stream_rpc_method_handler(unary_writer, parse, serialize)

        async def unary_stream(request: Any, context: Any) -> AsyncIterator[Any]:
            if isinstance(request, _Malformed):
                await _refuse(context, method, request)
            async for answer in inner_us(request, context):
                yield answer

        return grpc.unary_stream_rpc_method_handler(unary_stream, parse, serialize)
    if handler.stream_unary is not None:
        inner_su = handler.stream_unary

        async def stream_unary(requests: AsyncIterator[Any], context: Any) -> Any:
            return await inner_su(_checked(requests, context, method), context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, parse, serialize)
    inner_ss = handler.stream_stream
    if inspect.iscoroutinefunction(inner_ss):

        async def stream_writer(requests: AsyncIterator[Any], context: Any) -> None:
            await inner_ss(_checked(requests, context, method), context)

        return grpc.stream_stream_rpc_method_handler(stream_writer, parse, serialize)

    async def stream_stream(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for answer in inner_ss(_checked(requests, context, method), context):
            yield answer

    return grpc.stream_stream_rpc_method_handler(stream_stream, parse, serialize)


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
