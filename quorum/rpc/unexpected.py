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

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from quorum.raft.messages import ErrorCode
from quorum.rpc.wire_errors import exception_status, rich_status

log = logging.getLogger(__name__)


async def _answer(err: Exception, method: str, context: Any) -> None:
    if isinstance(err, grpc.aio.BaseError):  # an abort: the servicer's own answer
        raise err
    if isinstance(err, (TimeoutError, OSError)):
        log.info("%s call not answered: %s: %s", method, type(err).__name__, err)
    else:
        log.error("%s call failed unexpectedly", method, exc_info=err)
    await context.abort_with_status(exception_status(err))


class AnswerEveryCall(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Installed first on every server (`channels.new_server`), so it also
    answers for the other interceptors' checks.

    It also ends the calls still open when the server stops (`end_calls`): a
    long-lived stream (FetchStream, WriteStream, MetadataFetchStream) waiting
    for its client's next request would otherwise be cancelled by gRPC's own
    stop, which logs a CancelledError traceback per stream; here each is
    answered UNAVAILABLE ("the node is shutting down") instead."""

    def __init__(self) -> None:
        self._calls: set[asyncio.Task[Any]] = set()
        self._stopping = False

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return None
        return self.answered_handler(handler, details.method.rsplit("/", 1)[-1])

    async def end_calls(self, grace_s: float) -> None:
        """Let the open calls finish for `grace_s`, then answer the rest UNAVAILABLE."""
        if self._calls:
            await asyncio.wait(set(self._calls), timeout=grace_s)
        self._stopping = True
        left = set(self._calls)
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=grace_s)

    async def _stopped(self, method: str, context: Any) -> None:
        """Answer a call that `end_calls` cancelled (its cancellation is ours,
        not the caller's: the task goes on to send the answer)."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        try:
            await context.abort_with_status(
                rich_status(ErrorCode.BROKER_NOT_AVAILABLE, f"{method}: the node is shutting down")
            )
        except grpc.aio.UsageError:
            # Cancelled while its own abort was under way ("Abort was already
            # called"): returning lets gRPC send that answer.
            return

    def answered_handler(
        self, handler: grpc.RpcMethodHandler, method: str
    ) -> grpc.RpcMethodHandler:
        """The same handler (same shape: unary or stream each way, yielding or
        writing) with every exception turned into a status."""
        parse, serialize = handler.request_deserializer, handler.response_serializer
        calls = self._calls

        def returning(inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def call(request: Any, context: Any) -> Any:
                task = asyncio.current_task()
                if task is not None:
                    calls.add(task)
                try:
                    return await inner(request, context)
                except asyncio.CancelledError:
                    if not self._stopping:  # the caller went away, or gRPC stopped
                        raise
                    await self._stopped(method, context)
                except Exception as err:
                    await _answer(err, method, context)
                finally:
                    calls.discard(task)  # type: ignore[arg-type]

            return call

        def yielding(
            inner: Callable[..., AsyncIterator[Any]],
        ) -> Callable[..., AsyncIterator[Any]]:
            async def call(request: Any, context: Any) -> AsyncIterator[Any]:
                task = asyncio.current_task()
                if task is not None:
                    calls.add(task)
                try:
                    async for answer in inner(request, context):
                        yield answer
                except asyncio.CancelledError:
                    if not self._stopping:  # the caller went away, or gRPC stopped
                        raise
                    await self._stopped(method, context)
                except Exception as err:
                    await _answer(err, method, context)
                finally:
                    calls.discard(task)  # type: ignore[arg-type]

            return call

        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                returning(handler.unary_unary), parse, serialize
            )
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


__all__ = ["AnswerEveryCall"]
