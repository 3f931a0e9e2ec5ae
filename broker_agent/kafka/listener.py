"""A Kafka protocol listener: asyncio TCP, size-prefixed frames, one connection per task.

Kafka's rules at the edge, which this follows:

* A frame is a 4-byte big-endian size and that many bytes. A size below the
  smallest header or over `socket.request.max.bytes` closes that connection
  (Kafka's InvalidReceiveException) before anything is allocated for it.
* Requests of one connection are processed one at a time, in order, and their
  responses go back in that order (Kafka mutes a connection while its request
  is in the broker). Up to `MAX_IN_FLIGHT` further frames are read ahead
  while one is processed (clients pipeline up to 5), then the socket is left
  unread, so a client that floods stalls only itself.
* ApiVersions of a version not served is answered at v0 with
  UNSUPPORTED_VERSION and the served table, so a newer client can pick a
  version. Any other Kafka API or version outside `versions.SERVED` is answered
  with that API's response carrying UNSUPPORTED_VERSION, and the connection goes
  on (Kafka closes it; see `unsupported.py`), except an acks=0 Produce, whose
  client reads no answer: closed, as a failed acks=0 produce is. A key that is
  no Kafka API, and a request that does not parse, close the connection, as
  Kafka's SocketServer does.
* A connection idle for `connections.max.idle.ms` (no frame started or one
  never finished) is closed, as Kafka closes idle connections.
* Whatever one connection sends, the others are served on: every failure is
  confined to its connection's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from broker_agent.kafka import codec
from broker_agent.kafka.unsupported import unsupported_response
from broker_agent.kafka.versions import SERVED, ApiKey, is_served
from quorum.common.tls import ANONYMOUS

log = logging.getLogger("broker_agent.kafka")

MAX_IN_FLIGHT = 5
# api_key + api_version + correlation_id + client_id length: no request is shorter.
MIN_FRAME = 10


@dataclass(frozen=True, slots=True)
class Connection:
    """Who sent a request: the listener it came on (Metadata answers with that
    listener's endpoints), the client's address and principal."""

    listener_name: str
    peer_host: str
    principal: str = "User:ANONYMOUS"


# A handler returns the response object, or None when no response is due (acks=0).
Dispatch = Callable[[codec.DecodedRequest, Connection], Awaitable[Any | None]]


class FrameError(Exception):
    """The connection's bytes are not Kafka requests: it is closed."""


class CloseConnection(Exception):
    """Raised by a handler when Kafka answers by closing the connection (a failed
    acks=0 produce)."""


class KafkaListener:
    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        dispatch: Dispatch,
        max_request_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
        max_idle_ms: int = 600_000,
    ) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.dispatch = dispatch
        self.max_request_bytes = max_request_bytes
        self.ssl_context = ssl_context
        self.max_idle_s = max_idle_ms / 1000
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.closed_connections = 0  # by a bad frame or request (for tests and metrics)
        self.unsupported_requests = 0  # answered UNSUPPORTED_VERSION (an API or version not served)

    async def start(self) -> int:
        """Bind and serve; returns the bound port (the given one, or the kernel's for 0)."""
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True, ssl=self.ssl_context
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        conn = Connection(
            self.name, str(peer[0]) if peer else "", principal_of(writer.get_extra_info("peercert"))
        )
        frames: asyncio.Queue[bytes | None] = asyncio.Queue(MAX_IN_FLIGHT)
        reading = asyncio.create_task(self._read_frames(reader, frames, conn))
        try:
            while (frame := await frames.get()) is not None:
                response = await self._handle(frame, conn)
                if response is not None:
                    writer.write(response)
                    await writer.drain()
        except FrameError as err:
            self.closed_connections += 1
            log.info("closing Kafka connection from %s: %s", conn.peer_host, err)
        except CloseConnection as err:
            log.debug("closing Kafka connection from %s: %s", conn.peer_host, err)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # `stop()`: end normally, as asyncio's server callback calls exception()
            # on this task and logs a cancelled one as an error.
            pass
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reading
            writer.close()
            # A cancel landing here (stop() while closing) must end the task
            # normally too, for the same reason as above.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer.wait_closed()
            self._connections.discard(task)

    async def _read_frames(
        self, reader: asyncio.StreamReader, frames: asyncio.Queue[bytes | None], conn: Connection
    ) -> None:
        try:
            while True:
                # Kafka's connections.max.idle.ms: a connection that sends nothing (or
                # never finishes a frame) for that long is closed. One timeout per
                # frame, not asyncio.wait_for per read (a task each, on every request).
                async with asyncio.timeout(self.max_idle_s):
                    size_bytes = await reader.readexactly(4)
                    size = codec.SIZE.unpack(size_bytes)[0]
                    if size < MIN_FRAME or size > self.max_request_bytes:
                        self.closed_connections += 1
                        log.info(
                            "closing Kafka connection from %s: a request of %d bytes "
                            "(socket.request.max.bytes=%d)",
                            conn.peer_host,
                            size,
                            self.max_request_bytes,
                        )
                        break
                    frame = await reader.readexactly(size)
                await frames.put(frame)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except TimeoutError:
            log.info("closing idle Kafka connection from %s", conn.peer_host)
        await frames.put(None)

    async def _handle(self, frame: bytes, conn: Connection) -> bytes | None:
        try:
            api_key, api_version, correlation_id = codec.peek_header(frame)
        except codec.MalformedRequest as err:
            raise FrameError(str(err)) from None
        if not is_served(api_key, api_version):
            if api_key == ApiKey.API_VERSIONS:
                return codec.encode_response(correlation_id, unsupported_api_versions())
            answer = unsupported_response(api_key, api_version)
            if answer is None:
                raise FrameError(f"api key {api_key} is no Kafka API")
            if api_key == ApiKey.PRODUCE and codec.produce_acks(frame, api_version) == 0:
                # Its client reads no answer, so one would be taken for the next
                # request's: as for a failed acks=0 produce, Kafka's way is to close.
                raise CloseConnection(f"an acks=0 produce v{api_version} (not served)")
            self.unsupported_requests += 1
            log.debug(
                "Kafka connection from %s: %s (key %d) v%d is not served: UNSUPPORTED_VERSION",
                conn.peer_host, codec.api_name(api_key), api_key, api_version,
            )  # fmt: skip
            return codec.encode_response(correlation_id, answer)
        try:
            request = codec.decode_request(frame, api_key, api_version)
        except codec.MalformedRequest as err:
            raise FrameError(str(err)) from None
        response = await self.dispatch(request, conn)
        if response is None:
            return None
        return codec.encode_response(correlation_id, response)


# X.500 attribute names as Kafka's default principal builder prints them (RFC 2253).
_RDN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "domainComponent": "DC",
}


def principal_of(peercert: Any) -> str:
    """Kafka's default principal of a TLS client: ``User:`` and its verified
    certificate's subject (``User:CN=broker-101``); ANONYMOUS without one."""
    subject = (peercert or {}).get("subject") if isinstance(peercert, dict) else None
    if not subject:
        return ANONYMOUS
    parts = ["+".join(f"{_RDN_NAMES.get(k, k)}={v}" for k, v in rdn) for rdn in reversed(subject)]
    return "User:" + ",".join(parts)


def api_versions_table() -> list[dict[str, int]]:
    return [
        {"api_key": int(k), "min_version": low, "max_version": high}
        for k, (low, high) in sorted(SERVED.items())
    ]


def unsupported_api_versions() -> Any:
    """Kafka's answer to an ApiVersions version it does not know: v0, error 35,
    and the table, so the client retries with a version from it."""
    return codec.build(
        codec.response_class(ApiKey.API_VERSIONS, 0),
        {"error_code": 35, "api_keys": api_versions_table(), "throttle_time": 0},
    )
