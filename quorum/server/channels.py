"""The one place gRPC channels and servers are built.

Every process opens its channels and servers here so that settings that must
agree on both ends (message size limits now; TLS credentials later) cannot drift.
One atomic metadata change travels in one Raft batch, and a batch of tens of
thousands of partition records is larger than gRPC's 4 MiB default.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

MAX_MESSAGE_BYTES = 256 * 1024 * 1024

_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


async def exchange(call: Any, request: Any, timeout_s: float) -> Any:
    """One request and its answer on a stream-stream call that carries one
    exchange at a time (WriteStream, MetadataFetchStream). A call that ended
    without an answer, or gave none in time, raises TimeoutError; on any failure
    or cancellation the call is cancelled, so its caller must not reuse it: a
    late answer could otherwise be taken for the next request's."""
    try:
        await call.write(request)
        response = await asyncio.wait_for(call.read(), timeout_s)
    except asyncio.InvalidStateError as err:  # the call had ended while idle
        call.cancel()
        raise TimeoutError("the call has ended") from err
    except BaseException:
        call.cancel()
        raise
    if response is grpc.aio.EOF:
        call.cancel()
        raise TimeoutError("the call ended without an answer")
    return response


def open_channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=_OPTIONS)


def new_server() -> grpc.aio.Server:
    return grpc.aio.server(options=_OPTIONS)
