"""Wrap any gRPC method handler so that a check runs before its servicer sees a
request: the one piece of plumbing both server interceptors need (malformed
requests in `malformed.py`, authorization of grpcio's own servicers in
`quorum/server/standard_services_access.py`).

A handler comes in four shapes (unary or stream, each way), and a servicer may
answer a stream either by yielding or by `context.write` (grpcio's health Watch
does the latter: a coroutine, not a generator, which must stay a coroutine or
every call ends UNKNOWN). The wrapper keeps the shape it was given.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

# check(request, context): returns to let the request through; aborts the call
# (context.abort...) to refuse it.
RequestCheck = Callable[[Any, Any], Awaitable[None]]


def guarded_handler(
    handler: grpc.RpcMethodHandler,
    check: RequestCheck,
    parse: Callable[[bytes], Any] | None,
    *,
    first_only: bool = False,
) -> grpc.RpcMethodHandler:
    """The same handler with `check` awaited before the servicer sees each request
    (with `first_only`, only the first of a client stream: a check of the caller,
    not of the message). Requests are decoded with `parse`."""
    serialize = handler.response_serializer

    def stream(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async def each() -> AsyncIterator[Any]:
            checked = False
            async for request in requests:
                if not (first_only and checked):
                    await check(request, context)
                    checked = True
                yield request

        return each()

    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: Any) -> Any:
            await check(request, context)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, parse, serialize)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream
        if inspect.iscoroutinefunction(inner_us):

            async def unary_writer(request: Any, context: Any) -> None:
                await check(request, context)
                await inner_us(request, context)

            return grpc.unary_stream_rpc_method_handler(unary_writer, parse, serialize)

        async def unary_stream(request: Any, context: Any) -> AsyncIterator[Any]:
            await check(request, context)
            async for answer in inner_us(request, context):
                yield answer

        return grpc.unary_stream_rpc_method_handler(unary_stream, parse, serialize)
    if handler.stream_unary is not None:
        inner_su = handler.stream_unary

        async def stream_unary(requests: AsyncIterator[Any], context: Any) -> Any:
            return await inner_su(stream(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, parse, serialize)
    inner_ss = handler.stream_stream
    if inspect.iscoroutinefunction(inner_ss):

        async def stream_writer(requests: AsyncIterator[Any], context: Any) -> None:
            await inner_ss(stream(requests, context), context)

        return grpc.stream_stream_rpc_method_handler(stream_writer, parse, serialize)

    async def stream_stream(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for answer in inner_ss(stream(requests, context), context):
            yield answer

    return grpc.stream_stream_rpc_method_handler(stream_stream, parse, serialize)


__all__ = ["RequestCheck", "guarded_handler"]
