"""The one place gRPC servers are built, with the guards every server runs.

Every process's server carries the same options as its channels
(`quorum.common.channels`: message size limits, keepalive) and, first in line,
the guard that turns a servicer's exception into a proper status
(`unexpected.py`) and the one that refuses a request whose bytes do not parse
(`malformed.py`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence

import grpc

from quorum.common.channels import (
    MAX_MESSAGE_BYTES,
    MESSAGE_SIZE_OPTIONS,
    SERVER_KEEPALIVE_OPTIONS,
)
from quorum.rpc.malformed import RejectMalformedRequests
from quorum.rpc.unexpected import AnswerEveryCall

# Each server's interceptor that answers for it (see `stop_server`).
_ANSWERING: weakref.WeakKeyDictionary[grpc.aio.Server, AnswerEveryCall] = (
    weakref.WeakKeyDictionary()
)


def new_server(
    max_receive_bytes: int = MAX_MESSAGE_BYTES,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> grpc.aio.Server:
    """`max_receive_bytes` is the process's `socket.request.max.bytes`: gRPC refuses
    a larger request (RESOURCE_EXHAUSTED) before decoding it. SO_REUSEPORT is off
    (gRPC turns it on by default), so a second process given a busy port fails at
    start-up instead of sharing the port and taking half of the calls.
    `interceptors` run after the guard that turns any exception into a status
    (`unexpected.py`) and the malformed-request guard (the server's own
    authorization of grpcio's servicers)."""
    options = [o for o in MESSAGE_SIZE_OPTIONS if o[0] != "grpc.max_receive_message_length"]
    answering = AnswerEveryCall()
    server = grpc.aio.server(
        options=[
            *options,
            ("grpc.max_receive_message_length", max_receive_bytes),
            ("grpc.so_reuseport", 0),
            *SERVER_KEEPALIVE_OPTIONS,
        ],
        interceptors=[answering, RejectMalformedRequests(), *interceptors],
    )
    _ANSWERING[server] = answering
    return server


class _ShutdownCancellations(logging.Filter):
    """Drops gRPC's "Exception not handled by _handle_exceptions" record when the
    exception is a CancelledError: at a process's shutdown, gRPC's core cancels a
    call a second time while gRPC's own wrapper is still sending that call's
    answer (ours, or the cancellation's), and logs the second cancellation as an
    error with no frame of ours (seen as EndQuorumEpoch at a peer's shutdown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith("Exception not handled by _handle_exceptions"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:  # the traceback in the message itself
            return not message.rstrip().endswith("CancelledError")
        return not isinstance(exc, asyncio.CancelledError)


def mute_shutdown_cancellations() -> None:
    """Called by a process about to stop its servers (never by library code, so
    in-process tests still see any cancellation a server fails to answer)."""
    logging.getLogger("grpc._cython.cygrpc").addFilter(_ShutdownCancellations())


async def stop_server(server: grpc.aio.Server, grace_s: float) -> None:
    """Stop `server`, first answering the calls still open after `grace_s`
    (UNAVAILABLE: the node is shutting down) so gRPC need not cancel them."""
    answering = _ANSWERING.pop(server, None)
    if answering is not None:
        await answering.end_calls(grace_s)
    await server.stop(grace=grace_s)
