"""No call ends in an exception: whatever a servicer raises instead of answering
becomes a proper status (`wire_errors.exception_status`).

Left to itself, gRPC answers such a call UNKNOWN ("Unexpected <class
'TimeoutError'>") and logs a traceback at ERROR for each one; a long poll that
outlived its wait once did this for every follower at every leader change.
Here a wait that ran out is DEADLINE_EXCEEDED (REQUEST_TIMED_OUT) and an OS
failure UNAVAILABLE, each logged in one line; anything else is a defect and
is logged with its traceback, but still answered INTERNAL with the reason.

gRPC's own signals pass through untouched: an abort (the servicer's chosen
status) and cancellation (the caller went away).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from quorum.common.wire_errors import exception_status

log = logging.getLogger(__name__)


async def _answer(err: Exception, method: str, context: Any) -> None:
    if isinstance(err, grpc.aio.BaseError):  # an abort: the servicer's own answer
        raise err
    if isinstance(err, (TimeoutError, OSError)):
        log.info("%s call not answered: %s: %s", method, type(err).__name__, err)
    else:
        log.error("%s call failed unexpectedly", method, exc_info=err)
    await context.abort_with_status(exception_status(err))


def answered_handler(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    """The same handler (same shape: unary or stream each way, yielding or
    writing) with every exception turned into a status."""
    parse, serialize = handler.request_deserializer, handler.response_serializer

    def returning(inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(request: Any, context: Any) -> Any:
            try:
                return await inner(request, context)
            except Exception as err:
                await _answer(err, method, context)

        return call

    def yielding(inner: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
        async def call(request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                async for answer in inner(request, context):
                    yield answer
            except Exception as err:
                await _answer(err, method, context)

        return call

    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(returning(handler.unary_unary), parse, serialize)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            returning(handler.stream_unary), parse, serialize
        )
    if handler.unary_stream is not None:
        inner = handler.unary_stream
        wrap = returning if inspect.iscoroutinefunction(inner) else yielding
        return grpc.unary_stream_rpc_method_handler(wrap(inner), parse, serialize)
    inner = handler.stream_stream
    wrap = returning if inspect.iscoroutinefunction(inner) else yielding
    return grpc.stream_stream_rpc_method_handler(wrap(inner), parse, serialize)


class AnswerEveryCall(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Installed first on every server (`channels.new_server`), so it also
    answers for the other interceptors' checks."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return None
        return answered_handler(handler, details.method.rsplit("/", 1)[-1])


__all__ = ["AnswerEveryCall", "answered_handler"]
