"""The one place gRPC channels are built (servers: `quorum.rpc.servers`).

Every process opens its channels and servers here so that settings that must
agree on both ends (message size limits, TLS credentials: `quorum.common.tls`)
cannot drift. A process given `TlsSettings` listens and dials with TLS; without
them, in the clear (the loopback default).
One atomic metadata change travels in one Raft batch, and a batch of tens of
thousands of partition records is larger than gRPC's 4 MiB default.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from quorum.common.tls import TlsSettings

MAX_MESSAGE_BYTES = 256 * 1024 * 1024


MESSAGE_SIZE_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]

# A peer that froze (SIGSTOP, a stalled VM) keeps its TCP connections open, so a
# call to it waits out its whole deadline unless the channel notices. Clients ping
# every KEEPALIVE_MS and drop a connection whose ping goes unanswered for as long;
# a new connection must finish its handshake within CONNECT_TIMEOUT_MS.
KEEPALIVE_MS = 1000
CONNECT_TIMEOUT_MS = 1000
# gRPC's default reconnect back-off grows to 120 s: after a peer came back, a node
# would wait up to that long (30 s seen) before trying it again, and flip between
# roles meanwhile. Controllers cap it at their election timeout.
DEFAULT_MAX_RECONNECT_BACKOFF_MS = 1000

SERVER_KEEPALIVE_OPTIONS = [
    # Accept the clients' pings, also between calls (else GOAWAY "too_many_pings").
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
    ("grpc.http2.max_ping_strikes", 0),
]


async def exchange(call: Any, request: Any, timeout_s: float) -> Any:
    """One request and its answer on a stream-stream call that carries one
    exchange at a time (WriteStream, MetadataFetchStream, FetchStream). A call
    that ended without an answer, or gave none in time, raises TimeoutError; on
    any failure or cancellation the call is cancelled, so its caller must not
    reuse it: a late answer could otherwise be taken for the next request's.

    The deadline is a timer that cancels the call, not `asyncio.wait_for`, which
    would wrap every read in a task of its own."""
    expiry = _Expiry(call, asyncio.current_task())
    timer = asyncio.get_running_loop().call_later(timeout_s, expiry.fire)
    try:
        await call.write(request)
        response = await call.read()
    except asyncio.InvalidStateError as err:  # the call had ended while idle
        call.cancel()
        raise TimeoutError("the call has ended") from err
    except asyncio.CancelledError:
        call.cancel()
        if expiry.fired:
            if expiry.task_cancelled and expiry.task is not None:
                expiry.task.uncancel()  # our own nudge, not the caller's cancellation
            raise TimeoutError(f"no answer within {timeout_s}s") from None
        raise
    except BaseException:
        call.cancel()
        raise
    finally:
        timer.cancel()
        expiry.disarm()
    if response is grpc.aio.EOF:
        call.cancel()
        raise TimeoutError("the call ended without an answer")
    return response


class _Expiry:
    """Cancels a call whose answer is overdue, and remembers that it did.

    A call whose channel is still connecting (a handshake into a blackhole) does
    not wake its pending `write` when cancelled, so if the exchange is still
    stuck a moment later, the waiting task itself is cancelled too."""

    __slots__ = ("_nudge", "call", "fired", "task", "task_cancelled")

    NUDGE_S = 0.05

    def __init__(self, call: Any, task: asyncio.Task[Any] | None) -> None:
        self.call = call
        self.fired = False
        self.task = task
        self.task_cancelled = False
        self._nudge: asyncio.TimerHandle | None = None

    def fire(self) -> None:
        self.fired = True
        self.call.cancel()
        self._nudge = asyncio.get_running_loop().call_later(self.NUDGE_S, self._unstick)

    def _unstick(self) -> None:
        if self.task is not None and not self.task.done():
            self.task_cancelled = True
            self.task.cancel()

    def disarm(self) -> None:
        if self._nudge is not None:
            self._nudge.cancel()


class ListenerError(Exception):
    """A listener could not be opened (the port is taken, or the host is not ours)."""


def listen(server: grpc.aio.Server, address: str, tls: TlsSettings | None = None) -> int:
    """Bind `server` to `address` (with TLS when `tls` is given: then a plaintext
    client fails its handshake and reaches no servicer); its port, or
    ListenerError with a clear reason."""
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, tls.server_credentials())
    except RuntimeError as err:
        raise ListenerError(
            f"cannot listen on {address}: the port is in use or the host is not an "
            f"address of this machine ({err})"
        ) from err
    if port == 0:
        raise ListenerError(f"cannot listen on {address}: the port is in use")
    return int(port)


def channel_options(
    max_reconnect_backoff_ms: int = DEFAULT_MAX_RECONNECT_BACKOFF_MS,
) -> list[tuple[str, int]]:
    """Every client channel's options: sizes, keepalive and bounded reconnects."""
    return [
        *MESSAGE_SIZE_OPTIONS,
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", min(100, max_reconnect_backoff_ms)),
        ("grpc.max_reconnect_backoff_ms", max_reconnect_backoff_ms),
        ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
    ]


def open_channel(
    address: str,
    max_reconnect_backoff_ms: int = DEFAULT_MAX_RECONNECT_BACKOFF_MS,
    tls: TlsSettings | None = None,
) -> grpc.aio.Channel:
    """A channel to `address`, over TLS (presenting `tls`'s certificate, if it
    has one) when `tls` is given. The server's certificate must name the host
    dialled (a subject alternative name), as Kafka's default
    `ssl.endpoint.identification.algorithm=https` requires."""
    options = channel_options(max_reconnect_backoff_ms)
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, tls.channel_credentials(), options=options)
